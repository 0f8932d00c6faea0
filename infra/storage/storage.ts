/**
 * The storage every feature shares: the items table (one row per item per connection; its stream
 * feeds the change events), the items bucket (an item too large for a row, whole; ./items-bucket.ts),
 * the control table (the item sync's provider pace rows and the reconciler's cursor row) and the
 * changes table (each connection's changes feed; ./changes-table.ts). What downstream consumers
 * read is here: a row's `item`, or the object its `itemObject.key` names.
 *
 * Retained when the stack is deleted; no hard-coded physical name. Added to the given stack (the
 * stateful stack) under their own ids, so their logical ids do not depend on where this code lives.
 */
import { CfnOutput, RemovalPolicy, type Stack } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import { CHANGES_TABLE_PARTITION_KEY, CHANGES_TABLE_SORT_KEY, CHANGES_TABLE_TTL_ATTRIBUTE } from './changes-table.js';
import { addItemsBucket } from './items-bucket.js';

/**
 * The control table's partition key (string): the item sync's pace store reads and writes one row
 * there (functions/shared/adapters/dynamodb-pace-store.ts, CONTROL_TABLE_KEY; the infra tests check
 * that both agree). Written out here so the CDK app does not load the functions' AWS SDK adapters.
 */
export const CONTROL_TABLE_PARTITION_KEY = 'pk';

/** The items table's key: partition key the connection id, sort key the item id (both strings). */
export const ITEMS_TABLE_PARTITION_KEY = 'connection';
export const ITEMS_TABLE_SORT_KEY = 'id';

/** The storage as the functions' stack uses it. */
export interface StorageResources {
  readonly table: dynamodb.ITable;
  /** The item sync's pace rows and the reconciler's cursor row. */
  readonly controlTable: dynamodb.ITable;
  /** Items too large for a row (./items-bucket.ts). */
  readonly itemsBucket: s3.IBucket;
  /** Each connection's changes feed: written by the changes writer, read by the client API, emptied by the eraser. */
  readonly changesTable: dynamodb.ITable;
}

export interface Storage extends StorageResources {
  readonly table: dynamodb.Table;
  readonly controlTable: dynamodb.Table;
  readonly itemsBucket: s3.Bucket;
  readonly changesTable: dynamodb.Table;
}

/** The items table, the items bucket, the control table and the changes table, with their outputs. */
export function addStorage(stack: Stack): Storage {
  // One row per item per connection: two connections may hold the same item id, and one
  // connection's rows are one item collection. The key changed from `id` alone: CloudFormation
  // replaces the table under the same logical id and RemovalPolicy.RETAIN keeps the old one, the
  // upgrade path of docs/connections.md ("Upgrading a one-account deployment").
  const table = new dynamodb.Table(stack, 'ItemsTable', {
    partitionKey: { name: ITEMS_TABLE_PARTITION_KEY, type: dynamodb.AttributeType.STRING },
    sortKey: { name: ITEMS_TABLE_SORT_KEY, type: dynamodb.AttributeType.STRING },
    billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
    pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
    stream: dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
    // The AWS-managed key (aws/dynamodb): key use shows in CloudTrail; no KMS grants needed.
    encryption: dynamodb.TableEncryption.AWS_MANAGED,
    deletionProtection: true,
    removalPolicy: RemovalPolicy.RETAIN,
  });
  new CfnOutput(stack, 'ItemsTableName', { description: 'DynamoDB table of synced items', value: table.tableName });
  new CfnOutput(stack, 'ItemsTableStreamArn', {
    description: 'Stream of the items table (new and old images) for downstream consumers',
    value: table.tableStreamArn ?? '',
  });

  const itemsBucket = addItemsBucket(stack);
  new CfnOutput(stack, 'ItemsBucketName', {
    description: 'S3 bucket of items too large for a row: a row\'s itemObject.key is the key of its item here',
    value: itemsBucket.bucketName,
  });

  // The item sync's shared state: a row holds a provider pace the sync containers draw from (rate,
  // 429 history, breaker), one per client id or one per connection (paceScope). Small and hot: on
  // demand, strongly consistent reads and conditional writes. Point-in-time recovery as for the
  // items table (cdk-nag DDB3).
  const controlTable = new dynamodb.Table(stack, 'ControlTable', {
    partitionKey: { name: CONTROL_TABLE_PARTITION_KEY, type: dynamodb.AttributeType.STRING },
    billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
    pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
    encryption: dynamodb.TableEncryption.AWS_MANAGED,
    deletionProtection: true,
    removalPolicy: RemovalPolicy.RETAIN,
  });
  new CfnOutput(stack, 'ControlTableName', {
    description: 'DynamoDB table of the item sync shared state (the provider pace rows the sync containers draw from) and the reconciler cursor',
    value: controlTable.tableName,
  });

  // Each connection's changes feed (./changes-table.ts): numbered by the changes writer from the
  // items table's stream, read in order by the client API. Settings as the items
  // table's (point-in-time recovery: cdk-nag DDB3), but no stream and no index; a change row
  // expires `changesRetentionDays` after it is written (DynamoDB's TTL deletes it, at no charge).
  const changesTable = new dynamodb.Table(stack, 'ChangesTable', {
    partitionKey: { name: CHANGES_TABLE_PARTITION_KEY, type: dynamodb.AttributeType.STRING },
    sortKey: { name: CHANGES_TABLE_SORT_KEY, type: dynamodb.AttributeType.NUMBER },
    billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
    timeToLiveAttribute: CHANGES_TABLE_TTL_ATTRIBUTE,
    pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
    encryption: dynamodb.TableEncryption.AWS_MANAGED,
    deletionProtection: true,
    removalPolicy: RemovalPolicy.RETAIN,
  });
  new CfnOutput(stack, 'ChangesTableName', {
    description: 'DynamoDB table of each connection\'s changes feed (GET /connections/{connection}/changes)',
    value: changesTable.tableName,
  });

  return { table, controlTable, itemsBucket, changesTable };
}
