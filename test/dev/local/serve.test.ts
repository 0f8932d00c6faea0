/**
 * `npm run serve` as a developer uses it: a process of its own, reached through plain HTTP only. It
 * prints the client API's URL on 127.0.0.1 and the simulator's credentials; a connection put with
 * them syncs the ids sent (the tree behind the root by discovery), the item too large for a row
 * answers an `itemUrl` that a plain GET reads (the simulator's item), and the changes feed holds its
 * change. SIGINT stops every process it started, DynamoDB Local's JVM among them, and it exits 0. No
 * token reaches its request lines or the handlers' log. Usage errors exit 2 (in process: nothing
 * starts).
 *
 * The process is node with tsx's loader, so the SIGINT sent is the one it gets: under the tsx
 * command a child that has not answered its relay within 30 ms is sent the signal again, and killed
 * outright 30 ms later, which a busy machine could make happen (serve.ts).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { RUN_ENDPOINT_VARIABLE } from '../../../dev/fakes/local-aws.js';
import { main } from '../../../dev/local/serve-command.js';
import { LARGE_FIELD, LARGE_TEXT, largeFileOf } from '../../../dev/local/story-changes.js';
import { generateItemTree } from '../../../dev/simulator/item-tree.js';

const ROOT = resolve(import.meta.dirname, '../../..');
const require = createRequire(import.meta.url);
/** The simulator's tokens (refresh and access), as they look. */
const TOKEN = /\brt-(initial-)?[0-9a-f]{16,}\b|\bat-[0-9a-f]{16}-/;

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Every live process below `pid`, from /proc (pid, parent, command). */
function descendants(pid: number): Array<{ pid: number; command: string }> {
  const all: Array<{ pid: number; ppid: number; command: string; state: string }> = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const [state, ppid] = stat.slice(close + 2).split(' ');
      all.push({ pid: Number(entry), ppid: Number(ppid), command: stat.slice(stat.indexOf('(') + 1, close), state: state! });
    } catch {
      // gone meanwhile
    }
  }
  const found: Array<{ pid: number; command: string }> = [];
  const parents = [pid];
  while (parents.length > 0) {
    const parent = parents.pop()!;
    for (const child of all.filter((p) => p.ppid === parent && p.state !== 'Z')) {
      found.push({ pid: child.pid, command: child.command });
      parents.push(child.pid);
    }
  }
  return found;
}

/** Whether a process of this pid exists (a zombie counts: it is not reaped yet). */
function exists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw error;
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** `npm run serve` started in `cwd`, with the environment of a developer's shell (no AWS settings, no provider). */
function startServe(cwd: string, args: string[]) {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of Object.keys(env)) {
    if (/^AWS_(REGION|ACCESS_KEY_ID|SECRET_ACCESS_KEY|ENDPOINT_URL)/.test(name) || /^(PROVIDER_BASE_URL|REVISION_FIELD|CONTENT_SYNC_)/.test(name)) delete env[name];
  }
  delete env[RUN_ENDPOINT_VARIABLE];
  const child = spawn(process.execPath, ['--import', require.resolve('tsx'), join(ROOT, 'dev/local/serve.ts'), ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const state = { stdout: '', stderr: '', exit: undefined as { code: number | null; signal: NodeJS.Signals | null } | undefined };
  child.stdout.on('data', (chunk: Buffer) => (state.stdout += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (state.stderr += chunk.toString('utf8')));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      state.exit = { code, signal };
      resolve(state.exit);
    }),
  );
  /** Polls `probe` until it answers; throws if serve has ended meanwhile. No time limit but the test run's hang guard. */
  const until = async <T>(what: string, probe: () => T | undefined | Promise<T | undefined>): Promise<T> => {
    for (;;) {
      const value = await probe();
      if (value !== undefined) return value;
      if (state.exit) throw new Error(`serve ended (${JSON.stringify(state.exit)}) while waiting for ${what}:\n${state.stdout}\n${state.stderr}`);
      await sleep(200);
    }
  };
  return { child, state, exited, until };
}

