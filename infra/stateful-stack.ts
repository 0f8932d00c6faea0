/**
 * Everything that holds data or state, as a list of features: the shared storage (items table,
 * items bucket, control table, changes table), the connections table (with its stream) and its
 * key, the item sync's queues, the reconciler's queues, the eraser's queues, the change events' bus and failure
 * queue. Each feature module adds its stateful half (and its outputs) here; its stateless half
 * goes into the stateless stack (infra/stateless-stack.ts).
 * Every resource is retained when the stack is deleted; nothing has a hard-coded physical name.
 *
 * Layout: infra/storage (shared), infra/connections/connections-table.ts,
 * infra/item-sync/sync-queues.ts, infra/reconciler/reconcile-queues.ts,
 * infra/connection-eraser/erase-queues.ts, infra/change-events/change-event-resources.ts. Each
 * adds its resources to this stack under their own ids, so logical ids do not depend on where the
 * code lives.
 */
import { Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { addChangeEventResources, type ChangeEventResources } from './change-events/change-event-resources.js';
import { addChangesWriterResources, type ChangesWriterResources } from './changes-writer/changes-writer-resources.js';
import { addEraseQueues, type EraseQueues } from './connection-eraser/erase-queues.js';
import { addConnectionsTable, type Connections } from './connections/connections-table.js';
import type { ContentSyncConfig } from './context.js';
import { addSyncQueues, type SyncQueues } from './item-sync/sync-queues.js';
import { addReconcileQueues, type ReconcileQueues } from './reconciler/reconcile-queues.js';
import { addStorage, type Storage } from './storage/storage.js';

export { DEAD_LETTER_RETENTION, QUEUE_RETENTION, VISIBILITY_FACTOR } from './constructs/queues.js';
export { CONTROL_TABLE_PARTITION_KEY } from './storage/storage.js';
export { CONNECTIONS_TABLE_PARTITION_KEY } from './connections/connections-table.js';

export interface StatefulStackProps extends StackProps {
  readonly config: ContentSyncConfig;
}

export class StatefulStack extends Stack {
  /** The items table, the items bucket, the control table and the changes table (infra/storage). */
  readonly storage: Storage;
  /** The connections table and its customer-managed key (infra/connections). */
  readonly connections: Connections;
  /** The sync queue and its dead-letter queue (infra/item-sync). */
  readonly syncQueues: SyncQueues;
  /** The reconciler's queue of known ids, taken by the item sync, and its dead-letter queue (infra/reconciler). */
  readonly reconcileQueues: ReconcileQueues;
  /** The erase queue, taken by the eraser, and its dead-letter queue (infra/connection-eraser). */
  readonly eraseQueues: EraseQueues;
  /** The change-event bus and the stream event sources' failure queue (infra/change-events). */
  readonly changeEvents: ChangeEventResources;
  /** The changes writer's failure queue (infra/changes-writer). */
  readonly changesWriter: ChangesWriterResources;

  constructor(scope: Construct, id: string, props: StatefulStackProps) {
    super(scope, id, props);
    const { config } = props;

    this.storage = addStorage(this);
    this.connections = addConnectionsTable(this);
    this.syncQueues = addSyncQueues(this, config);
    this.reconcileQueues = addReconcileQueues(this, config);
    this.eraseQueues = addEraseQueues(this);
    this.changeEvents = addChangeEventResources(this);
    this.changesWriter = addChangesWriterResources(this);
  }
}
