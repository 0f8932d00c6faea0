/**
 * The item sync's event sources as deployed (infra/deployment.ts syncEventSourceDeployment): Lambda's
 * SQS event source mapping (dev/fakes/lambda.ts runEventSource) on the sync queue or the reconcile
 * queue, with the deployed batch size, a poller per container (maxConcurrency of them), and each
 * invocation's context carrying the function's deployed time-out.
 */
import type { SyncHandler } from '../../functions/item-sync/app.js';
import { runEventSource, type DrainResult, type EventSourceOptions, type EventSourceQueue, type SyncHandlerFn } from '../fakes/lambda.js';
import type { BuiltFunction } from './functions.js';
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
