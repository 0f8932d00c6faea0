/**
 * The functions' event sources as deployed:
 *
 * - the item sync's (infra/deployment.ts syncEventSourceDeployment): Lambda's SQS event source
 *   mapping (dev/fakes/lambda.ts runEventSource) on the sync queue or the reconcile queue, with the
 *   deployed batch size, a poller per container (maxConcurrency of them), and each invocation's
 *   context carrying the function's deployed time-out;
 * - the change-events function's (changeEventSourceDeployment): Lambda's DynamoDB event source
 *   mapping on the items table's stream or the connections table's (`startStreamEventSource`), the
 *   stream read by the harness's reader (dev/fakes/dynamodb-stream.ts).
 */
import type { Context } from 'aws-lambda';
import type { SyncHandler } from '../../functions/item-sync/app.js';
import { sleepMs } from '../../functions/shared/backoff.js';
import { changeEventSourceDeployment, type StreamEventSourceDeployment } from '../../infra/deployment.js';
import { STREAM_POLL_MS, TableStream, untracked, type LambdaStreamRecord, type Track } from '../fakes/dynamodb-stream.js';
import { runEventSource, type DrainResult, type EventSourceOptions, type EventSourceQueue, type SyncHandlerFn } from '../fakes/lambda.js';
import type { BuiltFunction, ChangeEventsHandler, ChangesWriterHandler } from './functions.js';
import type { LocalSystem } from './system.js';

/** The long poll of Lambda's event source mapping (ReceiveMessage WaitTimeSeconds). */
export const LAMBDA_LONG_POLL_SECONDS = 20;

/** Records per invocation and the batching window, as deployed (a batch over 10 is gathered from several receives). */
export function batchingOf(system: LocalSystem): { batchSize: number; batchWindowMs: number } {
  const source = system.deployment.syncEventSource;
  return { batchSize: source.batchSize, batchWindowMs: (source.maxBatchingWindowSeconds ?? 0) * 1000 };
}

export interface SyncEventSourceOptions extends Omit<EventSourceOptions, 'queue' | 'handlers' | 'batchSize' | 'batchWindowMs'> {
  /** The containers, one poller each; built with the system's defaults when a number (default maxConcurrency). */
  containers?: ReadonlyArray<BuiltFunction<SyncHandler>> | number;
  /** Handlers to poll with instead of the containers' own (the containers' handlers wrapped, e.g. timed). */
  wrap?: (handler: SyncHandlerFn, index: number) => SyncHandlerFn;
  /** The long poll, in the SQS model's seconds; default Lambda's. */
  waitSeconds?: number;
  /** The queue as polled (e.g. metered); default the backend's. */
  queue?: (queue: EventSourceQueue) => EventSourceQueue;
}

/** The queue of `which`, as the event source mapping polls it. */
export function eventSourceQueue(system: LocalSystem, which: 'sync' | 'reconcile', waitSeconds = LAMBDA_LONG_POLL_SECONDS): EventSourceQueue {
  const queue = which === 'sync' ? system.queues.sync : system.queues.reconcile;
  if (!queue) throw new Error('no reconcile queue: freshnessHours is 0 and discovery is off');
  return system.aws.eventSourceQueue(queue.name, waitSeconds);
}

/** Polls the queue of `which` into the sync's containers until it is empty (and `finished()`), the time limit, or `stop()`. */
export function runSyncEventSource(system: LocalSystem, which: 'sync' | 'reconcile', options: SyncEventSourceOptions = {}): Promise<DrainResult> {
  const { containers: given, wrap, waitSeconds, queue: around, ...rest } = options;
  const containers =
    typeof given === 'object' ? given : Array.from({ length: given ?? system.deployment.syncEventSource.maxConcurrency }, () => system.syncContainer());
  const queue = eventSourceQueue(system, which, waitSeconds);
  const first = containers[0];
  return runEventSource({
    queue: around ? around(queue) : queue,
    handlers: containers.map((container, index) => (wrap ? wrap(container.handler, index) : container.handler)),
    ...batchingOf(system),
    ...(first ? { context: () => system.context(first) } : {}),
    ...rest,
  });
}

