/**
 * The items table's stream and the change-events function on it, for a simulation: the stream is
 * DynamoDB Local's own (the items table is created with it, NEW_AND_OLD_IMAGES, as the stateful
 * stack defines it), read as Lambda's event source mapping reads it, and the local system runs no
 * change-events function of its own. As deployed (infra/deployment.ts changeEventSourceDeployment):
 * batches of up to CHANGE_EVENTS_BATCH_SIZE records, one batch of a shard at a time, starting at the
 * oldest record (TRIM_HORIZON), ReportBatchItemFailures (a batch is taken again from its first
 * failed record).
 *
 * - `TableStream` reads a table's stream with the DynamoDB Streams API (DescribeStream,
 *   GetShardIterator, GetRecords): every shard, a shard only once its parent has been read to its
 *   end (DynamoDB closes a shard and opens its children; DynamoDB Local keeps one open shard most of
 *   the time), each call held in virtual time (`track`: DynamoDB Local answers in real time, which
 *   the simulation does not count). Records come as Lambda hands them to a function
 *   (`lambdaRecord`). The changes scenario's ledger reads the same stream with a reader of its own
 *   (DynamoDB allows two readers a shard).
 * - `ItemsStream` is the event source's side: the records read and not yet done (a failed batch's
 *   rest is handed again, topped up with newer records), counted in StreamCount.
 * - `buildChangeEvents` is the real change-events handler (functions/change-events/app.ts), built
 *   as its handler.ts builds it from the deployed environment, with a metered connections-table
 *   client and an EventBridge client answered in process (`meteredEventBridge`: every entry
 *   accepted, after `roundTripMs` of virtual time).
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
import { DescribeTableCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  DescribeStreamCommand,
  DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
  type GetRecordsCommandOutput,
  type AttributeValue as SdkAttributeValue,
  type _Record as SdkRecord,
  type ShardIteratorType,
} from '@aws-sdk/client-dynamodb-streams';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import type { Context } from 'aws-lambda';
import { createChangeEventsHandler, type ChangeEventsHandler } from '../../functions/change-events/app.js';
import type { AttributeValue, StreamImage, StreamRecord } from '../../functions/change-events/ports.js';
import { loadChangeEventsConfig } from '../../functions/shared/config.js';
import { changeEventSourceDeployment, type FunctionDeployment } from '../../infra/deployment.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../fakes/local-aws.js';
import type { LocalDynamoDb } from '../fakes/local-dynamo.js';
import type { BuiltFunction } from '../system/functions.js';
import type { Observability } from '../system/observability.js';
import type { EventBridgeCount, InvocationCount, StreamCount } from './meters.js';
import type { VirtualClock } from './virtual-clock.js';

/** Lambda's reads of a shard: at most four a second (its documented base rate). */
export const STREAM_POLL_MS = 250;
/** The most records one GetRecords returns (DynamoDB Streams' limit). */
export const GET_RECORDS_LIMIT = 1000;
/** EventBridge bills each 64 KB chunk of an entry as one event. */
const EVENT_CHUNK_BYTES = 64 * 1024;
export const CHANGE_EVENTS_FUNCTION_NAME = 'content-sync-change-events';

/** A stream record as Lambda hands it to a function: the fields StreamRecord names, and the rest of Lambda's shape. */
export type LambdaStreamRecord = StreamRecord & {
  eventVersion?: string;
  eventSource: 'aws:dynamodb';
  awsRegion?: string;
  dynamodb: NonNullable<StreamRecord['dynamodb']> & { StreamViewType?: string; SizeBytes?: number };
};

/** Holds virtual time still while a call to DynamoDB Local is under way. */
type Track = <T>(work: Promise<T>) => Promise<T>;

interface Shard {
  id: string;
  parent: string | undefined;
  /** Where the next read starts; undefined until the shard is first read. */
  iterator: string | undefined;
  /** The last record read (a new iterator starts after it when one expires). */
  lastSequence: string | undefined;
  /** Read to its end: DynamoDB closed it and every record has been read. */
  ended: boolean;
}

