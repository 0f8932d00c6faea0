/**
 * The items table's stream and the change-events function on it, for a simulation: the stream is
 * DynamoDB Local's own (the items table is created with it, NEW_AND_OLD_IMAGES, as the stateful
 * stack defines it), read as Lambda's event source mapping reads it, on the virtual clock. As
 * deployed (infra/deployment.ts changeEventSourceDeployment): batches of up to
 * CHANGE_EVENTS_BATCH_SIZE records, one batch of a shard at a time, starting at the oldest record
 * (TRIM_HORIZON), ReportBatchItemFailures (a batch is taken again from its first failed record).
 *
 * - The reading itself is the harness's (dev/fakes/dynamodb-stream.ts: `TableStream`,
 *   `lambdaRecord`, re-exported here), each call held in virtual time (`track`: DynamoDB Local
 *   answers in real time, which the simulation does not count) and taking AWS's round trip for its
 *   operation, as the simulation's other DynamoDB calls do (meters.ts `simDynamoLatency`). The
 *   changes scenario's ledger reads the same stream with a reader of its own (DynamoDB allows two
 *   readers a shard).
 * - `ItemsStream` is the event source's side: the records read and not yet done (a failed batch's
 *   rest is handed again, topped up with newer records), counted in StreamCount.
 * - `meteredEventBridge` answers the change-events function's PutEvents in process (every entry
 *   accepted, after `roundTripMs` of virtual time, counted); the function itself is the system's
 *   (dev/system/functions.ts `buildChangeEvents`), built from its deployed environment.
 * - `pollStream` is the event source mapping: Lambda reads a shard at most four times a second
 *   (GetRecords, each one counted), and hands what it read (up to the batch size) to one invocation
 *   at a time. A scenario can make it lose a batch (`lose`): it moves past the records without
 *   invoking the function, as when a batch expires from the stream or is skipped after failing:
 *   their events never reach the bus (counted in `lostBatches`, `lostRecords`).
 *
 * Simplifications, said where the figures are used: one batch at a time for the whole stream (a
 * stream of several open shards is read a shard at a time, in turn; DynamoDB splits a busy table's
 * stream into more shards, and more shards mean more, smaller batches: more invocations, as many
 * PutEvents entries). A record's ApproximateCreationDateTime is the virtual time the event source
 * first read it (DynamoDB Local stamps the wall clock, which is not the simulation's); the change
 * events do not use it.
 */
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import type { Context } from 'aws-lambda';
import type { ChangeEventsHandler } from '../../functions/change-events/app.js';
import type { ChangesWriterHandler } from '../../functions/changes-writer/app.js';
import type { StreamRecord } from '../../functions/change-events/ports.js';
import { STREAM_POLL_MS, TableStream, type LambdaStreamRecord } from '../fakes/dynamodb-stream.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION, withoutSdkLogger } from '../fakes/local-aws.js';
import type { LocalDynamoDb } from '../fakes/local-dynamo.js';
import type { BuiltFunction } from '../system/functions.js';
import { withRoundTrip, type DynamoLatency } from '../fakes/dynamo-latency.js';
import { simDynamoLatency, type EventBridgeCount, type InvocationCount, type StreamCount } from './meters.js';
import type { VirtualClock } from './virtual-clock.js';

export { GET_RECORDS_LIMIT, lambdaRecord, STREAM_POLL_MS, TableStream, type LambdaStreamRecord, type StreamRead } from '../fakes/dynamodb-stream.js';

/** EventBridge bills each 64 KB chunk of an entry as one event. */
const EVENT_CHUNK_BYTES = 64 * 1024;

/**
 * However idle the stream, one read in this many is made (a minute of polls at four a second, in
 * virtual time: decided by the simulation, not by how fast it runs): DynamoDB Local's iterators
 * expire after 15 minutes of real time, and a simulation runs faster than real time.
 */
const REAL_READ_EVERY = 240;

