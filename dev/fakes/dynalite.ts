/**
 * DynamoDB for tests: dynalite in process on 127.0.0.1 (ephemeral port), behind a small HTTP proxy
 * that records every operation (X-Amz-Target) and can answer a number of requests with a throttling
 * error, as DynamoDB does under load (dynalite itself never throttles). The SDK sees real HTTP.
 */
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import {
  DynamoDBClient,
  GetItemCommand,
  ScanCommand,
  type AttributeValue,
  type DynamoDBClientConfig,
} from '@aws-sdk/client-dynamodb';
import dynalite from 'dynalite';
import { ensureItemsTable } from './items-table.js';
import { listenOnLoopback } from './loopback.js';

export type ThrottleError = 'ProvisionedThroughputExceededException' | 'ThrottlingException';

export interface ThrottleRule {
  /** Only this operation (`PutItem`, `BatchGetItem`...); default every operation. */
  operation?: string;
  /** How many requests are refused. */
  times: number;
  error?: ThrottleError;
}

export interface LocalDynamo {
  /** `http://127.0.0.1:<port>` of the proxy. */
  endpoint: string;
  /** Every operation the proxy passed on or refused, in order (`PutItem`, `BatchGetItem`...). */
  operations: string[];
  /** A client for this endpoint (region and dummy credentials set). */
  client(config?: DynamoDBClientConfig): DynamoDBClient;
  createItemsTable(tableName: string): Promise<void>;
  /** Every row of a table, raw AttributeValues, sorted by id. */
  scan(tableName: string): Promise<Array<Record<string, AttributeValue>>>;
  getRow(tableName: string, id: string): Promise<Record<string, AttributeValue> | undefined>;
  throttle(rule: ThrottleRule): void;
  /** Operations refused so far. */
  throttled: number;
  close(): Promise<void>;
}

export interface StartOptions {
  /** dynalite's item size limit, default 400 (DynamoDB's). */
  maxItemSizeKb?: number;
}

export async function startDynalite(options: StartOptions = {}): Promise<LocalDynamo> {
  const db = dynalite({
    createTableMs: 0,
    deleteTableMs: 0,
    updateTableMs: 0,
    ...(options.maxItemSizeKb !== undefined ? { maxItemSizeKb: options.maxItemSizeKb } : {}),
  });
  const dbPort = await listenOnLoopback(db);
  const rules: ThrottleRule[] = [];
  const operations: string[] = [];
  let throttled = 0;

  const proxy = createServer((req: IncomingMessage, res: ServerResponse) => {
    const operation = String(req.headers['x-amz-target'] ?? '').split('.').pop() ?? '';
    operations.push(operation);
    const rule = rules.find((r) => r.times > 0 && (r.operation === undefined || r.operation === operation));
    if (rule) {
      rule.times -= 1;
      throttled += 1;
      req.resume();
      const error = rule.error ?? 'ProvisionedThroughputExceededException';
      const body = JSON.stringify({
        __type: `com.amazonaws.dynamodb.v20120810#${error}`,
        message: 'The level of configured provisioned throughput for the table was exceeded (simulated)',
      });
      res.writeHead(400, { 'Content-Type': 'application/x-amz-json-1.0', 'Content-Length': Buffer.byteLength(body) });
      res.end(body);
      return;
    }
    const upstream = httpRequest(
      { host: '127.0.0.1', port: dbPort, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 500, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', (error) => res.destroy(error));
    req.pipe(upstream);
  });
  const port = await listenOnLoopback(proxy);
  const endpoint = `http://127.0.0.1:${port}`;
  const admin = new DynamoDBClient({ endpoint, region: 'eu-west-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } });

  return {
    endpoint,
    operations,
    get throttled() {
      return throttled;
    },
    client: (config = {}) =>
      new DynamoDBClient({ endpoint, region: 'eu-west-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' }, ...config }),
    async createItemsTable(tableName) {
      await ensureItemsTable(admin, tableName);
    },
    async scan(tableName) {
      const rows: Array<Record<string, AttributeValue>> = [];
      let start: Record<string, AttributeValue> | undefined;
      do {
        const page = await admin.send(new ScanCommand({ TableName: tableName, ConsistentRead: true, ExclusiveStartKey: start }));
        rows.push(...(page.Items ?? []));
        start = page.LastEvaluatedKey;
      } while (start);
      return rows.sort((a, b) => (a['id']!.S! < b['id']!.S! ? -1 : 1));
    },
    async getRow(tableName, id) {
      const out = await admin.send(new GetItemCommand({ TableName: tableName, Key: { id: { S: id } }, ConsistentRead: true }));
      return out.Item;
    },
    throttle(rule) {
      rules.push({ ...rule });
    },
    async close() {
      admin.destroy();
      proxy.closeAllConnections();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
      await new Promise<void>((resolve) => db.close(() => resolve()));
    },
  };
}
