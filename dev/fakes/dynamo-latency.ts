/**
 * AWS's DynamoDB latency, as a model the harness injects: DynamoDB Local answers in about a
 * millisecond on loopback, AWS in several (a transaction more), and what the system does depends on
 * it: two writers racing for one row or one head, a pace that draws from a shared row, how many
 * calls a second a container can make, how long an invocation lasts and so what it costs.
 *
 * The figures are a model, not a measurement: AWS publishes no latency per operation, only that
 * reads and writes take "single-digit milliseconds" at any scale (the DynamoDB developer guide and
 * product page; the USENIX ATC 2022 paper "Amazon DynamoDB: A Scalable, Predictably Performant, and
 * Fully Managed NoSQL Database Service"), and that a transaction prepares every item on its partition
 * and then commits it (two rounds: "Distributed Transactions at Scale in Amazon DynamoDB", USENIX
 * ATC 2023). So round figures inside that range: a read below a write (a write is acknowledged once
 * two of the three replicas in different Availability Zones hold it), a batch as its slowest member,
 * a transaction as two rounds of its kind, the control plane above them all.
 *
 * Half of a call's figure is waited before the request reaches DynamoDB Local and half after its
 * answer, so that two clients racing for one item see the window AWS gives them: each request is
 * applied half a round trip after it was sent, and its sender learns the outcome half a round trip
 * later. One round trip per SDK call: its retries (throttling, the harness's injected faults) add
 * their backoff, not another round trip.
 */
import type { DynamoDBClientConfig } from '@aws-sdk/client-dynamodb';
import type { LocalDynamoDb } from './local-dynamo.js';

/** One call's round trip by operation, ms, before the factor. */
export const DYNAMO_LATENCY_MS = {
  /** One item from one partition: the low end of AWS's "single-digit milliseconds". */
  GetItem: 4,
  /** Up to 100 keys read in parallel across partitions: the slowest of them, above one read. */
  BatchGetItem: 6,
  /** A page (up to 1 MB) of one partition's items, read in order: above one item. */
  Query: 6,
  /** A page (up to 1 MB) of a segment, whole rows read: the most work of a read. */
  Scan: 10,
  /** A write: acknowledged once two of the item's three replicas hold it, so above a read. */
  PutItem: 6,
  UpdateItem: 6,
  DeleteItem: 6,
  /** Up to 25 writes in parallel across partitions: the slowest of them, above one write. */
  BatchWriteItem: 8,
  /** Prepare then commit on every item's partition (its ConditionChecks included): two rounds of a write. */
  TransactWriteItems: 12,
  /** Read, then check that nothing changed meanwhile: two rounds of a read. */
  TransactGetItems: 8,
  /** The control plane: no latency is published for it, and it is not on any hot path here. */
  DescribeTable: 10,
  ListTables: 10,
  /** DynamoDB Streams: a page of a shard's records, read like a Query. */
  GetRecords: 6,
  /** A position in a shard: a lookup, like a GetItem. */
  GetShardIterator: 4,
  /** The stream's shards: the control plane, like DescribeTable. */
  DescribeStream: 10,
} as const satisfies Record<string, number>;

export type DynamoOperation = keyof typeof DYNAMO_LATENCY_MS;

/**
 * Any other operation (CreateTable, UpdateTimeToLive, DescribeTimeToLive...): the control plane's
 * figure, so that no call, known or not, takes longer than a documented one.
 */
export const OTHER_OPERATION_MS = 10;

export interface DynamoLatencyOptions {
  /** Multiplies every figure: 0 turns the latency off, 2 doubles it; default 1. */
  factor?: number;
  /** Figures (ms, before the factor) over the defaults, by operation: any operation, known or not. */
  overrides?: Readonly<Record<string, number>>;
}

export interface DynamoLatency {
  readonly factor: number;
  /** One call's round trip, ms (the factor applied): its figure, or OTHER_OPERATION_MS for an operation without one. */
  ms(operation: string): number;
}

/** The model with its factor and overrides; throws on a factor or a figure that is not a number of at least 0. */
export function dynamoLatency(options: DynamoLatencyOptions = {}): DynamoLatency {
  const factor = options.factor ?? 1;
  if (!(Number.isFinite(factor) && factor >= 0)) throw new Error(`the DynamoDB latency factor must be a number of at least 0, got ${factor}`);
  const figures: Record<string, number> = { ...DYNAMO_LATENCY_MS, ...options.overrides };
  for (const [operation, ms] of Object.entries(figures)) {
    if (!(Number.isFinite(ms) && ms >= 0)) throw new Error(`the DynamoDB latency of ${operation} must be a number of ms of at least 0, got ${ms}`);
  }
  return {
    factor,
    ms: (operation) => (Object.hasOwn(figures, operation) ? figures[operation]! : OTHER_OPERATION_MS) * factor,
  };
}

/** Waits `ms` of real time (the bench, the soak): at least that, as timers do. */
export const realSleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** One SDK call made through a Pipeline: each of its HTTP exchanges (the first and any retry) goes through `exchange`. */
export interface CallSlot {
  /** `work` (one HTTP exchange, its answer read whole) in line with every other; its answer handed back at the call's answer time. */
  exchange<R>(work: () => Promise<R>): Promise<R>;
}

/** A virtual clock that pipelines calls (dev/sim/virtual-clock.ts `call`). */
export interface Pipeline {
  /** The clock's time, ms. */
  ms(): number;
  /** `run` (the rest of the SDK call) made now, its answer handed over at `answerAt`. */
  call<T>(answerAt: number, run: (slot: CallSlot) => Promise<T>): Promise<T>;
}

