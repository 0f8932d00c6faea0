/**
 * The control table's pace row as a port-level fake, with the adapter's semantics (a conditional
 * write on the version): for unit tests whose DynamoDB is a mock that must see only the items
 * table's commands, and for the soak (with `latency`: the row's races as AWS's latency makes them).
 * The adapter itself (functions/shared/adapters/dynamodb-pace-store.ts) is tested against DynamoDB
 * Local. Faults: `failing` makes every call throw, as a throttled or unreachable table does.
 */
import type { PaceStore } from '../../functions/shared/provider/pace/provider-pace.js';
import type { PaceState } from '../../functions/shared/provider/pace/pace-state.js';
import { withRoundTrip, type LatencyParts } from './dynamo-latency.js';

export interface MemoryPaceStoreOptions {
  /**
   * Each call takes the latency model's round trip of the adapter's request (a read its GetItem, a
   * write its PutItem), half before the row is read or written and half after; default none.
   */
  latency?: LatencyParts;
}

export class MemoryPaceStore implements PaceStore {
  private row: { state: PaceState; version: number } | undefined;
  reads = 0;
  writes = 0;
  conflicts = 0;
  failing = false;

  constructor(private readonly options: MemoryPaceStoreOptions = {}) {}

  /** The call as the adapter's request, after the model's round trip when there is one. */
  private async roundTrip<T>(operation: 'GetItem' | 'PutItem', call: () => T): Promise<T> {
    const { latency } = this.options;
    if (latency) return withRoundTrip(latency, operation, async () => call());
    await Promise.resolve();
    return call();
  }

  get state(): PaceState | undefined {
    return this.row?.state;
  }

  read(): Promise<{ state: unknown; version: number } | undefined> {
    return this.roundTrip('GetItem', () => {
      this.reads += 1;
      if (this.failing) throw new Error('ProvisionedThroughputExceededException: the control table is throttled');
      return this.row ? { state: structuredClone(this.row.state), version: this.row.version } : undefined;
    });
  }

  write(state: PaceState, expectedVersion: number): Promise<'written' | 'conflict'> {
    return this.roundTrip('PutItem', () => {
      this.writes += 1;
      if (this.failing) throw new Error('ProvisionedThroughputExceededException: the control table is throttled');
      if ((this.row?.version ?? 0) !== expectedVersion) {
        this.conflicts += 1;
        return 'conflict' as const;
      }
      this.row = { state: structuredClone(state), version: expectedVersion + 1 };
      return 'written' as const;
    });
  }
}
