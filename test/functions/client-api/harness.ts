/**
 * The client API's handler built as production builds it (functions/client-api/app.ts
 * `createApiHandler` over `loadApiConfig`), for the tests of this folder: a real connections table
 * and control table in DynamoDB Local on 127.0.0.1, tokens sealed by the real TokenSealer over a KMS
 * client answered by the local KMS model (test/support/sealer.ts, which counts the KMS calls), an
 * SQSClient mocked with aws-sdk-client-mock, and a clock the test moves. Requests are API Gateway
 * HTTP API (payload 2.0) events; every answer and every line the handler writes is kept, so a file
 * can check at its end that none of them ever held a refresh token.
 */
import type { AttributeValue, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  SendMessageBatchCommand,
  SendMessageCommand,
  SQSClient,
  type SendMessageBatchCommandInput,
  type SendMessageCommandInput,
} from '@aws-sdk/client-sqs';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { mockClient, type AwsClientStub } from 'aws-sdk-client-mock';
import { captureOutput, jsonLines } from '../../../dev/fakes/capture-output.js';
import { startLocalDynamo, type LocalDynamoDb } from '../../../dev/fakes/local-dynamo.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../../../dev/fakes/local-aws.js';
import { createApiHandler, type ApiHandler } from '../../../functions/client-api/app.js';
import { DynamoDbCursorStore } from '../../../functions/reconciler/adapters/dynamodb-cursor-store.js';
import { DynamoDbConnectionStore } from '../../../functions/shared/adapters/dynamodb-connection-store.js';
import { loadApiConfig } from '../../../functions/shared/client-config.js';
import type { Clock } from '../../../functions/shared/ports.js';
import { testSealing, type TestSealing } from '../../support/sealer.js';

export const SYNC_QUEUE_URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/content-sync-items';
export const RECONCILE_QUEUE_URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/content-sync-reconcile';
export const ERASE_QUEUE_URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/content-sync-erase';
/** ERASE_SETTLE_SECONDS of these tests: below SQS's longest delay (900 s), so the message's delay is the whole wait. */
export const ERASE_SETTLE_SECONDS = 300;
export const FRESHNESS_HOURS = 24;

export const T0 = Date.parse('2026-11-24T10:00:00.000Z');
export const iso = (ms: number): string => new Date(ms).toISOString();

/** Every refresh token these tests use holds this, so that a search of the output finds any of them. */
export const TOKEN_MARK = 'rt-api-secret';
export const token = (name: string): string => `${TOKEN_MARK}-${name}`;

type Row = Record<string, AttributeValue>;

/** A clock that stands still until the test moves it. */
export class TestClock implements Clock {
  constructor(public at = T0) {}
  now(): Date {
    return new Date(this.at);
  }
  advance(ms: number): void {
    this.at += ms;
  }
}

export interface Request {
  method: string;
  /** The raw path, percent-encoded as sent. */
  path: string;
  /** The raw query string, without `?`. */
  query?: string;
  /**
   * Beside `host` and `user-agent`; `content-type` is application/json when there is a body and these
   * name none. A header given as undefined is left out.
   */
  headers?: Record<string, string | undefined>;
  /** A value that is not a string or a Buffer is sent as its JSON. */
  body?: unknown;
  /** Sends the body base64-encoded, as API Gateway passes a binary body. */
  base64?: boolean;
}

export interface Answer {
  status: number;
  headers: Record<string, unknown>;
  /** The body parsed. */
  body: any;
  /** The body as sent. */
  text: string;
  /** The lines the handler wrote for this request, parsed. */
  logs: Array<Record<string, unknown>>;
  /** What the handler wrote for this request, as written. */
  output: string;
}

