/**
 * What a simulation counts of the system it runs (system.ts), so that a scenario can price it:
 * every function's DynamoDB requests and the capacity units DynamoDB Local computes for them
 * (ReturnConsumedCapacity added to every read and write; a TransactWriteItems counted against each
 * table it writes, its cancelled attempts and replays apart: `TransactionCount`), its SQS calls, the event sources' own
 * receives and deletes, invocations and their virtual durations, and (with the counting logs of
 * dev/system/observability.ts) the bytes of log lines and EMF metrics. Also here: the clients and
 * wrappers that count, and the observers' hooks (the provider's answers, the sync's item log lines,
 * the reconciler's sends, the functions' metrics).
 */
import type { AttributeValue, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { SyncHandler } from '../../functions/item-sync/app.js';
import { estimateItemSize } from '../../functions/item-sync/adapters/attribute-values.js';
import type { LocalDynamoDb } from '../fakes/local-dynamo.js';
import { addDynamoLatency, dynamoLatency, type DynamoLatency } from '../fakes/dynamo-latency.js';
import { instrumentDynamo, tokenOf, type DynamoChaos, type DynamoMeter } from '../fakes/dynamo-meter.js';
import type { CallCounts } from '../fakes/in-process-aws.js';
import type { EventSourceQueue, SyncHandlerFn } from '../fakes/lambda.js';
import type { LogCount } from '../system/observability.js';
import type { VirtualClock } from './virtual-clock.js';

/** The sync's two event sources: users' ids (the sync queue) and the sweep (the reconcile queue). */
export type EventSourceName = 'sync' | 'reconcile';

/**
 * Who did what: `sync` and `reconcile` are the sync's containers of each event source, `reconciler`
 * the reconciler, `refresher` the token refresher, `changeEvents` the change-events function (on
 * the items table's stream, with `changeEvents`: items-stream.ts), `changesWriter` the changes
 * writer (on the same stream, with `changesWriter`).
 */
export type MeterSource = EventSourceName | 'reconciler' | 'refresher' | 'changeEvents' | 'changesWriter';

/** DynamoDB requests of one operation on one table. */
export interface DynamoCount {
  /** Requests (a TransactWriteItems: each request that wrote this table, whatever became of it). */
  requests: number;
  /**
   * Capacity units as DynamoDB Local computes them (read units for reads, write units for writes; a
   * TransactWriteItems: the write units its committed attempts consume on this table, as AWS
   * counts them: countCommitted).
   */
  capacityUnits: number;
  /**
   * Conditional writes refused (DynamoDB charges them as writes); a TransactWriteItems: requests
   * cancelled with a ConditionalCheckFailed reason at an action on this table.
   */
  conditionFailures: number;
  /** TransactWriteItems only: what did not commit on this table, and the answers replayed. */
  transactions?: TransactionCount;
}

/**
 * A TransactWriteItems's attempts on one table beyond its commit. DynamoDB writes every item of a
 * transaction twice, once to prepare it and once to commit it (2 write units per KB: "Capacity
 * management for transactions", DynamoDB developer guide), and charges a write whose condition
 * fails; a cancelled transaction is charged here as its prepare phase: 1 write unit per KB of each
 * action's item on this table (a Put: the item it sends; an Update, Delete or ConditionCheck: 1,
 * the row not being known to the client). A request the SDK sends again after a lost answer, with
 * the same ClientRequestToken, is answered without being applied again, and DynamoDB charges the
 * rows it reads (its read units) instead.
 */
export interface TransactionCount {
  /** Requests cancelled (any reason: a condition, TransactionConflict, throttling...). */
  cancelled: number;
  /** Write units of their prepare phase on this table. */
  cancelledUnits: number;
  /** Requests answered as the replay of a committed one (a lost answer sent again). */
  replays: number;
  /** Read units of those replays on this table. */
  replayReadUnits: number;
}

/** The event source mapping's own SQS calls on one queue. */
export interface EventSourceCount {
  /** ReceiveMessage calls (long polls that came back empty included). */
  receives: number;
  emptyReceives: number;
  /** DeleteMessageBatch calls (one per invocation with a record done). */
  deleteBatches: number;
}

export interface InvocationCount {
  invocations: number;
  /** Summed virtual durations, ms. */
  durationMs: number;
  /** The function's deployed memory. */
  memoryMb: number;
}

export type { LogCount };

export interface SimMeter {
  /** By source, then by `<Operation> <table>`. */
  dynamo: Record<MeterSource, Record<string, DynamoCount>>;
  /** SDK calls of the functions' SQS clients, by source and operation. */
  sqs: Record<MeterSource, CallCounts>;
  eventSource: Record<EventSourceName, EventSourceCount>;
  lambda: Record<MeterSource, InvocationCount>;
  /** Log lines and EMF metric documents written (only with `meterLogs`), by source, then by message (`EMF metrics` for those). */
  logs: Record<MeterSource, Record<string, LogCount>>;
  /** The items table's stream as the change-events function's event source read it (with `changeEvents`). */
  stream: StreamCount;
  /** The same stream as the changes writer's event source read it (with `changesWriter`). */
  writerStream: StreamCount;
  /** The change-events function's PutEvents (with `changeEvents`). */
  eventBridge: EventBridgeCount;
}

/** An empty meter; each source's memory is its function's deployed memory. */
export function emptyMeter(memoryMb: Record<MeterSource, number>): SimMeter {
  const bySource = <T>(make: () => T): Record<MeterSource, T> => ({ sync: make(), reconcile: make(), reconciler: make(), refresher: make(), changeEvents: make(), changesWriter: make() });
  const eventSource = (): EventSourceCount => ({ receives: 0, emptyReceives: 0, deleteBatches: 0 });
  return {
    dynamo: bySource(() => ({})),
    sqs: bySource(() => ({})),
    eventSource: { sync: eventSource(), reconcile: eventSource() },
    lambda: {
      sync: { invocations: 0, durationMs: 0, memoryMb: memoryMb.sync },
      reconcile: { invocations: 0, durationMs: 0, memoryMb: memoryMb.reconcile },
      reconciler: { invocations: 0, durationMs: 0, memoryMb: memoryMb.reconciler },
      refresher: { invocations: 0, durationMs: 0, memoryMb: memoryMb.refresher },
      changeEvents: { invocations: 0, durationMs: 0, memoryMb: memoryMb.changeEvents },
      changesWriter: { invocations: 0, durationMs: 0, memoryMb: memoryMb.changesWriter },
    },
    logs: bySource(() => ({})),
    stream: emptyStreamCount(),
    writerStream: emptyStreamCount(),
    eventBridge: emptyEventBridgeCount(),
  };
}

type AnyInput = Record<string, unknown>;
type Next = (args: { input: AnyInput }) => Promise<{ output: AnyInput; response: unknown }>;

/** Operations that take ReturnConsumedCapacity. */
const METERED = new Set(['GetItem', 'PutItem', 'UpdateItem', 'DeleteItem', 'BatchGetItem', 'BatchWriteItem', 'Scan', 'Query', 'TransactWriteItems']);
const TRANSACT_WRITE = 'TransactWriteItems';
/** Committed transactions' tokens a client remembers (a token's attempts all come within the SDK's retries). */
const COMMITTED_KEPT = 10_000;

/**
 * The latency every simulated DynamoDB client takes (dev/fakes/dynamo-latency.ts, AWS's as the
 * model has it), unless one is given: `npm run sim -- --dynamo-latency F` scales it for its run.
 */
let simLatency: DynamoLatency = dynamoLatency();

/** The latency simulated DynamoDB clients take from now on; returns the one they took until now. */
export function setSimDynamoLatency(latency: DynamoLatency): DynamoLatency {
  const previous = simLatency;
  simLatency = latency;
  return previous;
}

export function simDynamoLatency(): DynamoLatency {
  return simLatency;
}

export interface TrackedDynamoOptions {
  clock: VirtualClock;
  /** Each call's round trip, in virtual time; default the simulations' (simDynamoLatency). */
  latency?: DynamoLatency;
  counts: Record<string, DynamoCount>;
  /** The items table, whose ItemCount DescribeTable answers from `itemCount()`. */
  itemsTable: string;
  itemCount: () => number | undefined;
  /**
   * Faults below the SDK's retries (dev/fakes/dynamo-meter.ts instrumentDynamo): lost write
   * answers, TransactionConflict cancellations, throttling, counted in `meter`.
   */
  faults?: { meter: DynamoMeter; chaos: DynamoChaos };
}

/** The operations that write a table's items (what its stream may hold a record of). */
const WRITES = new Set(['PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem', 'TransactWriteItems']);
/** Writes sent through trackedDynamo clients to each server's tables, by table name: each attempt, counted as its answer (or error) comes. */
const tableWriteCounts = new WeakMap<LocalDynamoDb, Map<string, number>>();

/**
 * How many writes trackedDynamo's clients of `dynamo` have made to `table` (succeeded or not: a write
 * whose answer was lost did land). Every system call of a simulation goes through trackedDynamo;
 * the harness's own writes (a preload) are not counted.
 */
export function tableWrites(dynamo: LocalDynamoDb, table: string): number {
  return tableWriteCounts.get(dynamo)?.get(table) ?? 0;
}

/**
 * A DynamoDB client whose calls take the latency model's round trip of virtual time, half before
 * the request reaches DynamoDB Local and half after it (pipelined on the clock: virtual-clock.ts
 * `call`, the answer handed over at the end of the round trip); each call counted into `counts` with
 * the capacity DynamoDB Local computed for it.
 * A TransactWriteItems is counted against every table it writes (`TransactWriteItems <table>`):
 * the write units of each attempt that committed, as AWS counts them (below the SDK's
 * retries, under the faults: an attempt whose answer is then lost is counted), the replays of a
 * committed request, and each cancellation the caller gets (TransactionCount).
 * DescribeTable answers `itemCount()` as the items table's ItemCount when it is known: DynamoDB
 * refreshes it about every six hours, so a simulation says what it would be.
 */
export function trackedDynamo(dynamo: LocalDynamoDb, options: TrackedDynamoOptions): DynamoDBClient {
  const { clock, counts, itemsTable, itemCount, faults } = options;
  const client = dynamo.client();
  if (faults) instrumentDynamo(client, faults.meter, faults.chaos);
  const countOf = (key: string): DynamoCount => (counts[key] ??= { requests: 0, capacityUnits: 0, conditionFailures: 0 });
  // The tokens of the transactions committed (their later successes are replays), the latest kept.
  const committed = new Set<string>();
  // Added after the faults' middleware, same step and priority: it runs inside it, on each attempt as DynamoDB answered it.
  client.middlewareStack.add(
    ((next: Next, context: { commandName?: string }) => async (args: { input: AnyInput; request?: { headers: Record<string, string>; body?: unknown } }) => {
      const result = await next(args);
      if (context.commandName === `${TRANSACT_WRITE}Command`) {
        const token = tokenOf(args.request);
        const replay = token !== undefined && committed.has(token);
        if (token !== undefined && !replay) {
          committed.add(token);
          if (committed.size > COMMITTED_KEPT) committed.delete(committed.values().next().value!);
        }
        countCommitted(args.input, result.output['ConsumedCapacity'], replay, countOf);
      }
      return result;
    }) as never,
    { step: 'deserialize', priority: 'high', name: 'transactionUnits' },
  );
  client.middlewareStack.add(
    ((next: Next, context: { commandName?: string }) => async (args: { input: AnyInput }) => {
      const operation = (context.commandName ?? '').replace(/Command$/, '');
      const input = METERED.has(operation) ? { ...args.input, ReturnConsumedCapacity: 'TOTAL' } : args.input;
      const transaction = operation === TRANSACT_WRITE;
      const tables = transaction ? tablesOf(input) : [tableOf(input)];
      for (const table of tables) countOf(`${operation} ${table}`).requests += 1;
      try {
        const result = await next({ ...args, input });
        if (!transaction) countOf(`${operation} ${tables[0]}`).capacityUnits += consumed(result.output['ConsumedCapacity']);
        if (operation === 'DescribeTable' && itemCount() !== undefined) {
          const described = result.output['Table'] as AnyInput | undefined;
          if (described && described['TableName'] === itemsTable) described['ItemCount'] = itemCount();
        }
        return result;
      } catch (error) {
        if (transaction) countCancelled(input, error, countOf);
        else if ((error as { name?: string }).name === 'ConditionalCheckFailedException') countOf(`${operation} ${tables[0]}`).conditionFailures += 1;
        throw error;
      }
    }) as never,
    { step: 'initialize', priority: 'high', name: 'virtualTime' },
  );
  // Each attempt of a write, counted by table as it is sent (while it is prepared: before its request
  // is in line with DynamoDB Local, and before any later call's), succeeded or not: a read of the
  // stream whose count has not moved since it found nothing has seen every write sent before it
  // (TableStream.knownEmpty).
  const writes = tableWriteCounts.get(dynamo) ?? tableWriteCounts.set(dynamo, new Map()).get(dynamo)!;
  client.middlewareStack.add(
    ((next: Next, context: { commandName?: string }) => async (args: { input: AnyInput }) => {
      const operation = (context.commandName ?? '').replace(/Command$/, '');
      if (!WRITES.has(operation)) return next(args);
      const tables = operation === TRANSACT_WRITE ? tablesOf(args.input) : tableOf(args.input).split(',');
      for (const table of tables) writes.set(table, (writes.get(table) ?? 0) + 1);
      return next(args);
    }) as never,
    { step: 'deserialize', priority: 'high', name: 'tableWrites' },
  );
  // Added after the meter, same step and priority: it runs inside it, so a call is counted once whatever its latency.
  return addDynamoLatency(client, { latency: options.latency ?? simLatency, sleep: clock.sleep, pipeline: clock });
}

function tableOf(input: AnyInput): string {
  return typeof input['TableName'] === 'string' ? input['TableName'] : Object.keys((input['RequestItems'] as AnyInput | undefined) ?? {}).join(',');
}

type TransactAction = Record<string, { TableName?: string; Item?: Record<string, AttributeValue> } | undefined>;

/** A TransactWriteItems's actions, each as its one member (Put, Update, Delete or ConditionCheck). */
function actionsOf(input: AnyInput): Array<{ kind: string; table: string; item?: Record<string, AttributeValue> }> {
  return ((input['TransactItems'] ?? []) as TransactAction[]).map((action) => {
    const [kind = '', member] = Object.entries(action).find(([, value]) => value !== undefined) ?? [];
    return { kind, table: member?.TableName ?? '', ...(member?.Item ? { item: member.Item } : {}) };
  });
}

/** The tables a TransactWriteItems writes, in the order of its actions. */
function tablesOf(input: AnyInput): string[] {
  return [...new Set(actionsOf(input).map((action) => action.table))];
}

function transactionsOf(count: DynamoCount): TransactionCount {
  return (count.transactions ??= { cancelled: 0, cancelledUnits: 0, replays: 0, replayReadUnits: 0 });
}

/**
 * A committed attempt's write units by table, as AWS counts them: each action 2 units a KB of its
 * item, rounded up item by item. DynamoDB Local sizes a table's items in a transaction together (one
 * rounding for all of them) and answers a replay as if it wrote again: so a Put counts its item as
 * sent, another action at least 2 units, and a table at least what DynamoDB Local answered (an
 * Update's row is only known to it). A replay of a committed request (its token committed before)
 * is counted apart, with a strongly consistent read unit for each item it reads back.
 */
function countCommitted(input: AnyInput, capacity: unknown, replay: boolean, countOf: (key: string) => DynamoCount): void {
  const answered = new Map<string, number>();
  for (const entry of (Array.isArray(capacity) ? capacity : []) as Array<{ TableName?: string; CapacityUnits?: number }>) {
    answered.set(entry.TableName ?? '', Number(entry.CapacityUnits) || 0);
  }
  const byTable = new Map<string, { units: number; items: number }>();
  for (const action of actionsOf(input)) {
    const table = byTable.get(action.table) ?? { units: 0, items: 0 };
    table.units += action.kind === 'Put' && action.item ? 2 * Math.max(1, Math.ceil(estimateItemSize(action.item) / 1024)) : 2;
    table.items += 1;
    byTable.set(action.table, table);
  }
  for (const [table, { units, items }] of byTable) {
    const count = countOf(`${TRANSACT_WRITE} ${table}`);
    if (!replay) {
      count.capacityUnits += Math.max(units, answered.get(table) ?? 0);
      continue;
    }
    const transactions = transactionsOf(count);
    transactions.replays += 1;
    transactions.replayReadUnits += items;
  }
}

/** A cancellation the caller got: each table's prepare units, and its condition failures. */
function countCancelled(input: AnyInput, error: unknown, countOf: (key: string) => DynamoCount): void {
  const cancelled = error as { name?: string; CancellationReasons?: Array<{ Code?: string } | undefined> };
  if (cancelled.name !== 'TransactionCanceledException') return;
  const actions = actionsOf(input);
  const byTable = new Map<string, { units: number; conditionFailed: boolean }>();
  for (const [i, action] of actions.entries()) {
    const table = byTable.get(action.table) ?? { units: 0, conditionFailed: false };
    table.units += action.kind === 'Put' && action.item ? Math.max(1, Math.ceil(estimateItemSize(action.item) / 1024)) : 1;
    if (cancelled.CancellationReasons?.[i]?.Code === 'ConditionalCheckFailed') table.conditionFailed = true;
    byTable.set(action.table, table);
  }
  for (const [table, { units, conditionFailed }] of byTable) {
    const count = countOf(`${TRANSACT_WRITE} ${table}`);
    const transactions = transactionsOf(count);
    transactions.cancelled += 1;
    transactions.cancelledUnits += units;
    if (conditionFailed) count.conditionFailures += 1;
  }
}

function consumed(capacity: unknown): number {
  const list = Array.isArray(capacity) ? capacity : capacity === undefined ? [] : [capacity];
  return list.reduce((sum: number, entry) => sum + (Number((entry as { CapacityUnits?: number }).CapacityUnits) || 0), 0);
}

/** The event source's ReceiveMessage and DeleteMessageBatch calls, counted. */
export function meteredQueue(queue: EventSourceQueue, count: EventSourceCount): EventSourceQueue {
  return {
    arn: queue.arn,
    async receive(max, waitMs) {
      count.receives += 1;
      const messages = await queue.receive(max, waitMs);
      if (messages.length === 0) count.emptyReceives += 1;
      return messages;
    },
    async settle(succeeded, failed) {
      // Lambda deletes what succeeded with one DeleteMessageBatch (a batch holds at most 10 records).
      if (succeeded.length > 0) count.deleteBatches += Math.ceil(succeeded.length / 10);
      await queue.settle(succeeded, failed);
    },
    remaining: () => queue.remaining(),
  };
}

/** The messages every SendMessageBatch call sent and SQS accepted, told to `observe` with the call's queue URL (add before the backend answers). */
export function watchQueueSends(
  client: SQSClient,
  clock: VirtualClock,
  observe: (queueUrl: string, messages: ReadonlyArray<{ connection?: string; id: string }>, at: number) => void,
): void {
  client.middlewareStack.add(
    ((next: Next, context: { commandName?: string }) => async (args: { input: AnyInput }) => {
      const result = await next(args);
      if (context.commandName === 'SendMessageBatchCommand') {
        const entries = (args.input['Entries'] ?? []) as Array<{ Id: string; MessageBody: string }>;
        const accepted = new Set(((result.output['Successful'] ?? []) as Array<{ Id: string }>).map((entry) => entry.Id));
        const messages = entries.filter((entry) => accepted.has(entry.Id)).flatMap((entry) => {
          try {
            const body = JSON.parse(entry.MessageBody) as { connection?: unknown; id?: unknown };
            return typeof body.id === 'string' ? [{ id: body.id, ...(typeof body.connection === 'string' ? { connection: body.connection } : {}) }] : [];
          } catch {
            return [];
          }
        });
        observe(String(args.input['QueueUrl']), messages, clock.ms());
      }
      return result;
    }) as never,
    { step: 'initialize', priority: 'high', name: 'watchQueueSends' },
  );
}

/** A handler's invocations and virtual durations, counted. */
export function timed(handler: SyncHandler | SyncHandlerFn, clock: VirtualClock, count: InvocationCount): SyncHandlerFn {
  return async (event, context) => {
    const started = clock.ms();
    count.invocations += 1;
    try {
      return await handler(event, context);
    } finally {
      count.durationMs += clock.ms() - started;
    }
  };
}

/** The provider's answers, told to `observe` with the id asked for. */
export function observedFetch(
  fetch: typeof globalThis.fetch,
  clock: VirtualClock,
  observe: ((itemId: string, status: number, at: number) => void) | undefined,
): typeof globalThis.fetch {
  if (!observe) return fetch;
  return async (input, init) => {
    const response = await fetch(input, init);
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const marker = url.indexOf('/items/');
    if (marker >= 0) observe(decodeURIComponent(url.slice(marker + 7).split('?')[0]!), response.status, clock.ms());
    return response;
  };
}

/** The ids of every SendMessageBatch entry SQS accepted, told to `observe` (add before the backend answers). */
export function watchReconcileSends(client: SQSClient, clock: VirtualClock, observe: (ids: readonly string[], at: number) => void): void {
  client.middlewareStack.add(
    ((next: Next, context: { commandName?: string }) => async (args: { input: AnyInput }) => {
      const result = await next(args);
      if (context.commandName === 'SendMessageBatchCommand') {
        const entries = (args.input['Entries'] ?? []) as Array<{ Id: string; MessageBody: string }>;
        const accepted = new Set(((result.output['Successful'] ?? []) as Array<{ Id: string }>).map((entry) => entry.Id));
        const sent = entries.filter((entry) => accepted.has(entry.Id)).map((entry) => (JSON.parse(entry.MessageBody) as { id: string }).id);
        observe(sent, clock.ms());
      }
      return result;
    }) as never,
    // Added before the backend's middleware (same step and priority): it runs first and sees the model's answer.
    { step: 'initialize', priority: 'high', name: 'watchReconcileSends' },
  );
}

/** Tells `observe` of every line the logger writes about an item (its fields hold `itemId`, and `connection`). */
export function watchItemLogs(
  logger: unknown,
  clock: VirtualClock,
  observe: (message: string, itemId: string, at: number, connection: string | undefined) => void,
): void {
  const target = logger as Record<'debug' | 'info' | 'warn' | 'error', (message: string, ...rest: unknown[]) => void>;
  for (const level of ['debug', 'info', 'warn', 'error'] as const) {
    const original = target[level].bind(target);
    target[level] = (message: string, ...rest: unknown[]) => {
      const fields = rest[0] as { itemId?: unknown; connection?: unknown } | undefined;
      const itemId = fields?.itemId;
      if (typeof itemId === 'string') observe(message, itemId, clock.ms(), typeof fields?.connection === 'string' ? fields.connection : undefined);
      original(message, ...rest);
    };
  }
}

/** Tells `observe` of every value the metrics object is given (addMetric), before it stores it. */
export function watchMetrics(metrics: unknown, clock: VirtualClock, observe: (name: string, value: number, at: number) => void): void {
  const target = metrics as { addMetric: (name: string, unit: unknown, value: number, ...rest: unknown[]) => unknown };
  const original = target.addMetric.bind(target);
  target.addMetric = (name: string, unit: unknown, value: number, ...rest: unknown[]) => {
    observe(name, value, clock.ms());
    return original(name, unit, value, ...rest);
  };
}

/** The items table's stream, as the change events' event source (items-stream.ts) read it. */
export interface StreamCount {
  /** Records the event source read from the stream (each once, however often it was handed to the function). */
  records: number;
  /** The event source's GetRecords calls (idle reads included). */
  getRecords: number;
  emptyGetRecords: number;
  /** Records handed to the function again after it reported them failed. */
  retried: number;
  /** Batches the event source lost (a scenario's fault: items-stream.ts pollStream `lose`), and their records. */
  lostBatches: number;
  lostRecords: number;
  /** Invocations that failed after their work (a scenario's fault: pollStream `failAfter`): their batch came again. */
  failedAfterWork: number;
}

export interface EventBridgeCount {
  putEventsCalls: number;
  entries: number;
  /** Billed events: each entry's 64 KB chunks. */
  billedEvents: number;
}

export function emptyStreamCount(): StreamCount {
  return { records: 0, getRecords: 0, emptyGetRecords: 0, retried: 0, lostBatches: 0, lostRecords: 0, failedAfterWork: 0 };
}

export function emptyEventBridgeCount(): EventBridgeCount {
  return { putEventsCalls: 0, entries: 0, billedEvents: 0 };
}