describe('npm run serve', () => {
  it('serves the client API on 127.0.0.1 until SIGINT: a connection put, ids synced, a large item read from its itemUrl, its change in the feed; then every process stopped, exit 0', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'content-sync-serve-'));
    dirs.push(cwd);
    const serve = startServe(cwd, ['--items', '10', '--seed', '5']);
    try {
      const api = await serve.until('the API', () => /^Client API: (http:\/\/127\.0\.0\.1:\d+\/)$/m.exec(serve.state.stdout)?.[1]);
      await serve.until('the whole introduction', () => (serve.state.stdout.includes('Ctrl-C stops it') ? true : undefined));
      const out = serve.state.stdout;
      expect(out).toContain('It accepts any signature, or none');
      expect(out).toContain('listens on 127.0.0.1 only');
      expect(out).toContain("These refresh tokens are the simulator's fakes");
      const [, clientId, refreshToken] = /-d '\{"clientId": "([^"]+)", "refreshToken": "([^"]+)"\}'/.exec(out) ?? [];
      expect(clientId).toBe('test-client');
      // The simulator's account `default` as serve makes it: the tree of 10 at seed 5, its last file too large for a row.
      const items = generateItemTree({ count: 10, seed: 5, revisionField: 'revision' });
      const largeId = largeFileOf(items)!;
      const large: Record<string, unknown> = { ...items.find((item) => item.id === largeId)!, [LARGE_FIELD]: LARGE_TEXT };
      const revision = String(large['revision']);
      expect(out).toContain(`${largeId} is too large for a row`);

      // DynamoDB Local's JVM: a process of serve's own.
      const jvms = descendants(serve.child.pid!).filter((p) => p.command === 'java');
      expect(jvms).toHaveLength(1);
      const jvm = jvms[0]!.pid;

      const call = async (method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> => {
        const response = await fetch(`${api}${path}`, {
          method,
          ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
        });
        return { status: response.status, body: (await response.json()) as Record<string, unknown> };
      };
      const put = await call('PUT', 'connections/default', { clientId, refreshToken });
      expect(put.status).toBe(200);
      expect(put.body['status']).toBe('active');
      // A request signed with any credentials is answered as an unsigned one.
      const signed = await fetch(`${api}connections/default`, {
        headers: {
          authorization: 'AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260101/eu-west-1/execute-api/aws4_request, SignedHeaders=host;x-amz-date, Signature=0123abcd',
          'x-amz-date': '20260101T000000Z',
        },
      });
      expect(signed.status).toBe(200);
      // The root (its tree follows by discovery) and the large file (the users' lane brings it first).
      const sent = await call('POST', 'connections/default/items', { ids: ['fld-0001', largeId] });
      expect(sent).toEqual({ status: 200, body: { sent: 2 } });

      const answer = await serve.until('the large item', async () => {
        const got = await call('GET', `connections/default/items/${largeId}`);
        if (got.status !== 404) expect(got).toMatchObject({ status: 200 });
        return got.status === 200 ? got.body : undefined;
      });
      expect(answer['revision']).toBe(revision);
      expect(answer['item']).toBeUndefined();
      const itemUrl = new URL(String(answer['itemUrl']));
      expect(itemUrl.hostname).toBe('127.0.0.1');
      const object = await fetch(itemUrl);
      expect(object.status).toBe(200);
      const text = await object.text();
      expect(Buffer.byteLength(text)).toBeGreaterThan(400 * 1024);
      expect(JSON.parse(text)).toEqual(large);

      // The root's tree, brought by discovery: every item of the account has its row.
      await serve.until('the whole tree', async () => {
        const page = await call('GET', 'connections/default/items?limit=1000');
        return (page.body['items'] as unknown[] | undefined)?.length === items.length ? true : undefined;
      });
      // The feed: the large item's creation, at its revision.
      const change = await serve.until('the change in the feed', async () => {
        const feed = await call('GET', 'connections/default/changes?limit=1000');
        return (feed.body['changes'] as Array<Record<string, unknown>> | undefined)?.find((c) => c['id'] === largeId);
      });
      expect(change).toMatchObject({ change: 'created', id: largeId, type: 'file', revision, previousRevision: null });

      // One line a request, and no token in any of them.
      const requests = serve.state.stdout.slice(serve.state.stdout.indexOf('Requests as they are answered:'));
      expect(requests).toContain('PUT /connections/{connection} [default] → 200');
      expect(requests).toContain('POST /connections/{connection}/items [default] → 200');
      expect(requests).toContain('GET /connections/{connection}/items/{id} [default] → 200');
      expect(requests).not.toMatch(TOKEN);

      process.kill(serve.child.pid!, 'SIGINT');
      expect(await serve.exited).toEqual({ code: 0, signal: null });
      expect(serve.state.stdout).toContain('Stopped: every server and process it started.');
      expect(serve.state.stderr).toBe('');
      expect(exists(jvm)).toBe(false);
      expect(readFileSync(join(cwd, '.local/serve/handlers.log'), 'utf8')).not.toMatch(TOKEN);
    } finally {
      if (!serve.state.exit) serve.child.kill('SIGKILL');
    }
  });

  it('answers a usage error with status 2 and --help with the usage, starting nothing', async () => {
    const command = async (argv: string[], env: NodeJS.ProcessEnv = {}): Promise<{ status: number; stdout: string; stderr: string }> => {
      let stdout = '';
      let stderr = '';
      const sink = (add: (text: string) => void) =>
        new Writable({
          write(chunk: Buffer, _encoding, done) {
            add(chunk.toString('utf8'));
            done();
          },
        });
      const status = await main(argv, { stdout: sink((t) => (stdout += t)), stderr: sink((t) => (stderr += t)), env }, new Promise(() => undefined));
      return { status, stdout, stderr };
    };
    const help = await command(['--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toContain('npm run serve -- --port <n>');
    expect(help.stdout).toContain('accepts any signature, or none, and listens on 127.0.0.1 only');
    for (const [argv, said] of [
      [['--bogus'], "Unknown option '--bogus'"],
      [['--port', 'x'], '--port must be a whole number from 0 to 65535'],
      [['--port', '70000'], '--port must be a whole number from 0 to 65535'],
      [['--items', '5'], '--items must be a whole number from 10 to 100000'],
      [['fil-0001'], 'Unexpected argument'],
    ] as const) {
      const result = await command([...argv]);
      expect(result.status, argv.join(' ')).toBe(2);
      expect(result.stderr).toContain(said);
    }
    const real = await command(['--items', '20'], { PROVIDER_BASE_URL: 'https://provider.example.com/api' });
    expect(real.status).toBe(2);
    expect(real.stderr).toBe('serve: --items and --seed are for the simulated provider; unset PROVIDER_BASE_URL to use it\n');
  });
});