/** The event source's records of the items table's stream: read, handed to the function, done; counted in `count`. */
export class ItemsStream {
  private readonly reader: TableStream;
  /** Read and not yet done, oldest first. */
  private held: LambdaStreamRecord[] = [];
  /** The virtual time of the last GetRecords that found nothing new while nothing was held. */
  private caughtUpAt = Number.NEGATIVE_INFINITY;

  /**
   * `writes`: how many writes the table has had so far (meters.ts `tableWrites`). When given, a read
   * known to come back empty (`TableStream.knownEmpty`: every open shard came back empty with no
   * write since) does not ask DynamoDB Local; it is still counted and waits its round trip, so an
   * idle stream costs the simulation nothing. One read in REAL_READ_EVERY is made all the same, so
   * that an iterator never outlives its 15 minutes.
   * Undefined: every read is made.
   */
  constructor(options: { dynamo: LocalDynamoDb; tableName: string; clock: VirtualClock; count: StreamCount; writes?: () => number }) {
    const { dynamo, tableName, clock } = options;
    this.count = options.count;
    this.roundTrip = { latency: simDynamoLatency(), sleep: clock.sleep };
    this.reader = new TableStream(dynamo, tableName, (work) => clock.track(work), () => clock.ms(), {
      roundTrip: this.roundTrip,
      ...(options.writes ? { writes: options.writes } : {}),
    });
    this.now = () => clock.ms();
  }

  private readonly now: () => number;
  private readonly roundTrip: { latency: DynamoLatency; sleep: (ms: number) => Promise<void> };
  /** Reads known empty since the last one made. */
  private skipped = 0;

  readonly count: StreamCount;

  /** Records read and not yet done by the function (what the event source holds). */
  get size(): number {
    return this.held.length;
  }

  /** The event source starts after what the table's stream holds now (rows written before its mapping existed). */
  skipToLatest(): Promise<void> {
    return this.reader.skipToLatest();
  }

  /**
   * Up to `max` records from the oldest not done: those held, topped up by one GetRecords (counted)
   * when fewer than `max` are held. They stay held until `done`.
   */
  async take(max: number): Promise<LambdaStreamRecord[]> {
    if (this.held.length < max) {
      if (this.held.length === 0 && this.skipped < REAL_READ_EVERY - 1 && this.reader.knownEmpty()) {
        // The read's round trip, waited as a read made waits it, without the request.
        await withRoundTrip(this.roundTrip, 'GetRecords', async () => undefined);
        this.skipped += 1;
        this.count.getRecords += 1;
        this.count.emptyGetRecords += 1;
        this.caughtUpAt = this.now();
        return [];
      }
      const read = await this.reader.read(max - this.held.length);
      this.skipped = 0;
      if (read.called) {
        this.count.getRecords += 1;
        if (read.records.length === 0) {
          this.count.emptyGetRecords += 1;
          if (this.held.length === 0) this.caughtUpAt = this.now();
        }
      }
      this.count.records += read.records.length;
      this.held.push(...read.records);
    }
    return this.held.slice(0, max);
  }

  /**
   * Whether the event source has read the stream through since `ms`: a GetRecords at or after it
   * found nothing new, and nothing read is left to do. What the table wrote before `ms` has then
   * been read and done (the reader reads the shards in turn: on one shard, that read was the last).
   */
  readThroughSince(ms: number): boolean {
    return this.held.length === 0 && this.caughtUpAt >= ms;
  }

  /** The oldest `n` records are done: the event source moves past them. */
  done(n: number): void {
    this.held = this.held.slice(n);
  }

  close(): void {
    this.reader.close();
  }
}

type AnyInput = Record<string, unknown>;
type Next = (args: { input: AnyInput }) => Promise<{ output: AnyInput; response: unknown }>;

