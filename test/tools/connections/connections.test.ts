/**
 * The connections CLI (tools/connections) run through runCli against DynamoDB Local and s3rver on
 * 127.0.0.1: every command, the deployment's settings from flags or variables, the refresh token
 * from standard input (never printed) and sealed under the connections key before it is stored,
 * bad ids, empty tokens, unknown connections, the purge's confirmation and erase, the sealing of
 * tokens stored in clear, the upgrade's import.
 */
import { PassThrough, Readable, Writable } from 'node:stream';
import { CreateTableCommand, GetItemCommand, PutItemCommand, QueryCommand, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startLocalDynamo, type LocalDynamoDb } from '../../../dev/fakes/local-dynamo.js';
import { startS3, type LocalS3 } from '../../../dev/fakes/s3.js';
import { DynamoDbConnectionStore } from '../../../functions/shared/adapters/dynamodb-connection-store.js';
import { PURGE_SETTLE_SECONDS, runCli, s3ClientConfig, USAGE } from '../../../tools/connections/connections.js';
import { DEFAULTS } from '../../../functions/shared/config.js';
import { syncTimeoutSeconds } from '../../../infra/context.js';
import { ensureItemsTable, waitUntilActive } from '../../../dev/fakes/items-table.js';
import { DynamoDbCursorStore } from '../../../functions/reconciler/adapters/dynamodb-cursor-store.js';
import { testSealing } from '../../support/sealer.js';

const sealing = testSealing();

const RT = 'rt-cli-secret-0001';
const BUCKET = 'content-sync-items';
const NOW = Date.parse('2026-11-24T10:00:00.000Z');

let dynamo: LocalDynamoDb;
let db: DynamoDBClient;
let s3: LocalS3;
let s3Client: S3Client;
let n = 0;
let connectionsTable: string;
let itemsTable: string;
let changesTable: string;
let sleeps: number[];
/** Everything any run printed, checked for tokens at the end. */
const printed: string[] = [];

beforeAll(async () => {
  dynamo = await startLocalDynamo({ proxy: false });
  db = dynamo.client();
  s3 = await startS3();
  s3Client = s3.client();
  await s3.createBucket(BUCKET);
});

afterAll(async () => {
  for (const text of printed) expect(text).not.toMatch(/rt-[a-z-]*secret/);
  db?.destroy();
  s3Client?.destroy();
  await dynamo?.close();
  await s3?.close();
});

beforeEach(async () => {
  n += 1;
  connectionsTable = `connections-${n}`;
  itemsTable = `items-${n}`;
  changesTable = `changes-${n}`;
  sleeps = [];
  await dynamo.createConnectionsTable(connectionsTable);
  await ensureItemsTable(db, itemsTable);
  await dynamo.createChangesTable(changesTable);
});

interface Run {
  status: number;
  out: string;
  err: string;
}

/** The stacks DescribeStacks was asked for, in order. */
const stacksRead: string[] = [];

/** No stack deployed: DescribeStacks fails as CloudFormation does for an unknown stack. */
async function noStack(stackName: string): Promise<Record<string, string>> {
  stacksRead.push(stackName);
  throw Object.assign(new Error(`Stack with id ${stackName} does not exist`), { name: 'ValidationError' });
}

async function cli(
  argv: string[],
  options: {
    stdin?: string | NodeJS.ReadableStream;
    env?: NodeJS.ProcessEnv;
    now?: number;
    stackOutputs?: (stackName: string) => Promise<Record<string, string>>;
    dynamodb?: DynamoDBClient;
    s3?: S3Client;
    /** Called at each wait (after it is recorded in `sleeps`). */
    onSleep?: (ms: number) => Promise<void>;
  } = {},
): Promise<Run> {
  let out = '';
  let err = '';
  const stdin = typeof options.stdin === 'object' ? options.stdin : Readable.from(options.stdin === undefined ? [] : [Buffer.from(options.stdin, 'utf8')]);
  const io = {
    stdin,
    stdout: new Writable({ write: (chunk, _enc, cb) => ((out += String(chunk)), cb()) }),
    stderr: new Writable({ write: (chunk, _enc, cb) => ((err += String(chunk)), cb()) }),
  };
  const env = options.env ?? { CONNECTIONS_TABLE_NAME: connectionsTable, CONNECTIONS_KEY_ARN: sealing.keyArn, ITEMS_TABLE_NAME: itemsTable, ITEMS_BUCKET_NAME: BUCKET, CHANGES_TABLE_NAME: changesTable };
  const status = await runCli(argv, io, {
    dynamodb: options.dynamodb ?? db,
    s3: options.s3 ?? s3Client,
    kms: sealing.kms,
    env,
    stackOutputs: options.stackOutputs ?? noStack,
    clock: { now: () => new Date(options.now ?? NOW) },
    sleep: async (ms) => {
      sleeps.push(ms);
      await options.onSleep?.(ms);
    },
  });
  printed.push(out, err);
  return { status, out, err };
}

/** The connection's rows in the items table (`connection` is a DynamoDB reserved word: aliased). */
async function itemsOf(connection: string) {
  return db.send(
    new QueryCommand({
      TableName: itemsTable,
      KeyConditionExpression: '#c = :c',
      ExpressionAttributeNames: { '#c': 'connection' },
      ExpressionAttributeValues: { ':c': { S: connection } },
      ConsistentRead: true,
    }),
  );
}

const store = (): DynamoDbConnectionStore => new DynamoDbConnectionStore(db, connectionsTable, { sealer: sealing.sealer });

/**
 * Clients for one CLI run that do something else once, right after the first command of a name
 * has been answered (a sync writing while the purge deletes, an operator adding the connection back).
 */
function racingClients(after: Partial<Record<'BatchWriteItemCommand' | 'DeleteObjectsCommand', () => Promise<void>>>): { dynamodb: DynamoDBClient; s3: S3Client } {
  const done = new Set<string>();
  const hook =
    (next: (args: unknown) => Promise<unknown>, context: { commandName?: string }) =>
    async (args: unknown): Promise<unknown> => {
      const result = await next(args);
      const name = context.commandName as keyof typeof after | undefined;
      const then = name === undefined ? undefined : after[name];
      if (name !== undefined && then && !done.has(name)) {
        done.add(name);
        await then();
      }
      return result;
    };
  const dynamodb = dynamo.client();
  const s3Racing = s3.client();
  dynamodb.middlewareStack.add(hook as never, { step: 'initialize', name: 'racingHook' });
  s3Racing.middlewareStack.add(hook as never, { step: 'initialize', name: 'racingHook' });
  return { dynamodb, s3: s3Racing };
}

async function itemRow(connection: string, id: string, extra: Record<string, AttributeValue> = {}): Promise<void> {
  await db.send(new PutItemCommand({ TableName: itemsTable, Item: { connection: { S: connection }, id: { S: id }, type: { S: 'file' }, revision: { S: '1' }, ...extra } }));
}

