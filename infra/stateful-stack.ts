/**
 * Everything that holds data or state: the items table, the items bucket, the control table, both
 * secrets and both queues. Every resource is retained when the stack is deleted; nothing has a
 * hard-coded physical name.
 */
import { CfnOutput, RemovalPolicy, SecretValue, Stack, type StackProps, Validations } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { CREDENTIALS_PLACEHOLDER } from '../functions/shared/secrets.js';
import { addChangeEventResources, type ChangeEventResources } from './change-events/change-event-resources.js';
import type { ContentSyncConfig } from './context.js';
import { addWorkQueueOutputs, addWorkQueues } from './constructs/queues.js';
import { addReconcileQueues } from './reconciler/reconcile-queues.js';
import { addItemsBucket } from './items-bucket.js';

export { DEAD_LETTER_RETENTION, QUEUE_RETENTION, VISIBILITY_FACTOR } from './constructs/queues.js';

/**
 * The control table's partition key (string): the item sync's pace store reads and writes one row
 * there (functions/shared/adapters/dynamodb-pace-store.ts, CONTROL_TABLE_KEY; the infra tests check
 * that both agree). Written out here so the CDK app does not load the functions' AWS SDK adapters.
 */
export const CONTROL_TABLE_PARTITION_KEY = 'pk';

/** What the deploy writes into the credentials secret; the operator replaces it (README, "Deploy to AWS", step 4: "Store the provider credentials"). */
export const CREDENTIALS_PLACEHOLDER_VALUE = JSON.stringify({
  clientId: CREDENTIALS_PLACEHOLDER,
  refreshToken: CREDENTIALS_PLACEHOLDER,
});
/** The access-token secret until the refresher first writes it: the sync function reports "has the token refresher run?". */
export const ACCESS_TOKEN_INITIAL_VALUE = JSON.stringify({ accessToken: '', refreshedAt: '' });

export interface StatefulStackProps extends StackProps {
  readonly config: ContentSyncConfig;
}

export class StatefulStack extends Stack {
  readonly table: dynamodb.Table;
  readonly controlTable: dynamodb.Table;
  readonly credentialsSecret: secretsmanager.Secret;
  readonly accessTokenSecret: secretsmanager.Secret;
  readonly queue: sqs.Queue;
  readonly deadLetterQueue: sqs.Queue;
  /** The reconciler's queue of known ids, taken by the item sync, and its dead-letter queue (infra/reconciler). */
  readonly reconcileQueue: sqs.Queue;
  readonly reconcileDeadLetterQueue: sqs.Queue;
  /** Items too large for a row, whole (infra/items-bucket.ts). */
  readonly itemsBucket: s3.Bucket;
  /** The change-event bus and the stream event source's failure queue (infra/change-events). */
  readonly changeEvents: ChangeEventResources;

  constructor(scope: Construct, id: string, props: StatefulStackProps) {
    super(scope, id, props);
    const { config } = props;

    this.table = new dynamodb.Table(this, 'ItemsTable', {
      partitionKey: { name: 'id', type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      stream: dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
      // The AWS-managed key (aws/dynamodb): key use shows in CloudTrail; no KMS grants needed.
      encryption: dynamodb.TableEncryption.AWS_MANAGED,
      deletionProtection: true,
      removalPolicy: RemovalPolicy.RETAIN,
    });

    // The item sync's shared state: one row holds the provider pace every sync container draws
    // from (rate, 429 history, breaker). Small and hot: on demand, strongly consistent reads and
    // conditional writes. Point-in-time recovery as for the items table (cdk-nag DDB3).
    this.controlTable = new dynamodb.Table(this, 'ControlTable', {
      partitionKey: { name: CONTROL_TABLE_PARTITION_KEY, type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      encryption: dynamodb.TableEncryption.AWS_MANAGED,
      deletionProtection: true,
      removalPolicy: RemovalPolicy.RETAIN,
    });

    // CloudFormation writes SecretString only when the secret is created or this template value
    // changes: the operator's value (and every refresh token the provider rotates in) survives
    // later deploys. Never change these initial values.
    this.credentialsSecret = new secretsmanager.Secret(this, 'CredentialsSecret', {
      description: 'content-sync provider credentials {"clientId","refreshToken"}: set by the operator, rotated refresh tokens written by the token refresher',
      secretStringValue: SecretValue.unsafePlainText(CREDENTIALS_PLACEHOLDER_VALUE),
      removalPolicy: RemovalPolicy.RETAIN,
    });
    this.accessTokenSecret = new secretsmanager.Secret(this, 'AccessTokenSecret', {
      description: 'content-sync provider access token {"accessToken","refreshedAt"}: written by the token refresher',
      secretStringValue: SecretValue.unsafePlainText(ACCESS_TOKEN_INITIAL_VALUE),
      removalPolicy: RemovalPolicy.RETAIN,
    });
    for (const secret of [this.credentialsSecret, this.accessTokenSecret]) {
      Validations.of(secret).acknowledge({
        id: 'AwsSolutions-SMG4',
        reason:
          'The provider issues these tokens; Secrets Manager rotation cannot mint them. The token refresher replaces the access token every tokenRefreshMinutes and stores every refresh token the provider rotates.',
      });
    }

    const sync = addWorkQueues(this, { queue: 'SyncQueue', deadLetterQueue: 'DeadLetterQueue' }, config);
    this.deadLetterQueue = sync.deadLetterQueue;
    this.queue = sync.queue;

    // ---- the items bucket: items too large for a row (infra/items-bucket.ts) ----
    this.itemsBucket = addItemsBucket(this);
    new CfnOutput(this, 'ItemsBucketName', {
      description: 'S3 bucket of items too large for a row: a row\'s itemObject.key is the key of its item here',
      value: this.itemsBucket.bucketName,
    });

    addWorkQueueOutputs(this, sync, {
      idPrefix: '',
      queueName: 'Sync queue',
      deadLetterQueueName: 'Dead-letter queue',
      queueUrlDescription: 'Sync queue: send {"id": "<item id>"} messages here (npm run enqueue -- --queue-url <QueueUrl> id ...)',
      deadLetterQueueUrlDescription: 'Dead-letter queue: records that can never succeed, with message attributes error and sourceMessageId',
    });
    // ---- reconciliation: the reconcile queue and its dead-letter queue (infra/reconciler) ----
    const reconcile = addReconcileQueues(this, config);
    this.reconcileQueue = reconcile.queue;
    this.reconcileDeadLetterQueue = reconcile.deadLetterQueue;

    new CfnOutput(this, 'ItemsTableName', { description: 'DynamoDB table of synced items', value: this.table.tableName });
    new CfnOutput(this, 'ItemsTableStreamArn', {
      description: 'Stream of the items table (new and old images) for downstream consumers',
      value: this.table.tableStreamArn ?? '',
    });
    new CfnOutput(this, 'ControlTableName', {
      description: 'DynamoDB table of the item sync shared state (the one provider pace row every sync container draws from)',
      value: this.controlTable.tableName,
    });
    new CfnOutput(this, 'CredentialsSecretName', {
      description: 'Secret to fill with {"clientId": "...", "refreshToken": "..."} (aws secretsmanager put-secret-value)',
      value: this.credentialsSecret.secretName,
    });
    new CfnOutput(this, 'AccessTokenSecretName', {
      description: 'Secret holding the current access token (written by the token refresher)',
      value: this.accessTokenSecret.secretName,
    });

    // ---- change events: the bus and the stream event source's failure queue (infra/change-events) ----
    this.changeEvents = addChangeEventResources(this);
  }
}
