/**
 * The stateful half of the connections (docs/connections.md): the connections table, one row per
 * connection with its credentials and tokens, encrypted at rest with a customer-managed KMS key of
 * the stack's own (the operator controls its key policy, sees its use in CloudTrail, and disabling
 * it stops every read of a token). The tokens are also sealed by the functions under the same key
 * (envelope encryption, the connection id as encryption context), so neither the table, its
 * stream, a backup nor an export shows one in clear. The table's stream (new and old images)
 * drives the account lifecycle events (infra/change-events). Both are retained when the stack is
 * deleted; no hard-coded physical name. What each function's role may do on them: ./grants.ts.
 *
 * Added to the given stack (the stateful stack) under their own ids, so their logical ids do not
 * depend on where this code lives.
 */
import { CfnOutput, RemovalPolicy, type Stack } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';

/** The connections table's partition key (string): the connection id (functions/shared/connections). */
export const CONNECTIONS_TABLE_PARTITION_KEY = 'connection';

/** The connections table, its stream and its key as the functions' stack uses them. */
export interface ConnectionsResources {
  /** With its stream (NEW_AND_OLD_IMAGES): the change-events function's second event source. */
  readonly table: dynamodb.ITable;
  readonly key: kms.IKey;
  /** The table's stream: every write of a connection's row, old and new image (tokens sealed). */
  readonly streamArn: string;
}

export interface Connections extends ConnectionsResources {
  readonly table: dynamodb.Table;
  readonly key: kms.Key;
}

/** The condition under which a grant on the connections key is one an AWS service makes for its own use of the key. */
export const GRANT_FOR_AWS_RESOURCE = { Bool: { 'kms:GrantIsForAWSResource': true } } as const;

/**
 * The connections key's policy. CDK's default gives the account's IAM policies `kms:*`; this one
 * gives them the same but for kms:CreateGrant, which is allowed only for a grant an AWS service
 * creates for its own use of the key (DynamoDB's grant for the table), and denied to everyone
 * else, whatever their IAM policies say: the deny statement AWS Control Tower's proactive control
 * CT.KMS.PR.3 checks for (`BoolIfExists` both `false`: a grant neither made by an AWS service on
 * someone's behalf nor asked for by an AWS service principal). No role is named here: the
 * functions' access to the key is in their IAM policies (./grants.ts), and none may create grants.
 */
export function connectionsKeyPolicy(): iam.PolicyDocument {
  const account = new iam.AccountRootPrincipal();
  return new iam.PolicyDocument({
    statements: [
      new iam.PolicyStatement({ sid: 'AccountIamPolicies', principals: [account], notActions: ['kms:CreateGrant'], resources: ['*'] }),
      new iam.PolicyStatement({
        sid: 'AccountGrantsForAwsResources',
        principals: [account],
        actions: ['kms:CreateGrant'],
        resources: ['*'],
        conditions: GRANT_FOR_AWS_RESOURCE,
      }),
      new iam.PolicyStatement({
        sid: 'DenyGrantsNotForAwsServices',
        effect: iam.Effect.DENY,
        principals: [new iam.AnyPrincipal()],
        actions: ['kms:CreateGrant'],
        resources: ['*'],
        conditions: { BoolIfExists: { 'kms:GrantIsForAWSResource': 'false', 'aws:PrincipalIsAWSService': 'false' } },
      }),
    ],
  });
}

/** The key, the table under it, and their outputs. */
export function addConnectionsTable(stack: Stack): Connections {
  const key = new kms.Key(stack, 'ConnectionsKey', {
    description: 'content-sync connections table: encrypts every connection\'s credentials and tokens at rest',
    enableKeyRotation: true,
    policy: connectionsKeyPolicy(),
    removalPolicy: RemovalPolicy.RETAIN,
  });
  const table = new dynamodb.Table(stack, 'ConnectionsTable', {
    partitionKey: { name: CONNECTIONS_TABLE_PARTITION_KEY, type: dynamodb.AttributeType.STRING },
    billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
    pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
    // The account lifecycle events (ConnectionAdded, ConnectionFailing, ...): one per status change.
    stream: dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
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
  return { table, key, streamArn: table.tableStreamArn! };
}
