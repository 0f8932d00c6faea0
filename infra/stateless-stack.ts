/**
 * Everything that can be torn down and rebuilt without losing data, as a list of features: the
 * token refresher, the item sync, reconciliation, the change events (and the account lifecycle
 * events), the changes writer, the client API and the eraser, each with its functions, grants, event sources,
 * schedules and outputs; then operations, every feature's alarms on one alarm topic and its rows
 * on one dashboard. The stateful resources come in through typed props (infra/stateful-stack.ts
 * holds each feature's stateful half).
 *
 * Layout: infra/token-refresher, infra/item-sync, infra/reconciler, infra/change-events,
 * infra/changes-writer, infra/client-api, infra/connection-eraser (each granted its own access to the connections table:
 * infra/connections/grants.ts); each feature's alarms and widgets in its own operations.ts; the alarm topic, the dashboard frame and the
 * alarm-status widget in infra/operations. Every part adds its resources to this stack under their
 * own ids, so logical ids do not depend on where the code lives.
 */
import { Stack, type StackProps } from 'aws-cdk-lib';
import type * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type { Construct } from 'constructs';
import { addChangeEvents, type ChangeEventsStateful } from './change-events/change-events.js';
import { addChangesWriter } from './changes-writer/changes-writer.js';
import type { ChangesWriterResources } from './changes-writer/changes-writer-resources.js';
import { addClientApi } from './client-api/client-api.js';
import { addEraser } from './connection-eraser/eraser.js';
import type { ConnectionsResources } from './connections/connections-table.js';
import type { ContentSyncFunction } from './constructs/content-sync-function.js';
import type { WorkQueueResources } from './constructs/queues.js';
import type { ContentSyncConfig } from './context.js';
import type { ResourceNames } from './deployment.js';
import { addItemSync } from './item-sync/item-sync.js';
import { addAlarms } from './operations/alarms.js';
import { addDashboard, alarmStatusWidget } from './operations/dashboard.js';
import { addReconciliation } from './reconciler/reconciler.js';
import type { StorageResources } from './storage/storage.js';
import { addTokenRefresher } from './token-refresher/token-refresher.js';

export { REFRESHER_TIMEOUT } from './token-refresher/token-refresher.js';

/** The stateful resources this stack uses, feature by feature (infra/stateful-stack.ts). */
export interface StatefulResources {
  /** The items table, the items bucket, the control table and the changes table (infra/storage). */
  readonly storage: StorageResources;
  /** The connections table and its customer-managed key (infra/connections). */
  readonly connections: ConnectionsResources;
  /** The sync queue and its dead-letter queue (infra/item-sync). */
  readonly syncQueues: WorkQueueResources;
  /** The reconcile queue (the sync's second event source) and its dead-letter queue (infra/reconciler). */
  readonly reconcileQueues: WorkQueueResources;
  /** The erase queue (the eraser's event source) and its dead-letter queue (infra/connection-eraser). */
  readonly eraseQueues: WorkQueueResources;
  /** The change-event bus and the stream event sources' failure queue (infra/change-events). */
  readonly changeEvents: ChangeEventsStateful;
  /** The changes writer's failure queue (infra/changes-writer). */
  readonly changesWriter: ChangesWriterResources;
}

/** The names each function's environment gives the stateful resources (infra/deployment.ts). */
export function resourceNames(stateful: StatefulResources): ResourceNames {
  return {
    itemsTableName: stateful.storage.table.tableName,
    itemsBucketName: stateful.storage.itemsBucket.bucketName,
    controlTableName: stateful.storage.controlTable.tableName,
    changesTableName: stateful.storage.changesTable.tableName,
    deadLetterQueueUrl: stateful.syncQueues.deadLetterQueue.queueUrl,
    reconcileQueueUrl: stateful.reconcileQueues.queue.queueUrl,
    connectionsTableName: stateful.connections.table.tableName,
    eventBusName: stateful.changeEvents.bus.eventBusArn,
    connectionsKeyArn: stateful.connections.key.keyArn,
    syncQueueUrl: stateful.syncQueues.queue.queueUrl,
    eraseQueueUrl: stateful.eraseQueues.queue.queueUrl,
  };
}

