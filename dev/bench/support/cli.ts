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

/** The usage line of --dynamo-latency, the same for every command that takes it. */
export const DYNAMO_LATENCY_USAGE =
  "--dynamo-latency F scales AWS's DynamoDB latency injected into every call (docs/development.md, AWS's latency): 0 turns it off, 2 doubles it.";

/** The largest factor --dynamo-latency takes. */
export const MAX_LATENCY_FACTOR = 100;

/** A factor as the command line gives it: a number from 0 to MAX_LATENCY_FACTOR; undefined when it is not one. */
export function parsedFactor(raw: string): number | undefined {
  const value = raw.trim() === '' ? Number.NaN : Number(raw);
  return Number.isFinite(value) && value >= 0 && value <= MAX_LATENCY_FACTOR ? value : undefined;
}

/** A factor option (--dynamo-latency): its fallback when absent; exits 2 naming the option when it is not one. */
export function factorOption(name: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined) return fallback;
  const value = parsedFactor(raw);
  if (value === undefined) {
    process.stderr.write(`--${name} must be a number from 0 to ${MAX_LATENCY_FACTOR}, got "${raw}"\n`);
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
