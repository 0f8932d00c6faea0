/**
 * What a function's role may do on the connections table and its key (docs/connections.md, "Where
 * credentials live"): the item actions a feature asks for, on the table only, optionally under IAM
 * conditions (the change-events function may write two attributes and nothing else); and the key
 * actions DynamoDB needs to read and write the items of a table under a customer-managed key, on
 * the connections key only and only through DynamoDB (`kms:ViaService`). Each feature calls it for
 * its own function (infra/token-refresher, infra/item-sync, infra/change-events, infra/client-api,
 * infra/connection-eraser); the reconciler gets nothing.
 *
 * The functions that seal or open a token (the refresher, the item sync, the client API) also call
 * the key themselves, for a data key per token (functions/shared/connections/sealing.ts): that
 * grant (grantConnectionTokens) allows it only with the encryption context `{"connection": <id>}`,
 * the one key a sealed token is bound to. The change-events function, the eraser and the reconciler
 * never see a token and get no such grant.
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
  /** The key actions DynamoDB needs of the caller; default CONNECTIONS_KEY_ACTIONS (a role that only reads needs kms:Decrypt alone). */
  readonly keyActions?: readonly string[];
}

/**
 * Adds two statements to `fn`'s role: `Connections`, the item actions of `access` on the connections
 * table, and `ConnectionsKey`, the key actions of `access` (CONNECTIONS_KEY_ACTIONS by default) on
 * the connections key through DynamoDB of the stack's region only.
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
    actions: [...(access.keyActions ?? CONNECTIONS_KEY_ACTIONS)],
    resources: [connections.key.keyArn],
    conditions: { StringEquals: { 'kms:ViaService': `dynamodb.${stack.region}.${stack.urlSuffix}` } },
  });
}

/** Generate a data key (seal a token), decrypt one (open it): what sealing needs, nothing more. */
export const CONNECTION_TOKEN_ACTIONS: readonly string[] = ['kms:Decrypt', 'kms:GenerateDataKey'];

/**
 * The conditions of every direct call on the connections key: the request's encryption context has
 * keys, and `connection` is the only one (a sealed token's context is `{"connection": <id>}`).
 * Calls with no context, or with another key (as DynamoDB's own, `aws:dynamodb:tableName`), are
 * not allowed by it.
 */
export const CONNECTION_TOKEN_CONDITIONS = {
  'ForAllValues:StringEquals': { 'kms:EncryptionContextKeys': ['connection'] },
  Null: { 'kms:EncryptionContextKeys': 'false' },
} as const;

/**
 * Adds the statement `ConnectionTokens` to `fn`'s role: `actions` (of CONNECTION_TOKEN_ACTIONS) on
 * the connections key, called directly, under CONNECTION_TOKEN_CONDITIONS.
 */
export function grantConnectionTokens(fn: ContentSyncFunction, connections: ConnectionsResources, actions: readonly string[]): void {
  const unknown = actions.filter((action) => !CONNECTION_TOKEN_ACTIONS.includes(action));
  if (unknown.length > 0 || actions.length === 0) {
    throw new Error(`connection tokens: expected some of ${CONNECTION_TOKEN_ACTIONS.join(', ')}, got ${actions.join(', ') || 'none'}`);
  }
  fn.allow({
    sid: 'ConnectionTokens',
    actions: [...actions],
    resources: [connections.key.keyArn],
    conditions: {
      'ForAllValues:StringEquals': { 'kms:EncryptionContextKeys': [...CONNECTION_TOKEN_CONDITIONS['ForAllValues:StringEquals']['kms:EncryptionContextKeys']] },
      Null: { 'kms:EncryptionContextKeys': CONNECTION_TOKEN_CONDITIONS.Null['kms:EncryptionContextKeys'] },
    },
  });
}
