/**
 * DynamoDB Local as the harness starts it (dev/fakes/dynamodb-local.ts): Java 17 named in one line
 * when it is missing or too old, by every command that needs it; nothing left running after a run that is interrupted (Ctrl-C) or
 * killed outright, and none after `close()`.
 */
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { DYNAMODB_LOCAL_HEAP_MB, JAVA_REQUIRED, JavaMissingError, PortTakenError, requireJava, startDynamoDbLocal } from '../../../dev/fakes/dynamodb-local.js';
import { LOCAL_NAMES, LOCAL_RUN_JIT } from '../../../dev/local/local-run.js';
import { startStorage } from '../../../dev/system/storage.js';
import { HANG_GUARD_MS } from '../../support/hang-guard.js';

const require = createRequire(import.meta.url);
const folder = mkdtempSync(join(tmpdir(), 'dynamodb-local-test-'));
afterAll(() => rmSync(folder, { recursive: true, force: true }));

/** The live (not zombie) processes of a process group, from /proc. */
function liveInGroup(pgid: number): Array<{ pid: number; command: string }> {
  const live: Array<{ pid: number; command: string }> = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    // pid (comm) state ppid pgrp ...: comm may hold spaces, so read after its closing parenthesis.
    const close = stat.lastIndexOf(')');
    const [state, , pgrp] = stat.slice(close + 2).split(' ');
    if (Number(pgrp) === pgid && state !== 'Z') live.push({ pid: Number(entry), command: stat.slice(stat.indexOf('(') + 1, close) });
  }
  return live;
}

/** The command line of the group's JVM. */
function javaArgs(pgid: number): string[] {
  const java = liveInGroup(pgid).find((p) => p.command === 'java');
  if (java === undefined) throw new Error(`no java in the process group ${pgid}`);
  return readFileSync(`/proc/${java.pid}/cmdline`, 'utf8').split('\0');
}

/** Waits for the group to end, at most GONE_GUARD_MS (far beyond the watchdog's kill); the caller asserts. */
const GONE_GUARD_MS = 60_000;
async function untilGroupGone(pgid: number): Promise<void> {
  const until = Date.now() + GONE_GUARD_MS;
  while (liveInGroup(pgid).length > 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 100));
}

/** A fake `java` in a folder of its own that prints `version` as `java -version` does. */
function fakeJava(version: string): string {
  const home = mkdtempSync(join(folder, 'jdk-'));
  const bin = join(home, 'bin');
  mkdirSync(bin);
  writeFileSync(join(bin, 'java'), `#!/bin/sh\necho 'openjdk version "${version}" 2019-01-15' >&2\n`);
  chmodSync(join(bin, 'java'), 0o755);
  return home;
}
describe('Java', () => {
  it('is named in one line with the command that installs it when it is missing', () => {
    expect(() => requireJava(join(folder, 'no-such-java'))).toThrow(JavaMissingError);
    expect(() => requireJava(join(folder, 'no-such-java'))).toThrow(JAVA_REQUIRED);
    expect(JAVA_REQUIRED).toContain('Java 17');
    expect(JAVA_REQUIRED).toContain('apt-get install -y openjdk-17-jre-headless');
    expect(JAVA_REQUIRED).not.toContain('\n');
  });

  it('older than 17 is refused with what was found; 17 and 21 are taken', () => {
    expect(() => requireJava(join(fakeJava('11.0.2'), 'bin', 'java'))).toThrow(`${JAVA_REQUIRED} (found: openjdk version "11.0.2" 2019-01-15)`);
    expect(() => requireJava(join(fakeJava('1.8.0_392'), 'bin', 'java'))).toThrow(JavaMissingError);
    expect(requireJava(join(fakeJava('17.0.15'), 'bin', 'java'))).toBe(17);
    expect(requireJava(join(fakeJava('21'), 'bin', 'java'))).toBe(21);
  });

  it('missing stops the start at once, before anything is spawned', async () => {
    const home = process.env.JAVA_HOME;
    process.env.JAVA_HOME = join(folder, 'no-such-jdk');
    try {
      await expect(startDynamoDbLocal()).rejects.toThrow(JAVA_REQUIRED);
    } finally {
      if (home === undefined) delete process.env.JAVA_HOME;
      else process.env.JAVA_HOME = home;
    }
  });
});

