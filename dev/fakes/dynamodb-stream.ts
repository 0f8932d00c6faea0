/**
 * A DynamoDB table's stream as Lambda's event source mapping reads it, for any harness clock: the
 * stream is DynamoDB Local's own (the items table and the connections table are created with it,
 * NEW_AND_OLD_IMAGES, as the stateful stack defines them), read with the DynamoDB Streams API and
 * handed on in the shape Lambda gives a function. The simulations read it on their virtual clock
 * (dev/sim/items-stream.ts, the changes scenario's ledger), the local run on the wall clock
 * (dev/system/event-sources.ts); each says how its calls are timed (`track`) and what time it is
 * (`now`).
 *
 * - `TableStream` reads a table's stream (DescribeStream, GetShardIterator, GetRecords): every
 *   shard, a shard only once its parent has been read to its end (DynamoDB closes a shard and opens
 *   its children; DynamoDB Local keeps one open shard most of the time). Two readers of one stream
 *   each keep their own iterators (DynamoDB allows two readers a shard).
 * - `lambdaRecord` is a record as Lambda hands it to a function: the Streams API's record, images
 *   in Lambda's JSON (binary values in base64), ApproximateCreationDateTime in seconds.
 *
 * A record's ApproximateCreationDateTime is the reader's `now` when it read the record (DynamoDB
 * Local stamps the wall clock, which is not a simulation's); the change events do not use it but
 * for a removed connection's `at`.
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
import type { AttributeValue, StreamImage, StreamRecord } from '../../functions/change-events/ports.js';
import { withRoundTrip, type LatencyParts } from './dynamo-latency.js';
import { LOCAL_REGION, withoutSdkLogger } from './local-aws.js';
import type { LocalDynamoDb } from './local-dynamo.js';

/** Lambda's reads of a shard: at most four a second (its documented base rate). */
export const STREAM_POLL_MS = 250;
/** The most records one GetRecords returns (DynamoDB Streams' limit). */
export const GET_RECORDS_LIMIT = 1000;

/** A stream record as Lambda hands it to a function: the fields StreamRecord names, and the rest of Lambda's shape. */
export type LambdaStreamRecord = StreamRecord & {
  eventVersion?: string;
  eventSource: 'aws:dynamodb';
  awsRegion?: string;
  dynamodb: NonNullable<StreamRecord['dynamodb']> & { StreamViewType?: string; SizeBytes?: number };
};

/**
 * Wraps each call to DynamoDB Local: a simulation holds its virtual time still while one is under
 * way (DynamoDB Local answers in real time, which a simulation does not count); on the wall clock
 * it is the call itself.
 */
export type Track = <T>(work: () => Promise<T>) => Promise<T>;

/** The wall clock's Track: the call as it is. */
export const untracked: Track = (work) => work();