/** How a client waits: the sleep, and (a simulation) what holds its clock still while DynamoDB Local answers. */
export interface LatencyParts {
  latency: DynamoLatency;
  /** A real sleep (realSleep) or a virtual clock's. */
  sleep: (ms: number) => Promise<void>;
  /**
   * Wraps the request to DynamoDB Local (a virtual clock's `track`: its time stands still while the
   * real server answers, so that the call takes the model's time and nothing more); default none.
   */
  track?: <T>(work: () => Promise<T>) => Promise<T>;
  /**
   * In place of `track` (addDynamoLatency only), a virtual clock that pipelines the calls: each is
   * sent half its round trip after it was made and answered at the end of the round trip, its
   * clock running on while DynamoDB Local answers (the same on every run, and faster).
   */
  pipeline?: Pipeline;
}

/** `call` as AWS would answer it: half of `operation`'s round trip before it, half after it (an error's answer too). */
export async function withRoundTrip<T>(parts: LatencyParts, operation: string, call: () => Promise<T>): Promise<T> {
  const total = parts.latency.ms(operation);
  const before = total / 2;
  if (before > 0) await parts.sleep(before);
  try {
    return await (parts.track ? parts.track(call) : call());
  } finally {
    if (total - before > 0) await parts.sleep(total - before);
  }
}

/**
 * `run` (an SDK call) as AWS would answer it, on a pipelining clock: sent half of `operation`'s round
 * trip after now, answered at the end of it (an error's answer too; a call that failed before any
 * request waits the rest of its round trip as withRoundTrip does).
 */
async function pipelinedRoundTrip<T>(parts: LatencyParts, pipeline: Pipeline, operation: string, run: (slot: CallSlot) => Promise<T>): Promise<T> {
  const total = parts.latency.ms(operation);
  const before = total / 2;
  if (before > 0) await parts.sleep(before);
  const answerAt = pipeline.ms() + (total - before);
  try {
    return await pipeline.call(answerAt, run);
  } finally {
    const left = answerAt - pipeline.ms();
    if (left > 0) await parts.sleep(left);
  }
}

type Args = { input: Record<string, unknown> };
type Handler = (args: Args) => Promise<unknown>;
/** What the SDK clients share: DynamoDBClient and DynamoDBStreamsClient both have it. */
interface WithMiddleware {
  middlewareStack: { add(middleware: never, options: { step: 'initialize'; priority: 'high'; name: string }): void };
}

/** The middleware's name on a client's stack. */
export const LATENCY_MIDDLEWARE = 'dynamoLatency';
/** With a pipeline: the middleware, innermost, that puts each HTTP exchange in the pipeline's line. */
export const EXCHANGE_MIDDLEWARE = 'dynamoLatencyExchange';
/** Where a pipelined call's slot is kept in the SDK's context of the call (shared by its middleware). */
const SLOT = Symbol('pipelined call');

/** The HTTP answer's body read whole (the SDK reads a byte array as it reads a stream): the exchange is over when it is. */
async function readWhole(output: unknown): Promise<unknown> {
  const response = (output as { response?: { body?: unknown } } | undefined)?.response;
  const body = response?.body;
  if (body !== undefined && body !== null && !(body instanceof Uint8Array) && typeof (body as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function') {
    const chunks: Buffer[] = [];
    for await (const chunk of body as AsyncIterable<Buffer | string>) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
    response!.body = Buffer.concat(chunks);
  }
  return output;
}

/**
 * Applies the model to every call of `client` (a DynamoDBClient or a DynamoDBStreamsClient), by its
 * operation (its command's name), around the whole call (the SDK's retries inside it). Added to the
 * initialize step with high priority: after another middleware of that step and priority, it runs
 * inside it (a simulation's meter counts the call around its latency).
 */
export function addDynamoLatency<C extends WithMiddleware>(client: C, parts: LatencyParts): C {
  const { pipeline } = parts;
  type Context = { commandName?: string; [SLOT]?: CallSlot };
  const middleware = (next: Handler, context: Context): Handler => {
    const operation = (context.commandName ?? '').replace(/Command$/, '');
    if (pipeline === undefined) return (args) => withRoundTrip(parts, operation, () => next(args));
    return (args) =>
      pipelinedRoundTrip(parts, pipeline, operation, (slot) => {
        context[SLOT] = slot;
        return next(args);
      });
  };
  client.middlewareStack.add(middleware as never, { step: 'initialize', priority: 'high', name: LATENCY_MIDDLEWARE });
  if (pipeline !== undefined) {
    // Innermost (the deserialize step's lowest priority: below the SDK's deserializer), once per attempt.
    const exchange = (next: Handler, context: Context): Handler => (args) => {
      const slot = context[SLOT];
      return slot === undefined ? next(args) : slot.exchange(async () => readWhole(await next(args)));
    };
    (client.middlewareStack as unknown as { add(middleware: never, options: object): void }).add(exchange as never, { step: 'deserialize', priority: 'low', name: EXCHANGE_MIDDLEWARE });
  }
  return client;
}

/**
 * `dynamo` whose `client()` makes clients with the model applied (real sleeps): what the bench, the
 * soak and the reconciler's bench hand to the system. Its own helpers (creating tables, `scan`,
 * `getRow`) are the harness's set-up and checks, not the system's calls: they take none.
 */
export function withDynamoLatency<D extends LocalDynamoDb>(dynamo: D, latency: DynamoLatency, sleep: LatencyParts['sleep'] = realSleep): D {
  const wrapped = Object.create(dynamo) as D;
  wrapped.client = (config?: DynamoDBClientConfig) => addDynamoLatency(dynamo.client(config), { latency, sleep });
  return wrapped;
}
