/**
 * What a function's role may do on the connections table and its key (docs/connections.md, "Where
 * credentials live"): the item actions a feature asks for, on the table only, optionally under IAM
 * conditions (the change-events function may write two attributes and nothing else); and the key
 * actions DynamoDB needs to read and write the items of a table under a customer-managed key, on
 * the connections key only and only through DynamoDB (`kms:ViaService`). Each feature calls it for
 * its own function (infra/token-refresher, infra/item-sync, infra/change-events); the reconciler
 * gets nothing.
 */
import type { ContentSyncFunction } from '../constructs/content-sync-function.js';
import type { ConnectionsResources } from './connections-table.js';

/**
 * Decrypt the table key (every read and write), encrypt and generate data keys (writes): what
 * DynamoDB asks of the caller for a customer-managed key, with no `*` in an action.
 */
export const CONNECTIONS_KEY_ACTIONS: readonly string[] = ['kms:Decrypt', 'kms:Encrypt', 'kms:GenerateDataKey'];

/** What one function may do on the connections table. */
export interface ConnectionsAccess {
  /** DynamoDB item actions on the table. */
  readonly actions: readonly string[];
  /** IAM conditions of the table statement (e.g. which attributes it may write). */
  readonly conditions?: Record<string, Record<string, unknown>>;
}

/**
 * Adds two statements to `fn`'s role: `Connections`, the item actions of `access` on the connections
 * table, and `ConnectionsKey`, CONNECTIONS_KEY_ACTIONS on the connections key through DynamoDB of the
 * stack's region only.
 */
export function grantConnections(fn: ContentSyncFunction, connections: ConnectionsResources, access: ConnectionsAccess): void {
  const stack = fn.function.stack;
  fn.allow({
    sid: 'Connections',
    actions: [...access.actions],
    resources: [connections.table.tableArn],
    ...(access.conditions === undefined ? {} : { conditions: access.conditions }),
  });
  fn.allow({
    sid: 'ConnectionsKey',
    actions: [...CONNECTIONS_KEY_ACTIONS],
    resources: [connections.key.keyArn],
    conditions: { StringEquals: { 'kms:ViaService': `dynamodb.${stack.region}.${stack.urlSuffix}` } },
  });
}
