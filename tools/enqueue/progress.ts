/**
 * Progress display: on a terminal, one line rewritten in place (at most 10 times a second); anywhere
 * else (a pipe, a CI log), a plain line at most every `intervalMs`, so logs stay readable.
 */

export interface Progress {
  /** The current state; shown now on a terminal, or when the interval has passed otherwise. */
  update(text: string): void;
  /** Ends the progress with a final line (always shown). */
  done(text: string): void;
  /** Removes the progress line from a terminal (nothing otherwise). */
  clear(): void;
}

export interface ProgressOptions {
  /** Force terminal or plain mode; default: the stream's isTTY. */
  tty?: boolean;
  /** Plain mode: least time between two lines; default 2000 ms. */
  intervalMs?: number;
  /** Shows nothing at all. */
  silent?: boolean;
  now?: () => number;
}

export function createProgress(stream: NodeJS.WritableStream & { isTTY?: boolean }, options: ProgressOptions = {}): Progress {
  if (options.silent) return { update() {}, done() {}, clear() {} };
  const tty = options.tty ?? stream.isTTY === true;
  const now = options.now ?? Date.now;
  const interval = tty ? 100 : (options.intervalMs ?? 2000);
  let last = -Infinity;
  let shown = false;
  const columns = (): number => {
    const width = (stream as { columns?: number }).columns;
    return typeof width === 'number' && width >= 20 ? width : 100;
  };

  const draw = (text: string): void => {
    const fitted = text.length >= columns() ? `${text.slice(0, Math.max(1, columns() - 2))}…` : text;
    stream.write(`\r\x1b[2K${fitted}`);
    shown = true;
  };

  return {
    update(text) {
      const t = now();
      if (t - last < interval) return;
      last = t;
      if (tty) draw(text);
      else stream.write(`${text}\n`);
    },
    done(text) {
      if (tty) {
        draw(text);
        stream.write('\n');
        shown = false;
      } else {
        stream.write(`${text}\n`);
      }
      last = -Infinity;
    },
    clear() {
      if (tty && shown) stream.write('\r\x1b[2K');
      shown = false;
      last = -Infinity;
    },
  };
}

export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const minutes = Math.floor(ms / 60_000);
  const seconds = Math.round((ms % 60_000) / 1000);
  return `${minutes} min ${seconds} s`;
}