describe('add', () => {
  it('adds a connection from the refresh token on standard input (trimmed), then replaces its credentials', async () => {
    const added = await cli(['add', 'acme', '--client-id', 'client-1'], { stdin: `  ${RT}\n` });
    expect(added).toMatchObject({ status: 0, err: '' });
    expect(added.out).toMatch(/^connection "acme" added \(client id "client-1"\): active/);
    expect(await store().get('acme', { consistent: true })).toMatchObject({ clientId: 'client-1', refreshToken: RT, status: 'active', credentialsVersion: 1 });

    const replaced = await cli(['add', 'acme', '--client-id', 'client-2'], { stdin: 'rt-cli-secret-0002' });
    expect(replaced.status).toBe(0);
    expect(replaced.out).toMatch(/credentials replaced \(client id "client-2"\); active, refresh health reset/);
    expect(await store().get('acme', { consistent: true })).toMatchObject({ clientId: 'client-2', refreshToken: 'rt-cli-secret-0002', credentialsVersion: 2 });
  });

  it('an empty token, a token that cannot go in a header, a bad id, no --client-id: usage errors (2), nothing written, no token printed', async () => {
    for (const stdin of ['', '  \n\t ']) {
      const run = await cli(['add', 'acme', '--client-id', 'client-1'], { stdin });
      expect(run.status).toBe(2);
      expect(run.err).toMatch(/^connections: no refresh token on standard input/);
    }
    const spaced = await cli(['add', 'acme', '--client-id', 'client-1'], { stdin: 'rt-cli secret-x' });
    expect(spaced.status).toBe(2);
    expect(spaced.err).toMatch(/the refresh token holds whitespace or a control character at position 7 \(it is not shown\)/);
    expect(spaced.err).not.toContain('secret-x');
    const badId = await cli(['add', 'a/b', '--client-id', 'client-1'], { stdin: RT });
    expect(badId).toMatchObject({ status: 2, err: 'connections: bad connection id: the connection id may hold only the characters A-Z a-z 0-9 . _ -\nRun with --help for usage.\n' });
    const dots = await cli(['add', '..', '--client-id', 'client-1'], { stdin: RT });
    expect(dots).toMatchObject({ status: 2, err: 'connections: bad connection id: the connection id may not be made of dots only\nRun with --help for usage.\n' });
    expect((await cli(['add', 'x'.repeat(65), '--client-id', 'c'], { stdin: RT })).err).toMatch(/65 characters long; the limit is 64/);
    expect((await cli(['add', 'acme'], { stdin: RT })).err).toMatch(/add needs --client-id/);
    expect((await cli(['add', 'acme', '--client-id', ' '], { stdin: RT })).err).toMatch(/--client-id: the client id is empty/);
    expect(await store().get('acme', { consistent: true })).toBeUndefined();
  });

  it('at a terminal: the token is typed without echo (raw mode), Backspace erases, Enter ends it', async () => {
    const modes: boolean[] = [];
    const terminal = Object.assign(new PassThrough(), { isTTY: true, setRawMode: (mode: boolean) => void modes.push(mode) });
    const running = cli(['add', 'acme', '--client-id', 'client-1'], { stdin: terminal });
    for (const key of ['rt-typed-secreX', '\u007f', 't', '\r']) terminal.write(key);
    const run = await running;
    expect(run.status).toBe(0);
    expect(modes).toEqual([true, false]);
    expect(run.err).toBe('Refresh token of connection "acme" (not shown): \n');
    expect((await store().get('acme'))?.refreshToken).toBe('rt-typed-secret');
  });

  it('the connections table from --connections-table, else CONNECTIONS_TABLE_NAME, else the stack; none: an error naming all three', async () => {
    stacksRead.length = 0;
    const none = await cli(['add', 'acme', '--client-id', 'c'], { stdin: RT, env: {} });
    // The stack could not be read: a failure (1), with the whole reason.
    expect(none).toMatchObject({ status: 1 });
    expect(none.err).toBe(
      'connections: the connections table is not known: give --connections-table, set CONNECTIONS_TABLE_NAME, or name the deployment with --stage or --stack (reading the stack ContentSyncStateful failed: ValidationError: Stack with id ContentSyncStateful does not exist)\n',
    );
    expect(stacksRead).toEqual(['ContentSyncStateful']);
    expect((await cli(['add', 'acme', '--client-id', 'c', '--connections-table', connectionsTable], { stdin: RT, env: { CONNECTIONS_KEY_ARN: sealing.keyArn } })).status).toBe(0);
    expect((await store().get('acme'))?.clientId).toBe('c');
  });

  it('with neither flag nor variable, the tables from the stateful stack\'s outputs (--stack names it)', async () => {
    const asked: string[] = [];
    const outputs = async (stackName: string) => {
      asked.push(stackName);
      return { ConnectionsTableName: connectionsTable, ConnectionsKeyArn: sealing.keyArn, ItemsTableName: itemsTable, ItemsBucketName: BUCKET };
    };
    const added = await cli(['add', 'acme', '--client-id', 'from-stack', '--stack', 'MySync'], { stdin: RT, env: {}, stackOutputs: outputs });
    expect(added.status).toBe(0);
    expect((await store().get('acme'))?.clientId).toBe('from-stack');
    expect(asked).toEqual(['MySync']);
    // A flag wins over the stack, which is then not read at all.
    asked.length = 0;
    expect((await cli(['pause', 'acme', '--connections-table', connectionsTable], { env: {}, stackOutputs: outputs })).status).toBe(0);
    expect(asked).toEqual([]);
    // list also looks for the control table (the last passes): the stack is read for it alone.
    expect((await cli(['list', '--connections-table', connectionsTable], { env: {}, stackOutputs: outputs })).status).toBe(0);
    expect(asked).toEqual(['ContentSyncStateful']);
    // A stack without the output: the error says which output is missing.
    const bare = await cli(['list'], { env: {}, stackOutputs: async () => ({}) });
    expect(bare).toMatchObject({ status: 2, err: expect.stringMatching(/the stack ContentSyncStateful has no output ConnectionsTableName/) });
  });

  it('--stage names the deployment: its stateful stack ContentSyncStateful-<stage>; a bad stage, or both --stage and --stack, is a usage error', async () => {
    const asked: string[] = [];
    const outputs = async (stackName: string) => {
      asked.push(stackName);
      return { ConnectionsTableName: connectionsTable, ControlTableName: 'no-such-control-table' };
    };
    const added = await cli(['add', 'acme', '--client-id', 'staged', '--stage', 'staging', '--connections-key', sealing.keyArn], { stdin: RT, env: {}, stackOutputs: outputs });
    expect(added.status).toBe(0);
    expect((await store().get('acme'))?.clientId).toBe('staged');
    expect(asked).toEqual(['ContentSyncStateful-staging']);

    asked.length = 0;
    for (const [argv, message] of [
      [['list', '--stage', 'Staging'], 'connections: --stage: must be 1 to 20 of a-z 0-9 - (it names the stacks ContentSyncStateful-<stage> and ContentSyncStateless-<stage>), got "Staging"'],
      [['list', '--stage', 'x'.repeat(21)], `connections: --stage: must be 1 to 20 of a-z 0-9 - (it names the stacks ContentSyncStateful-<stage> and ContentSyncStateless-<stage>), got "${'x'.repeat(21)}"`],
      [['pause', 'acme', '--stage', 'staging', '--stack', 'MySync'], 'connections: give --stage or --stack, not both'],
    ] as const) {
      const run = await cli([...argv], { env: {}, stackOutputs: outputs });
      expect(run).toMatchObject({ status: 2, err: `${message}\nRun with --help for usage.\n` });
    }
    expect(asked).toEqual([]);
    expect((await cli(['--help'])).out).toMatch(/--stage <stage> +the deployment whose stateful stack's outputs are read/);
  });

  it('a stack that cannot be read: a failure (1) with the whole reason, before the refresh token is read', async () => {
    const refused = async (): Promise<Record<string, string>> => {
      throw Object.assign(new Error('The security token included in the request is expired'), { name: 'ExpiredTokenException' });
    };
    const stdin = Readable.from([Buffer.from('rt-never-read', 'utf8')]);
    const run = await cli(['add', 'acme', '--client-id', 'c', '--stage', 'staging'], { stdin, env: {}, stackOutputs: refused });
    expect(run).toEqual({
      status: 1,
      out: '',
      err: 'connections: the connections table is not known: give --connections-table, set CONNECTIONS_TABLE_NAME, or name the deployment with --stage or --stack (reading the stack ContentSyncStateful-staging failed: ExpiredTokenException: The security token included in the request is expired)\n',
    });
    expect(stdin.readableEnded).toBe(false);
    expect(await store().get('acme')).toBeUndefined();
  });

  it('a table that does not exist: a failure (1) that says so', async () => {
    const run = await cli(['add', 'acme', '--client-id', 'c', '--connections-table', 'no-such-table', '--connections-key', sealing.keyArn], { stdin: RT, env: {} });
    expect(run.status).toBe(1);
    // The connection's row is read first (the same credentials again change nothing).
    expect(run.err).toMatch(/ConfigError: --connections-table or CONNECTIONS_TABLE_NAME: DynamoDB GetItem on the connections table no-such-table failed \(ResourceNotFoundException/);
  });

  it('the token is sealed under the connections key: a raw read of the table holds it nowhere; the store opens it', async () => {
    await cli(['add', 'acme', '--client-id', 'client-1'], { stdin: RT });
    await cli(['add', 'beta', '--client-id', 'client-1'], { stdin: 'rt-beta-secret' });
    const rows = await dynamo.scan(connectionsTable);
    expect(rows.map((row) => row['connection']?.S)).toEqual(['acme', 'beta']);
    const raw = JSON.stringify(rows);
    expect(raw).not.toContain(RT);
    expect(raw).not.toContain('rt-beta-secret');
    expect(raw).not.toMatch(/secret/);
    for (const row of rows) expect(row['refreshToken']?.S).toMatch(/^cs-sealed-v1 /);
    expect((await store().get('acme', { consistent: true }))?.refreshToken).toBe(RT);
    expect((await store().get('beta', { consistent: true }))?.refreshToken).toBe('rt-beta-secret');
  });

  it('the connections key from --connections-key, else CONNECTIONS_KEY_ARN, else the stack; none: an error naming all three, before the token is read, nothing written', async () => {
    const env = { CONNECTIONS_TABLE_NAME: connectionsTable };
    // The stack cannot be read: a failure (1), with the whole reason.
    stacksRead.length = 0;
    const unread = Readable.from([Buffer.from('rt-never-read-1', 'utf8')]);
    const failed = await cli(['add', 'acme', '--client-id', 'c'], { stdin: unread, env });
    expect(failed).toEqual({
      status: 1,
      out: '',
      err: 'connections: the connections key is not known: give --connections-key, set CONNECTIONS_KEY_ARN, or name the deployment with --stage or --stack (reading the stack ContentSyncStateful failed: ValidationError: Stack with id ContentSyncStateful does not exist)\n',
    });
    expect(stacksRead).toEqual(['ContentSyncStateful']);
    expect(unread.readableEnded).toBe(false);
    // The stack holds no such output: a usage error (2).
    const bare = Readable.from([Buffer.from('rt-never-read-2', 'utf8')]);
    const missing = await cli(['add', 'acme', '--client-id', 'c', '--stack', 'MySync'], { stdin: bare, env, stackOutputs: async () => ({ ConnectionsTableName: connectionsTable }) });
    expect(missing).toEqual({
      status: 2,
      out: '',
      err: 'connections: the connections key is not known: give --connections-key, set CONNECTIONS_KEY_ARN, or name the deployment with --stage or --stack (the stack MySync has no output ConnectionsKeyArn)\nRun with --help for usage.\n',
    });
    expect(bare.readableEnded).toBe(false);
    expect(await dynamo.scan(connectionsTable)).toEqual([]);

    // Each way gives it; the flag wins over the variable, the variable over the stack.
    expect((await cli(['add', 'acme', '--client-id', 'flag', '--connections-key', sealing.keyArn], { stdin: RT, env: { ...env, CONNECTIONS_KEY_ARN: 'arn:aws:kms:us-east-1:000000000000:key/not-this-one' } })).status).toBe(0);
    expect((await store().get('acme', { consistent: true }))?.clientId).toBe('flag');
    expect((await cli(['add', 'acme', '--client-id', 'variable'], { stdin: RT, env: { ...env, CONNECTIONS_KEY_ARN: sealing.keyArn }, stackOutputs: async () => ({ ConnectionsKeyArn: 'arn:aws:kms:us-east-1:000000000000:key/not-this-one' }) })).status).toBe(0);
    expect((await store().get('acme', { consistent: true }))?.clientId).toBe('variable');
    expect((await cli(['add', 'acme', '--client-id', 'stack'], { stdin: RT, env, stackOutputs: async () => ({ ConnectionsKeyArn: sealing.keyArn }) })).status).toBe(0);
    expect((await store().get('acme', { consistent: true }))?.clientId).toBe('stack');

    // The commands that seal no token do not need it.
    expect((await cli(['list', '--json'], { env })).status).toBe(0);
    expect((await cli(['remove', 'acme'], { env })).status).toBe(0);
  });

  it('the very same credentials again on an active connection: nothing changed, and it says so', async () => {
    await cli(['add', 'acme', '--client-id', 'client-1'], { stdin: RT });
    const before = await store().get('acme', { consistent: true });
    expect(before).toMatchObject({ status: 'active', credentialsVersion: 1 });
    const again = await cli(['add', 'acme', '--client-id', 'client-1'], { stdin: `${RT}\n`, now: NOW + 60_000 });
    expect(again).toEqual({ status: 0, out: 'connection "acme" already holds these credentials (client id "client-1") and is active: nothing changed\n', err: '' });
    expect(await store().get('acme', { consistent: true })).toEqual(before);
    // Another client id, or a connection not active: the credentials are put again.
    expect((await cli(['add', 'acme', '--client-id', 'client-2'], { stdin: RT })).out).toMatch(/credentials replaced \(client id "client-2"\)/);
    expect((await store().get('acme', { consistent: true }))?.credentialsVersion).toBe(2);
    await cli(['pause', 'acme']);
    expect((await cli(['add', 'acme', '--client-id', 'client-2'], { stdin: RT })).out).toMatch(/credentials replaced \(client id "client-2"\); active/);
    expect(await store().get('acme', { consistent: true })).toMatchObject({ status: 'active', credentialsVersion: 3 });
  });
});

describe('list', () => {
  it('prints status, refresh health, ids known and last write; --json the same without any token', async () => {
    expect(await cli(['list'])).toMatchObject({ status: 0, out: '', err: expect.stringMatching(/^no connections/) });
    await cli(['add', 'beta', '--client-id', 'client-1'], { stdin: 'rt-beta-secret' });
    await cli(['add', 'acme', '--client-id', 'client-1'], { stdin: RT });
    const s = store();
    await s.takeRefreshLease('acme', { owner: 'o', until: NOW + 1000, now: NOW });
    await s.completeRefresh({ connection: 'acme', owner: 'o', credentialsVersion: 1, accessToken: 'at-acme-secret', refreshedAt: '2026-11-24T09:00:00.000Z' });
    await s.takeRefreshLease('beta', { owner: 'o', until: NOW + 1000, now: NOW });
    await s.failRefresh({ connection: 'beta', owner: 'o', credentialsVersion: 1, at: '2026-11-24T09:30:00.000Z', reason: 'getToken: the provider refused the credentials; HTTP 401', refused: true });
    await db.send(new PutItemCommand({ TableName: connectionsTable, Item: { ...(await rawRow('acme')), idsKnown: { N: '1234' }, lastWriteAt: { S: '2026-11-24T09:45:00.000Z' } } }));

    const table = await cli(['list']);
    expect(table.status).toBe(0);
    expect(table.out.split('\n')).toEqual([
      'CONNECTION  STATUS   LAST SUCCESS              LAST FAILURE                                                                       FAILURES  IDS KNOWN  LAST WRITE                LAST PASS',
      'acme        active   2026-11-24T09:00:00.000Z  -                                                                                  0         1234       2026-11-24T09:45:00.000Z  -',
      'beta        failing  -                         2026-11-24T09:30:00.000Z getToken: the provider refused the credentials; HTTP 401  1         -          -                         -',
      '',
    ]);
    const json = await cli(['list', '--json']);
    const parsed = JSON.parse(json.out) as Array<Record<string, unknown>>;
    expect(parsed.map((c) => c['connection'])).toEqual(['acme', 'beta']);
    // Each connection's view (functions/shared/connections/view.ts): no control table known here, so no last pass.
    expect(parsed[0]).toEqual({
      connection: 'acme',
      clientId: 'client-1',
      status: 'active',
      refresh: { consecutiveFailures: 0, lastSuccessAt: '2026-11-24T09:00:00.000Z' },
      idsKnown: 1234,
      lastWriteAt: '2026-11-24T09:45:00.000Z',
      fresh: false,
      createdAt: new Date(NOW).toISOString(),
      updatedAt: '2026-11-24T09:00:00.000Z',
    });
    expect(parsed[1]).toEqual({
      connection: 'beta',
      clientId: 'client-1',
      status: 'failing',
      refresh: { consecutiveFailures: 1, lastFailureAt: '2026-11-24T09:30:00.000Z', lastFailureReason: 'getToken: the provider refused the credentials; HTTP 401' },
      fresh: false,
      createdAt: new Date(NOW).toISOString(),
      updatedAt: '2026-11-24T09:30:00.000Z',
    });
    expect(json.out).not.toContain('at-acme-secret');
    expect(table.out + json.out).not.toMatch(/secret/);
  });
});

describe('list: each connection\'s last reconciliation pass', () => {
  const at = (iso: string): number => Date.parse(iso);
  let controlTable: string;
  beforeEach(async () => {
    controlTable = `control-${n}`;
    await dynamo.createControlTable(controlTable);
  });
  const cursors = (): DynamoDbCursorStore => new DynamoDbCursorStore(db, controlTable);
  /** Pass 1 ran 08:00-09:00, pass 2 started 09:30 and ended 09:50 (the cursor holds both). */
  async function twoPasses(): Promise<void> {
    expect(await cursors().startPass({ pass: 1, startedAt: at('2026-11-24T08:00:00.000Z'), segments: [{ done: false, version: 0, ids: 0 }] }, undefined)).toBe('written');
    expect(await cursors().endPass(1, at('2026-11-24T09:00:00.000Z'))).toBe('written');
    const previous = { pass: 1, startedAt: at('2026-11-24T08:00:00.000Z'), endedAt: at('2026-11-24T09:00:00.000Z'), ids: 10 };
    expect(await cursors().startPass({ pass: 2, startedAt: at('2026-11-24T09:30:00.000Z'), segments: [{ done: false, version: 0, ids: 0 }], previous }, 1)).toBe('written');
    expect(await cursors().endPass(2, at('2026-11-24T09:50:00.000Z'))).toBe('written');
  }

  it('the latest ended pass that started after the connection was added; none for one added since', async () => {
    await cli(['add', 'early', '--client-id', 'c'], { stdin: RT, now: at('2026-11-24T07:00:00.000Z') });
    await cli(['add', 'middle', '--client-id', 'c'], { stdin: RT, now: at('2026-11-24T09:10:00.000Z') });
    await cli(['add', 'late', '--client-id', 'c'], { stdin: RT, now: at('2026-11-24T09:40:00.000Z') });
    await twoPasses();
    const env = { CONNECTIONS_TABLE_NAME: connectionsTable, CONTROL_TABLE_NAME: controlTable };
    const table = await cli(['list'], { env });
    expect(table).toMatchObject({ status: 0, err: '' });
    const lines = table.out.trim().split('\n');
    expect(lines[0]).toMatch(/LAST WRITE  LAST PASS$/);
    expect(lines.slice(1).map((line) => [line.split(/\s+/)[0], line.split(/\s+/).pop()])).toEqual([
      ['early', '2026-11-24T09:50:00.000Z'],
      ['late', '-'],
      ['middle', '2026-11-24T09:50:00.000Z'],
    ]);
    // lastPassAt: when pass 2 ended; fresh: it ended within freshnessHours (24) of the CLI's clock (10:00).
    const json = JSON.parse((await cli(['list', '--json'], { env })).out) as Array<Record<string, unknown>>;
    expect(json.map((c) => [c['connection'], c['lastPassAt'], c['fresh']])).toEqual([
      ['early', '2026-11-24T09:50:00.000Z', true],
      ['late', undefined, false],
      ['middle', '2026-11-24T09:50:00.000Z', true],
    ]);
    expect(json[1]).not.toHaveProperty('lastPassAt');
    // freshnessHours after the pass ended it is still fresh; a moment later it is not.
    expect(DEFAULTS.freshnessHours).toBe(24);
    const freshness = async (now: number) =>
      (JSON.parse((await cli(['list', '--json'], { env, now })).out) as Array<Record<string, unknown>>).map((c) => [c['lastPassAt'], c['fresh']]);
    const endedAt = at('2026-11-24T09:50:00.000Z');
    expect(await freshness(endedAt + 24 * 3_600_000)).toEqual([
      ['2026-11-24T09:50:00.000Z', true],
      [undefined, false],
      ['2026-11-24T09:50:00.000Z', true],
    ]);
    expect(await freshness(endedAt + 24 * 3_600_000 + 1)).toEqual([
      ['2026-11-24T09:50:00.000Z', false],
      [undefined, false],
      ['2026-11-24T09:50:00.000Z', false],
    ]);
  });

  it('while a pass runs, the one before it; the control table from --control-table or the stack\'s output', async () => {
    await cli(['add', 'early', '--client-id', 'c'], { stdin: RT, now: at('2026-11-24T07:00:00.000Z') });
    await cli(['add', 'middle', '--client-id', 'c'], { stdin: RT, now: at('2026-11-24T09:10:00.000Z') });
    await twoPasses();
    const previous = { pass: 2, startedAt: at('2026-11-24T09:30:00.000Z'), endedAt: at('2026-11-24T09:50:00.000Z'), ids: 10 };
    expect(await cursors().startPass({ pass: 3, startedAt: at('2026-11-24T10:00:00.000Z'), segments: [{ done: false, version: 0, ids: 0 }], previous }, 2)).toBe('written');
    // Pass 2 (09:30-09:50), not pass 1 (ended 09:00) nor pass 3 (running).
    const flagged = await cli(['list', '--json', '--control-table', controlTable]);
    expect((JSON.parse(flagged.out) as Array<Record<string, unknown>>).map((c) => c['lastPassAt'])).toEqual(['2026-11-24T09:50:00.000Z', '2026-11-24T09:50:00.000Z']);
    const fromStack = await cli(['list', '--json'], { env: { CONNECTIONS_TABLE_NAME: connectionsTable }, stackOutputs: async () => ({ ControlTableName: controlTable }) });
    expect(fromStack.err).toBe('');
    expect((JSON.parse(fromStack.out) as Array<Record<string, unknown>>).map((c) => c['lastPassAt'])).toEqual(['2026-11-24T09:50:00.000Z', '2026-11-24T09:50:00.000Z']);
  });

  it('no control table known, or none readable: the list without its last passes, and a line that says why', async () => {
    await cli(['add', 'acme', '--client-id', 'c'], { stdin: RT });
    const unknown = await cli(['list']);
    expect(unknown.status).toBe(0);
    expect(unknown.out).toMatch(/^acme .* -\n$/m);
    expect(unknown.err).toBe(
      'last reconciliation passes not shown: the control table is not known: give --control-table, set CONTROL_TABLE_NAME, or name the deployment with --stage or --stack (reading the stack ContentSyncStateful failed: ValidationError: Stack with id ContentSyncStateful does not exist)\n',
    );
    const missing = await cli(['list', '--json', '--control-table', 'no-such-table']);
    expect(missing.status).toBe(0);
    expect((JSON.parse(missing.out) as Array<Record<string, unknown>>)[0]).not.toHaveProperty('lastPassAt');
    expect((JSON.parse(missing.out) as Array<Record<string, unknown>>)[0]).toMatchObject({ connection: 'acme', fresh: false });
    expect(missing.err).toMatch(/^last reconciliation passes not shown: reading the control table failed: ResourceNotFoundException/);
  });
});

async function rawRow(connection: string): Promise<Record<string, AttributeValue>> {
  return (await db.send(new GetItemCommand({ TableName: connectionsTable, Key: { connection: { S: connection } }, ConsistentRead: true }))).Item!;
}

describe('pause and resume', () => {
  it('pause, pause again, resume, resume again; unknown connections fail', async () => {
    await cli(['add', 'acme', '--client-id', 'c'], { stdin: RT });
    expect(await cli(['pause', 'acme'])).toMatchObject({ status: 0, out: 'connection "acme" paused: its messages wait (nothing is lost) until it is resumed\n' });
    expect((await store().get('acme'))?.status).toBe('paused');
    expect(await cli(['pause', 'acme'])).toMatchObject({ status: 0, out: 'connection "acme" is already paused\n' });
    expect(await cli(['resume', 'acme'])).toMatchObject({ status: 0, out: 'connection "acme" resumed: active\n' });
    expect(await cli(['resume', 'acme'])).toMatchObject({ status: 0, out: 'connection "acme" is already active\n' });
    for (const command of ['pause', 'resume', 'remove']) {
      expect(await cli([command, 'nobody'])).toMatchObject({ status: 1, err: 'connections: unknown connection "nobody": npm run connections -- list shows the connections\n' });
    }
  });

  it('pause, resume or remove of a connection whose erase was asked for: it is being erased, and list shows how far', async () => {
    await cli(['add', 'acme', '--client-id', 'c'], { stdin: RT });
    await cli(['remove', 'acme']);
    expect(await store().requestErase('acme', { startedAt: new Date(NOW).toISOString(), notBefore: new Date(NOW + 150_000).toISOString() })).toBe('written');
    for (const command of ['pause', 'resume', 'remove']) {
      expect(await cli([command, 'acme'])).toMatchObject({ status: 1, err: 'connections: connection "acme" is being erased (npm run connections -- list shows how far)\n' });
    }
  });

  it('resume of a failing connection: an error that says to add it again with new credentials', async () => {
    await cli(['add', 'acme', '--client-id', 'client-7'], { stdin: RT });
    const s = store();
    await s.takeRefreshLease('acme', { owner: 'o', until: NOW + 1000, now: NOW });
    await s.failRefresh({ connection: 'acme', owner: 'o', credentialsVersion: 1, at: new Date(NOW).toISOString(), reason: 'getToken: HTTP 401', refused: true });
    const run = await cli(['resume', 'acme']);
    expect(run.status).toBe(1);
    expect(run.err).toContain('connection "acme" is failing, not paused: the provider refused its refresh token (getToken: HTTP 401); resume does not apply; add it again with new credentials');
    expect(run.err).toContain('npm run connections -- add acme --client-id client-7');
  });
});

describe('remove', () => {
  it('without --purge: removed, tokens deleted, rows kept; a removed connection cannot be resumed', async () => {
    await cli(['add', 'acme', '--client-id', 'c'], { stdin: RT });
    await itemRow('acme', 'fil-1');
    const run = await cli(['remove', 'acme']);
    expect(run).toMatchObject({ status: 0, out: expect.stringMatching(/^connection "acme" removed: its messages are dead-lettered from now on; its tokens are deleted/) });
    expect(JSON.stringify(await rawRow('acme'))).not.toContain(RT);
    expect((await store().get('acme'))?.status).toBe('removed');
    expect((await itemsOf('acme')).Count).toBe(1);
    expect((await cli(['resume', 'acme'])).err).toMatch(/was removed: it cannot be resumed/);
  });

  it('--purge asks first: a wrong answer changes nothing', async () => {
    await cli(['add', 'acme', '--client-id', 'c'], { stdin: RT });
    await itemRow('acme', 'fil-1');
    const run = await cli(['remove', 'acme', '--purge'], { stdin: 'acm\n' });
    expect(run.status).toBe(1);
    expect(run.err).toMatch(/Type the connection id to confirm: connections: not confirmed \(the answer was not "acme"\): nothing was changed/);
    expect((await store().get('acme'))?.status).toBe('active');
    expect(await cli(['remove', 'acme', '--purge'], { stdin: '' })).toMatchObject({ status: 1 });
  });

  it("--purge: deletes the connection's rows, its objects (and those its rows point to), then its row; others' are kept", async () => {
    await cli(['add', 'acme', '--client-id', 'c'], { stdin: RT });
    await cli(['add', 'other', '--client-id', 'c'], { stdin: 'rt-other-secret' });
    for (let i = 0; i < 30; i++) await itemRow('acme', `fil-${i}`);
    // A row that names a key outside every items/<connection>/ prefix: deleted with the connection's objects.
    await itemRow('acme', 'imported', { itemObject: { M: { key: { S: 'legacy/imported.json' }, size: { N: '2' }, sha256: { S: 'x' } } } });
    await itemRow('other', 'fil-1');
    for (const key of ['items/acme/a.json', 'items/acme/b/c.json', 'legacy/imported.json', 'items/other/a.json', 'items/acme-2/a.json']) {
      await s3Client.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: '{}' }));
    }
    // Their changes logs: acme's head and 2 changes, other's head and 1.
    for (const [connection, seq] of [['acme', 0], ['acme', 1], ['acme', 2], ['other', 0], ['other', 1]] as const) {
      await db.send(new PutItemCommand({ TableName: changesTable, Item: { connection: { S: connection }, seq: { N: String(seq) } } }));
    }

    const run = await cli(['remove', 'acme', '--purge'], { stdin: 'acme\n' });
    expect(run.status).toBe(0);
    expect(run.out).toBe(
      'connection "acme" removed: its messages are dead-lettered from now on; its tokens are deleted (add it again with a refresh token to use it)\n' +
        `connection "acme" purged: 31 rows deleted from ${itemsTable}, 3 objects from ${BUCKET}, its changes from ${changesTable}, and its row from ${connectionsTable}\n`,
    );
    // The safety wait, once; then each sweep's progress (the second finds nothing left).
    expect(sleeps).toEqual([PURGE_SETTLE_SECONDS * 1000]);
    expect(run.err).toContain(`waiting ${PURGE_SETTLE_SECONDS} s, until no item sync container still uses the connection`);
    // A page's rows have the objects they name deleted first (the imported row's key outside items/acme/), then the prefix's.
    expect(run.err.split('\n').filter((line) => line.startsWith('acme: '))).toEqual([
      'acme: deleted 1 objects its rows name',
      'acme: deleted 31 rows',
      'acme: deleted 2 objects',
      'acme: deleted 3 changes',
      'acme: deleted 0 rows',
      'acme: deleted 0 changes',
    ]);
    expect((await dynamo.scan(changesTable)).map((row) => `${row['connection']?.S}/${row['seq']?.N}`)).toEqual(['other/0', 'other/1']);
    const left = await itemsOf('acme');
    expect(left.Count).toBe(0);
    const others = await itemsOf('other');
    expect(others.Count).toBe(1);
    expect([...(await s3.listObjects(BUCKET)).keys()].sort()).toEqual(['items/acme-2/a.json', 'items/other/a.json']);
    expect(await store().get('acme', { consistent: true })).toBeUndefined();
    expect((await store().get('other'))?.status).toBe('active');
  });

  it('--purge waits for a sync container\'s cache (60 s) and one sync invocation (60 s) after the removal, with a margin', () => {
    expect(PURGE_SETTLE_SECONDS).toBe(150);
    expect(PURGE_SETTLE_SECONDS).toBeGreaterThan(DEFAULTS.tokenCacheSeconds + syncTimeoutSeconds(10));
  });

  it('--purge sweeps twice: a row and an object a running sync wrote during the first sweep are deleted too', async () => {
    await cli(['add', 'acme', '--client-id', 'c'], { stdin: RT });
    for (let i = 0; i < 3; i++) await itemRow('acme', `fil-${i}`);
    await s3Client.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'items/acme/a.json', Body: '{}' }));
    const racing = racingClients({
      // A sync invocation still running writes while the first sweep deletes.
      BatchWriteItemCommand: () => itemRow('acme', 'late', { itemObject: { M: { key: { S: 'items/acme/late.json' }, size: { N: '2' }, sha256: { S: 'x' } } } }),
      DeleteObjectsCommand: () => s3Client.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'items/acme/late.json', Body: '{}' })).then(() => undefined),
    });
    const run = await cli(['remove', 'acme', '--purge', '--yes'], racing);
    expect(run.status).toBe(0);
    expect(run.out).toMatch(new RegExp(`purged: 4 rows deleted from ${itemsTable}, 2 objects from ${BUCKET}, its changes from ${changesTable}, and its row`));
    // The second sweep deletes what was written during the first.
    expect(run.err).toBe(
      `waiting ${PURGE_SETTLE_SECONDS} s, until no item sync container still uses the connection...\n` +
        'acme: deleted 3 rows\nacme: deleted 1 objects\nacme: deleted 0 changes\n' +
        // The late row names its object: deleted before the row, in the second sweep.
        'acme: deleted 1 objects its rows name\nacme: deleted 1 rows\nacme: deleted 0 changes\n',
    );
    expect(sleeps).toEqual([PURGE_SETTLE_SECONDS * 1000]);
    expect((await itemsOf('acme')).Count).toBe(0);
    expect([...(await s3.listObjects(BUCKET)).keys()].filter((key) => key.startsWith('items/acme/'))).toEqual([]);
    expect(await store().get('acme', { consistent: true })).toBeUndefined();
  });

  it('--purge of a connection added again during the purge: the add fails (being erased), nothing written; the purge runs to its end, then an add creates it anew', async () => {
    await cli(['add', 'acme', '--client-id', 'c'], { stdin: RT });
    await cli(['add', 'other', '--client-id', 'c'], { stdin: 'rt-other-secret' });
    await itemRow('acme', 'fil-1');
    await itemRow('other', 'fil-1');
    const written = ['items/acme/readd.json', 'items/other/readd.json'];
    for (const key of written) await s3Client.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: '{}' }));
    let readded: Run | undefined;
    let during: unknown;
    const racing = racingClients({
      // An operator adds acme again while its first sweep deletes.
      BatchWriteItemCommand: async () => {
        readded = await cli(['add', 'acme', '--client-id', 'c'], { stdin: 'rt-readded-secret' });
        during = await store().view('acme', { consistent: true });
      },
    });
    const run = await cli(['remove', 'acme', '--purge', '--yes'], racing);

    expect(readded).toEqual({
      status: 1,
      out: '',
      err: 'connections: connection "acme" is being erased: add it again once its erase is over (it then answers 404)\n',
    });
    // Nothing written: still removed, its erase running.
    expect(during).toMatchObject({ status: 'removed', erase: { state: 'running', startedAt: new Date(NOW).toISOString() } });
    expect(run.status).toBe(0);
    expect(run.out).toMatch(new RegExp(`purged: 1 rows deleted from ${itemsTable}, 1 objects from ${BUCKET}, its changes from ${changesTable}, and its row from ${connectionsTable}\\n$`));
    expect((await itemsOf('acme')).Count).toBe(0);
    expect(await store().view('acme', { consistent: true })).toBeUndefined();
    // The other connection's row, rows and objects are kept.
    expect(((await itemsOf('other')).Items ?? []).map((row) => row['id']?.S)).toEqual(['fil-1']);
    expect([...(await s3.listObjects(BUCKET)).keys()].filter((key) => written.includes(key))).toEqual(['items/other/readd.json']);
    expect(await store().get('other', { consistent: true })).toMatchObject({ status: 'active', refreshToken: 'rt-other-secret' });

    // Once the erase is over, an add creates the connection anew.
    const added = await cli(['add', 'acme', '--client-id', 'c'], { stdin: 'rt-readded-secret' });
    expect(added.status).toBe(0);
    expect(added.out).toMatch(/^connection "acme" added \(client id "c"\): active/);
    expect(await store().get('acme', { consistent: true })).toMatchObject({ status: 'active', refreshToken: 'rt-readded-secret', credentialsVersion: 1 });
    expect(await store().view('acme', { consistent: true })).not.toHaveProperty('erase');
  });

  it("--purge marks the erase in the connection's row, then waits the safety wait once, counted from the removal", async () => {
    await cli(['add', 'acme', '--client-id', 'c'], { stdin: RT });
    await itemRow('acme', 'fil-1');
    const seen: Array<{ erase: unknown; listed: unknown; items: number | undefined }> = [];
    const run = await cli(['remove', 'acme', '--purge', '--yes'], {
      onSleep: async () => {
        const listed = JSON.parse((await cli(['list', '--json'])).out) as Array<Record<string, unknown>>;
        seen.push({ erase: (await rawRow('acme'))['erase'], listed: listed[0], items: (await itemsOf('acme')).Count });
      },
    });
    expect(run.status).toBe(0);
    expect(sleeps).toEqual([PURGE_SETTLE_SECONDS * 1000]);
    const startedAt = new Date(NOW).toISOString();
    expect(seen).toEqual([
      {
        erase: { M: { state: { S: 'waiting' }, startedAt: { S: startedAt }, notBefore: { S: new Date(NOW + PURGE_SETTLE_SECONDS * 1000).toISOString() }, rowsDeleted: { N: '0' }, objectsDeleted: { N: '0' } } },
        listed: expect.objectContaining({ connection: 'acme', status: 'removed', erase: { state: 'waiting', startedAt, rowsDeleted: 0, objectsDeleted: 0 } }),
        // Nothing is deleted before the wait has passed.
        items: 1,
      },
    ]);
    expect(await store().view('acme', { consistent: true })).toBeUndefined();
  });

  it("--purge keeps another connection's objects and rows, even a key under its prefix that a row of the purged connection names", async () => {
    await cli(['add', 'acme', '--client-id', 'c'], { stdin: RT });
    await cli(['add', 'other', '--client-id', 'c'], { stdin: 'rt-other-secret' });
    await itemRow('acme', 'fil-1', { itemObject: { M: { key: { S: 'items/acme/fil-1.json' }, size: { N: '2' }, sha256: { S: 'x' } } } });
    // A row of acme that names a key under other's prefix (copied, or written wrong): that object is other's.
    await itemRow('acme', 'fil-2', { itemObject: { M: { key: { S: 'items/other/fil-2.json' }, size: { N: '2' }, sha256: { S: 'x' } } } });
    await itemRow('other', 'fil-1', { itemObject: { M: { key: { S: 'items/other/fil-1.json' }, size: { N: '2' }, sha256: { S: 'x' } } } });
    await itemRow('other', 'fil-2', { itemObject: { M: { key: { S: 'items/other/fil-2.json' }, size: { N: '2' }, sha256: { S: 'x' } } } });
    const written = ['items/acme/fil-1.json', 'items/other/fil-1.json', 'items/other/fil-2.json', 'items/acmeX/fil-1.json'];
    for (const key of written) await s3Client.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: '{}' }));
    const run = await cli(['remove', 'acme', '--purge', '--yes']);
    expect(run.status).toBe(0);
    expect(run.out).toMatch(new RegExp(`purged: 2 rows deleted from ${itemsTable}, 1 objects from ${BUCKET}, its changes from ${changesTable}, and its row`));
    expect((await itemsOf('acme')).Count).toBe(0);
    expect(((await itemsOf('other')).Items ?? []).map((row) => row['id']?.S).sort()).toEqual(['fil-1', 'fil-2']);
    // The bucket is shared by the tests: the keys this one wrote.
    expect([...(await s3.listObjects(BUCKET)).keys()].filter((key) => written.includes(key)).sort()).toEqual(['items/acmeX/fil-1.json', 'items/other/fil-1.json', 'items/other/fil-2.json']);
    expect(await store().view('acme', { consistent: true })).toBeUndefined();
    expect(await store().get('other', { consistent: true })).toMatchObject({ status: 'active', refreshToken: 'rt-other-secret' });
  });

  it('--purge --yes of a connection removed long ago: no question, no wait', async () => {
    await cli(['add', 'acme', '--client-id', 'c'], { stdin: RT });
    await cli(['remove', 'acme']);
    const run = await cli(['remove', 'acme', '--purge', '--yes'], { now: NOW + 10 * 60_000 });
    expect(run.status).toBe(0);
    expect(run.out).toMatch(/^connection "acme" was already removed\nconnection "acme" purged: 0 rows deleted/);
    expect(run.err).not.toMatch(/confirm|waiting/);
    expect(sleeps).toEqual([]);
  });

  it('--purge needs the items table and bucket: an error naming the flag and the variable', async () => {
    await cli(['add', 'acme', '--client-id', 'c'], { stdin: RT });
    const run = await cli(['remove', 'acme', '--purge', '--yes'], { env: { CONNECTIONS_TABLE_NAME: connectionsTable, ITEMS_TABLE_NAME: itemsTable }, stackOutputs: async () => ({}) });
    expect(run).toMatchObject({
      status: 2,
      err: expect.stringMatching(/the items bucket is not known: give --items-bucket, set ITEMS_BUCKET_NAME, or name the deployment with --stage or --stack \(the stack ContentSyncStateful has no output ItemsBucketName\)/),
    });
    expect((await store().get('acme'))?.status).toBe('active');
  });
});

