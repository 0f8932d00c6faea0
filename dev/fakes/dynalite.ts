/**
 * DynamoDB for the harness: dynalite on 127.0.0.1 (ephemeral port), the one way the tests, the local
 * run, the bench and the soak start it.
 *
 * - `where: 'in-process'` (default) runs it in this process; `'child'` in a child Node.js process,
 *   so that DynamoDB's own CPU work runs on another core than the handlers, as it would in AWS.
 * - `path` keeps the tables in LevelDB files in that folder (the local run); in memory otherwise.
 * - `proxy` (default on, for the tests) puts a small HTTP proxy in front that records every
 *   operation (X-Amz-Target) and can answer a number of requests with a throttling error, as
 *   DynamoDB does under load (dynalite itself never throttles), or with TransactionConflictException
 *   (DynamoDB's answer to a write on an item a transaction is writing), and cancel a number of
 *   TransactWriteItems with TransactionConflict (or throttling) reasons, as DynamoDB cancels a
 *   transaction that meets another one on an item (dynalite's transactions wait for each other
 *   instead). The SDK sees real HTTP either way.
 * - Either way, key sizes are counted in UTF-8 bytes, as DynamoDB counts them (dynalite-key-sizes.ts),
 *   and TransactWriteItems is there (dynalite-transactions.ts), its commits told in this process
 *   (dynalite-commits.ts; from a child, those of the requests that ask).
 */
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  CreateTableCommand,
  DynamoDBClient,
  GetItemCommand,
  ResourceInUseException,
  ScanCommand,
  type AttributeValue,
  type DynamoDBClientConfig,
} from '@aws-sdk/client-dynamodb';
import type { DynaliteOptions } from 'dynalite';
import { CONTROL_TABLE_KEY } from '../../functions/shared/adapters/dynamodb-pace-store.js';
import { DEFAULT_CONNECTION } from '../../functions/shared/connections/connection.js';
import { CHANGES_TABLE_PARTITION_KEY, CHANGES_TABLE_SORT_KEY } from '../../infra/storage/changes-table.js';
import { tellCommit, type CommittedTransaction } from './dynalite-commits.js';
import { checkKeySizesInBytes } from './dynalite-key-sizes.js';
import { cancellationBody, REASON_MESSAGES, type CancellationReason } from './dynalite-transact-write.js';
import { dynaliteWithTransactions } from './dynalite-transactions.js';
import { ensureItemsTable, waitUntilActive } from './items-table.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from './local-aws.js';
import { listenOnLoopback } from './loopback.js';

export type ThrottleError = 'ProvisionedThroughputExceededException' | 'ThrottlingException' | 'TransactionConflictException';

export interface ThrottleRule {
  /** Only this operation (`PutItem`, `BatchGetItem`...); default every operation. */
  operation?: string;
  /** How many requests are refused. */
  times: number;
  error?: ThrottleError;
}

export interface CancelRule {
  /** How many TransactWriteItems requests are cancelled (answered by the proxy: nothing is applied). */
  times: number;
  /** The reason of the actions `actions` names; default TransactionConflict. */
  code?: 'TransactionConflict' | 'ThrottlingError' | 'ProvisionedThroughputExceeded';
  /** The positions (from 0) in TransactItems of the actions with that reason, the others `None`; default every action. */
  actions?: number[];
}

export interface StartOptions {
  where?: 'in-process' | 'child';
  /** Folder for dynalite's LevelDB files (created if need be); in memory when undefined. */
  path?: string;
  /** dynalite's item size limit, default 400 (DynamoDB's). */
  maxItemSizeKb?: number;
  /** The recording and throttling proxy; default true. */
  proxy?: boolean;
}

export interface Dynalite {
  /** `http://127.0.0.1:<port>` (of the proxy, when there is one). */
  endpoint: string;
  /** A client for this endpoint (region and dummy credentials set; the SDK's default retries). */
  client(config?: DynamoDBClientConfig): DynamoDBClient;
  createItemsTable(tableName: string): Promise<void>;
  /** The connections table (partition key `connection`) as the stateful stack defines it, unless it exists. */
  createConnectionsTable(tableName: string): Promise<void>;
  /** The control table (the provider pace's row) as the stateful stack defines it, unless it exists. */
  createControlTable(tableName: string): Promise<void>;
  /**
   * The changes table (partition key `connection`, string; sort key `seq`, number) as the stateful
   * stack defines it, unless it exists. Without its time to live: dynalite has no UpdateTimeToLive,
   * so a change row never expires here.
   */
  createChangesTable(tableName: string): Promise<void>;
  /** Every row of a table, raw AttributeValues, sorted by connection, then id (where the table has them). */
  scan(tableName: string): Promise<Array<Record<string, AttributeValue>>>;
  /** A row of the items table (key `connection`, `id`), strongly consistent. */
  getRow(tableName: string, id: string, connection?: string): Promise<Record<string, AttributeValue> | undefined>;
  close(): Promise<void>;
}