/** An API Gateway HTTP API (payload 2.0) event, as the function receives it. */
export function httpEvent(request: Request): APIGatewayProxyEventV2 {
  const { method, path, query = '' } = request;
  let body: string | undefined;
  if (request.body !== undefined) {
    const bytes = Buffer.isBuffer(request.body) ? request.body : Buffer.from(typeof request.body === 'string' ? request.body : JSON.stringify(request.body), 'utf8');
    body = request.base64 ? bytes.toString('base64') : bytes.toString('utf8');
  }
  const given = request.headers ?? {};
  const headers: Record<string, string> = {
    host: 'abc123.execute-api.eu-west-1.amazonaws.com',
    'user-agent': 'client-api-test',
    ...(request.body !== undefined && !Object.keys(given).some((name) => name.toLowerCase() === 'content-type') ? { 'content-type': 'application/json' } : {}),
  };
  for (const [name, value] of Object.entries(given)) if (value !== undefined) headers[name] = value;
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: path,
    rawQueryString: query,
    headers,
    requestContext: {
      accountId: '123456789012',
      apiId: 'abc123',
      domainName: 'abc123.execute-api.eu-west-1.amazonaws.com',
      domainPrefix: 'abc123',
      http: { method, path, protocol: 'HTTP/1.1', sourceIp: '192.0.2.1', userAgent: 'client-api-test' },
      requestId: 'request-1',
      routeKey: '$default',
      stage: '$default',
      time: '24/Nov/2026:10:00:00 +0000',
      timeEpoch: T0,
    },
    isBase64Encoded: request.base64 === true,
    ...(body !== undefined ? { body } : {}),
  };
}

/** A SendMessageBatch answer with every entry sent (message id `msg-<entry id>`). */
export function acceptAll(input: SendMessageBatchCommandInput) {
  return { Successful: (input.Entries ?? []).map((entry) => ({ Id: entry.Id!, MessageId: `msg-${entry.Id}`, MD5OfMessageBody: 'x' })), Failed: [] };
}

/** One client API over its own DynamoDB Local; `reset` gives each test new tables and a new handler. */
export class ApiHarness {
  dynamo!: LocalDynamoDb;
  db!: DynamoDBClient;
  readonly sqs = new SQSClient({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS });
  readonly sqsMock: AwsClientStub<SQSClient> = mockClient(this.sqs);
  readonly sealing: TestSealing = testSealing();
  clock = new TestClock();
  connectionsTable = '';
  controlTable = '';
  changesTable = '';
  handler!: ApiHandler;
  /** Every body answered and everything written, over the harness's life. */
  readonly answered: string[] = [];
  readonly written: string[] = [];
  private tables = 0;

  async start(): Promise<void> {
    this.dynamo = await startLocalDynamo({ proxy: false });
    this.db = this.dynamo.client();
  }

  async close(): Promise<void> {
    this.db?.destroy();
    this.sqs.destroy();
    this.sqsMock.restore();
    await this.dynamo?.close();
  }

  /** New tables, a new handler (its sealer's cache empty), the clock at T0, SQS accepting everything. */
  async reset(env: Record<string, string> = {}): Promise<void> {
    this.tables += 1;
    this.connectionsTable = `connections-${this.tables}`;
    this.controlTable = `control-${this.tables}`;
    this.changesTable = `changes-${this.tables}`;
    await this.dynamo.createConnectionsTable(this.connectionsTable);
    await this.dynamo.createControlTable(this.controlTable);
    await this.dynamo.createChangesTable(this.changesTable);
    this.clock = new TestClock();
    this.sqsMock.reset();
    this.sqsMock.on(SendMessageBatchCommand).callsFake(acceptAll);
    this.sqsMock.on(SendMessageCommand).resolves({ MessageId: 'msg-erase', MD5OfMessageBody: 'x' });
    this.handler = this.build(env);
  }

  /** The deployment's variables of the client API, as the stack sets them, for this test's tables. */
  env(overrides: Record<string, string> = {}): Record<string, string> {
    return {
      CONNECTIONS_TABLE_NAME: this.connectionsTable,
      CONNECTIONS_KEY_ARN: this.sealing.keyArn,
      ITEMS_TABLE_NAME: 'content-sync-items',
      ITEMS_BUCKET_NAME: 'content-sync-items-bucket',
      CHANGES_TABLE_NAME: this.changesTable,
      CHANGES_RETENTION_DAYS: '35',
      CONTROL_TABLE_NAME: this.controlTable,
      SYNC_QUEUE_URL,
      RECONCILE_QUEUE_URL,
      ERASE_QUEUE_URL,
      ERASE_SETTLE_SECONDS: String(ERASE_SETTLE_SECONDS),
      FRESHNESS_HOURS: String(FRESHNESS_HOURS),
      ...overrides,
    };
  }

