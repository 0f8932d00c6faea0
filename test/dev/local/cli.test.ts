/**
 * `npm start` and `npm run enqueue` as a user runs them: separate processes (tsx), configured only
 * through the environment, against local servers started here. Exit statuses, what they print (the
 * three connections, the revocation and the recovery), the files they leave under `.local/`, and
 * that no token is printed.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { PutItemCommand } from '@aws-sdk/client-dynamodb';
import { runProcess, type ProcessRun as Run } from '../../../dev/fakes/loopback.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AwsEmulator } from '../../../dev/fakes/aws-emulator.js';
import { ensureItemsTable } from '../../../dev/fakes/items-table.js';
import { startLocalDynamo, type LocalDynamoDb } from '../../../dev/fakes/local-dynamo.js';
import { generateItemTree } from '../../../dev/simulator/item-tree.js';
import { main } from '../../../dev/local/start-command.js';
import { ProviderSimulator } from '../../../dev/simulator/provider-simulator.js';

const ROOT = resolve(import.meta.dirname, '../../..');
const TSX = join(ROOT, 'node_modules', '.bin', 'tsx');

/** Runs a script with tsx in `cwd`; the environment is the test's, without provider settings, plus `env`. */
function run(script: string, args: string[], options: { cwd: string; env?: Record<string, string | undefined>; stdin?: string }): Promise<Run> {
  const env: Record<string, string | undefined> = { ...process.env };
  for (const name of ['PROVIDER_BASE_URL', 'CONTENT_SYNC_CLIENT_ID', 'CONTENT_SYNC_REFRESH_TOKEN', 'REVISION_FIELD', 'AWS_ENDPOINT_URL_SQS', 'AWS_ENDPOINT_URL_DYNAMODB']) {
    delete env[name];
  }
  Object.assign(env, options.env);
  return runProcess(TSX, [join(ROOT, script), ...args], {
    cwd: options.cwd,
    env: env as NodeJS.ProcessEnv,
    ...(options.stdin !== undefined ? { stdin: options.stdin } : {}),
  });
}