/** The clock a stream event source polls on: the wall clock's by default, a simulation's own otherwise. */
export interface StreamClock {
  /** Milliseconds. */
  now(): number;
  sleep(ms: number): Promise<void>;
  /** Wraps each call to DynamoDB Local (a virtual clock holds still meanwhile). */
  track: Track;
}

export const WALL_CLOCK: StreamClock = { now: () => Date.now(), sleep: sleepMs, track: untracked };

/** A batch the event source gave up on after its retries: in AWS its shard and sequence range go to the on-failure destination. */
export interface DiscardedBatch {
  table: string;
  records: number;
  firstSequence: string | undefined;
  lastSequence: string | undefined;
  /** The function's last answer: the records it reported failed, or the error it threw. */
  reason: string;
}

/** What a stream event source did so far. */
export interface StreamEventSourceCounts {
  /** GetRecords calls, and those that brought nothing. */
  getRecords: number;
  emptyGetRecords: number;
  /** Records read from the stream. */
  records: number;
  invocations: number;
  /** Records handed to the function again (a failed batch's rest). */
  retried: number;
  /** Records moved past without being done (DiscardedBatch). */
  discarded: number;
}

export interface StreamEventSourceOptions {
  /** The function the stream feeds: the change-events function (LocalSystem.changeEvents) or the changes writer (LocalSystem.changesWriter). */
  fn: BuiltFunction<ChangeEventsHandler | ChangesWriterHandler>;
  /** Its event source as deployed; default the change-events function's (changeEventSourceDeployment). */
  deployment?: StreamEventSourceDeployment;
  /**
   * Where reading starts: TRIM_HORIZON, as deployed (the oldest record the stream holds), or LATEST
   * (after what the stream holds now: a table kept from an earlier run, whose records a mapping
   * created then has read).
   */
  startingPosition?: 'TRIM_HORIZON' | 'LATEST';
  /** Default the wall clock. */
  clock?: StreamClock;
  /** Each invocation's context; default the system's (the function's deployed time-out, counting down in the system's time). */
  context?: () => Context;
}

export interface StreamEventSource {
  readonly table: string;
  readonly counts: StreamEventSourceCounts;
  /** The batches given up on (none unless the function kept failing). */
  readonly discarded: readonly DiscardedBatch[];
  /**
   * Resolves once every record the stream held when called has been handed to the function and
   * done (or given up on): what the table wrote before then has reached the function. Rejects when
   * the event source stops first, or a read of the stream fails meanwhile.
   */
  readThrough(): Promise<void>;
  /** Stops polling once the invocation under way (if any) ends. */
  stop(): Promise<void>;
}

/**
 * Lambda's DynamoDB event source mapping on the stream of `table` ('items' or 'connections', the
 * system's names), as deployed (infra/deployment.ts changeEventSourceDeployment): a shard read at
 * most every STREAM_POLL_MS (four times a second), whether busy or idle; up to `batchSize` records an
 * invocation, one invocation at a time (parallelization factor 1); ReportBatchItemFailures: the
 * records before the first one reported failed are done, the batch is taken again from it; a batch
 * whose invocation throws is split in two (bisectBatchOnError: a split is not a retry) until one
 * record; after `retryAttempts` retries of a batch the event source moves past it (`discarded`:
 * AWS sends its range to the on-failure destination). With LATEST, resolves once the position is
 * taken: every write after the call is read.
 *
 * Simplification: one loop reads the stream's shards in turn (dev/fakes/dynamodb-stream.ts), so
 * four reads a second for the whole stream; DynamoDB Local keeps one open shard most of the time,
 * where that is the deployed rate.
 */