describe('mend-changes', () => {
  /** The feed as the changes table holds it: each change's kind, id and revisions, in number order. */
  async function feedOf(connection: string): Promise<string[]> {
    const output = await db.send(
      new QueryCommand({
        TableName: changesTable,
        KeyConditionExpression: '#c = :c AND #s > :zero',
        ExpressionAttributeNames: { '#c': 'connection', '#s': 'seq' },
        ExpressionAttributeValues: { ':c': { S: connection }, ':zero': { N: '0' } },
        ConsistentRead: true,
      }),
    );
    return (output.Items ?? []).map((row) => `${row['seq']?.N} ${row['change']?.S} ${row['id']?.S} ${row['previousRevision']?.S ?? '-'}→${row['revision']?.S}`);
  }
  const daysAgo = (days: number): Record<string, AttributeValue> => ({ syncedAt: { S: new Date(NOW - days * 86_400_000).toISOString() } });

  it('refused while the connection is active; paused, appends the changes its rows lack, and again appends none', async () => {
    await cli(['add', 'acme', '--client-id', 'c'], { stdin: RT });
    await itemRow('acme', 'fil-1', daysAgo(2));
    await itemRow('acme', 'fil-2', { ...daysAgo(3), deleted: { BOOL: true } });
    await itemRow('acme', 'fil-3', { syncedAt: { S: new Date(NOW - 3_600_000).toISOString() } });
    await itemRow('acme', 'fil-4', daysAgo(60));

    const active = await cli(['mend-changes', 'acme']);
    expect(active.status).toBe(1);
    expect(active.err).toContain('connections: connection "acme" is active: pause it first, so that the sync writes none of its rows while its feed is mended, then resume it\n');
    expect(await feedOf('acme')).toEqual([]);

    await cli(['pause', 'acme']);
    const mended = await cli(['mend-changes', 'acme']);
    expect(mended.status).toBe(0);
    expect(mended.out).toBe(
      'connection "acme": 4 rows read, 2 compared with their last change; 2 changes appended (1 created, 1 deleted), head 2. ' +
        'Not compared: 1 rows written in the last 25 hours (their records may still come), 1 written before the feed\'s retention (their changes may have expired). ' +
        'If you paused it for this: npm run connections -- resume acme\n',
    );
    expect(await feedOf('acme')).toEqual(['1 deleted fil-2 -→1', '2 created fil-1 -→1']);

    const again = await cli(['mend-changes', 'acme']);
    expect(again.out).toMatch(/^connection "acme": 4 rows read, 2 compared with their last change; 0 changes appended, head 2\. /);
    expect(await feedOf('acme')).toHaveLength(2);
  });

  it('a failing connection (its messages wait too) is mended as a paused one', async () => {
    await cli(['add', 'acme', '--client-id', 'c'], { stdin: RT });
    const s = store();
    await s.takeRefreshLease('acme', { owner: 'o', until: NOW + 1000, now: NOW });
    await s.failRefresh({ connection: 'acme', owner: 'o', credentialsVersion: 1, at: new Date(NOW).toISOString(), reason: 'getToken: HTTP 401', refused: true });
    await itemRow('acme', 'fil-1', daysAgo(2));
    expect(await cli(['mend-changes', 'acme'])).toMatchObject({ status: 0, out: expect.stringMatching(/1 changes appended \(1 created\), head 1\./) });
    expect(await feedOf('acme')).toEqual(['1 created fil-1 -→1']);
  });

  it('the retention from --retention-days, else CHANGES_RETENTION_DAYS; a bad one is a usage error; removed and unknown connections fail', async () => {
    await cli(['add', 'acme', '--client-id', 'c'], { stdin: RT });
    await cli(['pause', 'acme']);
    await itemRow('acme', 'fil-1', daysAgo(10));
    expect((await cli(['mend-changes', 'acme', '--retention-days', '7'])).out).toMatch(/0 changes appended, head 0\. Not compared: 0 rows written in the last 25 hours \(their records may still come\), 1 written before/);
    const env = { CONNECTIONS_TABLE_NAME: connectionsTable, ITEMS_TABLE_NAME: itemsTable, CHANGES_TABLE_NAME: changesTable };
    expect((await cli(['mend-changes', 'acme'], { env: { ...env, CHANGES_RETENTION_DAYS: '7' } })).out).toMatch(/0 changes appended, head 0\./);
    for (const bad of ['0', '3651', '7.5', 'week']) {
      expect(await cli(['mend-changes', 'acme', '--retention-days', bad])).toMatchObject({ status: 2, err: expect.stringMatching(/--retention-days \(or CHANGES_RETENTION_DAYS\) must be a whole number of days from 1 to 3650/) });
    }
    expect((await cli(['mend-changes', 'acme'])).out).toMatch(/1 changes appended \(1 created\), head 1\./);

    expect(await cli(['mend-changes', 'nobody'])).toMatchObject({ status: 1, err: expect.stringContaining('connections: unknown connection "nobody": npm run connections -- list shows the connections\n') });
    await cli(['remove', 'acme']);
    expect(await cli(['mend-changes', 'acme'])).toMatchObject({ status: 1, err: expect.stringContaining('connections: connection "acme" was removed: its feed is not mended\n') });
    expect(await cli(['mend-changes', 'acme'], { env: { CONNECTIONS_TABLE_NAME: connectionsTable } })).toMatchObject({
      status: 1,
      err: expect.stringMatching(/the items table is not known: give --items-table, set ITEMS_TABLE_NAME/),
    });
  });
});