/** dynalite behind the proxy. */
export interface LocalDynamo extends Dynalite {
  /** Every operation the proxy passed on or refused, in order (`PutItem`, `BatchGetItem`...). */
  operations: string[];
  throttle(rule: ThrottleRule): void;
  /** Operations refused so far. */
  readonly throttled: number;
  /** Cancels TransactWriteItems requests with `rule`'s reasons (TransactionCanceledException), after any `throttle` rule. */
  cancel(rule: CancelRule): void;
  /** Transactions cancelled so far by `cancel` rules. */
  readonly cancelled: number;
}

interface Server {
  endpoint: string;
  port: number;
  close(): Promise<void>;
}

export function startDynalite(options: StartOptions & { proxy: false }): Promise<Dynalite>;
export function startDynalite(options?: StartOptions): Promise<LocalDynamo>;
export async function startDynalite(options: StartOptions = {}): Promise<Dynalite | LocalDynamo> {
  const settings: DynaliteOptions = {
    createTableMs: 0,
    deleteTableMs: 0,
    updateTableMs: 0,
    ...(options.maxItemSizeKb !== undefined ? { maxItemSizeKb: options.maxItemSizeKb } : {}),
    ...(options.path !== undefined ? { path: options.path } : {}),
  };
  if (options.path !== undefined) mkdirSync(options.path, { recursive: true });
  const server = options.where === 'child' ? await startChild(settings) : await startInProcess(settings);
  if (options.proxy === false) return withHelpers(server.endpoint, () => server.close());
  const proxy = await startProxy(server.port);
  const base = withHelpers(proxy.endpoint, async () => {
    await proxy.close();
    await server.close();
  });
  const { operations, throttle, cancel } = proxy.control;
  return {
    ...base,
    operations,
    throttle,
    cancel,
    get throttled() {
      return proxy.control.throttled;
    },
    get cancelled() {
      return proxy.control.cancelled;
    },
  };
}

function withHelpers(endpoint: string, close: () => Promise<void>): Dynalite {
  const client = (config: DynamoDBClientConfig = {}): DynamoDBClient =>
    new DynamoDBClient({ endpoint, region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS, ...config });
  const admin = client();
  return {
    endpoint,
    client,
    createItemsTable: async (tableName) => void (await ensureItemsTable(admin, tableName)),
    createControlTable: (tableName) => createKeyedTable(admin, tableName, CONTROL_TABLE_KEY),
    createConnectionsTable: (tableName) => createKeyedTable(admin, tableName, 'connection'),
    createChangesTable: (tableName) =>
      createKeyedTable(admin, tableName, CHANGES_TABLE_PARTITION_KEY, { name: CHANGES_TABLE_SORT_KEY, type: 'N' }),
    async scan(tableName) {
      const rows: Array<Record<string, AttributeValue>> = [];
      let start: Record<string, AttributeValue> | undefined;
      do {
        const page = await admin.send(new ScanCommand({ TableName: tableName, ConsistentRead: true, ExclusiveStartKey: start }));
        rows.push(...(page.Items ?? []));
        start = page.LastEvaluatedKey;
      } while (start);
      const order = (row: Record<string, AttributeValue>): string => `${row['connection']?.S ?? ''}\u0000${row['id']?.S ?? row[CONTROL_TABLE_KEY]?.S ?? ''}`;
      return rows.sort((a, b) => (order(a) < order(b) ? -1 : 1));
    },
    async getRow(tableName, id, connection = DEFAULT_CONNECTION) {
      const out = await admin.send(
        new GetItemCommand({ TableName: tableName, Key: { connection: { S: connection }, id: { S: id } }, ConsistentRead: true }),
      );
      return out.Item;
    },
    async close() {
      admin.destroy();
      await close();
    },
  };
}

/** A table with one string partition key (and a sort key, when given), unless it exists. */
async function createKeyedTable(admin: DynamoDBClient, tableName: string, key: string, sortKey?: { name: string; type: 'S' | 'N' }): Promise<void> {
  try {
    await admin.send(
      new CreateTableCommand({
        TableName: tableName,
        AttributeDefinitions: [{ AttributeName: key, AttributeType: 'S' }, ...(sortKey ? [{ AttributeName: sortKey.name, AttributeType: sortKey.type }] : [])],
        KeySchema: [{ AttributeName: key, KeyType: 'HASH' }, ...(sortKey ? [{ AttributeName: sortKey.name, KeyType: 'RANGE' as const }] : [])],
        BillingMode: 'PAY_PER_REQUEST',
      }),
    );
  } catch (error) {
    if (!(error instanceof ResourceInUseException)) throw error;
  }
  await waitUntilActive(admin, tableName);
}

