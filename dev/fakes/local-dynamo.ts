/**
 * DynamoDB for the harness: AWS's own DynamoDB Local (dynamodb-local.ts), the one way the tests,
 * the local run, the bench, the soak and the simulations reach it.
 *
 * - `startLocalDynamo` opens a namespace of its own (an access key of its own: DynamoDB Local
 *   keeps one database per access key) on the run's shared server when there is one (the test
 *   run's, its endpoint in RUN_ENDPOINT_VARIABLE, set by test/setup.ts from the global setup), or
 *   on a server it starts (and stops at `close`) otherwise.
 * - `proxy` (default on, for the tests) puts a small HTTP proxy in front that records every
 *   operation (X-Amz-Target) and can answer a number of requests with a throttling error, as
 *   DynamoDB does under load (DynamoDB Local never throttles), or with TransactionConflictException,
 *   and cancel a number of TransactWriteItems with TransactionConflict (or throttling) reasons. The
 *   SDK sees real HTTP either way.
 * - The tables are created as the stateful stack defines them: the items table with its stream
 *   (new and old images), the changes table (its time to live when asked: see createChangesTable).
 */
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import {
  CreateTableCommand,
  DeleteTableCommand,
  DescribeTimeToLiveCommand,
  DynamoDBClient,
  GetItemCommand,
  ListTablesCommand,
  ResourceInUseException,
  ScanCommand,
  UpdateTimeToLiveCommand,
  type AttributeValue,
  type DynamoDBClientConfig,
} from '@aws-sdk/client-dynamodb';
import { CONTROL_TABLE_KEY } from '../../functions/shared/adapters/dynamodb-pace-store.js';
import { DEFAULT_CONNECTION } from '../../functions/shared/connections/connection.js';
import { CHANGES_TABLE_PARTITION_KEY, CHANGES_TABLE_SORT_KEY, CHANGES_TABLE_TTL_ATTRIBUTE } from '../../infra/storage/changes-table.js';
import { LOCAL_PAGE_ROWS, namespaceCredentials, startDynamoDbLocal, type DynamoDbLocalServer } from './dynamodb-local.js';
import { ensureItemsTable, waitUntilActive } from './items-table.js';
import { LOCAL_REGION, RUN_ENDPOINT_VARIABLE, withoutSdkLogger } from './local-aws.js';
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
  /**
   * The reason of the actions `actions` names; default TransactionConflict. ValidationError is
   * DynamoDB's refusal of a row over 400 KB (a size the item sync's estimate should never let through).
   */
  code?: 'TransactionConflict' | 'ThrottlingError' | 'ProvisionedThroughputExceeded' | 'ValidationError';
  /** The positions (from 0) in TransactItems of the actions with that reason, the others `None`; default every action. */
  actions?: number[];
}

/** DynamoDB's reason messages in a TransactionCanceledException, as AWS words them. */
export const REASON_MESSAGES: Record<NonNullable<CancelRule['code']>, string> = {
  ValidationError: 'Item size has exceeded the maximum allowed size',
  TransactionConflict: 'Transaction is ongoing for the item',
  ThrottlingError:
    'Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly. ' +
    'If exceptions persist, check if you have a hot key: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html',
  ProvisionedThroughputExceeded:
    'The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API',
};

export interface StartOptions {
  /** Keeps the tables in files in this folder (a server of its own, created if need be); in memory when undefined. */
  path?: string;
  /** With `path`: the folder goes when the server stops, however the run ends (a run's scratch tables). */
  temporary?: boolean;
  /** A server of its own even when the run shares one. */
  ownServer?: boolean;
  /** The recording and throttling proxy; default true. */
  proxy?: boolean;
  /** The namespace's access key (default a new one): the same key on the same server reaches the same tables. */
  namespace?: string;
  /** A server of its own compiles this way (ServerOptions.jit); default `full`. */
  jit?: 'quick' | 'full';
}

export interface LocalDynamoDb {
  /** `http://127.0.0.1:<port>` (of the proxy, when there is one). */
  endpoint: string;
  /** The credentials of this namespace: a client must sign with them to see its tables. */
  credentials: { accessKeyId: string; secretAccessKey: string };
  region: string;
  /** A client for this endpoint and namespace (the SDK's default retries). */
  client(config?: DynamoDBClientConfig): DynamoDBClient;
  /** The items table (key `connection`, `id`) with its stream (new and old images), as the stateful stack defines it, unless it exists. */
  createItemsTable(tableName: string): Promise<void>;
  /** The connections table (partition key `connection`) with its stream (new and old images), as the stateful stack defines it, unless it exists. */
  createConnectionsTable(tableName: string): Promise<void>;
  /** The control table (the provider pace's row) as the stateful stack defines it, unless it exists. */
  createControlTable(tableName: string): Promise<void>;
  /**
   * The changes table (partition key `connection`, string; sort key `seq`, number) as the stateful
   * stack defines it, unless it exists; its time to live only when `timeToLive` says so.
   * DynamoDB Local deletes expired rows by the wall clock (within seconds): a test or a simulation
   * on a clock of its own would see its rows vanish, so by default the table has no time to live
   * (no simulation shows expiry yet); the local run, on the wall clock, turns it on (on a table
   * kept from an earlier run too, when it has none).
   */
  createChangesTable(tableName: string, options?: { timeToLive?: boolean }): Promise<void>;
  /** Every row of a table, raw AttributeValues, sorted by connection, then id (where the table has them). */
  scan(tableName: string): Promise<Array<Record<string, AttributeValue>>>;
  /** A row of the items table (key `connection`, `id`), strongly consistent. */
  getRow(tableName: string, id: string, connection?: string): Promise<Record<string, AttributeValue> | undefined>;
  /** Deletes this namespace's tables (on a shared server) and stops what it started. */
  close(): Promise<void>;
}

