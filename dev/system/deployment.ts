/**
 * The local system's deployment: every function's memory, time-out and environment, the work
 * queues', the event sources' and the schedules' numbers, from infra/deployment.ts (what the stacks
 * build from) for a configuration (config.ts) and the local names, with a scenario's tuning
 * (tuning.ts) applied to the environments. The one place a function's environment is made.
 */
import { ENV } from '../../functions/shared/config.js';
import type { ContentSyncConfig } from '../../infra/context.js';
import {
  functionDeployments,
  scheduleDeployment,
  syncEventSourceDeployment,
  workQueueDeployment,
  eraseQueueDeployment,
  type FunctionDeployment,
  type ResourceNames,
  type ScheduleDeployment,
  type SqsEventSourceDeployment,
  type WorkQueueDeployment,
} from '../../infra/deployment.js';
import type { LocalNames } from './names.js';
import { tuned, type Tuning } from './tuning.js';

/**
 * The tunable variables each function takes (of those its loader reads: functions/shared/config.ts).
 * The token refresher takes its concurrency and the idle connections' refresh age (a simulation of
 * many connections); its provider requests keep the deployed defaults.
 */
const READS = {
  refresher: new Set<string>([ENV.refreshConcurrency, ENV.idleRefreshHours]),
  api: new Set<string>([ENV.eraseSettleSeconds]),
  sync: new Set<string>([
    ENV.timeoutMs,
    ENV.maxResponseBytes,
    ENV.fetchConcurrency,
    ENV.tokenCacheSeconds,
    ENV.fetchAttempts,
    ENV.rateLimitMinDelaySeconds,
    ENV.paceFallbackRate,
    ENV.postponeMaxSeconds,
    ENV.connectionWaitSeconds,
  ]),
  reconciler: new Set<string>([ENV.freshnessHours, ENV.reconcileSegments, ENV.reconcileHighWater]),
};

export interface LocalDeployment {
  readonly config: ContentSyncConfig;
  readonly refresher: FunctionDeployment;
  readonly sync: FunctionDeployment;
  /** Undefined when freshnessHours is 0 (no reconciler, as deployed). */
  readonly reconciler: FunctionDeployment | undefined;
  readonly changeEvents: FunctionDeployment;
  readonly changesWriter: FunctionDeployment;
  /** The client API's function and the eraser (infra/client-api, infra/connection-eraser). */
  readonly api: FunctionDeployment;
  readonly eraser: FunctionDeployment;
  readonly workQueues: WorkQueueDeployment;
  readonly eraseQueue: WorkQueueDeployment;
  readonly syncEventSource: SqsEventSourceDeployment;
  readonly schedule: ScheduleDeployment;
}

/** Where the queues and the key are once created: what the functions' environments name beside the local names. */
export interface QueueUrls {
  readonly syncDeadLetterQueueUrl: string;
  readonly reconcileQueueUrl: string;
  /** The sync queue (the client API's users' lane); default none. */
  readonly syncQueueUrl?: string;
  /** The erase queue (the client API's erases); default none. */
  readonly eraseQueueUrl?: string;
  /** The key tokens are sealed under (the local KMS model's: dev/system/aws.ts `tokensKeyArn`). */
  readonly connectionsKeyArn: string;
}

/** What the functions' environments name: the local names, the queues' URLs. */
export function resourceNames(names: LocalNames, queues: QueueUrls): ResourceNames {
  return {
    itemsTableName: names.itemsTable,
    itemsBucketName: names.itemsBucket,
    controlTableName: names.controlTable,
    changesTableName: names.changesTable,
    deadLetterQueueUrl: queues.syncDeadLetterQueueUrl,
    reconcileQueueUrl: queues.reconcileQueueUrl,
    connectionsTableName: names.connectionsTable,
    eventBusName: names.eventBus,
    connectionsKeyArn: queues.connectionsKeyArn,
    syncQueueUrl: queues.syncQueueUrl ?? '',
    eraseQueueUrl: queues.eraseQueueUrl ?? '',
  };
}

/** The deployment of `config` over these resources, the environments tuned. */
export function localDeployment(config: ContentSyncConfig, resources: ResourceNames, tuning: Tuning = {}): LocalDeployment {
  const functions = functionDeployments(config, resources);
  const withTuning = (deployment: FunctionDeployment, reads: ReadonlySet<string>): FunctionDeployment => ({
    ...deployment,
    environment: tuned(deployment.environment, tuning, reads),
  });
  return {
    config,
    refresher: withTuning(functions.refresher, READS.refresher),
    sync: withTuning(functions.sync, READS.sync),
    reconciler: functions.reconciler && withTuning(functions.reconciler, READS.reconciler),
    changeEvents: functions.changeEvents,
    changesWriter: functions.changesWriter,
    api: withTuning(functions.api, READS.api),
    eraser: functions.eraser,
    workQueues: workQueueDeployment(config),
    eraseQueue: eraseQueueDeployment(),
    syncEventSource: syncEventSourceDeployment(config),
    schedule: scheduleDeployment(config),
  };
}

/** A function's environment with more tuning (one container of several tuned apart, as the bench's baseline). */
export function retuned(deployment: FunctionDeployment, tuning: Tuning): FunctionDeployment {
  return { ...deployment, environment: tuned(deployment.environment, tuning, READS.sync) };
}
