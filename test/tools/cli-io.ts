/** The enqueue CLI's standard streams in a test: standard input from a string, what it writes captured. */
import { Readable, Writable } from 'node:stream';
import type { CliIo } from '../../tools/enqueue/enqueue.js';

export function io(stdinText = '', isTTY = false): CliIo & { out: () => string; err: () => string; stdin: Readable } {
  let out = '';
  let err = '';
  const stdin = Readable.from([Buffer.from(stdinText, 'utf8')]) as Readable & { isTTY?: boolean };
  stdin.isTTY = isTTY;
  return {
    stdin,
    stdout: new Writable({ write: (chunk, _enc, cb) => ((out += String(chunk)), cb()) }),
    stderr: new Writable({ write: (chunk, _enc, cb) => ((err += String(chunk)), cb()) }),
    out: () => out,
    err: () => err,
  };
}