/** DynamoDB Local behind the proxy. */
export interface LocalDynamo extends LocalDynamoDb {
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

export function startLocalDynamo(options: StartOptions & { proxy: false }): Promise<LocalDynamoDb>;
export function startLocalDynamo(options?: StartOptions): Promise<LocalDynamo>;
export async function startLocalDynamo(options: StartOptions = {}): Promise<LocalDynamoDb | LocalDynamo> {
  const shared = process.env[RUN_ENDPOINT_VARIABLE];
  const own: DynamoDbLocalServer | undefined =
    shared === undefined || shared === '' || options.ownServer || options.path !== undefined
      ? await startDynamoDbLocal({ ...(options.jit ? { jit: options.jit } : {}), ...(options.path !== undefined ? { path: options.path, removeOnStop: options.temporary === true } : {}) })
      : undefined;
  const upstream = own ? own.endpoint : (shared as string);
  const credentials = namespaceCredentials(options.namespace);
  const stop = async (): Promise<void> => {
    if (own) await own.close();
  };
  if (options.proxy === false) return withHelpers(upstream, credentials, !own, stop);
  const proxy = await startProxy(Number(new URL(upstream).port));
  const base = withHelpers(proxy.endpoint, credentials, !own, async () => {
    await proxy.close();
    await stop();
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

function withHelpers(
  endpoint: string,
  credentials: LocalDynamoDb['credentials'],
  sharedServer: boolean,
  close: () => Promise<void>,
): LocalDynamoDb {
  const client = (config: DynamoDBClientConfig = {}): DynamoDBClient => withoutSdkLogger(new DynamoDBClient({ endpoint, region: LOCAL_REGION, credentials, ...config }));
  const admin = client();
  return {
    endpoint,
    credentials,
    region: LOCAL_REGION,
    client,
    createItemsTable: async (tableName) => void (await ensureItemsTable(admin, tableName)),
    createControlTable: async (tableName) => void (await createKeyedTable(admin, tableName, CONTROL_TABLE_KEY)),
    createConnectionsTable: async (tableName) => void (await createKeyedTable(admin, tableName, 'connection', undefined, true)),
    async createChangesTable(tableName, options = {}) {
      await createKeyedTable(admin, tableName, CHANGES_TABLE_PARTITION_KEY, { name: CHANGES_TABLE_SORT_KEY, type: 'N' });
      if (options.timeToLive && !(await timeToLiveOn(admin, tableName))) {
        await admin.send(new UpdateTimeToLiveCommand({ TableName: tableName, TimeToLiveSpecification: { AttributeName: CHANGES_TABLE_TTL_ATTRIBUTE, Enabled: true } }));
      }
    },
    async scan(tableName) {
      const rows: Array<Record<string, AttributeValue>> = [];
      let start: Record<string, AttributeValue> | undefined;
      do {
        const page = await admin.send(new ScanCommand({ TableName: tableName, ConsistentRead: true, Limit: LOCAL_PAGE_ROWS, ExclusiveStartKey: start }));
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
      // On a shared server, the namespace's tables go (the run's server lives on, in memory).
      if (sharedServer) await dropTables(admin).catch(() => undefined);
      admin.destroy();
      await close();
    },
  };
}

async function timeToLiveOn(admin: DynamoDBClient, tableName: string): Promise<boolean> {
  const described = await admin.send(new DescribeTimeToLiveCommand({ TableName: tableName }));
  return described.TimeToLiveDescription?.TimeToLiveStatus === 'ENABLED';
}

async function dropTables(admin: DynamoDBClient): Promise<void> {
  let start: string | undefined;
  do {
    const page = await admin.send(new ListTablesCommand({ ExclusiveStartTableName: start }));
    for (const name of page.TableNames ?? []) await admin.send(new DeleteTableCommand({ TableName: name }));
    start = page.LastEvaluatedTableName;
  } while (start);
}

/** A table with one string partition key (and a sort key, when given; its stream of new and old images when asked), unless it exists; true when created. */
async function createKeyedTable(
  admin: DynamoDBClient,
  tableName: string,
  key: string,
  sortKey?: { name: string; type: 'S' | 'N' },
  stream = false,
): Promise<boolean> {
  let created = true;
  try {
    await admin.send(
      new CreateTableCommand({
        TableName: tableName,
        AttributeDefinitions: [{ AttributeName: key, AttributeType: 'S' }, ...(sortKey ? [{ AttributeName: sortKey.name, AttributeType: sortKey.type }] : [])],
        KeySchema: [{ AttributeName: key, KeyType: 'HASH' }, ...(sortKey ? [{ AttributeName: sortKey.name, KeyType: 'RANGE' as const }] : [])],
        BillingMode: 'PAY_PER_REQUEST',
        ...(stream ? { StreamSpecification: { StreamEnabled: true, StreamViewType: 'NEW_AND_OLD_IMAGES' as const } } : {}),
      }),
    );
  } catch (error) {
    if (!(error instanceof ResourceInUseException)) throw error;
    created = false;
  }
  await waitUntilActive(admin, tableName);
  return created;
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
        const reasons: Array<{ Code: string; Message?: string }> = Array.from({ length: actions }, (_, i) =>
          cancelRule.actions === undefined || cancelRule.actions.includes(i) ? { Code: code, Message: REASON_MESSAGES[code] } : { Code: 'None' },
        );
        const body = JSON.stringify({
          __type: 'com.amazonaws.dynamodb.v20120810#TransactionCanceledException',
          CancellationReasons: reasons,
          Message: `Transaction cancelled, please refer cancellation reasons for specific reasons [${reasons.map((reason) => reason.Code).join(', ')}]`,
        });
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