/** One GetRecords: the records (Lambda's shape), or none when no shard could be read. */
export interface StreamRead {
  records: LambdaStreamRecord[];
  /** Whether a GetRecords was made (no shard to read makes none). */
  called: boolean;
}

/**
 * A reader of one table's stream, on its own iterators: each `read` is one GetRecords on a shard
 * whose parent has been read to its end (shards that qualify are taken in turn, a shard kept while
 * it has records), after the DescribeStream and GetShardIterator it needs.
 */
export class TableStream {
  private readonly client: DynamoDBStreamsClient;
  private arn: string | undefined;
  private readonly shards: Shard[] = [];
  private stale = true;
  private described = false;
  /** Shards opened after the reader first described the stream. */
  private readonly opened = new Set<string>();
  private turn = 0;
  /** Where a shard known from the first DescribeStream starts (shards opened later start at their beginning). */
  private start: ShardIteratorType = 'TRIM_HORIZON';

  constructor(
    private readonly dynamo: LocalDynamoDb,
    private readonly tableName: string,
    private readonly track: Track,
    /** The virtual time a record is stamped with (ApproximateCreationDateTime, seconds). */
    private readonly now: () => number,
  ) {
    this.client = new DynamoDBStreamsClient({ endpoint: dynamo.endpoint, region: dynamo.region, credentials: dynamo.credentials });
  }

  /** The stream's ARN (the table's latest stream). */
  async streamArn(): Promise<string> {
    if (this.arn !== undefined) return this.arn;
    const admin: DynamoDBClient = this.dynamo.client();
    try {
      const described = await this.track(admin.send(new DescribeTableCommand({ TableName: this.tableName })));
      const arn = described.Table?.LatestStreamArn;
      if (arn === undefined) throw new Error(`the table ${this.tableName} has no stream (it must be created with NEW_AND_OLD_IMAGES, as the stateful stack does)`);
      this.arn = arn;
      return arn;
    } finally {
      admin.destroy();
    }
  }

  /**
   * Moves past every record in the stream now, as a mapping created now with the position LATEST
   * would start: what was written before is never read. Reading starts where the stream is when
   * this is called.
   */
  async skipToLatest(): Promise<void> {
    this.start = 'LATEST';
    await this.describe();
    for (const shard of this.shards) {
      if (shard.ended) continue;
      shard.lastSequence = undefined;
      this.opened.delete(shard.id);
      shard.iterator = await this.iteratorOf(shard);
    }
  }

  /** One GetRecords of up to `limit` records (at most GET_RECORDS_LIMIT). */
  async read(limit: number): Promise<StreamRead> {
    if (this.stale) await this.describe();
    const shard = this.nextShard();
    if (!shard) {
      this.stale = true;
      return { records: [], called: false };
    }
    const iterator = shard.iterator ?? (await this.iteratorOf(shard));
    if (iterator === undefined) {
      shard.ended = true;
      this.stale = true;
      return { records: [], called: false };
    }
    const out = await this.getRecords(shard, iterator, Math.min(limit, GET_RECORDS_LIMIT));
    const arn = await this.streamArn();
    const seconds = Math.floor(this.now() / 1000);
    const records = (out.Records ?? []).map((record) => lambdaRecord(record, arn, seconds));
    const last = records.at(-1)?.dynamodb.SequenceNumber;
    if (last !== undefined) shard.lastSequence = last;
    shard.iterator = out.NextShardIterator;
    if (shard.iterator === undefined) {
      // Closed and read to its end: its children (in the next DescribeStream) can be read.
      shard.ended = true;
      this.stale = true;
    }
    // A shard that had nothing gives its turn to the next one.
    if (records.length === 0) this.turn += 1;
    return { records, called: true };
  }

  close(): void {
    this.client.destroy();
  }

