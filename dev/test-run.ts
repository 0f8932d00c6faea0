/**
 * `npm test`: Java 17 checked first (DynamoDB Local needs it: without it the run stops at once with
 * the one line that names it), then the type check and the tests side by side.
 *
 * The tests keep both CPUs busy most of the time, not all of it (a file waiting on a process or a
 * real-time wait, the run's start and its end); the type check, single-threaded and at a lower
 * priority, takes what they leave, where before the tests it held one CPU alone for half a minute.
 * Its errors, if any, are printed after the tests' report. Arguments go to vitest
 * (`npm test -- test/infra`). Exit status 0 only when both passed. `npm run typecheck` is the type
 * check alone.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { constants, setPriority } from 'node:os';
import { dirname, join } from 'node:path';
import { exitUnlessJava } from './fakes/dynamodb-local.js';

exitUnlessJava('test');

const require = createRequire(import.meta.url);
/** The type check's niceness: below the tests, so it never slows them. */
const TYPE_CHECK_NICENESS = 10;

/** A package's command, by its path in the package (not every package exports it). */
function binOf(name: string, path: string): string {
  return join(dirname(require.resolve(`${name}/package.json`)), path);
}

/** The child's exit status once its output is read to the end ('close'); one ended by a signal is 128 + its number. */
function ended(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => child.once('close', (code, signal) => resolve(code ?? 128 + (signal ? (constants.signals[signal] ?? 0) : 0))));
}

const typeCheck = spawn(process.execPath, [binOf('typescript', 'bin/tsc'), '--noEmit'], { stdio: ['ignore', 'pipe', 'pipe'] });
try {
  setPriority(typeCheck.pid!, TYPE_CHECK_NICENESS);
} catch {
  // A machine that refuses it runs the check at the tests' priority.
}
let typeCheckOutput = '';
typeCheck.stdout!.on('data', (chunk: Buffer) => void (typeCheckOutput += chunk.toString('utf8')));
typeCheck.stderr!.on('data', (chunk: Buffer) => void (typeCheckOutput += chunk.toString('utf8')));
const typeChecked = ended(typeCheck);

const tests = spawn(process.execPath, [binOf('vitest', 'vitest.mjs'), 'run', ...process.argv.slice(2)], { stdio: 'inherit' });
// Interrupted (Ctrl-C reaches the whole group; a supervisor may signal this process alone): both
// children are told, and this run waits for them (the tests' teardown stops DynamoDB Local), then
// ends with the signal's status.
let interrupted: NodeJS.Signals | undefined;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    interrupted ??= signal;
    for (const child of [tests, typeCheck]) if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  });
}
const [testsStatus, typeCheckStatus] = await Promise.all([ended(tests), typeChecked]);
if (typeCheckStatus !== 0 && interrupted === undefined) {
  process.stdout.write(`\n${typeCheckOutput}\ntype check (tsc --noEmit) failed\n`);
}
process.exitCode = interrupted ? 128 + constants.signals[interrupted] : testsStatus !== 0 || typeCheckStatus !== 0 ? 1 : 0;