const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'content-sync-cli-'));
  dirs.push(dir);
  return dir;
}

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('npm start', () => {
  it('runs the main job on embedded defaults: three connections added, synced from their roots, checked and copied from the feed; exits 0, its files under .local/', async () => {
    const cwd = tempDir();
    const result = await run('dev/local/run.ts', ['--items', '10', '--seed', '5'], { cwd });
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    // The simulator's limit is told to the run (the tour leaves it for the pace to find).
    expect(result.stdout).toContain('told to the run (providerRequestsPerSecond)');
    // The connections put as the application's code puts them (the client API on a loopback port), listed at the start and at the end.
    expect(result.stdout).toContain('1. Add the three connections');
    for (const connection of ['default', 'acme', 'globex']) {
      expect(result.stdout).toMatch(new RegExp(`\\$ curl -X PUT http://127\\.0\\.0\\.1:\\d+/connections/${connection} .*\\n +200: ${connection} active\\n +event ConnectionAdded ${connection}`));
    }
    expect(result.stdout.match(/\$ npm run connections -- list\n/g)).toHaveLength(2);
    expect(result.stdout).toContain('2. Refresh the access tokens');
    // default: 10 items; acme and globex: 8 each. The first sync sends each account's root; discovery finds the rest.
    expect(result.stdout).toContain("3. The first sync: each account's root alone");
    expect(result.stdout).toMatch(/initial sync +3 +23 +26 +0 +0 +0 +0 +0 +0 /);
    expect(result.stdout).toContain('   default: 1 id sent, the root fld-0001; 10 items mirrored, 9 of them found by discovery');
    expect(result.stdout).toContain('OK: the table matches the provider, connection by connection');
    expect(result.stdout).toContain("4. The application's copy of each connection");
    for (const [connection, rows] of [['default', 10], ['acme', 8], ['globex', 8]] as const) {
      expect(result.stdout).toContain(`${connection}: ${rows} changes (${rows} created); its copy equals its ${rows} rows`);
    }
    // The tour's steps are not run; the run says where they are.
    expect(result.stdout).not.toContain('5. Sync again');
    expect(result.stdout).not.toContain('ConnectionFailing');
    expect(result.stdout).toContain('npm run tour');
    // No token (the simulator's refresh and access tokens look like these).
    expect(result.stdout).not.toMatch(/\brt-[0-9a-f]{24}\b|\bat-[0-9a-f]{16}-/);
    // No handler log line reaches the screen; they are in the log file.
    expect(result.stdout).not.toContain('"level"');
    const log = readFileSync(join(cwd, '.local/demo/handlers.log'), 'utf8');
    expect(log).toContain('"level":"INFO"');
    expect(log).not.toMatch(/\brt-[0-9a-f]{24}\b|\bat-[0-9a-f]{16}-/);
    const rows = JSON.parse(readFileSync(join(cwd, '.local/demo/items.json'), 'utf8')) as Array<{ connection: string }>;
    expect(rows.filter((row) => row.connection === 'default')).toHaveLength(10);
    expect(rows.filter((row) => row.connection === 'acme')).toHaveLength(8);
    expect(rows.filter((row) => row.connection === 'globex')).toHaveLength(8);
    expect(statSync(join(cwd, '.local/demo/dynamodb')).isDirectory()).toBe(true);
  });

  it('answers usage errors with status 2, as a process (one) and as its command (the others: the same main, in this process)', async () => {
    const cwd = tempDir();
    const noCredentials = await run('dev/local/run.ts', ['x'], { cwd, env: { PROVIDER_BASE_URL: 'https://provider.example.com/api' } });
    expect(noCredentials.status).toBe(2);
    expect(noCredentials.stderr).toContain('no credentials: set CONTENT_SYNC_CLIENT_ID and CONTENT_SYNC_REFRESH_TOKEN, or write .local/credentials.json');
    const command = async (argv: string[], env: NodeJS.ProcessEnv = {}): Promise<{ status: number; stderr: string }> => {
      let stderr = '';
      const sink = new Writable({ write: (chunk, _encoding, done) => ((stderr += String(chunk)), done()) });
      const stdin = Readable.from([]) as NodeJS.ReadableStream & { isTTY?: boolean };
      return { status: await main(argv, { stdin, stdout: sink, stderr: sink, env }), stderr };
    };
    const ids = await command(['some-id']);
    expect(ids.status).toBe(2);
    expect(ids.stderr).toContain('set PROVIDER_BASE_URL');
    const tourWithProvider = await command(['--tour'], { PROVIDER_BASE_URL: 'https://provider.example.com/api' });
    expect(tourWithProvider.status).toBe(2);
    expect(tourWithProvider.stderr).toContain('--items, --seed and --tour are for the simulated provider; unset PROVIDER_BASE_URL to use it');
    const insecure = await command(['x'], { PROVIDER_BASE_URL: 'http://provider.example.com/api' });
    expect(insecure.status).toBe(2);
    expect(insecure.stderr).toContain('PROVIDER_BASE_URL: plain http:// is accepted only for loopback hosts');
    const badId = await command(['ok', 'bad\u0001'], { PROVIDER_BASE_URL: 'https://provider.example.com', CONTENT_SYNC_CLIENT_ID: 'c', CONTENT_SYNC_REFRESH_TOKEN: 'r' });
    expect(badId.status).toBe(2);
    expect(badId.stderr).toContain('#2 "bad\\u0001": the item id contains a control character');
  });

  describe('against a real provider (PROVIDER_BASE_URL)', () => {
    let provider: ProviderSimulator;
    beforeAll(async () => {
      provider = await ProviderSimulator.start({ items: generateItemTree({ count: 8, seed: 2 }), rotateRefreshToken: true });
    });
    afterAll(async () => {
      await provider.close();
    });

    it('syncs the ids from standard input with credentials from the environment, and keeps a rotated refresh token', async () => {
      const cwd = tempDir();
      const refreshToken = provider.refreshToken;
      const result = await run('dev/local/run.ts', [], {
        cwd,
        env: { PROVIDER_BASE_URL: provider.baseUrl, CONTENT_SYNC_CLIENT_ID: provider.clientId, CONTENT_SYNC_REFRESH_TOKEN: refreshToken },
        stdin: 'fil-0002\nfld-0001\n',
      });
      expect(result.stderr).toBe('');
      expect(result.status).toBe(0);
      expect(result.stdout).toContain('Credentials from CONTENT_SYNC_CLIENT_ID / CONTENT_SYNC_REFRESH_TOKEN; revision field "revision" (the default');
      expect(result.stdout).toContain(`npm run connections -- add default --client-id ${provider.clientId}`);
      expect(result.stdout).toContain('connection "default" added');
      expect(result.stdout).toContain(`"fil-0002": file, revision ${String(provider.getItem('fil-0002')!.revision)}`);
      expect(result.stdout).toContain(`"fld-0001": folder, revision ${String(provider.getItem('fld-0001')!.revision)}`);
      expect(result.stdout).toContain('CONTENT_SYNC_REFRESH_TOKEN no longer works. The new one is in .local/credentials.json');

      // The rotated refresh token is saved (owner-only) where the next run finds it, and never printed.
      const file = join(cwd, '.local/credentials.json');
      expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ clientId: provider.clientId, refreshToken: provider.refreshToken });
      expect(statSync(file).mode & 0o777).toBe(0o600);
      for (const token of [refreshToken, provider.refreshToken]) {
        expect(result.stdout).not.toContain(token);
        expect(result.stderr).not.toContain(token);
      }

      // The next run reads the file; the table is kept between runs, so the same ids are unchanged.
      const again = await run('dev/local/run.ts', ['fil-0002', 'fld-0001', 'fil-0003'], { cwd, env: { PROVIDER_BASE_URL: provider.baseUrl } });
      expect(again.status, again.stdout + again.stderr).toBe(0);
      expect(again.stdout).toContain('Credentials from .local/credentials.json');
      // The same credentials put again change nothing: the access token of the last run is used as it is.
      expect(again.stdout).toContain(`connection "default" already holds these credentials (client id "${provider.clientId}") and is active: nothing changed`);
      expect(again.stdout).toContain('its access token (from the last run) is not due yet');
      expect(again.stdout).toMatch(/sync +3 +1 +0 +2 +0 +0 +0 +0 /);
    });

    it('exits 1 when an id is dead-lettered, and says why', async () => {
      const cwd = tempDir();
      mkdirSync(join(cwd, '.local'));
      writeFileSync(join(cwd, '.local/credentials.json'), JSON.stringify({ clientId: provider.clientId, refreshToken: provider.refreshToken }), { mode: 0o600 });
      const remove = provider.addFault({ endpoint: 'items', itemId: 'fil-0004', fault: { kind: 'status', status: 403 } });
      try {
        const result = await run('dev/local/run.ts', ['fil-0004', 'fil-0005'], { cwd, env: { PROVIDER_BASE_URL: provider.baseUrl, REVISION_FIELD: 'revision' } });
        expect(result.status).toBe(1);
        expect(result.stdout).toContain('revision field "revision" (REVISION_FIELD)');
        expect(result.stdout).toMatch(/Dead-lettered \(these can never succeed as sent\):\n {3}\{[^\n]*"id":"fil-0004"\}: .*HTTP 403/);
        expect(result.stdout).toContain('FAILED:');
      } finally {
        remove();
      }
    });
  });
});