  /**
   * GetRecords on the shard's iterator, again on a new iterator when that one expired (an iterator
   * lives 15 minutes) or points before the shard's oldest record (TrimmedDataAccessException: in
   * DynamoDB Local, a TRIM_HORIZON iterator taken while a shard is empty names the shard's first
   * sequence number, and the namespace's writes to other tables may have used it): the new one
   * starts after the last record read, or at the oldest record.
   */
  private async getRecords(shard: Shard, iterator: string, limit: number): Promise<GetRecordsCommandOutput> {
    try {
      return await this.track(this.client.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: limit })));
    } catch (error) {
      const name = (error as { name?: string }).name;
      if (name !== 'ExpiredIteratorException' && name !== 'TrimmedDataAccessException') throw error;
      const fresh = await this.iteratorOf(shard);
      if (fresh === undefined) throw error;
      return await this.track(this.client.send(new GetRecordsCommand({ ShardIterator: fresh, Limit: limit })));
    }
  }

  /** The shards that can be read now (open, or closed with records left; parent read or gone), the one whose turn it is. */
  private nextShard(): Shard | undefined {
    const ended = new Set(this.shards.filter((shard) => shard.ended).map((shard) => shard.id));
    const known = new Set(this.shards.map((shard) => shard.id));
    const readable = this.shards.filter((shard) => !shard.ended && (shard.parent === undefined || !known.has(shard.parent) || ended.has(shard.parent)));
    if (readable.length === 0) return undefined;
    return readable[this.turn % readable.length];
  }

  /** Every shard of the stream (DescribeStream, all pages), the ones not known yet added in its order (parents first). */
  private async describe(): Promise<void> {
    const arn = await this.streamArn();
    const first = this.shards.length === 0 && !this.described;
    let from: string | undefined;
    do {
      const out = await this.track(this.client.send(new DescribeStreamCommand({ StreamArn: arn, ...(from ? { ExclusiveStartShardId: from } : {}) })));
      const description = out.StreamDescription;
      for (const shard of description?.Shards ?? []) {
        if (shard.ShardId === undefined || this.shards.some((known) => known.id === shard.ShardId)) continue;
        this.shards.push({ id: shard.ShardId, parent: shard.ParentShardId, iterator: undefined, lastSequence: undefined, ended: false });
        // A shard opened since the reader first looked is read from its beginning.
        if (!first) this.opened.add(shard.ShardId);
      }
      from = description?.LastEvaluatedShardId;
    } while (from !== undefined);
    this.described = true;
    this.stale = false;
  }

  private async iteratorOf(shard: Shard): Promise<string | undefined> {
    const arn = await this.streamArn();
    const input =
      shard.lastSequence !== undefined
        ? { ShardIteratorType: 'AFTER_SEQUENCE_NUMBER' as const, SequenceNumber: shard.lastSequence }
        : { ShardIteratorType: this.opened.has(shard.id) ? ('TRIM_HORIZON' as const) : this.start };
    const out = await this.track(this.client.send(new GetShardIteratorCommand({ StreamArn: arn, ShardId: shard.id, ...input })));
    return out.ShardIterator;
  }
}

/** A record as the DynamoDB Streams API answers it, as Lambda hands it to a function (ApproximateCreationDateTime: `seconds`). */
export function lambdaRecord(record: SdkRecord, eventSourceARN: string, seconds: number): LambdaStreamRecord {
  const data = record.dynamodb ?? {};
  return {
    ...(record.eventID !== undefined ? { eventID: record.eventID } : {}),
    ...(record.eventName !== undefined ? { eventName: record.eventName } : {}),
    ...(record.eventVersion !== undefined ? { eventVersion: record.eventVersion } : {}),
    eventSource: 'aws:dynamodb',
    awsRegion: record.awsRegion ?? LOCAL_REGION,
    eventSourceARN,
    dynamodb: {
      ApproximateCreationDateTime: seconds,
      ...(data.Keys ? { Keys: image(data.Keys) } : {}),
      ...(data.NewImage ? { NewImage: image(data.NewImage) } : {}),
      ...(data.OldImage ? { OldImage: image(data.OldImage) } : {}),
      ...(data.SequenceNumber !== undefined ? { SequenceNumber: data.SequenceNumber } : {}),
      ...(data.SizeBytes !== undefined ? { SizeBytes: data.SizeBytes } : {}),
      ...(data.StreamViewType !== undefined ? { StreamViewType: data.StreamViewType } : {}),
    },
  };
}

