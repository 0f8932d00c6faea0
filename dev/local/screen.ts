/** Where the local run prints: the screen (or a writer a test gives), and the handlers' log file. */
import { closeSync, openSync, writeSync } from 'node:fs';
import { relative } from 'node:path';
import { Writable } from 'node:stream';
import { createProgress, type Progress } from '../../tools/enqueue/progress.js';

export interface Writer {
  write(text: string): void;
  isTTY?: boolean;
  columns?: number;
}

export interface Screen {
  line(text?: string): void;
  progress: Progress;
}

export const terminal: Writer = {
  write: (text) => void process.stdout.write(text),
  get isTTY() {
    return process.stdout.isTTY === true;
  },
  get columns() {
    return process.stdout.columns;
  },
};

export function screenFor(writer: Writer | undefined): Screen {
  if (!writer) return { line() {}, progress: createProgress({ write: () => true } as unknown as NodeJS.WritableStream, { silent: true }) };
  const stream = {
    write: (text: string) => {
      writer.write(text);
      return true;
    },
    isTTY: writer.isTTY,
    get columns() {
      return writer.columns;
    },
  } as unknown as NodeJS.WritableStream & { isTTY?: boolean };
  return { line: (text = '') => writer.write(`${text}\n`), progress: createProgress(stream) };
}

export function display(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel && !rel.startsWith('..') ? rel : path;
}

/** The log file the handlers write to (JSON lines, as in CloudWatch), emptied first. Writes are synchronous. */
export function openLog(file: string): { stream: Writable; close(): void } {
  const fd = openSync(file, 'w');
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      try {
        writeSync(fd, chunk);
        done();
      } catch (error) {
        done(error as Error);
      }
    },
  });
  return { stream, close: () => closeSync(fd) };
}