describe('seal', () => {
  /** A row as a deployment that did not seal yet wrote it: its tokens in clear. */
  async function clearRow(connection: string, tokens: { refreshToken: string; accessToken?: string }): Promise<void> {
    const at = new Date(NOW - 86_400_000).toISOString();
    await db.send(
      new PutItemCommand({
        TableName: connectionsTable,
        Item: {
          connection: { S: connection },
          clientId: { S: 'client-1' },
          status: { S: 'active' },
          refreshToken: { S: tokens.refreshToken },
          ...(tokens.accessToken !== undefined ? { accessToken: { S: tokens.accessToken }, refreshedAt: { S: at }, lastSuccessAt: { S: at } } : {}),
          credentialsVersion: { N: '1' },
          consecutiveFailures: { N: '0' },
          createdAt: { S: at },
          updatedAt: { S: at },
        },
      }),
    );
  }

  it('seals every token stored in clear; a run again seals none; the store still opens each to the original', async () => {
    await clearRow('old-1', { refreshToken: 'rt-clear-secret-1' });
    await clearRow('old-2', { refreshToken: 'rt-clear-secret-2', accessToken: 'at-clear-secret-2' });
    await cli(['add', 'acme', '--client-id', 'c'], { stdin: RT });
    const sealedBefore = (await rawRow('acme'))['refreshToken']?.S;
    expect(JSON.stringify(await dynamo.scan(connectionsTable))).toContain('rt-clear-secret-1');

    const run = await cli(['seal']);
    expect(run).toEqual({ status: 0, out: "3 tokens sealed in 3 connections' rows; every token in the table is sealed now\n", err: '' });
    for (const [connection, name, token] of [
      ['old-1', 'refreshToken', 'rt-clear-secret-1'],
      ['old-2', 'refreshToken', 'rt-clear-secret-2'],
      ['old-2', 'accessToken', 'at-clear-secret-2'],
    ] as const) {
      const stored = (await rawRow(connection))[name]?.S;
      expect(stored, `${connection} ${name}`).toMatch(/^cs-sealed-v1 /);
      expect(stored).not.toContain(token);
      expect((await store().get(connection, { consistent: true }))?.[name]).toBe(token);
    }
    // A token sealed already is left as it is.
    expect((await rawRow('acme'))['refreshToken']?.S).toBe(sealedBefore);
    expect(JSON.stringify(await dynamo.scan(connectionsTable))).not.toMatch(/secret/);
    expect(await store().get('old-2', { consistent: true })).toMatchObject({ status: 'active', clientId: 'client-1', credentialsVersion: 1 });

    expect(await cli(['seal'])).toEqual({ status: 0, out: "0 tokens sealed in 3 connections' rows; every token in the table is sealed now\n", err: '' });
  });

  it('needs the connections key, and takes no argument', async () => {
    await clearRow('old-1', { refreshToken: 'rt-clear-secret-1' });
    const run = await cli(['seal'], { env: { CONNECTIONS_TABLE_NAME: connectionsTable } });
    expect(run.status).toBe(1);
    expect(run.err).toMatch(/^connections: the connections key is not known: give --connections-key, set CONNECTIONS_KEY_ARN, or name the deployment with --stage or --stack \(reading the stack ContentSyncStateful failed/);
    expect((await rawRow('old-1'))['refreshToken']?.S).toBe('rt-clear-secret-1');
    expect(await cli(['seal', 'old-1'])).toMatchObject({ status: 2, err: expect.stringMatching(/seal takes no arguments/) });
    expect(await cli(['seal', '--json'])).toMatchObject({ status: 2, err: expect.stringMatching(/seal takes no --json/) });
    expect((await cli(['seal', '--connections-key', sealing.keyArn], { env: { CONNECTIONS_TABLE_NAME: connectionsTable } })).out).toMatch(/^1 tokens sealed in 1 connections' rows/);
    expect((await rawRow('old-1'))['refreshToken']?.S).toMatch(/^cs-sealed-v1 /);
  });
});

describe('import-items', () => {
  /** An old one-account items table (partition key `id`) holding a row for each id (its item: `{"id"}`). */
  async function oldTableWith(ids: readonly string[]): Promise<string> {
    const oldTable = `old-items-${n}`;
    await db.send(
      new CreateTableCommand({
        TableName: oldTable,
        AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
        KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
        BillingMode: 'PAY_PER_REQUEST',
      }),
    );
    await waitUntilActive(db, oldTable);
    for (const id of ids) await db.send(new PutItemCommand({ TableName: oldTable, Item: { id: { S: id }, type: { S: 'file' }, revision: { S: '1' }, item: { M: { id: { S: id } } } } }));
    return oldTable;
  }

  it('copies every row of the old table as the connection default, keeping rows already written', async () => {
    const oldTable = await oldTableWith(Array.from({ length: 40 }, (_, i) => `fil-${i}`));
    await itemRow('default', 'fil-3', { revision: { S: '9' } });
    const run = await cli(['import-items', '--from-table', oldTable]);
    expect(run.status).toBe(0);
    expect(run.out).toBe(`imported ${oldTable} into ${itemsTable} as connection "default": 40 rows read, 39 copied, 1 kept (already written by this deployment), 0 skipped (no string id), 0 refused (not an item id), 0 failed\n`);
    const rows = await itemsOf('default');
    expect(rows.Count).toBe(40);
    expect(rows.Items?.find((r) => r['id']?.S === 'fil-3')?.['revision']).toEqual({ S: '9' });
    expect(rows.Items?.find((r) => r['id']?.S === 'fil-4')).toEqual({ connection: { S: 'default' }, id: { S: 'fil-4' }, type: { S: 'file' }, revision: { S: '1' }, item: { M: { id: { S: 'fil-4' } } } });
    // Again: everything kept.
    expect((await cli(['import-items', '--from-table', oldTable])).out).toMatch(/0 copied, 40 kept/);
  });


  /** The ids of the connection default's rows in the items table, sorted. */
  const importedIds = async () => ((await itemsOf('default')).Items ?? []).map((row) => row['id']!.S!).sort();

  // The old table's partition key held up to 2,048 bytes; the items table's sort key holds 1,024.
  const TOO_LONG = 'x'.repeat(1025);
  // 1,200 bytes in 600 characters: DynamoDB counts a key in UTF-8 bytes and refuses it.
  const TOO_WIDE = 'é'.repeat(600);
  const BELL = 'bell\u0007';
  const LONGEST = 'y'.repeat(1024);
  const REFUSED_LINES = [
    `refused: "${'x'.repeat(40)}"… (1025 bytes): the item id is 1025 bytes long in UTF-8; the limit is 1024 bytes`,
    `refused: "${'é'.repeat(40)}"… (1200 bytes): the item id is 1200 bytes long in UTF-8; the limit is 1024 bytes`,
    'refused: "bell\\u0007": the item id contains a control character (U+0007) at position 4',
  ].sort();
  const REFUSED_FAILURE =
    'connections: 3 rows were refused because their ids break the item id rule (listed above with the reason): ' +
    'the items table cannot hold them, and running the import again does not copy them\n';

  it('refuses a row whose id is not an item id: not written, listed with the reason, exit 1, and no promise that a run again copies it', async () => {
    const oldTable = await oldTableWith(['fil-0', 'fil-1', TOO_LONG, TOO_WIDE, BELL, LONGEST]);
    for (const attempt of [1, 2]) {
      const run = await cli(['import-items', '--from-table', oldTable]);
      expect(run.status, `run ${attempt}`).toBe(1);
      const copied = attempt === 1 ? '3 copied, 0 kept' : '0 copied, 3 kept';
      expect(run.out).toBe(
        `imported ${oldTable} into ${itemsTable} as connection "default": 6 rows read, ${copied} (already written by this deployment), 0 skipped (no string id), 3 refused (not an item id), 0 failed\n`,
      );
      const lines = run.err.split('\n');
      expect(lines.filter((line) => line.startsWith('refused: ')).sort()).toEqual(REFUSED_LINES);
      expect(run.err.endsWith(REFUSED_FAILURE)).toBe(true);
      expect(run.err).not.toMatch(/copies them/);
      expect(await importedIds()).toEqual(['fil-0', 'fil-1', LONGEST]);
    }
  });

  it('a write that fails may be copied by a run again; a refused row never', async () => {
    const oldTable = await oldTableWith(['fil-0', 'fil-1', 'fil-2', TOO_LONG, TOO_WIDE, BELL]);
    // DynamoDB throttles the write of fil-1.
    const throttling = {
      send: (command: unknown) =>
        command instanceof PutItemCommand && command.input.Item?.['id']?.S === 'fil-1'
          ? Promise.reject(Object.assign(new Error('Rate of requests exceeds the allowed throughput.'), { name: 'ThrottlingException', $metadata: { httpStatusCode: 400 } }))
          : db.send(command as PutItemCommand),
    } as unknown as DynamoDBClient;
    const first = await cli(['import-items', '--from-table', oldTable], { dynamodb: throttling });
    expect(first.status).toBe(1);
    expect(first.out).toMatch(/: 6 rows read, 2 copied, 0 kept \(already written by this deployment\), 0 skipped \(no string id\), 3 refused \(not an item id\), 1 failed\n$/);
    expect(first.err).toContain('not copied: "fil-1": PutItem failed (ThrottlingException, HTTP 400)\n');
    expect(first.err.split('\n').filter((line) => line.startsWith('refused: ')).sort()).toEqual(REFUSED_LINES);
    expect(first.err.endsWith(`connections: 1 rows were not copied; running the import again copies them (rows already copied are kept). ${REFUSED_FAILURE.slice('connections: '.length)}`)).toBe(true);
    expect(await importedIds()).toEqual(['fil-0', 'fil-2']);

    const again = await cli(['import-items', '--from-table', oldTable]);
    expect(again.status).toBe(1);
    expect(again.out).toMatch(/: 6 rows read, 1 copied, 2 kept \(already written by this deployment\), 0 skipped \(no string id\), 3 refused \(not an item id\), 0 failed\n$/);
    expect(again.err.endsWith(REFUSED_FAILURE)).toBe(true);
    expect(again.err).not.toMatch(/copies them/);
    expect(await importedIds()).toEqual(['fil-0', 'fil-1', 'fil-2']);
  });

  it('--from-table is required and may not be the items table itself', async () => {
    expect(await cli(['import-items'])).toMatchObject({ status: 2, err: expect.stringMatching(/import-items needs --from-table/) });
    expect(await cli(['import-items', '--from-table', itemsTable])).toMatchObject({ status: 2, err: expect.stringMatching(/names the items table itself/) });
  });
});

describe('the command line', () => {
  it('--help prints the usage; no command, an unknown command or option, or an option of another command: usage errors', async () => {
    expect(await cli(['--help'])).toMatchObject({ status: 0, out: `${USAGE}\n` });
    expect(await cli([])).toMatchObject({ status: 2, err: `${USAGE}\n` });
    expect((await cli(['frobnicate'])).err).toMatch(/unknown command "frobnicate"; the commands are add, list, pause, resume, remove, mend-changes, seal, import-items/);
    expect(await cli(['list', '--purge'])).toMatchObject({ status: 2, err: expect.stringMatching(/list takes no --purge/) });
    expect(await cli(['list', '--connections-key', sealing.keyArn])).toMatchObject({ status: 2, err: expect.stringMatching(/list takes no --connections-key/) });
    expect(await cli(['list', '--nope'])).toMatchObject({ status: 2, err: expect.stringMatching(/Unknown option '--nope'/) });
    expect(await cli(['pause'])).toMatchObject({ status: 2, err: expect.stringMatching(/pause takes one connection id/) });
    expect(await cli(['remove', 'acme', '--yes'])).toMatchObject({ status: 2, err: expect.stringMatching(/--yes goes with --purge/) });
  });

  it('the S3 client addresses a configured endpoint path-style', () => {
    expect(s3ClientConfig({})).toEqual({});
    expect(s3ClientConfig({ AWS_ENDPOINT_URL_S3: 'http://localhost:4569' })).toEqual({ endpoint: 'http://localhost:4569', forcePathStyle: true });
    expect(s3ClientConfig({ AWS_ENDPOINT_URL: 'http://127.0.0.1:4566' })).toEqual({ endpoint: 'http://127.0.0.1:4566', forcePathStyle: true });
    expect(s3ClientConfig({ AWS_ENDPOINT_URL: 'http://127.0.0.1:4566', AWS_IGNORE_CONFIGURED_ENDPOINT_URLS: 'true' })).toEqual({});
  });
});
