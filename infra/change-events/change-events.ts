/**
 * The stateless half of the change events (docs/change-events.md; the bus and the failure queue,
 * the stateful half: ./change-event-resources.ts): the change-events function fed by two streams,
 * the items table's (item change events) and the connections table's (the account lifecycle
 * events: ConnectionAdded, ConnectionFailing, ... one per status change); its permissions
 * (publish on the bus; on the connections table, update each connection's `idsKnown` and
 * `lastWriteAt` and nothing else; read both streams, the event sources' grants) and its output;
 * its two alarms and its dashboard row (./operations.ts). Memory, time-out, environment and the
 * stream event sources' numbers come from infra/deployment.ts. It never opens a token (they are
 * sealed in the connections stream's images): no grant on the connections key but DynamoDB's own.
 *
 * Each stream event source, with the same numbers:
 * - TRIM_HORIZON: a mapping that is created (first deploy) or re-created starts at the oldest
 *   record the stream still holds (24 hours), so no write made before it existed goes unannounced.
 *   LATEST would skip every write between the table's stream and the mapping, silently.
 * - ReportBatchItemFailures: the function reports the first record it could not announce (and every
 *   one after it) by sequence number; Lambda checkpoints before it and tries again from there.
 * - Bisect on error, at most CHANGE_EVENTS_RETRY_ATTEMPTS retries, then the failure queue gets the
 *   batch's shard and sequence range and the shard moves on (bounded, never stuck for a day).
 * - Parallelization factor 1 (one batch per shard at a time): an item's (a connection's) records
 *   are in one shard, in order, and the function puts its event only after its earlier one was
 *   accepted. Lambda would keep that per-key order with a higher factor too; one is the default and
 *   the tables' write rates (the items table's bounded by the provider pace) need no more.
 *
 * Added to the given scope (the stateless stack) under their own ids, so their logical ids do not
 * depend on where this code lives.
 */
import { CfnOutput, Duration, type Stack } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as events from 'aws-cdk-lib/aws-events';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { DynamoEventSource, SqsDlq } from 'aws-cdk-lib/aws-lambda-event-sources';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { CHANGE_EVENTS_SERVICE } from '../../functions/shared/metric-names.js';
import type { LogLevel } from '../../functions/shared/config.js';
import type { ConnectionsResources } from '../connections/connections-table.js';
import { grantConnections, type ConnectionsAccess } from '../connections/grants.js';
import { acknowledgeFunctionFindings, ContentSyncFunction, functionProps } from '../constructs/content-sync-function.js';
import { CHANGE_EVENTS_TIMEOUT_SECONDS, changeEventSourceDeployment, changeEventsDeployment } from '../deployment.js';
import { changeEventsOperations, type ChangeEventsOperations } from './operations.js';

export { CHANGE_EVENTS_BATCH_SIZE, CHANGE_EVENTS_RETRY_ATTEMPTS } from '../deployment.js';
export const CHANGE_EVENTS_TIMEOUT = Duration.seconds(CHANGE_EVENTS_TIMEOUT_SECONDS);

/**
 * The attributes of a connection's row the change-events function may name: the key, and the two
 * it keeps (docs/connections.md, "Where credentials live"). Tokens and status are out of its reach.
 */
export const CHANGE_EVENTS_CONNECTION_ATTRIBUTES: readonly string[] = ['connection', 'idsKnown', 'lastWriteAt'];

/**
 * UpdateItem only, naming no top-level attribute but CHANGE_EVENTS_CONNECTION_ATTRIBUTES (its key,
 * its update and its condition alike) and returning nothing (ReturnValues NONE or absent), so it
 * can neither touch nor read back a token or a status.
 */
export const CHANGE_EVENTS_CONNECTIONS_ACCESS: ConnectionsAccess = {
  actions: ['dynamodb:UpdateItem'],
  conditions: {
    'ForAllValues:StringEquals': { 'dynamodb:Attributes': [...CHANGE_EVENTS_CONNECTION_ATTRIBUTES] },
    StringEqualsIfExists: { 'dynamodb:ReturnValues': 'NONE' },
  },
};

