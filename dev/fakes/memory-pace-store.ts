/**
 * The control table's pace row as a port-level fake, with the adapter's semantics (a conditional
 * write on the version): for unit tests whose DynamoDB is a mock that must see only the items
 * table's commands, and for simulations in virtual time (with a round-trip `sleep`). The adapter
 * itself (functions/shared/adapters/dynamodb-pace-store.ts) is tested against DynamoDB Local. Faults:
 * `failing` makes every call throw, as a throttled or unreachable table does.
 */
import type { PaceStore } from '../../functions/shared/provider/pace/provider-pace.js';
import type { PaceState } from '../../functions/shared/provider/pace/pace-state.js';

export interface MemoryPaceStoreOptions {
  /** Waits one round trip (a simulation's virtual sleep); default none. */
  sleep?: (ms: number) => Promise<void>;
  roundTripMs?: number;
}

export class MemoryPaceStore implements PaceStore {
  private row: { state: PaceState; version: number } | undefined;
  reads = 0;
  writes = 0;
  conflicts = 0;
  failing = false;

  constructor(private readonly options: MemoryPaceStoreOptions = {}) {}

  private async roundTrip(): Promise<void> {
    if (this.options.sleep) await this.options.sleep(this.options.roundTripMs ?? 5);
  }

  get state(): PaceState | undefined {
    return this.row?.state;
  }

  async read(): Promise<{ state: unknown; version: number } | undefined> {
    await this.roundTrip();
    this.reads += 1;
    if (this.failing) throw new Error('ProvisionedThroughputExceededException: the control table is throttled');
    return this.row ? { state: structuredClone(this.row.state), version: this.row.version } : undefined;
  }

  async write(state: PaceState, expectedVersion: number): Promise<'written' | 'conflict'> {
    await this.roundTrip();
    this.writes += 1;
    if (this.failing) throw new Error('ProvisionedThroughputExceededException: the control table is throttled');
    if ((this.row?.version ?? 0) !== expectedVersion) {
      this.conflicts += 1;
      return 'conflict';
    }
    this.row = { state: structuredClone(state), version: expectedVersion + 1 };
    return 'written';
  }
}