  /** The handler as production builds it: loadApiConfig over the deployment's variables. */
  build(env: Record<string, string> = {}, deps: { dynamodb?: DynamoDBClient; clock?: Clock } = {}): ApiHandler {
    return createApiHandler({ config: loadApiConfig(this.env(env)), dynamodb: deps.dynamodb ?? this.db, kms: this.sealing.kms, sqs: this.sqs, clock: deps.clock ?? this.clock });
  }

  async call(request: Request): Promise<Answer> {
    const { result, error, output } = await captureOutput(() => this.handler(httpEvent(request)));
    this.written.push(output);
    if (error !== undefined) throw error;
    const text = String(result?.body ?? '');
    this.answered.push(text);
    const logs = jsonLines(output).filter((line): line is Record<string, unknown> => typeof line === 'object');
    return { status: result?.statusCode ?? 0, headers: (result?.headers ?? {}) as Record<string, unknown>, body: JSON.parse(text), text, logs, output };
  }

  put(connection: string, body: unknown, headers?: Record<string, string | undefined>): Promise<Answer> {
    return this.call({ method: 'PUT', path: `/connections/${connection}`, body, ...(headers ? { headers } : {}) });
  }

  get(path: string, query?: string): Promise<Answer> {
    return this.call({ method: 'GET', path, ...(query !== undefined ? { query } : {}) });
  }

  post(path: string, body?: unknown): Promise<Answer> {
    return this.call({ method: 'POST', path, ...(body !== undefined ? { body } : {}) });
  }

  delete(path: string, query?: string): Promise<Answer> {
    return this.call({ method: 'DELETE', path, ...(query !== undefined ? { query } : {}) });
  }

  /** The connections table's rows, raw. */
  scan(): Promise<Row[]> {
    return this.dynamo.scan(this.connectionsTable);
  }

  /** Both tables, raw: what a refused request must leave as it was. */
  async tablesNow(): Promise<{ connections: Row[]; control: Row[] }> {
    return { connections: await this.dynamo.scan(this.connectionsTable), control: await this.dynamo.scan(this.controlTable) };
  }

  async row(connection: string): Promise<Row | undefined> {
    return (await this.scan()).find((row) => row['connection']?.S === connection);
  }

  /** The connections table through its adapter, sealing with the tests' sealer (same KMS key). */
  store(): DynamoDbConnectionStore {
    return new DynamoDbConnectionStore(this.db, this.connectionsTable, { sealer: this.sealing.sealer });
  }

  cursors(): DynamoDbCursorStore {
    return new DynamoDbCursorStore(this.db, this.controlTable);
  }

  /** A connection the provider refused: its refresh failed with `reason` (the refresher's own writes). */
  async makeFailing(connection: string, reason: string): Promise<void> {
    const store = this.store();
    const lease = await store.takeRefreshLease(connection, { owner: 'refresher', until: this.clock.at + 300_000, now: this.clock.at });
    if (lease.kind !== 'taken') throw new Error(`the refresh lease of ${connection} was not taken`);
    const failed = await store.failRefresh({ connection, owner: 'refresher', credentialsVersion: lease.record.credentialsVersion, at: iso(this.clock.at), reason, refused: true });
    if (failed !== 'written') throw new Error(`the refresh failure of ${connection} was not written`);
  }

  /** SendMessage inputs (the erase queue), in order. */
  sentMessages(): SendMessageCommandInput[] {
    return this.sqsMock.commandCalls(SendMessageCommand).map((call) => call.args[0].input);
  }

  /** SendMessageBatch inputs (the lanes), in order. */
  sentBatches(): SendMessageBatchCommandInput[] {
    return this.sqsMock.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input);
  }
}

/** The request's one `request` log line. */
export function requestLine(answer: Answer): Record<string, unknown> {
  const lines = answer.logs.filter((line) => line['message'] === 'request');
  if (lines.length !== 1) throw new Error(`expected one request line, got ${lines.length}: ${answer.output}`);
  return lines[0]!;
}