describe('npm run enqueue', () => {
  let emulator: AwsEmulator;
  let dynamo: LocalDynamoDb;
  beforeAll(async () => {
    emulator = await AwsEmulator.start({ region: 'eu-west-1' });
    dynamo = await startLocalDynamo({ proxy: false });
  });
  afterAll(async () => {
    await emulator.close();
    await dynamo.close();
  });

  it('uses AWS_ENDPOINT_URL_SQS (the standard SDK variable) and sends the ids read from standard input', async () => {
    emulator.sqs.createQueue('cli-stdin');
    // A queue URL as AWS prints it: the request still goes to the configured endpoint.
    const queueUrl = 'https://sqs.eu-west-1.amazonaws.com/000000000000/cli-stdin';
    const result = await run('tools/enqueue/enqueue.ts', ['--queue-url', queueUrl], {
      cwd: tempDir(),
      env: { AWS_ENDPOINT_URL_SQS: emulator.endpoint },
      stdin: Array.from({ length: 12 }, (_, i) => `fil-${i}`).join('\n'),
    });
    expect(result.status).toBe(0);
    expect(result.stdout.trim().split('\n')).toHaveLength(12);
    expect(result.stdout).toMatch(/^sent "fil-0" [0-9a-f-]{36}$/m);
    expect(result.stderr).toContain('Sent 12 of 12 ids from standard input');
    expect(result.stderr).toContain('in 2 SendMessageBatch calls');
    expect(result.stderr).not.toContain('differs from SQSClient resolved endpoint');
    expect(emulator.sqs.peek('cli-stdin').map((m) => m.body).sort()).toEqual(Array.from({ length: 12 }, (_, i) => `{"id":"fil-${i}"}`).sort());
  });

  it('exits 1 naming the bad id, sending nothing', async () => {
    const queueUrl = emulator.sqs.createQueue('cli-invalid');
    const result = await run('tools/enqueue/enqueue.ts', ['--queue-url', queueUrl, 'good', 'x'.repeat(1100)], { cwd: tempDir() });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('1 invalid id, nothing sent');
    expect(result.stderr).toContain('#2 "xxxx');
    expect(emulator.sqs.counts(queueUrl).total).toBe(0);
  });

  it('--resync-table enqueues every row the table knows with its connection, or one connection\'s with --connection (AWS_ENDPOINT_URL_DYNAMODB)', async () => {
    const dynamodb = dynamo.client();
    await ensureItemsTable(dynamodb, 'items-resync');
    // 25 rows: 15 of acme, 10 of default, the ids id-0 to id-9 in both.
    for (let i = 0; i < 25; i++) {
      const connection = i < 15 ? 'acme' : 'default';
      const id = `id-${i < 15 ? i : i - 15}`;
      await dynamodb.send(new PutItemCommand({ TableName: 'items-resync', Item: { connection: { S: connection }, id: { S: id }, revision: { S: String(i) } } }));
    }
    dynamodb.destroy();
    // The tool signs with the namespace's key, as a user's CLI signs with theirs.
    const env = {
      AWS_ENDPOINT_URL_DYNAMODB: dynamo.endpoint,
      AWS_ACCESS_KEY_ID: dynamo.credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: dynamo.credentials.secretAccessKey,
      AWS_REGION: dynamo.region,
    };
    const queueUrl = emulator.sqs.createQueue('cli-resync');
    const result = await run('tools/enqueue/enqueue.ts', ['--queue-url', queueUrl, '--resync-table', 'items-resync'], { cwd: tempDir(), env });
    expect(result.status).toBe(0);
    expect(result.stderr).toContain('scanned items-resync: 25 ids');
    expect(result.stderr).toContain('in 3 SendMessageBatch calls');
    const bodies = emulator.sqs.peek(queueUrl).map((m) => JSON.parse(m.body) as { connection: string; id: string });
    expect(bodies).toHaveLength(25);
    expect(bodies.filter((b) => b.connection === 'acme')).toHaveLength(15);
    expect(bodies.filter((b) => b.connection === 'default')).toHaveLength(10);

    const oneUrl = emulator.sqs.createQueue('cli-resync-acme');
    const one = await run('tools/enqueue/enqueue.ts', ['--queue-url', oneUrl, '--resync-table', 'items-resync', '--connection', 'acme'], { cwd: tempDir(), env });
    expect(one.status).toBe(0);
    expect(one.stderr).toContain('queried items-resync (connection acme): 15 ids');
    expect(emulator.sqs.peek(oneUrl).map((m) => JSON.parse(m.body) as { connection: string }).every((b) => b.connection === 'acme')).toBe(true);
    expect(emulator.sqs.counts(oneUrl).total).toBe(15);
  });

  it('--connection sends {"connection","id"} messages', async () => {
    const queueUrl = emulator.sqs.createQueue('cli-connection');
    const result = await run('tools/enqueue/enqueue.ts', ['--queue-url', queueUrl, '--connection', 'globex', 'fil-1', 'fil-2'], { cwd: tempDir() });
    expect(result.status).toBe(0);
    expect(emulator.sqs.peek(queueUrl).map((m) => m.body).sort()).toEqual(['{"connection":"globex","id":"fil-1"}', '{"connection":"globex","id":"fil-2"}']);
  });

  it('exits 1 when the queue does not exist, without trying every batch', async () => {
    const result = await run('tools/enqueue/enqueue.ts', ['--queue-url', `${emulator.endpoint}/000000000000/no-such-queue`, 'a', 'b'], { cwd: tempDir() });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('not sent "a": QueueDoesNotExist');
    expect(result.stderr).toContain('2 ids were not sent (stopped after an error every further call would repeat)');
  });
});