interface Shard {
  id: string;
  parent: string | undefined;
  /** Where the next read starts; undefined until the shard is first read. */
  iterator: string | undefined;
  /** The last record read (a new iterator starts after it when one expires). */
  lastSequence: string | undefined;
  /** Read to its end: DynamoDB closed it and every record has been read. */
  ended: boolean;
  /** When (`now`) the last read of it that found nothing began; it has had none since a read brought records. */
  emptyAt: number;
  /** The table's write count (`writes`) when the last read of it that found nothing was sent; undefined since a read brought records. */
  emptyWrites: number | undefined;
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
    /** The reader's time, ms: what a record is stamped with (ApproximateCreationDateTime, in seconds), and what `readThroughSince` counts in. */
    private readonly now: () => number,
    private readonly options: {
      /** AWS's round trip each call waits, on the reader's clock (dev/fakes/dynamo-latency.ts); default none. */
      roundTrip?: Omit<LatencyParts, 'track'>;
      /** How many writes the table has had (a simulation's count); what `knownEmpty` compares. */
      writes?: () => number;
    } = {},
  ) {
    this.client = withoutSdkLogger(new DynamoDBStreamsClient({ endpoint: dynamo.endpoint, region: dynamo.region, credentials: dynamo.credentials }));
  }

  /** One call to DynamoDB Local, tracked on the reader's clock, with AWS's round trip for `operation` when one is given. */
  private call<T>(operation: string, work: () => Promise<T>): Promise<T> {
    const { roundTrip } = this.options;
    return roundTrip ? withRoundTrip({ ...roundTrip, track: this.track }, operation, work) : this.track(work);
  }

  /** The stream's ARN (the table's latest stream). */
  async streamArn(): Promise<string> {
    if (this.arn !== undefined) return this.arn;
    const admin: DynamoDBClient = this.dynamo.client();
    try {
      const described = await this.call('DescribeTable', () => admin.send(new DescribeTableCommand({ TableName: this.tableName })));
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
   * this is called. A shard that holds no record is read from its beginning instead: in DynamoDB
   * Local, a LATEST iterator taken on an empty shard, while another table of the namespace has a
   * stream, misses the shard's next records (nothing to skip there anyway).
   */
  async skipToLatest(): Promise<void> {
    this.start = 'LATEST';
    await this.describe();
    for (const shard of this.shards) {
      if (shard.ended) continue;
      shard.lastSequence = undefined;
      if (await this.holdsNothing(shard)) {
        this.opened.add(shard.id);
        shard.iterator = undefined;
        continue;
      }
      this.opened.delete(shard.id);
      shard.iterator = await this.iteratorOf(shard);
    }
  }

  /** Whether the shard has no record to read from its beginning (a trimmed beginning counts as none). */
  private async holdsNothing(shard: Shard): Promise<boolean> {
    const arn = await this.streamArn();
    const at = await this.call('GetShardIterator', () => this.client.send(new GetShardIteratorCommand({ StreamArn: arn, ShardId: shard.id, ShardIteratorType: 'TRIM_HORIZON' })));
    if (at.ShardIterator === undefined) return true;
    try {
      const out = await this.call('GetRecords', () => this.client.send(new GetRecordsCommand({ ShardIterator: at.ShardIterator, Limit: 1 })));
      return (out.Records ?? []).length === 0;
    } catch (error) {
      if ((error as { name?: string }).name === 'TrimmedDataAccessException') return true;
      throw error;
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
    const began = this.now();
    const { out, writes } = await this.getRecords(shard, iterator, Math.min(limit, GET_RECORDS_LIMIT));
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
    if (records.length === 0) {
      this.turn += 1;
      shard.emptyAt = began;
      shard.emptyWrites = writes;
    } else {
      shard.emptyAt = Number.NEGATIVE_INFINITY;
      shard.emptyWrites = undefined;
    }
    return { records, called: true };
  }

  /**
   * Whether this reader has read everything the stream held at `ms` (its `now`): every shard not
   * read to its end had a read that began at or after `ms` and found nothing. A write committed
   * before `ms` is then read, whichever shard holds it (a shard not read to its end is still open,
   * so it has no children yet; a closed one is read to its end before its children count).
   */
  readThroughSince(ms: number): boolean {
    const open = this.shards.filter((shard) => !shard.ended);
    return open.length > 0 && open.every((shard) => shard.emptyAt >= ms);
  }

  /**
   * Whether a read now would find nothing, known without asking: the table's write count (`writes`)
   * is what it was when the last read of every shard not read to its end was sent and found nothing,
   * and no shard has ended since the stream was last described (its children would be unknown).
   */
  knownEmpty(): boolean {
    const writes = this.options.writes?.();
    if (writes === undefined || this.stale) return false;
    const open = this.shards.filter((shard) => !shard.ended);
    return open.length > 0 && open.every((shard) => shard.emptyWrites === writes);
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
  private async getRecords(shard: Shard, iterator: string, limit: number): Promise<{ out: GetRecordsCommandOutput; writes: number | undefined }> {
    // The table's write count as the request goes (a write counted later may be in the answer or not).
    let writes: number | undefined;
    const send = (from: string) => () => {
      writes = this.options.writes?.();
      return this.client.send(new GetRecordsCommand({ ShardIterator: from, Limit: limit }));
    };
    try {
      return { out: await this.call('GetRecords', send(iterator)), writes };
    } catch (error) {
      const name = (error as { name?: string }).name;
      if (name !== 'ExpiredIteratorException' && name !== 'TrimmedDataAccessException') throw error;
      const fresh = await this.iteratorOf(shard);
      if (fresh === undefined) throw error;
      return { out: await this.call('GetRecords', send(fresh)), writes };
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
      const out = await this.call('DescribeStream', () => this.client.send(new DescribeStreamCommand({ StreamArn: arn, ...(from ? { ExclusiveStartShardId: from } : {}) })));
      const description = out.StreamDescription;
      for (const shard of description?.Shards ?? []) {
        if (shard.ShardId === undefined || this.shards.some((known) => known.id === shard.ShardId)) continue;
        this.shards.push({ id: shard.ShardId, parent: shard.ParentShardId, iterator: undefined, lastSequence: undefined, ended: false, emptyAt: Number.NEGATIVE_INFINITY, emptyWrites: undefined });
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
    const out = await this.call('GetShardIterator', () => this.client.send(new GetShardIteratorCommand({ StreamArn: arn, ShardId: shard.id, ...input })));
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
