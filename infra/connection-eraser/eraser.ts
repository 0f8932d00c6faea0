/**
 * The eraser, the stateless half of the erase (docs/connections.md, "Erase"; the queues, the
 * stateful half: ./erase-queues.ts): the function that erases one removed connection's data per
 * message of the erase queue (its rows in the items table, its objects in the items bucket, its
 * changes feed in the changes table, last its connection row), and sends itself the rest of a run
 * cut short; its permissions; the erase queue as its event source (one message at a time, partial batch failures reported); its output;
 * its alarm and dashboard row (./operations.ts). Memory, time-out, environment and the event
 * source's numbers come from infra/deployment.ts. It never reads a token: no grant on the
 * connections key but DynamoDB's own.
 *
 * Added to the given stack (the stateless stack) under their own ids, so their logical ids do not
 * depend on where this code lives.
 */
import { ERASER_LAZY_MODULES } from '../../functions/connection-eraser/lazy-modules.js';
import { CfnOutput, type Stack } from 'aws-cdk-lib';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import { ERASER_SERVICE } from '../../functions/shared/metric-names.js';
import type { ConnectionsResources } from '../connections/connections-table.js';
import { grantConnections, type ConnectionsAccess } from '../connections/grants.js';
import { acknowledgeFunctionFindings, ContentSyncFunction, functionProps, sqsEventSourceProps } from '../constructs/content-sync-function.js';
import type { WorkQueueResources } from '../constructs/queues.js';
import type { ContentSyncConfig } from '../context.js';
import { eraseEventSourceDeployment, eraserDeployment, type ResourceNames } from '../deployment.js';
import { grantEraseItemObjects } from '../storage/items-bucket.js';
import type { StorageResources } from '../storage/storage.js';
import { eraserOperations, type EraserOperations } from './operations.js';

/**
 * The eraser on the connections table: GetItem (the connection is removed and holds this erase),
 * UpdateItem (the erase's progress), DeleteItem (the row, last, conditional on both).
 */
export const ERASER_CONNECTIONS_ACCESS: ConnectionsAccess = {
  actions: ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem'],
};

/** The eraser on the items table: Query a connection's partition, delete its rows (BatchWriteItem's DeleteRequests: no DeleteItem). */
export const ERASER_ITEMS_ACTIONS: readonly string[] = ['dynamodb:Query', 'dynamodb:BatchWriteItem'];

/** The eraser on the changes table: Query a connection's feed (head row and changes), delete its rows (BatchWriteItem). */
export const ERASER_CHANGES_ACTIONS: readonly string[] = ['dynamodb:Query', 'dynamodb:BatchWriteItem'];

export interface EraserProps {
  readonly config: ContentSyncConfig;
  /** What its environment names (infra/deployment.ts, eraserDeployment). */
  readonly names: ResourceNames;
  readonly storage: StorageResources;
  /** The connections table and its key (infra/connections). */
  readonly connections: ConnectionsResources;
  /** The erase queue and its dead-letter queue (./erase-queues.ts). */
  readonly queues: WorkQueueResources;
}

export interface Eraser extends EraserOperations {
  readonly fn: ContentSyncFunction;
}

export function addEraser(stack: Stack, props: EraserProps): Eraser {
  const { config, storage, queues } = props;
  const fn = new ContentSyncFunction(stack, 'ConnectionEraser', {
    entry: 'functions/connection-eraser/handler.ts',
    serviceName: ERASER_SERVICE,
    lazyModules: ERASER_LAZY_MODULES,
    description: 'content-sync: erases a removed connection\'s rows, item objects and connection row, one erase-queue message at a time',
    logLevel: config.logLevel,
    logRetentionDays: config.logRetentionDays,
    stage: config.stage,
    ...functionProps(eraserDeployment(config, props.names)),
  });
  fn.allow({ sid: 'EraseItems', actions: [...ERASER_ITEMS_ACTIONS], resources: [storage.table.tableArn] });
  grantEraseItemObjects(fn.role, storage.itemsBucket);
  fn.allow({ sid: 'EraseChanges', actions: [...ERASER_CHANGES_ACTIONS], resources: [storage.changesTable.tableArn] });
  grantConnections(fn, props.connections, ERASER_CONNECTIONS_ACCESS);
  // The rest of a run cut short goes back to the erase queue (SQS-managed encryption: no KMS permission).
  fn.allow({ sid: 'ContinueErase', actions: ['sqs:SendMessage'], resources: [queues.queue.queueArn] });
  // The event source grants receive/delete/attributes and ChangeMessageVisibility on the erase queue.
  fn.function.addEventSource(new SqsEventSource(queues.queue, sqsEventSourceProps(eraseEventSourceDeployment())));
  acknowledgeFunctionFindings(fn);

  new CfnOutput(stack, 'ConnectionEraserFunctionName', {
    description: 'Erases removed connections\' data from the erase queue; its logs show each run\'s progress',
    value: fn.function.functionName,
  });
  return { fn, ...eraserOperations({ fn: fn.function, queues }) };
}
