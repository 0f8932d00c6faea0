/**
 * The local system, built in one place: the configuration (cdk.json with a scenario's overrides,
 * read by the stacks' own reader), the deployment infra/deployment.ts makes of it (every function's
 * memory, time-out and environment, the queues', event sources' and schedules' numbers), the work
 * queues in the AWS backend, the connections table's store (connections are added as the operator
 * CLI adds them), and the functions, built on demand with the backend's and the storage's clients
 * unless a scenario gives its own (metered, faulty, in virtual time).
 *
 * What differs from scenario to scenario is an option: the AWS backend (aws.ts: in process, on any
 * clock, or the HTTP emulator), the storage (storage.ts: DynamoDB Local, in
 * memory or on disk; s3rver), the provider (its base URL, or a fetch that reaches a model), the
 * context overrides, the tuning, and the clients, clock and logs each function gets.
 */
import type { Context } from 'aws-lambda';
import type { SyncHandler } from '../../functions/item-sync/app.js';
import type { ReconcilerHandler } from '../../functions/reconciler/app.js';
import { sealedConnectionStore } from '../../functions/shared/adapters/sealed-connection-store.js';
import type { ConnectionStore } from '../../functions/shared/connections/ports.js';
import type { ContentSyncConfig } from '../../infra/context.js';
import type { WorkQueueDeployment } from '../../infra/deployment.js';
import type { AwsBackend } from './aws.js';
import { systemConfig, type ContextOverrides } from './config.js';
import { localDeployment, resourceNames, retuned, type LocalDeployment } from './deployment.js';
import {
  buildReconciler,
  buildRefresher,
  buildSyncContainer,
  buildApi,
  buildChangeEvents,
  buildChangesWriter,
  buildEraser,
  FUNCTION_NAMES,
  invocationContext,
  type ApiHandler,
  type ApiParts,
  type ChangeEventsHandler,
  type ChangesWriterHandler,
  type ChangesWriterParts,
  type ChangeEventsParts,
  type EraserHandler,
  type EraserParts,
  type BuiltFunction,
  type InvocationOptions,
  type ReconcilerParts,
  type RefresherHandler,
  type RefresherParts,
  type SyncParts,
} from './functions.js';
import type { LocalNames } from './names.js';
import { createWorkQueues, type WorkQueues } from './queues.js';
import type { Storage } from './storage.js';
import type { Tuning } from './tuning.js';
import { kmsApi } from '../../functions/shared/adapters/kms-api.js';

export interface SystemOptions {
  names: LocalNames;
  /** Context values over cdk.json's (baseUrl: the provider's address). */
  context?: ContextOverrides;
  /** The functions' tunables beyond the deployed environment (tuning.ts). */
  tuning?: Tuning;
  aws: AwsBackend;
  storage: Storage;
  /**
   * Departures from the deployed work queues: a scenario whose SQS time runs faster than its
   * handlers' (the soak), or a local run that retries sooner than a deployment would.
   */
  queues?: Partial<Pick<WorkQueueDeployment, 'visibilityTimeoutSeconds' | 'maxReceiveCount'>>;
  /** Appended to the functions' names (`-local`). */
  functionNameSuffix?: string;
  /** The time invocations' remaining time counts down in; default Date.now. */
  now?: () => number;
}

export interface LocalSystem {
  readonly config: ContentSyncConfig;
  readonly deployment: LocalDeployment;
  readonly names: LocalNames;
  readonly queues: WorkQueues;
  readonly aws: AwsBackend;
  readonly storage: Storage;
  /** The connections table (what the operator CLI writes): add connections, read their state. */
  readonly connections: ConnectionStore;
  /** The token refresher, with its own DynamoDB client unless given one. */
  refresher(parts?: Partial<RefresherParts>): BuiltFunction<RefresherHandler>;
  /** One container of the item sync (its own clients unless given), with more tuning if asked (the bench's sequential baseline). */
  syncContainer(parts?: Partial<SyncParts> & { tuning?: Tuning }): BuiltFunction<SyncHandler>;
  /** The client API's function, with its own clients unless given; its presigned URLs signed with the storage's S3 client (s3rver's endpoint), when there is a bucket. */
  api(parts?: Partial<ApiParts>): BuiltFunction<ApiHandler>;
  /** The eraser, with its own clients unless given. */
  eraser(parts?: Partial<EraserParts>): BuiltFunction<EraserHandler>;
  /**
   * The change-events function (its own connections-table client unless given), on the bus client
   * given: no backend models EventBridge. Its event sources: event-sources.ts startStreamEventSource.
   */
  changeEvents(parts: Partial<ChangeEventsParts> & Pick<ChangeEventsParts, 'eventbridge'>): BuiltFunction<ChangeEventsHandler>;
  /** The changes writer (its own DynamoDB client unless given). Its event source: event-sources.ts startStreamEventSource with changesWriterEventSourceDeployment. */
  changesWriter(parts?: Partial<ChangesWriterParts>): BuiltFunction<ChangesWriterHandler>;
  /** The reconciler; throws when freshnessHours is 0 (none deployed). */
  reconciler(parts?: Partial<ReconcilerParts>): BuiltFunction<ReconcilerHandler>;
  /** The context of one invocation of `fn` (its deployed time-out and memory, counting down in the system's time). */
  context(fn: BuiltFunction<unknown>, options?: InvocationOptions): Context;
  /** Stops the AWS backend and the storage. */
  close(): Promise<void>;
}

