/**
 * Captures everything written to process.stdout and process.stderr (the functions' JSON logs, their
 * EMF metrics, warnings) while it runs, to search it (tokens, metrics, log lines). The one place
 * that swaps the process's write functions.
 */
type Write = typeof process.stdout.write;

export class OutputCapture {
  private readonly chunks: string[] = [];
  private originalOut: Write | undefined;
  private originalErr: Write | undefined;

  start(): void {
    if (this.originalOut) return;
    this.originalOut = process.stdout.write.bind(process.stdout) as Write;
    this.originalErr = process.stderr.write.bind(process.stderr) as Write;
    const capture = (chunk: unknown, ...rest: unknown[]): boolean => {
      const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString('utf8');
      this.chunks.push(text);
      const callback = rest.find((arg) => typeof arg === 'function') as (() => void) | undefined;
      callback?.();
      return true;
    };
    process.stdout.write = capture as Write;
    process.stderr.write = capture as Write;
  }

  stop(): void {
    if (this.originalOut) process.stdout.write = this.originalOut;
    if (this.originalErr) process.stderr.write = this.originalErr;
    this.originalOut = undefined;
    this.originalErr = undefined;
  }

  /** Runs `fn` with the real stdout and stderr (progress lines of a CLI), not captured. */
  released(fn: () => void): void {
    const out = process.stdout.write;
    const err = process.stderr.write;
    if (this.originalOut) process.stdout.write = this.originalOut;
    if (this.originalErr) process.stderr.write = this.originalErr;
    try {
      fn();
    } finally {
      process.stdout.write = out;
      process.stderr.write = err;
    }
  }

  text(): string {
    return this.chunks.join('');
  }
}

/** Runs `fn` and captures what it writes to stdout and stderr. */
export async function captureOutput<T>(fn: () => Promise<T>): Promise<{ result: T | undefined; error: unknown; output: string }> {
  const capture = new OutputCapture();
  capture.start();
  let result: T | undefined;
  let error: unknown;
  try {
    result = await fn();
  } catch (caught) {
    error = caught;
  } finally {
    capture.stop();
  }
  return { result, error, output: capture.text() };
}

/** The JSON lines of captured output (logs and EMF metrics), parsed. Non-JSON lines are returned as strings. */
export function jsonLines(output: string): Array<Record<string, unknown> | string> {
  return output
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      try {
        return JSON.parse(line) as Record<string, unknown>;
      } catch {
        return line;
      }
    });
}

/** Occurrences of `needle` in `haystack`. */
export function occurrences(haystack: string, needle: string): number {
  if (needle === '') return 0;
  let count = 0;
  for (let at = haystack.indexOf(needle); at >= 0; at = haystack.indexOf(needle, at + needle.length)) count += 1;
  return count;
}
