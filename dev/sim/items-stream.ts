/**
 * The items table's stream and the change-events function on it, for a simulation (dynalite has no
 * streams, and the local system runs no change-events function). As deployed
 * (infra/deployment.ts changeEventSourceDeployment): view type NEW_AND_OLD_IMAGES, batches of up to
 * CHANGE_EVENTS_BATCH_SIZE records, one batch of a shard at a time, ReportBatchItemFailures (a
 * batch is taken again from its first failed record).
 *
 * - `streamWrites` adds a record for every row write the sync's DynamoDB client makes on the items
 *   table, once DynamoDB has accepted it: a PutItem's row is its new image, the row it replaced
 *   (the item store asks for ALL_OLD when a row exists) its old one; INSERT without one. A
 *   TransactWriteItems returns no rows: its Put and Update of an items-table row are recorded with
 *   the rows the harness's dynalite reports when it commits them (dev/fakes/dynalite-commits.ts, by
 *   the request's ClientRequestToken), as it commits them, so in commit order (a transaction the SDK
 *   sends again after a lost answer is committed, so recorded, once). A PutItem's record is added
 *   when its answer comes back. UpdateItem, DeleteItem and a transaction's Delete are counted as
 *   unmodelled.
 * - `buildChangeEvents` is the real change-events handler (functions/change-events/app.ts), built
 *   as its handler.ts builds it from the deployed environment, with a metered connections-table
 *   client and an EventBridge client answered in process (`meteredEventBridge`: every entry
 *   accepted, after `roundTripMs` of virtual time).
 * - `pollStream` is the event source mapping on one shard: Lambda reads a shard at most four times a
 *   second (GetRecords, each one counted), and hands what it read (up to the batch size) to one
 *   invocation at a time. A scenario can make it lose a batch (`lose`): it moves past the records
 *   without invoking the function, as when a batch expires from the stream or is skipped after
 *   failing: their events never reach the bus (counted in `lostBatches`, `lostRecords`).
 *
 * Simplification, said where the figures are used: the stream has one shard (one batch at a time
 * for the whole table). DynamoDB splits a busy table's stream into more shards; more shards mean
 * more, smaller batches (more invocations, as many PutEvents entries).
 */
import { randomUUID } from 'node:crypto';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { Context } from 'aws-lambda';
import { createChangeEventsHandler, type ChangeEventsHandler } from '../../functions/change-events/app.js';
import type { StreamImage, StreamRecord } from '../../functions/change-events/ports.js';
import { loadChangeEventsConfig } from '../../functions/shared/config.js';
import { changeEventSourceDeployment, type FunctionDeployment } from '../../infra/deployment.js';
import { ITEMS_TABLE_PARTITION_KEY, ITEMS_TABLE_SORT_KEY } from '../../infra/storage/storage.js';
import { askForCommitReports, notCommitted, watchCommit, type CommittedWrite } from '../fakes/dynalite-commits.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../fakes/local-aws.js';
import type { BuiltFunction } from '../system/functions.js';
import type { Observability } from '../system/observability.js';
import type { EventBridgeCount, InvocationCount, StreamCount } from './meters.js';
import type { VirtualClock } from './virtual-clock.js';

/** Lambda's reads of a shard: at most four a second (its documented base rate). */
export const STREAM_POLL_MS = 250;
/** EventBridge bills each 64 KB chunk of an entry as one event. */
const EVENT_CHUNK_BYTES = 64 * 1024;
export const CHANGE_EVENTS_FUNCTION_NAME = 'content-sync-change-events';

/** The records of the items table's stream not yet read by the event source, in order. */
export class ItemsStream {
  private readonly records: StreamRecord[] = [];
  private head = 0;
  private sequence = 0;

  constructor(
    private readonly clock: VirtualClock,
    readonly count: StreamCount,
  ) {}

  append(eventName: 'INSERT' | 'MODIFY', newImage: StreamImage, oldImage: StreamImage | undefined): void {
    this.sequence += 1;
    const sequenceNumber = String(this.sequence).padStart(21, '0');
    const keys: StreamImage = {};
    for (const key of [ITEMS_TABLE_PARTITION_KEY, ITEMS_TABLE_SORT_KEY]) if (newImage[key]) keys[key] = newImage[key]!;
    this.records.push({
      eventID: `sim-${sequenceNumber}`,
      eventName,
      ...({ eventSource: 'aws:dynamodb', awsRegion: LOCAL_REGION } as object),
      dynamodb: {
        Keys: keys,
        NewImage: newImage,
        ...(oldImage ? { OldImage: oldImage } : {}),
        SequenceNumber: sequenceNumber,
        ...({ StreamViewType: 'NEW_AND_OLD_IMAGES', ApproximateCreationDateTime: Math.floor(this.clock.ms() / 1000) } as object),
      },
    });
    this.count.records += 1;
  }

