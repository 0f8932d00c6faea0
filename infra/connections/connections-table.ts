/**
 * The stateful half of the connections (docs/connections.md): the connections table, one row per
 * connection with its credentials and tokens, encrypted at rest with a customer-managed KMS key of
 * the stack's own (the operator controls its key policy, sees its use in CloudTrail, and disabling
 * it stops every read of a token). Both are retained when the stack is deleted; no hard-coded
 * physical name. What each function's role may do on them: ./grants.ts.
 *
 * Added to the given stack (the stateful stack) under their own ids, so their logical ids do not
 * depend on where this code lives.
 */
import { CfnOutput, RemovalPolicy, type Stack } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as kms from 'aws-cdk-lib/aws-kms';

/** The connections table's partition key (string): the connection id (functions/shared/connections). */
export const CONNECTIONS_TABLE_PARTITION_KEY = 'connection';

/** The connections table and its key as the functions' stack uses them. */
export interface ConnectionsResources {
  readonly table: dynamodb.ITable;
  readonly key: kms.IKey;
}

export interface Connections extends ConnectionsResources {
  readonly table: dynamodb.Table;
  readonly key: kms.Key;
}

/** The key, the table under it, and their outputs. */
export function addConnectionsTable(stack: Stack): Connections {
  const key = new kms.Key(stack, 'ConnectionsKey', {
    description: 'content-sync connections table: encrypts every connection\'s credentials and tokens at rest',
    enableKeyRotation: true,
    removalPolicy: RemovalPolicy.RETAIN,
  });
  const table = new dynamodb.Table(stack, 'ConnectionsTable', {
    partitionKey: { name: CONNECTIONS_TABLE_PARTITION_KEY, type: dynamodb.AttributeType.STRING },
    billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
    pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
    encryption: dynamodb.TableEncryption.CUSTOMER_MANAGED,
    encryptionKey: key,
    deletionProtection: true,
    removalPolicy: RemovalPolicy.RETAIN,
  });

  new CfnOutput(stack, 'ConnectionsTableName', {
    description: 'DynamoDB table of the connections (credentials, tokens, status): managed with npm run connections',
    value: table.tableName,
  });
  new CfnOutput(stack, 'ConnectionsKeyArn', {
    description: 'Customer-managed KMS key of the connections table',
    value: key.keyArn,
  });
  return { table, key };
}
