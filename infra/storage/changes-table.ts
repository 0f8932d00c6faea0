/**
 * The changes table's key schema and expiry attribute, as the stateful stack defines the table
 * (./storage.ts) and the local harness creates it (dev/fakes/local-dynamo.ts). No aws-cdk-lib import:
 * the harness loads this without the CDK.
 *
 * One item collection per connection: row `seq` 0 is the connection's head (`{connection, seq: 0,
 * head, epoch}`), rows `seq` ≥ 1 its changes (`{connection, seq, change, id, type, revision,
 * previousRevision?, syncedAt, expiresAt}`), written by the item sync in the transaction that writes
 * the items-table row (docs/changes.md).
 */

/** Partition key (string): the connection id. */
export const CHANGES_TABLE_PARTITION_KEY = 'connection';
/** Sort key (number): 0 for the head row, 1, 2, … for the connection's changes in order. */
export const CHANGES_TABLE_SORT_KEY = 'seq';
/**
 * The table's time-to-live attribute: epoch seconds after which DynamoDB deletes a change row
 * (written `changesRetentionDays` after the change; the head row has none).
 */
export const CHANGES_TABLE_TTL_ATTRIBUTE = 'expiresAt';
