/**
 * The stateless half of the changes writer (docs/changes.md; the failure queue, the stateful half:
 * ./changes-writer-resources.ts): the function fed by the items table's stream that numbers each
 * connection's changes into the changes table; its permissions, its output, its alarms and its
 * dashboard row (./operations.ts). Memory, time-out, environment and the event source's numbers
 * come from infra/deployment.ts (changesWriterDeployment, changesWriterEventSourceDeployment).
 *
 * The event source: TRIM_HORIZON (a mapping created or re-created starts at the oldest record the
 * stream holds, so no write goes unnumbered); one batch per shard at a time (a shard's records in
 * order); ReportBatchItemFailures (the writer reports a connection's first record it could not
 * number; Lambda goes on from the lowest); retried until the records leave the stream, then their
 * range goes to the failure queue, which alarms.
 *
 * Added to the given scope (the stateless stack) under their own ids, so their logical ids do not
 * depend on where this code lives.
 */
import { CfnOutput, type Stack } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { DynamoEventSource, SqsDlq } from 'aws-cdk-lib/aws-lambda-event-sources';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { CHANGES_WRITER_CONNECTION_ATTRIBUTES } from '../../functions/changes-writer/adapters/dynamodb-erase-state.js';
import { CHANGES_WRITER_SERVICE } from '../../functions/shared/metric-names.js';
import type { ConnectionsResources } from '../connections/connections-table.js';
import { grantConnections, type ConnectionsAccess } from '../connections/grants.js';
import { acknowledgeFunctionFindings, ContentSyncFunction, functionProps } from '../constructs/content-sync-function.js';
import type { ContentSyncConfig } from '../context.js';
import { changesWriterDeployment, changesWriterEventSourceDeployment, type ResourceNames } from '../deployment.js';
import { changesWriterOperations, type ChangesWriterOperations } from './operations.js';

/**
 * The changes writer on the changes table: GetItem (a head, strongly consistent), PutItem (a
 * change), UpdateItem (a head's move), Query (the last changes, when a batch comes again). No
 * Scan, DeleteItem or BatchWriteItem.
 */
export const CHANGES_WRITER_CHANGES_ACTIONS: readonly string[] = ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:Query'];

/**
 * GetItem only, of the row's key and `erase` (its ProjectionExpression: dynamodb:Attributes, and
 * dynamodb:Select SPECIFIC_ATTRIBUTES when the request carries it, as AWS's example of limiting a
 * role to some attributes writes it), so it can read neither a token nor a status; on the key,
 * kms:Decrypt alone (a read).
 */
export const CHANGES_WRITER_CONNECTIONS_ACCESS: ConnectionsAccess = {
  actions: ['dynamodb:GetItem'],
  keyActions: ['kms:Decrypt'],
  conditions: {
    'ForAllValues:StringEquals': { 'dynamodb:Attributes': [...CHANGES_WRITER_CONNECTION_ATTRIBUTES] },
    StringEqualsIfExists: { 'dynamodb:Select': 'SPECIFIC_ATTRIBUTES' },
  },
};

export interface ChangesWriterProps {
  readonly config: ContentSyncConfig;
  /** What its environment names (infra/deployment.ts, changesWriterDeployment). */
  readonly names: ResourceNames;
  /** The items table; its stream (NEW_AND_OLD_IMAGES) feeds the function. */
  readonly itemsTable: dynamodb.ITable;
  readonly changesTable: dynamodb.ITable;
  /** The connections table and its key (infra/connections). */
  readonly connections: ConnectionsResources;
  /** The event source's on-failure destination (./changes-writer-resources.ts). */
  readonly failureQueue: sqs.IQueue;
}

export interface ChangesWriter extends ChangesWriterOperations {
  readonly fn: ContentSyncFunction;
}

export function addChangesWriter(stack: Stack, props: ChangesWriterProps): ChangesWriter {
  const fn = new ContentSyncFunction(stack, 'ChangesWriter', {
    entry: 'functions/changes-writer/handler.ts',
    serviceName: CHANGES_WRITER_SERVICE,
    description: "content-sync: numbers each connection's changes from the items table stream into the changes feed",
    logLevel: props.config.logLevel,
    logRetentionDays: props.config.logRetentionDays,
    stage: props.config.stage,
    ...functionProps(changesWriterDeployment(props.config, props.names)),
  });
  fn.allow({ sid: 'WriteChanges', actions: [...CHANGES_WRITER_CHANGES_ACTIONS], resources: [props.changesTable.tableArn] });
  grantConnections(fn, props.connections, CHANGES_WRITER_CONNECTIONS_ACCESS);
  // The event source grants the stream's read (and ListStreams) and sqs:SendMessage on the failure
  // queue (SQS-managed encryption: no KMS permission is needed).
  const source = changesWriterEventSourceDeployment();
  fn.function.addEventSource(
    new DynamoEventSource(props.itemsTable, {
      startingPosition: lambda.StartingPosition[source.startingPosition],
      batchSize: source.batchSize,
      parallelizationFactor: source.parallelizationFactor,
      reportBatchItemFailures: source.reportBatchItemFailures,
      bisectBatchOnError: source.bisectBatchOnError,
      ...(source.retryAttempts !== undefined ? { retryAttempts: source.retryAttempts } : {}),
      onFailure: new SqsDlq(props.failureQueue),
    }),
  );
  acknowledgeFunctionFindings(
    fn,
    "The stream event source's grant (dynamodb:ListStreams) supports no resource-level permission; the stream reads themselves are on the items table's stream only.",
  );
  new CfnOutput(stack, 'ChangesWriterFunctionName', {
    description: "Numbers each connection's changes into the changes feed from the items table stream (its logs name records it could not read)",
    value: fn.function.functionName,
  });
  return { fn, ...changesWriterOperations({ fn: fn.function, failureQueue: props.failureQueue, stage: props.config.stage }) };
}
