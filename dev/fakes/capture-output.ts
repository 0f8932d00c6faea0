/** Captures everything written to stdout and stderr while a function runs (logs, EMF metrics). */
export async function captureOutput<T>(fn: () => Promise<T>): Promise<{ result: T | undefined; error: unknown; output: string }> {
  const chunks: string[] = [];
  const originalOut = process.stdout.write.bind(process.stdout);
  const originalErr = process.stderr.write.bind(process.stderr);
  const capture = (chunk: unknown, ...rest: unknown[]): boolean => {
    chunks.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString('utf8'));
    const callback = rest.find((arg) => typeof arg === 'function') as (() => void) | undefined;
    callback?.();
    return true;
  };
  process.stdout.write = capture as typeof process.stdout.write;
  process.stderr.write = capture as typeof process.stderr.write;
  let result: T | undefined;
  let error: unknown;
  try {
    result = await fn();
  } catch (caught) {
    error = caught;
  } finally {
    process.stdout.write = originalOut;
    process.stderr.write = originalErr;
  }
  return { result, error, output: chunks.join('') };
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