async function startInProcess(settings: DynaliteOptions): Promise<Server> {
  checkKeySizesInBytes();
  const server = dynaliteWithTransactions(settings);
  const port = await listenOnLoopback(server);
  return {
    endpoint: `http://127.0.0.1:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** dynalite-child.ts, run with tsx's loader. */
async function startChild(settings: DynaliteOptions): Promise<Server> {
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
  const entry = fileURLToPath(new URL('./dynalite-child.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', tsx, entry, JSON.stringify(settings)], { stdio: ['pipe', 'pipe', 'inherit', 'ipc'] });
  // With the IPC channel as a fourth stream, Node's types no longer know the first two are pipes.
  const stdin = child.stdin as Writable;
  const stdout = child.stdout as Readable;
  // The commits the child reports (dynalite-commits.ts), told here in the order they come.
  child.on('message', (commit) => tellCommit(commit as CommittedTransaction));
  const port = await new Promise<number>((resolve, reject) => {
    let text = '';
    const onData = (chunk: Buffer): void => {
      text += chunk.toString('utf8');
      const match = /PORT (\d+)/.exec(text);
      if (match) {
        stdout.off('data', onData);
        resolve(Number(match[1]));
      }
    };
    stdout.on('data', onData);
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`dynalite child process exited early (code ${code})`)));
  });
  child.unref();
  child.channel?.unref();
  (stdout as unknown as { unref?: () => void }).unref?.();
  (stdin as unknown as { unref?: () => void }).unref?.();
  return {
    endpoint: `http://127.0.0.1:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.ref(); // keep the event loop alive until it has gone
        child.once('exit', () => resolve());
        stdin.end();
        child.kill();
      }),
  };
}

async function startProxy(dbPort: number): Promise<Server & { control: Pick<LocalDynamo, 'operations' | 'throttle' | 'throttled' | 'cancel' | 'cancelled'> }> {
  const rules: ThrottleRule[] = [];
  const cancelRules: CancelRule[] = [];
  const operations: string[] = [];
  let throttled = 0;
  let cancelled = 0;
  const proxy = createServer((req: IncomingMessage, res: ServerResponse) => {
    const operation = String(req.headers['x-amz-target'] ?? '').split('.').pop() ?? '';
    operations.push(operation);
    const rule = rules.find((r) => r.times > 0 && (r.operation === undefined || r.operation === operation));
    if (rule) {
      rule.times -= 1;
      throttled += 1;
      req.resume();
      const body = JSON.stringify({
        __type: `com.amazonaws.dynamodb.v20120810#${rule.error ?? 'ProvisionedThroughputExceededException'}`,
        message:
          rule.error === 'TransactionConflictException'
            ? `${REASON_MESSAGES.TransactionConflict} (simulated)`
            : 'The level of configured provisioned throughput for the table was exceeded (simulated)',
      });
      res.writeHead(400, { 'Content-Type': 'application/x-amz-json-1.0', 'Content-Length': Buffer.byteLength(body) });
      res.end(body);
      return;
    }
    const cancelRule = operation === 'TransactWriteItems' ? cancelRules.find((r) => r.times > 0) : undefined;
    if (cancelRule) {
      cancelRule.times -= 1;
      cancelled += 1;
      // One reason per action: the request is read for its number of actions.
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        let actions = 0;
        try {
          actions = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { TransactItems?: unknown[] }).TransactItems?.length ?? 0;
        } catch {
          // An unreadable request: no reasons.
        }
        const code = cancelRule.code ?? 'TransactionConflict';
        const reasons: CancellationReason[] = Array.from({ length: actions }, (_, i) =>
          cancelRule.actions === undefined || cancelRule.actions.includes(i) ? { Code: code, Message: REASON_MESSAGES[code] } : { Code: 'None' },
        );
        const body = JSON.stringify(cancellationBody(reasons));
        res.writeHead(400, { 'Content-Type': 'application/x-amz-json-1.0', 'Content-Length': Buffer.byteLength(body) });
        res.end(body);
      });
      return;
    }
    const upstream = httpRequest({ host: '127.0.0.1', port: dbPort, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 500, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', (error) => res.destroy(error));
    req.pipe(upstream);
  });
  const port = await listenOnLoopback(proxy);
  return {
    endpoint: `http://127.0.0.1:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        proxy.closeAllConnections();
        proxy.close(() => resolve());
      }),
    control: {
      operations,
      throttle: (rule) => void rules.push({ ...rule }),
      get throttled() {
        return throttled;
      },
      cancel: (rule) => void cancelRules.push({ ...rule }),
      get cancelled() {
        return cancelled;
      },
    },
  };
}
