/**
 * The client API's handler, built from its dependencies (handler.ts builds it once per container
 * from the environment): API Gateway's HTTP API event (payload 2.0) to a request for routes.ts,
 * over the connections' core (functions/shared/connections/operations.ts) on the connections table
 * (tokens sealed under CONNECTIONS_KEY_ARN), the reconciler's cursor (each connection's last pass),
 * the sync and reconcile queues (the lanes), the erase queue, and, for the item reads, the feed and
 * the snapshot, the items table, the items bucket and the changes table. One log line per request: method,
 * route, status, connection, duration; never a body, a header or a token. An error the caller
 * cannot fix is a 500 `internal` (a TransientError a 503 `unavailable`: trying again may pass).
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { KMSClient } from '@aws-sdk/client-kms';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { stringify } from 'lossless-json';
import { DynamoDbItemRows } from './adapters/dynamodb-item-rows.js';
import { readFeed, readSnapshot, type ChangesPorts } from './changes.js';
import { readItem, type ObjectLinks } from './items.js';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { DynamoDbCursorStore } from '../reconciler/adapters/dynamodb-cursor-store.js';
import { DynamoDbChangesLog } from '../shared/adapters/dynamodb-changes-log.js';
import { kmsApi } from '../shared/adapters/kms-api.js';
import { sealedConnectionStore } from '../shared/adapters/sealed-connection-store.js';
import { SqsEraseScheduler } from '../shared/adapters/sqs-erase-scheduler.js';
import { SqsIdLanes } from '../shared/adapters/sqs-id-lanes.js';
import type { ApiConfig } from '../shared/client-config.js';
import { ConnectionOperations } from '../shared/connections/operations.js';
import type { ConnectionStore } from '../shared/connections/ports.js';
import { TransientError } from '../shared/errors.js';
import { API_SERVICE } from '../shared/metric-names.js';
import { createLogger, describeError } from '../shared/observability.js';
import { systemClock, type Clock } from '../shared/ports.js';
import { describeRoute, route, type ApiRequest, type ApiResponse } from './routes.js';

export interface ApiHandlerDeps {
  config: ApiConfig;
  dynamodb: DynamoDBClient;
  kms: KMSClient;
  sqs: SQSClient;
  /** The presigned URLs of items held in the items bucket; default the S3 signer, loaded at first use. */
  links?: ObjectLinks;
  clock?: Clock;
  logger?: ReturnType<typeof createLogger>;
  /** The connections table; default the sealed DynamoDB adapter. */
  store?: ConnectionStore;
  /** Waits before a missing change is taken for expired (functions/shared/changes/feed.ts); default real time. */
  sleep?: (ms: number) => Promise<void>;
}

export type ApiHandler = (event: APIGatewayProxyEventV2) => Promise<APIGatewayProxyStructuredResultV2>;

export function createApiHandler(deps: ApiHandlerDeps): ApiHandler {
  const { config } = deps;
  const logger = deps.logger ?? createLogger(API_SERVICE);
  const clock = deps.clock ?? systemClock;
  const cursors = new DynamoDbCursorStore(deps.dynamodb, config.controlTableName);
  const store = deps.store ?? sealedConnectionStore({ dynamodb: deps.dynamodb, kms: kmsApi(deps.kms), config });
  const rows = new DynamoDbItemRows(deps.dynamodb, config.itemsTableName);
  let loaded: Promise<ObjectLinks> | undefined;
  const links: ObjectLinks = deps.links ?? {
    // The literal is OBJECT_LINKS_MODULE (lazy-modules.ts): the bundle keeps this import.
    urlFor: async (key, seconds) => {
      loaded ??= import('./adapters/s3-object-links.js').then((module) => module.createObjectLinks(config.itemsBucketName, config.s3Endpoint));
      return (await loaded).urlFor(key, seconds);
    },
  };
  const reads: ChangesPorts = { store, rows, links, log: new DynamoDbChangesLog(deps.dynamodb, config.changesTableName), clock, ...(deps.sleep ? { sleep: deps.sleep } : {}) };
  const core = {
    readItem: (connection: string, id: string) => readItem({ store, rows, links }, connection, id),
    readFeed: (connection: string, after: string | undefined, limit: number) => readFeed(reads, connection, after, limit),
    readSnapshot: (connection: string, cursor: string | undefined, limit: number) => readSnapshot(reads, connection, cursor, limit),
  };
  const operations = new ConnectionOperations(
    {
      store,
      clock,
      cursor: () => cursors.read(),
      erasures: new SqsEraseScheduler(deps.sqs, config.eraseQueueUrl),
      lanes: new SqsIdLanes(deps.sqs, { users: config.syncQueueUrl, background: config.reconcileQueueUrl }),
    },
    { freshnessHours: config.freshnessHours, eraseSettleSeconds: config.eraseSettleSeconds },
  );

  return async function handler(event) {
    const started = clock.now().getTime();
    const request = requestOf(event);
    let response: ApiResponse;
    try {
      response = await route({ operations, ...core }, request);
    } catch (error) {
      const transient = error instanceof TransientError;
      const described = describeRoute(request);
      logger.error('request failed', { method: request.method, ...described, error: describeError(error) });
      response = {
        ...described,
        statusCode: transient ? 503 : 500,
        body: { error: { code: transient ? 'unavailable' : 'internal', message: transient ? 'a service the API depends on failed for now: try again' : 'the request failed inside the API: its log line says why' } },
      };
    }
    logger.info('request', {
      method: request.method,
      route: response.route ?? 'none',
      status: response.statusCode,
      ...(response.connection !== undefined ? { connection: response.connection } : {}),
      durationMs: clock.now().getTime() - started,
    });
    // lossless-json: an item's numbers keep their JSON text (a large integer stays exact).
    return { statusCode: response.statusCode, headers: { 'content-type': 'application/json' }, body: stringify(response.body) ?? 'null' };
  };
}

/** What routes.ts reads of the event. */
export function requestOf(event: APIGatewayProxyEventV2): ApiRequest {
  const body = event.body === undefined || event.body === null ? undefined : Buffer.from(event.body, event.isBase64Encoded ? 'base64' : 'utf8');
  return {
    method: event.requestContext?.http?.method ?? 'GET',
    rawPath: event.rawPath ?? '/',
    query: parseQuery(event.rawQueryString ?? ''),
    headers: event.headers ?? {},
    body,
  };
}

/** The query string's parameters, each percent-decoded once; a repeated one keeps its last value. */
function parseQuery(raw: string): Record<string, string> {
  const query: Record<string, string> = {};
  for (const [key, value] of new URLSearchParams(raw)) query[key] = value;
  return query;
}