  /** Records not yet done by the function. */
  get size(): number {
    return this.records.length - this.head;
  }

  /** Up to `max` records from the oldest not done (they stay until `done`). */
  peek(max: number): StreamRecord[] {
    return this.records.slice(this.head, this.head + max);
  }

  /** The oldest `n` records are done: the event source moves past them. */
  done(n: number): void {
    this.head += n;
    if (this.head > 10_000 && this.head * 2 > this.records.length) {
      this.records.splice(0, this.head);
      this.head = 0;
    }
  }
}

type AnyInput = Record<string, unknown>;
type Next = (args: { input: AnyInput }) => Promise<{ output: AnyInput; response: unknown }>;

/** Every row write `client` makes on `itemsTable`, once accepted, as a record of `stream`. */
export function streamWrites(client: DynamoDBClient, itemsTable: string, stream: ItemsStream): void {
  askForCommitReports(client);
  client.middlewareStack.add(
    ((next: Next, context: { commandName?: string }) => async (args: { input: AnyInput }) => {
      if (context.commandName === 'TransactWriteItemsCommand' && writesTable(args.input, itemsTable)) return streamTransaction(next, args, itemsTable, stream);
      const result = await next(args);
      if (args.input['TableName'] !== itemsTable) return result;
      const operation = (context.commandName ?? '').replace(/Command$/, '');
      if (operation === 'PutItem') {
        const old = result.output['Attributes'] as StreamImage | undefined;
        const fresh = args.input['Item'] as StreamImage;
        stream.append(old && Object.keys(old).length > 0 ? 'MODIFY' : 'INSERT', fresh, old);
      } else if (operation === 'UpdateItem' || operation === 'DeleteItem') {
        stream.count.unmodelled += 1;
      }
      return result;
    }) as never,
    { step: 'initialize', priority: 'low', name: 'itemsStream' },
  );
}

/** The transaction's items-table writes, recorded as the harness's dynalite reports its commit; resolves once recorded. */
async function streamTransaction(next: Next, args: { input: AnyInput }, itemsTable: string, stream: ItemsStream): ReturnType<Next> {
  // The token the SDK would make, made here: it names this request's commit.
  const token = typeof args.input['ClientRequestToken'] === 'string' ? args.input['ClientRequestToken'] : randomUUID();
  const watch = watchCommit(token, (commit) => {
    for (const write of commit.writes) if (write.table === itemsTable) appendWrite(stream, write);
  });
  let result: Awaited<ReturnType<Next>>;
  try {
    result = await next({ ...args, input: { ...args.input, ClientRequestToken: token } });
  } catch (error) {
    if (notCommitted(error)) watch.stop();
    throw error;
  }
  await watch.committed();
  return result;
}

/** A Put or Update of a row as a record (INSERT when there was no row); a Delete is not modelled. */
function appendWrite(stream: ItemsStream, write: CommittedWrite): void {
  if (!write.newImage) {
    stream.count.unmodelled += 1;
    return;
  }
  const old = write.oldImage as StreamImage | undefined;
  stream.append(old ? 'MODIFY' : 'INSERT', write.newImage as StreamImage, old);
}

/** A TransactWriteItems with a Put, Update or Delete on `table`. */
function writesTable(input: AnyInput, table: string): boolean {
  const actions = (input['TransactItems'] ?? []) as Array<Record<string, { TableName?: string } | undefined>>;
  return actions.some((action) => [action['Put'], action['Update'], action['Delete']].some((write) => write?.TableName === table));
}

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
 * The event source mapping on the stream's one shard, until `stopped()`: reads (counted), invokes
 * the function with up to the deployed batch size, moves past what it reports done; reads at most
 * every STREAM_POLL_MS. Resolves when it has stopped.
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
    stream.count.getRecords += 1;
    const records = stream.peek(batchSize);
    if (records.length === 0) {
      stream.count.emptyGetRecords += 1;
      continue;
    }
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
        const at = records.findIndex((record) => record.dynamodb?.SequenceNumber === failure.itemIdentifier);
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