describe('the commands that need DynamoDB Local, without Java', () => {
  /** A PATH with node and the shell but no java. */
  function pathWithoutJava(): string {
    const bin = mkdtempSync(join(folder, 'bin-'));
    for (const tool of ['node', 'sh']) {
      const found = spawnSync('/bin/sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).stdout.trim();
      symlinkSync(found, join(bin, tool));
    }
    return bin;
  }

  it.each([
    ['npm start', 'dev/local/run.ts', [], 'start'],
    ['npm test', 'dev/test-run.ts', [], 'test'],
    ['npm run sim', 'dev/sim/run.ts', ['--short', 'known'], 'sim'],
    ['npm run bench', 'dev/bench/bench.ts', [], 'bench'],
    ['npm run soak', 'dev/bench/soak.ts', [], 'soak'],
    ['npm run bench:reconciler', 'dev/bench/reconciler.ts', [], 'bench:reconciler'],
  ] as const)('%s stops with exit status 1 and one line naming Java 17 and its install command', (_, entry, args, command) => {
    const env: NodeJS.ProcessEnv = { ...process.env, PATH: pathWithoutJava() };
    delete env.JAVA_HOME;
    const run = spawnSync(process.execPath, ['--import', require.resolve('tsx'), entry, ...args], { encoding: 'utf8', env, timeout: HANG_GUARD_MS });
    expect(run.status).toBe(1);
    expect(run.stderr).toBe(`${command}: ${JAVA_REQUIRED}\n`);
    expect(run.stdout).not.toContain('Error');
  });
});

describe('the server', () => {
  it('is gone, every process of its group, once closed', async () => {
    const server = await startDynamoDbLocal();
    expect(server.endpoint).toBe(`http://127.0.0.1:${server.port}`);
    expect(liveInGroup(server.pid).map((p) => p.command)).toContain('java');
    // Its heap capped (the machine's quarter otherwise), in memory.
    expect(javaArgs(server.pid)).toEqual(expect.arrayContaining([`-Xmx${DYNAMODB_LOCAL_HEAP_MB}m`, '-inMemory']));
    // Both compilers by default (a simulation's long run).
    expect(javaArgs(server.pid).filter((arg) => arg.startsWith('-XX:TieredStopAtLevel'))).toEqual([]);
    await server.close();
    expect(liveInGroup(server.pid)).toEqual([]);
  });

  it("takes the heap it is given, keeps its tables in the folder it is given, and compiles with the first tier only when asked (jit: 'quick', the test suite's)", async () => {
    const server = await startDynamoDbLocal({ heapMb: 256, path: join(folder, 'tables'), jit: 'quick' });
    try {
      const args = javaArgs(server.pid);
      expect(args.filter((arg) => arg.startsWith('-XX:TieredStopAtLevel'))).toEqual(['-XX:TieredStopAtLevel=1']);
      expect(args).toContain('-Xmx256m');
      expect(args.filter((arg) => arg.startsWith('-Xmx'))).toHaveLength(1);
      expect(args.slice(args.indexOf('-dbPath'), args.indexOf('-dbPath') + 2)).toEqual(['-dbPath', join(folder, 'tables')]);
      expect(args).not.toContain('-inMemory');
    } finally {
      await server.close();
    }
    // Kept: only a server asked to remove its folder does.
    expect(existsSync(join(folder, 'tables'))).toBe(true);
  });

  it("compiles with the first tier only for the local run (startStorage's jit, as dev/local/local-run.ts asks)", async () => {
    const commandLines = (path: string): string[][] =>
      readdirSync('/proc')
        .filter((entry) => /^\d+$/.test(entry))
        .flatMap((entry) => {
          try {
            return [readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0')];
          } catch {
            return []; // gone meanwhile
          }
        })
        // The JVM's own command line, not its shell's.
        .filter((args) => /(^|\/)java$/.test(args[0]!) && args.includes('-dbPath') && args[args.indexOf('-dbPath') + 1] === path);
    const path = join(folder, 'local-run-tables');
    const storage = await startStorage(LOCAL_NAMES, { dynamodbPath: path, dynamodbTemporary: true, noBucket: true, jit: LOCAL_RUN_JIT });
    try {
      const [args, ...others] = commandLines(path);
      expect(others).toEqual([]);
      expect(args!.filter((arg) => arg.startsWith('-XX:TieredStopAtLevel'))).toEqual(['-XX:TieredStopAtLevel=1']);
    } finally {
      await storage.close();
    }
  });

  it('is never taken for ours when another process holds the port: refused, the other server left alone', async () => {
    const other = await startDynamoDbLocal({ jit: 'quick' });
    try {
      await expect(startDynamoDbLocal({ port: other.port, jit: 'quick' })).rejects.toThrow(PortTakenError);
      expect(liveInGroup(other.pid).map((p) => p.command)).toContain('java');
    } finally {
      await other.close();
    }
  });

  /** Starts the fixture run in a child process; resolves with it and its server's process group once the server answers. */
  async function startRun(tables?: string, options: { cli?: boolean; exit?: boolean } = {}): Promise<{ child: ReturnType<typeof spawn>; pgid: number }> {
    const entry = fileURLToPath(new URL('./fixtures/start-dynamodb-local.ts', import.meta.url));
    const args = [entry, ...(tables !== undefined ? [tables] : []), ...(options.exit ? ['exit'] : [])];
    // As npm runs a script (the tsx command, which handles SIGINT itself and exits), in a process
    // group of its own as a terminal's Ctrl-C reaches it; or node with tsx's loader.
    const child = options.cli
      ? spawn(process.execPath, [fileURLToPath(new URL('../../../node_modules/tsx/dist/cli.mjs', import.meta.url)), ...args], { stdio: ['ignore', 'pipe', 'inherit'], detached: true })
      : spawn(process.execPath, ['--import', require.resolve('tsx'), ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    const pgid = await new Promise<number>((resolve, reject) => {
      let text = '';
      child.stdout!.on('data', (chunk: Buffer) => {
        text += chunk.toString('utf8');
        const match = /PID (\d+)/.exec(text);
        if (match) resolve(Number(match[1]));
      });
      child.once('exit', (code) => reject(new Error(`the run ended early (code ${code})`)));
    });
    return { child, pgid };
  }

  /** Kills a process group, gone or not (a leak fails its test; it must not outlive it). */
  function killQuietly(pgid: number): void {
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {
      // gone, as it should be
    }
  }

  type Run = Awaited<ReturnType<typeof startRun>>;
  it.each<[string, 'cli' | 'exit' | 'node', (run: Run) => void]>([
    ['interrupted with Ctrl-C under the tsx command, as npm runs it', 'cli', ({ child }) => process.kill(-child.pid!, 'SIGINT')],
    ['ended by process.exit() without closing its server', 'exit', () => undefined],
    ['interrupted (Ctrl-C, SIGINT)', 'node', ({ child }) => child.kill('SIGINT')],
    ['terminated (SIGTERM)', 'node', ({ child }) => child.kill('SIGTERM')],
    ['killed outright (SIGKILL: no handler runs)', 'node', ({ child }) => child.kill('SIGKILL')],
  ])('leaves no Java process behind, nor the tables of a server that removes them, when its run is %s', async (what, how, end) => {
    const tables = join(folder, `tables-${what.replace(/\W+/g, '-')}`);
    const run = await startRun(tables, how === 'cli' ? { cli: true } : how === 'exit' ? { exit: true } : {});
    expect(liveInGroup(run.pgid).map((p) => p.command)).toContain('java');
    expect(existsSync(tables)).toBe(true);
    const ended = new Promise((resolve) => run.child.once('exit', resolve));
    end(run);
    await ended;
    try {
      await untilGroupGone(run.pgid);
      expect(liveInGroup(run.pgid)).toEqual([]);
      expect(existsSync(tables)).toBe(false);
    } finally {
      killQuietly(run.pgid);
      // Under the tsx command the run has a group of its own.
      if (how === 'cli') killQuietly(run.child.pid!);
    }
  });
});
