/**
 * What the bench, soak, reconciler-bench and simulation command lines share: a mistake in the
 * command line told in one line, whole-number options, and a log that --json silences.
 */

/**
 * The mistake parseArgs threw (an unknown option, a missing value, an argument not taken), in one
 * line naming it; undefined for any other error.
 */
export function commandLineMistake(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (!(error instanceof Error) || typeof code !== 'string' || !code.startsWith('ERR_PARSE_ARGS_')) return undefined;
  // parseArgs adds a hint about positional arguments that start with '-': not what a user mistyping an option needs.
  const unknownOption = /^Unknown option '([^']+)'/.exec(error.message);
  return unknownOption ? `unknown option ${unknownOption[1]}` : error.message.split('\n')[0];
}

/**
 * parseArgs' result, or on a mistake in the command line: the mistake in one line and the usage on
 * standard error, exit status 2.
 */
export function parsedOrExit<T>(usage: string, parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    const mistake = commandLineMistake(error);
    if (mistake === undefined) throw error;
    process.stderr.write(`${mistake}\n\n${usage}`);
    process.exit(2);
  }
}

/** A whole-number option: its fallback when absent; exits 2 naming the option when it is not one within range. */
export function intOption(name: string, raw: string | undefined, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `≥ ${min}` : `from ${min} to ${max}`;
    process.stderr.write(`--${name} must be a whole number ${range}, got "${raw}"\n`);
    process.exit(2);
  }
  return value;
}

/** Progress lines on standard output, none with --json (the JSON is the only output then). */
export function progressLog(json: boolean | undefined): (line: string) => void {
  return (line) => {
    if (!json) process.stdout.write(`${line}\n`);
  };
}
