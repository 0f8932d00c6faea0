/** What the bench, soak and reconciler-bench command lines share: whole-number options, and a log that --json silences. */

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