/** What the stateful stack holds for the change events (infra/change-events/change-event-resources.ts). */
export interface ChangeEventsStateful {
  readonly bus: events.IEventBus;
  /** The stream event source's on-failure destination. */
  readonly failureQueue: sqs.IQueue;
}

export interface ChangeEventsProps extends ChangeEventsStateful {
  /** The items table; its stream (NEW_AND_OLD_IMAGES) feeds the function. */
  readonly table: dynamodb.ITable;
  /** The connections table and its key (infra/connections); its stream (NEW_AND_OLD_IMAGES) feeds the function too. */
  readonly connections: ConnectionsResources;
  /** The context key `logLevel`. */
  readonly logLevel: LogLevel;
  /** The context key `logRetentionDays`. */
  readonly logRetentionDays: number;
  /** The context key `tracing`. */
  readonly tracing: boolean;
  /** The context key `stage`. */
  readonly stage: string | undefined;
}

export interface ChangeEvents extends ChangeEventsOperations {
  readonly fn: ContentSyncFunction;
}

/** The change-events function, its stream event source, its permissions and its output. */
export function addChangeEvents(stack: Stack, props: ChangeEventsProps): ChangeEvents {
  const fn = new ContentSyncFunction(stack, 'ChangeEvents', {
    entry: 'functions/change-events/handler.ts',
    serviceName: CHANGE_EVENTS_SERVICE,
    description: 'content-sync: announces every real change of an items-table row, and every connection status change, on the change-event bus',
    logLevel: props.logLevel,
    logRetentionDays: props.logRetentionDays,
    stage: props.stage,
    ...functionProps(changeEventsDeployment(props, { eventBusName: props.bus.eventBusArn, connectionsTableName: props.connections.table.tableName })),
  });
  fn.allow({
    sid: 'PublishChangeEvents',
    actions: ['events:PutEvents'],
    resources: [props.bus.eventBusArn],
  });
  grantConnections(fn, props.connections, CHANGE_EVENTS_CONNECTIONS_ACCESS);
  // Each event source grants its stream's read (and ListStreams) and, for the on-failure
  // destination, sqs:SendMessage on the failure queue (SQS-managed encryption: no KMS permission is
  // needed). The connections stream is given as a table without its key: the event source would
  // otherwise grant kms:Decrypt on the connections key directly, with no condition (a token's data
  // key opened by anyone with the role); the stream's records are decrypted by DynamoDB, under the
  // ConnectionsKey grant (kms:ViaService DynamoDB).
  const connectionsStream = dynamodb.Table.fromTableAttributes(stack, 'ConnectionsTableStream', {
    tableArn: props.connections.table.tableArn,
    tableStreamArn: props.connections.streamArn,
  });
  const source = changeEventSourceDeployment();
  for (const table of [props.table, connectionsStream]) {
    fn.function.addEventSource(
      new DynamoEventSource(table, {
        startingPosition: lambda.StartingPosition[source.startingPosition],
        batchSize: source.batchSize,
        parallelizationFactor: source.parallelizationFactor,
        reportBatchItemFailures: source.reportBatchItemFailures,
        bisectBatchOnError: source.bisectBatchOnError,
        retryAttempts: source.retryAttempts,
        onFailure: new SqsDlq(props.failureQueue),
      }),
    );
  }

  acknowledgeFunctionFindings(
    fn,
    'The stream event sources\' grant (dynamodb:ListStreams) supports no resource-level permission; the stream reads themselves are on the items table\'s and the connections table\'s streams only.',
  );

  new CfnOutput(stack, 'ChangeEventsFunctionName', {
    description: 'Publishes the change events from the items table stream and the lifecycle events from the connections table stream (its logs say which records were handed back)',
    value: fn.function.functionName,
  });
  return { fn, ...changeEventsOperations({ fn: fn.function, failureQueue: props.failureQueue, stage: props.stage }) };
}
