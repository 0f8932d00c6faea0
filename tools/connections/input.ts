/**
 * What the connections CLI reads from standard input: a refresh token (all of a pipe, trimmed; at a
 * terminal, one line typed without echo) and a confirmation line. Nothing read is ever written back.
 */

export interface InputStream extends NodeJS.ReadableStream {
  isTTY?: boolean;
  setRawMode?: (mode: boolean) => unknown;
}

/** Most characters read from a pipe for a refresh token: far more than any token, bounded anyway. */
const MAX_PIPED_CHARS = 64 * 1024;

/** All of standard input as text (at most MAX_PIPED_CHARS; more is an error). */
export function readAll(stdin: InputStream): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const onData = (chunk: Buffer | string): void => {
      text += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
      if (text.length > MAX_PIPED_CHARS) {
        cleanup();
        reject(new Error(`standard input holds more than ${MAX_PIPED_CHARS} characters; a refresh token is far shorter`));
      }
    };
    const onEnd = (): void => {
      cleanup();
      resolve(text);
    };
    const onError = (error: Error): void => {
      cleanup();
      reject(error);
    };
    const cleanup = (): void => {
      stdin.off('data', onData);
      stdin.off('end', onEnd);
      stdin.off('error', onError);
    };
    stdin.on('data', onData);
    stdin.once('end', onEnd);
    stdin.once('error', onError);
    stdin.resume();
  });
}

/** One line of standard input (without its line break); the rest of the input when it has none. */
export function readLine(stdin: InputStream): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const finish = (line: string): void => {
      cleanup();
      stdin.pause();
      resolve(line);
    };
    const onData = (chunk: Buffer | string): void => {
      text += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
      const end = text.indexOf('\n');
      if (end >= 0) finish(text.slice(0, end).replace(/\r$/, ''));
    };
    const onEnd = (): void => finish(text);
    const onError = (error: Error): void => {
      cleanup();
      reject(error);
    };
    const cleanup = (): void => {
      stdin.off('data', onData);
      stdin.off('end', onEnd);
      stdin.off('error', onError);
    };
    stdin.on('data', onData);
    stdin.once('end', onEnd);
    stdin.once('error', onError);
    stdin.resume();
  });
}

/**
 * One line typed at a terminal without echo (raw mode): Enter ends it, Backspace erases, Ctrl-C
 * cancels. The prompt goes to `prompt`'s stream; nothing typed is shown.
 */
export function readHidden(stdin: InputStream & { setRawMode: (mode: boolean) => unknown }, out: NodeJS.WritableStream, prompt: string): Promise<string> {
  out.write(prompt);
  return new Promise((resolve, reject) => {
    let text = '';
    const done = (error?: Error): void => {
      stdin.off('data', onData);
      stdin.setRawMode(false);
      stdin.pause();
      out.write('\n');
      if (error) reject(error);
      else resolve(text);
    };
    const onData = (chunk: Buffer | string): void => {
      for (const char of typeof chunk === 'string' ? chunk : chunk.toString('utf8')) {
        if (char === '\r' || char === '\n' || char === '\u0004') return done();
        if (char === '\u0003') return done(new Error('cancelled'));
        if (char === '\u007f' || char === '\b') text = text.slice(0, -1);
        else text += char;
      }
    };
    stdin.setRawMode(true);
    stdin.on('data', onData);
    stdin.resume();
  });
}