/** An image as Lambda's JSON holds it: binary values in base64. */
function image(values: Record<string, SdkAttributeValue>): StreamImage {
  const out: StreamImage = {};
  for (const [name, value] of Object.entries(values)) out[name] = attribute(value);
  return out;
}

function attribute(value: SdkAttributeValue): AttributeValue {
  if (value.S !== undefined) return { S: value.S };
  if (value.N !== undefined) return { N: value.N };
  if (value.BOOL !== undefined) return { BOOL: value.BOOL };
  if (value.NULL !== undefined) return { NULL: value.NULL };
  if (value.B !== undefined) return { B: Buffer.from(value.B).toString('base64') };
  if (value.SS !== undefined) return { SS: value.SS };
  if (value.NS !== undefined) return { NS: value.NS };
  if (value.BS !== undefined) return { BS: value.BS.map((bytes) => Buffer.from(bytes).toString('base64')) };
  if (value.L !== undefined) return { L: value.L.map(attribute) };
  if (value.M !== undefined) return { M: image(value.M) };
  return {};
}

/** The event source's records of the items table's stream: read, handed to the function, done; counted in `count`. */
export class ItemsStream {
  private readonly reader: TableStream;
  /** Read and not yet done, oldest first. */
  private held: LambdaStreamRecord[] = [];
  /** The virtual time of the last GetRecords that found nothing new while nothing was held. */
  private caughtUpAt = Number.NEGATIVE_INFINITY;

  constructor(options: { dynamo: LocalDynamoDb; tableName: string; clock: VirtualClock; count: StreamCount }) {
    const { dynamo, tableName, clock } = options;
    this.count = options.count;
    this.reader = new TableStream(dynamo, tableName, (work) => clock.track(work), () => clock.ms());
    this.now = () => clock.ms();
  }

  private readonly now: () => number;

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
      const read = await this.reader.read(max - this.held.length);
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
  const client = new EventBridgeClient({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS });
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

/** The change-events function as its handler.ts builds it, from its deployed environment, with these clients. */
export function buildChangeEvents(
  deployment: FunctionDeployment,
  parts: { eventbridge: EventBridgeClient; dynamodb: DynamoDBClient; clock: VirtualClock } & Observability,
): BuiltFunction<ChangeEventsHandler> {
  const { eventbridge, dynamodb, clock, logger, metrics } = parts;
  const config = loadChangeEventsConfig(deployment.environment);
  return {
    name: CHANGE_EVENTS_FUNCTION_NAME,
    handler: createChangeEventsHandler({ config, eventbridge, dynamodb, clock, sleep: clock.sleep, logger, metrics }),
    memoryMb: deployment.memoryMb,
    timeoutMs: deployment.timeoutSeconds * 1000,
    environment: deployment.environment,
  };
}

/**
 * The event source mapping on the stream, until `stopped()`: reads (counted), invokes the function
 * with up to the deployed batch size, moves past what it reports done; reads at most every
 * STREAM_POLL_MS. Resolves when it has stopped.
 */
export async function pollStream(options: {
  stream: ItemsStream;
  fn: BuiltFunction<ChangeEventsHandler>;
  context: () => Context;
  clock: VirtualClock;
  invocations: InvocationCount;
  stopped: () => boolean;
  /** Whether the event source loses this batch (default never). */
  lose?: (records: readonly StreamRecord[]) => boolean;
}): Promise<void> {
  const { stream, fn, context, clock, invocations, stopped, lose } = options;
  const { batchSize } = changeEventSourceDeployment();
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