export interface StatelessStackProps extends StackProps {
  readonly config: ContentSyncConfig;
  readonly stateful: StatefulResources;
}

export class StatelessStack extends Stack {
  readonly refresher: ContentSyncFunction;
  readonly sync: ContentSyncFunction;
  /** Sends every known id to the reconcile queue once per pass; undefined when freshnessHours is 0 (infra/reconciler). */
  readonly reconciler: ContentSyncFunction | undefined;
  /** Announces every real change of an items-table row and every connection status change (infra/change-events). */
  readonly changeEvents: ContentSyncFunction;
  /** Numbers each connection's changes into its changes feed from the items table's stream (infra/changes-writer). */
  readonly changesWriter: ContentSyncFunction;
  /** The client API's function, behind its HTTP API (infra/client-api). */
  readonly api: ContentSyncFunction;
  /** Erases removed connections' data from the erase queue (infra/connection-eraser). */
  readonly eraser: ContentSyncFunction;
  readonly alarmTopic: sns.Topic;
  readonly alarms: cloudwatch.Alarm[];

  constructor(scope: Construct, id: string, props: StatelessStackProps) {
    super(scope, id, props);
    const { config, stateful } = props;
    const names = resourceNames(stateful);
    const { storage, connections } = stateful;

    // ---- the features: each with its functions, grants, event sources, schedules and outputs ----
    const refresher = addTokenRefresher(this, { config, names, connections, controlTable: storage.controlTable });
    const sync = addItemSync(this, { config, names, storage, connections, queues: stateful.syncQueues });
    const reconciliation = addReconciliation(this, { config, storage, queues: stateful.reconcileQueues, sync: sync.fn });
    const changeEvents = addChangeEvents(this, { table: storage.table, connections, logLevel: config.logLevel, logRetentionDays: config.logRetentionDays, tracing: config.tracing, stage: config.stage, ...stateful.changeEvents });
    const changesWriter = addChangesWriter(this, {
      config,
      names,
      itemsTable: storage.table,
      changesTable: storage.changesTable,
      connections,
      failureQueue: stateful.changesWriter.failureQueue,
    });
    const api = addClientApi(this, {
      config,
      names,
      storage,
      connections,
      syncQueues: stateful.syncQueues,
      reconcileQueues: stateful.reconcileQueues,
      eraseQueues: stateful.eraseQueues,
    });
    const eraser = addEraser(this, { config, names, storage, connections, queues: stateful.eraseQueues });

    // ---- operations (infra/operations): every feature's alarms on one topic, its rows on one dashboard ----
    // Both orders are the dashboard as deployed: the alarm-status widget lists the sync's dead
    // letters first, then feature by feature; the refresher's two graphs share a row with it.
    const operations = addAlarms(this, {
      alarmEmail: config.alarmEmail,
      alarms: [sync.deadLetterAlarm, ...refresher.alarms, ...sync.alarms, ...reconciliation.alarms, ...changeEvents.alarms, ...changesWriter.alarms, ...eraser.alarms],
    });
    addDashboard(this, [
      ...sync.rows,
      [...refresher.graphs, alarmStatusWidget(operations.alarms, 8)],
      ...reconciliation.rows,
      ...changeEvents.rows,
      ...changesWriter.rows,
      ...api.rows,
      ...eraser.rows,
    ]);

    this.refresher = refresher.fn;
    this.sync = sync.fn;
    this.reconciler = reconciliation.fn;
    this.changeEvents = changeEvents.fn;
    this.changesWriter = changesWriter.fn;
    this.api = api.fn;
    this.eraser = eraser.fn;
    this.alarmTopic = operations.topic;
    this.alarms = operations.alarms;
  }
}
