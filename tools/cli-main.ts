/**
 * What every operator CLI here does when it is the program being run (not imported by a test or the
 * local run): run, set the exit status, and name itself in an unexpected failure.
 */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** True when the module at `moduleUrl` (its `import.meta.url`) is the program being run. */
export function isMain(moduleUrl: string): boolean {
  const script = process.argv[1];
  if (!script) return false;
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(moduleUrl));
  } catch {
    return false;
  }
}

/** Runs `main` with the command line's arguments when `moduleUrl` is the program; its result is the exit status. */
export function runWhenMain(moduleUrl: string, name: string, main: (argv: string[]) => Promise<number>): void {
  if (!isMain(moduleUrl)) return;
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  main(process.argv.slice(2)).then(
    (status) => {
      process.exitCode = status;
    },
    (error: unknown) => {
      process.stderr.write(`${name}: ${String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
