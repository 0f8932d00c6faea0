/**
 * What a simulation counts of the system it runs (system.ts), so that a scenario can price it:
 * every function's DynamoDB requests and the capacity units dynalite computes for them
 * (ReturnConsumedCapacity added to every read and write), its SQS calls, the event sources' own
 * receives and deletes, invocations and their virtual durations, and (with the counting logs of
 * dev/system/observability.ts) the bytes of log lines and EMF metrics. Also here: the clients and
 * wrappers that count, and the observers' hooks (the provider's answers, the sync's item log lines,
 * the reconciler's sends, the functions' metrics).
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { SyncHandler } from '../../functions/item-sync/app.js';
import type { Dynalite } from '../fakes/dynalite.js';
import type { CallCounts } from '../fakes/in-process-aws.js';
import type { EventSourceQueue, SyncHandlerFn } from '../fakes/lambda.js';
import type { LogCount } from '../system/observability.js';
import type { VirtualClock } from './virtual-clock.js';

/** The sync's two event sources: users' ids (the sync queue) and the sweep (the reconcile queue). */
export type EventSourceName = 'sync' | 'reconcile';

/**
 * Who did what: `sync` and `reconcile` are the sync's containers of each event source, `reconciler`
 * the reconciler, `refresher` the token refresher, `changeEvents` the change-events function (on
 * the items table's stream, with `changeEvents`: items-stream.ts).
 */
export type MeterSource = EventSourceName | 'reconciler' | 'refresher' | 'changeEvents';

/** DynamoDB requests of one operation on one table. */
export interface DynamoCount {
  requests: number;
  /** Capacity units as dynalite computes them (read units for reads, write units for writes). */
  capacityUnits: number;
  /** Conditional writes refused (DynamoDB charges them as writes). */
  conditionFailures: number;
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
  /** The change-events function's PutEvents (with `changeEvents`). */
  eventBridge: EventBridgeCount;
}

/** An empty meter; each source's memory is its function's deployed memory. */
export function emptyMeter(memoryMb: Record<MeterSource, number>): SimMeter {
  const bySource = <T>(make: () => T): Record<MeterSource, T> => ({ sync: make(), reconcile: make(), reconciler: make(), refresher: make(), changeEvents: make() });
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
    },
    logs: bySource(() => ({})),
    stream: emptyStreamCount(),
    eventBridge: emptyEventBridgeCount(),
  };
}

type AnyInput = Record<string, unknown>;
type Next = (args: { input: AnyInput }) => Promise<{ output: AnyInput; response: unknown }>;

/** Operations that take ReturnConsumedCapacity. */
const METERED = new Set(['GetItem', 'PutItem', 'UpdateItem', 'DeleteItem', 'BatchGetItem', 'BatchWriteItem', 'Scan', 'Query']);

export interface TrackedDynamoOptions {
  clock: VirtualClock;
  roundTripMs: number;
  counts: Record<string, DynamoCount>;
  /** The items table, whose ItemCount DescribeTable answers from `itemCount()`. */
  itemsTable: string;
  itemCount: () => number | undefined;
}

/**
 * A DynamoDB client whose calls hold virtual time still while dynalite answers, then take
 * `roundTripMs` of it; each call counted into `counts` with the capacity dynalite computed for it.
 * DescribeTable answers `itemCount()` as the items table's ItemCount when it is known: DynamoDB
 * refreshes it about every six hours, dynalite never (always 0).
 */
export function trackedDynamo(dynamo: Dynalite, options: TrackedDynamoOptions): DynamoDBClient {
  const { clock, roundTripMs, counts, itemsTable, itemCount } = options;
  const client = dynamo.client();
  client.middlewareStack.add(
    ((next: Next, context: { commandName?: string }) => async (args: { input: AnyInput }) => {
      const operation = (context.commandName ?? '').replace(/Command$/, '');
      const input = METERED.has(operation) ? { ...args.input, ReturnConsumedCapacity: 'TOTAL' } : args.input;
      const table = typeof input['TableName'] === 'string' ? input['TableName'] : Object.keys((input['RequestItems'] as AnyInput | undefined) ?? {}).join(',');
      const count = (counts[`${operation} ${table}`] ??= { requests: 0, capacityUnits: 0, conditionFailures: 0 });
      count.requests += 1;
      try {
        const result = await clock.track(next({ ...args, input }));
        count.capacityUnits += consumed(result.output['ConsumedCapacity']);
        if (operation === 'DescribeTable' && itemCount() !== undefined) {
          const described = result.output['Table'] as AnyInput | undefined;
          if (described && described['TableName'] === itemsTable) described['ItemCount'] = itemCount();
        }
        return result;
      } catch (error) {
        if ((error as { name?: string }).name === 'ConditionalCheckFailedException') count.conditionFailures += 1;
        throw error;
      } finally {
        if (roundTripMs > 0) await clock.sleep(roundTripMs);
      }
    }) as never,
    { step: 'initialize', priority: 'high', name: 'virtualTime' },
  );
  return client;
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

/** The items table's stream, as its model (items-stream.ts) counts it. */
export interface StreamCount {
  /** Records the stream was given (row writes on the items table). */
  records: number;
  /** Row writes not turned into a record (an UpdateItem or DeleteItem: no image to give). */
  unmodelled: number;
  /** The event source's GetRecords calls (idle reads included). */
  getRecords: number;
  emptyGetRecords: number;
  /** Records handed to the function again after it reported them failed. */
  retried: number;
}

export interface EventBridgeCount {
  putEventsCalls: number;
  entries: number;
  /** Billed events: each entry's 64 KB chunks. */
  billedEvents: number;
}

export function emptyStreamCount(): StreamCount {
  return { records: 0, unmodelled: 0, getRecords: 0, emptyGetRecords: 0, retried: 0 };
}

export function emptyEventBridgeCount(): EventBridgeCount {
  return { putEventsCalls: 0, entries: 0, billedEvents: 0 };
}
