/**
 * The eraser's handler, built from its dependencies (handler.ts builds it once per container): fed
 * by the erase queue (batch size 1, ReportBatchItemFailures), each message `{"connection",
 * "startedAt"}` one erase to run (functions/shared/connections/erase.ts `runErase`). An erase that
 * must wait (the safety wait) or that ran out of time is sent back to the erase queue, delayed, and
 * its message is done: waiting never uses up the queue's receive count. A malformed message or a
 * failure is reported in `batchItemFailures` (a message that keeps failing reaches the erase queue's
 * dead-letter queue, which alarms). One log line per erase run, with its connection.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { S3Client } from '@aws-sdk/client-s3';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { AwsItemsEraser } from '../shared/adapters/items-eraser.js';
import { SqsEraseScheduler } from '../shared/adapters/sqs-erase-scheduler.js';
import { DynamoDbConnectionStore } from '../shared/adapters/dynamodb-connection-store.js';
import type { EraserConfig } from '../shared/client-config.js';
import { connectionIdProblem } from '../shared/connections/connection.js';
import { runErase, type EraseRequest, type EraseScheduler, type ItemsEraser } from '../shared/connections/erase.js';
import type { ConnectionStore } from '../shared/connections/ports.js';
import { NO_TOKENS } from '../shared/connections/sealing.js';
import { ERASER_SERVICE } from '../shared/metric-names.js';
import { createLogger, describeError } from '../shared/observability.js';
import { systemClock, type Clock } from '../shared/ports.js';

/** Time kept back from the invocation's end: no new page of deletes starts within it. */
export const ERASE_SAFETY_MARGIN_MS = 30_000;

export interface EraserHandlerDeps {
  config: EraserConfig;
  dynamodb: DynamoDBClient;
  /** The S3 client, or how to get it when first needed. */
  s3: S3Client | (() => Promise<S3Client>);
  sqs: SQSClient;
  clock?: Clock;
  logger?: ReturnType<typeof createLogger>;
  store?: ConnectionStore;
  items?: ItemsEraser;
  scheduler?: EraseScheduler;
  sleep?: (ms: number) => Promise<void>;
}

export function createEraserHandler(deps: EraserHandlerDeps): (event: SQSEvent, context: Context) => Promise<SQSBatchResponse> {
  const { config } = deps;
  const logger = deps.logger ?? createLogger(ERASER_SERVICE);
  const clock = deps.clock ?? systemClock;
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  // The eraser opens and seals no token (its role may not use the key either).
  const store = deps.store ?? new DynamoDbConnectionStore(deps.dynamodb, config.connectionsTableName, { sealer: NO_TOKENS });
  const items = deps.items ?? new AwsItemsEraser({ dynamodb: deps.dynamodb, s3: deps.s3, itemsTable: config.itemsTableName, itemsBucket: config.itemsBucketName, changesTable: config.changesTableName, sleep });
  const scheduler = deps.scheduler ?? new SqsEraseScheduler(deps.sqs, config.eraseQueueUrl);

  return async function handler(event, context) {
    logger.addContext(context);
    const failures: SQSBatchResponse['batchItemFailures'] = [];
    for (const record of event.Records ?? []) {
      const request = parseRequest(record.body);
      if (typeof request === 'string') {
        logger.error('erase message refused', { messageId: record.messageId, reason: request });
        failures.push({ itemIdentifier: record.messageId });
        continue;
      }
      try {
        const stop = (): boolean => context.getRemainingTimeInMillis() < ERASE_SAFETY_MARGIN_MS;
        const run = await runErase({ store, items, clock }, request, stop);
        if (run.kind === 'wait') await scheduler.schedule(request, run.seconds);
        if (run.kind === 'unfinished') await scheduler.schedule(request, 0);
        logger.info('erase', { connection: request.connection, startedAt: request.startedAt, ...run });
      } catch (error) {
        logger.error('erase failed', { connection: request.connection, startedAt: request.startedAt, error: describeError(error) });
        failures.push({ itemIdentifier: record.messageId });
      }
    }
    return { batchItemFailures: failures };
  };
}

/** The erase a message asks for, or why it is not one. */
export function parseRequest(body: string): EraseRequest | string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return 'the body is not JSON';
  }
  const { connection, startedAt } = (parsed ?? {}) as { connection?: unknown; startedAt?: unknown };
  const problem = connectionIdProblem(connection);
  if (problem !== undefined) return problem;
  if (typeof startedAt !== 'string' || Number.isNaN(Date.parse(startedAt))) return 'startedAt is not an ISO-8601 time';
  return { connection: connection as string, startedAt };
}
