/**
 * Captures everything written to process.stdout and process.stderr (the functions' JSON logs, their
 * EMF metrics, warnings) while a run lasts, so that it can be searched for tokens. `print` writes
 * through to the real stdout (progress lines of the CLI), and is not captured.
 */
type Write = typeof process.stdout.write;

export class OutputCapture {
  private readonly chunks: string[] = [];
  private bytes = 0;
  private originalOut: Write | undefined;
  private originalErr: Write | undefined;

  start(): void {
    if (this.originalOut) return;
    this.originalOut = process.stdout.write.bind(process.stdout) as Write;
    this.originalErr = process.stderr.write.bind(process.stderr) as Write;
    const capture = (chunk: unknown, ...rest: unknown[]): boolean => {
      const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString('utf8');
      this.chunks.push(text);
      this.bytes += text.length;
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

  /** Writes to the real stdout, around the capture. */
  print(line: string): void {
    (this.originalOut ?? process.stdout.write.bind(process.stdout))(`${line}\n`);
  }

  get length(): number {
    return this.bytes;
  }

  text(): string {
    return this.chunks.join('');
  }
}

/** Occurrences of `needle` in `haystack`. */
export function occurrences(haystack: string, needle: string): number {
  if (needle === '') return 0;
  let count = 0;
  for (let at = haystack.indexOf(needle); at >= 0; at = haystack.indexOf(needle, at + needle.length)) count += 1;
  return count;
}