export function buildSystem(options: SystemOptions): LocalSystem {
  const { names, aws, storage } = options;
  const config = systemConfig(options.context);
  // The reconcile queue: the reconciler's, and where discovery sends a folder's children (the stacks
  // deploy it whatever freshnessHours is; locally it is made when something sends to it).
  const withReconcile = config.freshnessHours !== 0 || config.discovery !== undefined;
  const placeholder = localDeployment(config, resourceNames(names, { syncDeadLetterQueueUrl: '', reconcileQueueUrl: '', connectionsKeyArn: aws.tokensKeyArn }));
  const queues = createWorkQueues(aws.sqs, names, { ...placeholder.workQueues, ...options.queues }, withReconcile, placeholder.eraseQueue);
  const deployment = localDeployment(
    config,
    resourceNames(names, {
      syncDeadLetterQueueUrl: queues.sync.deadLetterUrl,
      reconcileQueueUrl: queues.reconcile?.url ?? '',
      syncQueueUrl: queues.sync.url,
      eraseQueueUrl: queues.erase.url,
      connectionsKeyArn: aws.tokensKeyArn,
    }),
    options.tuning,
  );
  const workQueues = { ...deployment.workQueues, ...options.queues };
  const suffix = options.functionNameSuffix ?? '';
  const now = options.now ?? Date.now;
  const clients: Array<{ destroy(): void }> = [];
  const kept = <T extends { destroy(): void }>(client: T): T => {
    clients.push(client);
    return client;
  };

  return {
    config,
    deployment: { ...deployment, workQueues },
    names,
    queues,
    aws,
    storage,
    connections: sealedConnectionStore({
      dynamodb: kept(storage.dynamo.client()),
      kms: kmsApi(aws.kmsClient()),
      config: { connectionsTableName: names.connectionsTable, connectionsKeyArn: aws.tokensKeyArn },
    }),
    refresher: (parts = {}) =>
      buildRefresher(deployment.refresher, { ...parts, dynamodb: parts.dynamodb ?? kept(storage.dynamo.client()), kms: parts.kms ?? aws.kmsClient() }, FUNCTION_NAMES.refresher + suffix),
    syncContainer({ tuning, ...parts } = {}) {
      const fn = tuning ? retuned(deployment.sync, tuning) : deployment.sync;
      const s3 = parts.s3 ?? (storage.s3 ? kept(storage.s3.client()) : undefined);
      return buildSyncContainer(
        fn,
        {
          dynamodb: parts.dynamodb ?? kept(storage.dynamo.client()),
          sqs: parts.sqs ?? aws.sqsClient(),
          kms: parts.kms ?? aws.kmsClient(),
          ...parts,
          ...(s3 ? { s3 } : {}),
        },
        FUNCTION_NAMES.sync + suffix,
      );
    },
    api(parts = {}) {
      const s3 = parts.s3 ?? (storage.s3 ? kept(storage.s3.client()) : undefined);
      return buildApi(
        deployment.api,
        { ...parts, dynamodb: parts.dynamodb ?? kept(storage.dynamo.client()), kms: parts.kms ?? aws.kmsClient(), sqs: parts.sqs ?? aws.sqsClient(), ...(s3 ? { s3 } : {}) },
        FUNCTION_NAMES.api + suffix,
      );
    },
    eraser(parts = {}) {
      const s3 = parts.s3 ?? (storage.s3 ? kept(storage.s3.client()) : undefined);
      if (!s3) throw new Error('no eraser without the items bucket (storage.s3)');
      return buildEraser(deployment.eraser, { ...parts, dynamodb: parts.dynamodb ?? kept(storage.dynamo.client()), s3, sqs: parts.sqs ?? aws.sqsClient() }, FUNCTION_NAMES.eraser + suffix);
    },
    changeEvents: (parts) =>
      buildChangeEvents(deployment.changeEvents, { ...parts, dynamodb: parts.dynamodb ?? kept(storage.dynamo.client()) }, FUNCTION_NAMES.changeEvents + suffix),
    changesWriter: (parts = {}) =>
      buildChangesWriter(deployment.changesWriter, { ...parts, dynamodb: parts.dynamodb ?? kept(storage.dynamo.client()) }, FUNCTION_NAMES.changesWriter + suffix),
    reconciler(parts = {}) {
      if (!deployment.reconciler) throw new Error('no reconciler: freshnessHours is 0');
      const dynamodb = parts.dynamodb ?? kept(storage.dynamo.client());
      return buildReconciler(deployment.reconciler, { sqs: parts.sqs ?? aws.sqsClient(), ...parts, dynamodb }, FUNCTION_NAMES.reconciler + suffix);
    },
    context: (fn, invocation = {}) => invocationContext(fn, aws.region, { now, ...invocation }),
    async close() {
      for (const client of clients) client.destroy();
      await aws.close();
      await storage.close();
    },
  };
}