/** An EventBridge client answered in process: every PutEvents entry accepted after `roundTripMs` of virtual time, counted. */
export function meteredEventBridge(clock: VirtualClock, roundTripMs: number, count: EventBridgeCount): EventBridgeClient {
  const client = withoutSdkLogger(new EventBridgeClient({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS }));
  client.middlewareStack.add(
    ((_next: Next, context: { commandName?: string }) => async (args: { input: AnyInput }) => {
      if (context.commandName !== 'PutEventsCommand') throw new Error(`the simulated EventBridge answers PutEvents only, not ${context.commandName}`);
      const entries = (args.input['Entries'] ?? []) as Array<Record<string, unknown>>;
      count.putEventsCalls += 1;
      count.entries += entries.length;
      for (const entry of entries) count.billedEvents += Math.max(1, Math.ceil(entryBytes(entry) / EVENT_CHUNK_BYTES));
      if (roundTripMs > 0) await clock.sleep(roundTripMs);
      const output = { FailedEntryCount: 0, Entries: entries.map((_, i) => ({ EventId: `event-${count.entries - entries.length + i}` })), $metadata: { httpStatusCode: 200 } };
      return { output, response: {} };
    }) as never,
    { step: 'initialize', priority: 'high', name: 'inProcessEventBridge' },
  );
  return client;
}

/** An entry's size as EventBridge counts it (its text fields in UTF-8). */
function entryBytes(entry: Record<string, unknown>): number {
  let bytes = 0;
  for (const field of ['Source', 'DetailType', 'Detail', 'EventBusName']) {
    const value = entry[field];
    if (typeof value === 'string') bytes += Buffer.byteLength(value);
  }
  return bytes;
}

/**
 * The event source mapping on the stream, until `stopped()`: reads (counted), invokes the function
 * with up to `batchSize` records (its deployed batch size), moves past what it reports done; reads
 * at most every STREAM_POLL_MS. Resolves when it has stopped.
 */
export async function pollStream(options: {
  stream: ItemsStream;
  fn: BuiltFunction<ChangeEventsHandler | ChangesWriterHandler>;
  batchSize: number;
  context: () => Context;
  clock: VirtualClock;
  invocations: InvocationCount;
  stopped: () => boolean;
  /** Whether the event source loses this batch (default never). */
  lose?: (records: readonly StreamRecord[]) => boolean;
  /** Whether this invocation fails after its work (its answer never reaches the event source: the batch comes again); default never. */
  failAfter?: (records: readonly StreamRecord[]) => boolean;
}): Promise<void> {
  const { stream, fn, batchSize, context, clock, invocations, stopped, lose, failAfter } = options;
  let lastRead = Number.NEGATIVE_INFINITY;
  while (!stopped()) {
    // At most four reads a second, busy or idle.
    if (clock.ms() < lastRead + STREAM_POLL_MS) await clock.sleep(lastRead + STREAM_POLL_MS - clock.ms());
    if (stopped()) break;
    lastRead = clock.ms();
    const records = await stream.take(batchSize);
    if (records.length === 0) continue;
    if (lose?.(records)) {
      stream.count.lostBatches += 1;
      stream.count.lostRecords += records.length;
      stream.done(records.length);
      continue;
    }
    const started = clock.ms();
    invocations.invocations += 1;
    let failedFrom = records.length;
    try {
      const answer = await fn.handler({ Records: records } as never, context());
      if (failAfter?.(records)) {
        stream.count.failedAfterWork += 1;
        throw new Error('the invocation failed after its work (injected)');
      }
      for (const failure of answer.batchItemFailures ?? []) {
        const at = records.findIndex((record) => record.dynamodb.SequenceNumber === failure.itemIdentifier);
        if (at >= 0) failedFrom = Math.min(failedFrom, at);
      }
    } catch {
      failedFrom = 0;
    } finally {
      invocations.durationMs += clock.ms() - started;
    }
    stream.done(failedFrom);
    if (failedFrom < records.length) stream.count.retried += records.length - failedFrom;
  }
}
