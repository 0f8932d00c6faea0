/**
 * The item sync (its queues, the stateful half: ./sync-queues.ts): the function that fetches queued
 * item ids of every connection from the provider into the items table; its permissions (read a
 * connection's tokens and refresh them on demand in the connections table, sealed under its key;
 * read and write items, put and delete item objects in the items bucket, draw on the provider pace in the control table, send waiting records back to the
 * sync queue and dead ones to the dead-letter queue); the sync queue as its event source; its output; its alarms and dashboard
 * rows (./operations.ts). Memory, time-out, environment and the event source's numbers come from
 * infra/deployment.ts. The reconcile queue, its second event source, is the reconciler's
 * (infra/reconciler).
 *
 * Added to the given stack (the stateless stack) under their own ids, so their logical ids do not
 * depend on where this code lives.
 */
import { CfnOutput, type Stack } from 'aws-cdk-lib';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import { ITEM_SYNC_LAZY_MODULES } from '../../functions/item-sync/lazy-modules.js';
import { SYNC_SERVICE } from '../../functions/shared/metric-names.js';
import type { ConnectionsResources } from '../connections/connections-table.js';
import { CONNECTION_TOKEN_ACTIONS, grantConnections, grantConnectionTokens, type ConnectionsAccess } from '../connections/grants.js';
import { acknowledgeFunctionFindings, ContentSyncFunction, functionProps, sqsEventSourceProps } from '../constructs/content-sync-function.js';
import type { WorkQueueResources } from '../constructs/queues.js';
import type { ContentSyncConfig } from '../context.js';
import { syncDeployment, syncEventSourceDeployment, type ResourceNames } from '../deployment.js';
import { grantItemObjects } from '../storage/items-bucket.js';
import type { StorageResources } from '../storage/storage.js';
import { itemSyncOperations, type ItemSyncOperations } from './operations.js';

/**
 * The item sync on the connections table: GetItem (a connection's status and tokens) and UpdateItem
 * (an on-demand refresh's lease, tokens and health; `lastUsedAt`). No Scan, PutItem or DeleteItem.
 */
export const SYNC_CONNECTIONS_ACCESS: ConnectionsAccess = {
  actions: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
};

export interface ItemSyncProps {
  readonly config: ContentSyncConfig;
  /** What its environment names (infra/deployment.ts, syncDeployment). */
  readonly names: ResourceNames;
  readonly storage: StorageResources;
  /** The connections table and its key (infra/connections). */
  readonly connections: ConnectionsResources;
  /** The sync queue and its dead-letter queue (./sync-queues.ts). */
  readonly queues: WorkQueueResources;
}

export interface ItemSync extends ItemSyncOperations {
  readonly fn: ContentSyncFunction;
}

export function addItemSync(stack: Stack, props: ItemSyncProps): ItemSync {
  const { storage, queues } = props;
  const sync = new ContentSyncFunction(stack, 'ItemSync', {
    entry: 'functions/item-sync/handler.ts',
    // The S3 client, for items too large for a row only, is a module of its own, loaded when needed.
    lazyModules: ITEM_SYNC_LAZY_MODULES,
    serviceName: SYNC_SERVICE,
    description: 'content-sync: fetches queued item ids from the provider into the items table',
    logLevel: props.config.logLevel,
    logRetentionDays: props.config.logRetentionDays,
    stage: props.config.stage,
    ...functionProps(syncDeployment(props.config, props.names)),
  });
  sync.allow({
    sid: 'ReadWriteItems',
    actions: ['dynamodb:BatchGetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
    resources: [storage.table.tableArn],
  });
  sync.allow({
    sid: 'ProviderPace',
    actions: ['dynamodb:GetItem', 'dynamodb:PutItem'],
    resources: [storage.controlTable.tableArn],
  });
  // Records that must wait (pace, provider outage) are sent again, delayed, to the queue they came
  // from (SendMessageBatch is authorised by sqs:SendMessage). The queue is SQS-managed encrypted:
  // no KMS permission is needed.
  sync.allow({
    sid: 'Requeue',
    actions: ['sqs:SendMessage'],
    resources: [queues.queue.queueArn],
  });
  sync.allow({
    sid: 'DeadLetter',
    actions: ['sqs:SendMessage'],
    resources: [queues.deadLetterQueue.queueArn],
  });
  // Items too large for a row: put and delete item objects (infra/storage/items-bucket.ts); with
  // discovery on, read them too (a large folder's previous copy: its children that left the list).
  // Discovery sends the children to the reconcile queue: the reconcile queue's own grant covers it
  // (infra/reconciler/reconciler.ts, RequeueReconcile: sqs:SendMessage on that queue only).
  grantItemObjects(sync.role, storage.itemsBucket, { read: props.config.discovery !== undefined });
  grantConnections(sync, props.connections, SYNC_CONNECTIONS_ACCESS);
  // Opens a connection's access token; seals the new ones of an on-demand refresh (infra/connections/grants.ts).
  grantConnectionTokens(sync, props.connections, CONNECTION_TOKEN_ACTIONS);
  // The sync queue feeds the item sync (partial batch failures reported). The event source grants
  // receive/delete/attributes and ChangeMessageVisibility (Retry-After) on the sync queue.
  sync.function.addEventSource(new SqsEventSource(queues.queue, sqsEventSourceProps(syncEventSourceDeployment(props.config))));
  acknowledgeFunctionFindings(sync);

  new CfnOutput(stack, 'ItemSyncFunctionName', { value: sync.function.functionName });
  return { fn: sync, ...itemSyncOperations({ sync: sync.function, queues, stage: props.config.stage }) };
}