export async function startStreamEventSource(system: LocalSystem, table: 'items' | 'connections', options: StreamEventSourceOptions): Promise<StreamEventSource> {
  const deployed: StreamEventSourceDeployment = options.deployment ?? changeEventSourceDeployment();
  const { fn } = options;
  const clock = options.clock ?? WALL_CLOCK;
  const context = options.context ?? (() => system.context(fn, { now: clock.now }));
  const tableName = table === 'items' ? system.names.itemsTable : system.names.connectionsTable;
  const reader = new TableStream(system.storage.dynamo, tableName, clock.track, clock.now);
  const counts: StreamEventSourceCounts = { getRecords: 0, emptyGetRecords: 0, records: 0, invocations: 0, retried: 0, discarded: 0 };
  const discarded: DiscardedBatch[] = [];
  const waiters: Array<{ since: number; resolve: () => void; reject: (error: unknown) => void }> = [];
  /** Read and not yet done, oldest first. */
  let held: LambdaStreamRecord[] = [];
  let stopped = false;

  const settle = (): void => {
    if (held.length > 0) return;
    for (const waiter of [...waiters]) {
      // A read that began in the very millisecond of the call may have begun before it: the next one counts.
      if (!reader.readThroughSince(waiter.since + 1)) continue;
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve();
    }
  };
  const failAll = (error: unknown): void => {
    for (const waiter of waiters.splice(0)) waiter.reject(error);
  };

  /** Hands `batch` to the function once: how many of its first records are done, and why the rest are not. */
  const invoke = async (batch: LambdaStreamRecord[]): Promise<{ done: number; threw: boolean; reason: string }> => {
    counts.invocations += 1;
    try {
      const answer = await fn.handler({ Records: batch } as never, context());
      let done = batch.length;
      for (const failure of answer.batchItemFailures ?? []) {
        const at = batch.findIndex((record) => record.dynamodb.SequenceNumber === failure.itemIdentifier);
        // An identifier that names no record of the batch fails the whole batch, as Lambda treats it.
        done = Math.min(done, at >= 0 ? at : 0);
      }
      const failed = answer.batchItemFailures?.length ?? 0;
      return { done, threw: false, reason: `the function reported ${failed} failed record${failed === 1 ? '' : 's'}` };
    } catch (error) {
      return { done: 0, threw: true, reason: error instanceof Error ? `${error.name}: ${error.message}` : String(error) };
    }
  };

  // Resolved before polling starts: every write after this call is read.
  if (options.startingPosition === 'LATEST') {
    try {
      await reader.skipToLatest();
    } catch (error) {
      reader.close();
      throw error;
    }
  }

  const poll = async (): Promise<void> => {
    let lastRead = Number.NEGATIVE_INFINITY;
    let size = deployed.batchSize;
    let retries = 0;
    while (!stopped) {
      if (clock.now() < lastRead + STREAM_POLL_MS) await clock.sleep(lastRead + STREAM_POLL_MS - clock.now());
      if (stopped) break;
      lastRead = clock.now();
      if (held.length < deployed.batchSize) {
        try {
          const read = await reader.read(deployed.batchSize - held.length);
          if (read.called) {
            counts.getRecords += 1;
            if (read.records.length === 0) counts.emptyGetRecords += 1;
          }
          counts.records += read.records.length;
          held.push(...read.records);
        } catch (error) {
          failAll(error);
          continue;
        }
      }
      if (held.length === 0) {
        settle();
        continue;
      }
      const batch = held.slice(0, size);
      const outcome = await invoke(batch);
      held = held.slice(outcome.done);
      if (outcome.done === batch.length) {
        size = deployed.batchSize;
        retries = 0;
      } else if (outcome.threw && batch.length > 1) {
        size = Math.ceil(batch.length / 2);
        counts.retried += batch.length;
      } else if (deployed.retryAttempts === undefined || retries < deployed.retryAttempts) {
        retries += 1;
        counts.retried += batch.length - outcome.done;
      } else {
        const rest = batch.slice(outcome.done);
        discarded.push({
          table: tableName,
          records: rest.length,
          firstSequence: rest[0]?.dynamodb.SequenceNumber,
          lastSequence: rest.at(-1)?.dynamodb.SequenceNumber,
          reason: outcome.reason,
        });
        counts.discarded += rest.length;
        held = held.slice(rest.length);
        size = deployed.batchSize;
        retries = 0;
      }
      settle();
    }
  };

  const polling = poll()
    .catch((error: unknown) => failAll(error))
    .finally(() => {
      stopped = true;
      failAll(new Error(`the event source on ${tableName}'s stream has stopped`));
      reader.close();
    });

  return {
    table: tableName,
    counts,
    discarded,
    readThrough() {
      if (stopped) return Promise.reject(new Error(`the event source on ${tableName}'s stream has stopped`));
      return new Promise<void>((resolve, reject) => void waiters.push({ since: clock.now(), resolve, reject }));
    },
    async stop() {
      stopped = true;
      await polling;
    },
  };
}
