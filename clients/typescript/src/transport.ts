/**
 * How each request goes out: signed (signing.ts), within a time-out, tried again when it may pass
 * later, its answer read whole, and a ContentSyncError (errors.ts) for any answer that is not a 2xx.
 * openapi-fetch builds the request (its URL, query and JSON body from the schema's types) and hands
 * it here as its `fetch`.
 *
 * - Time-out: `timeoutMs` a try (default 30 s, API Gateway's integration limit: a longer wait could
 *   not bring an answer), the answer's body included, with the caller's own signal beside it.
 * - Tried again: a 429 or a 5xx, a time-out, a connection that failed; never another 4xx, which
 *   the same request would get again. Every route of the client API may be sent twice: a PUT of
 *   the same credentials, a DELETE, a pause or a resume again changes nothing, a GET reads, and a
 *   send again only queues its ids once more (the sync reads each id's item again, no harm). So a
 *   request whose answer was lost is sent again like any other.
 * - At most `retries` more tries (default 3), each signed again (a new date, and the credentials of
 *   the moment). Between tries a wait with full jitter: a random time from 0 to
 *   min(capMs, baseMs × 2^(try − 1)), baseMs 200, capMs 10,000 by default; an answer's
 *   `Retry-After` (seconds, or an HTTP date) is waited instead, unless it is over maxRetryAfterMs
 *   (default 60 s): then the error is thrown at once, for the caller to come back later.
 * - The caller's signal ends everything at once, with its reason, a wait between tries included.
 */
import { ContentSyncError, errorOfAnswer } from './errors.js';
import { signedHeaders, type RequestSigner } from './signing.js';

export type Fetch = (input: URL, init: RequestInit) => Promise<Response>;
export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

export interface Backoff {
  /** The first wait's upper bound, doubled at each try (default 200 ms). */
  baseMs: number;
  /** The longest upper bound (default 10,000 ms). */
  capMs: number;
  /** The longest `Retry-After` waited; a longer one throws at once (default 60,000 ms). */
  maxRetryAfterMs: number;
}

export const DEFAULT_TIMEOUT_MS = 30_000;
export const DEFAULT_RETRIES = 3;
export const DEFAULT_BACKOFF: Backoff = { baseMs: 200, capMs: 10_000, maxRetryAfterMs: 60_000 };

export interface TransportOptions {
  fetch: Fetch;
  /** Undefined: requests go unsigned (a local API). */
  signer: RequestSigner | undefined;
  timeoutMs: number;
  retries: number;
  backoff: Backoff;
  sleep: Sleep;
  random: () => number;
  now: () => number;
  /** The secrets an error message must never hold: the credentials' (signing.ts tells them). */
  secrets: () => Iterable<string>;
}

/** Waits `ms`, or rejects with the signal's reason when it aborts first. */
export const realSleep: Sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });

/** The wait a `Retry-After` value asks for, in ms; undefined when there is none or it is neither seconds nor an HTTP date. */
export function retryAfterMs(value: string | null, now: number): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** The wait before try `tries + 1` without a `Retry-After`: full jitter. */
export function jitteredDelay(tries: number, backoff: Backoff, random: () => number): number {
  return Math.floor(random() * Math.min(backoff.capMs, backoff.baseMs * 2 ** (tries - 1)));
}

const retryableStatus = (status: number): boolean => status === 429 || status >= 500;

/** The fetch openapi-fetch calls for one operation (its route as a pattern, for the errors). */
export function transport(options: TransportOptions, operation: string): (request: Request) => Promise<Response> {
  return async (request) => {
    const caller = request.signal;
    const url = new URL(request.url);
    const method = request.method;
    const bytes = request.body === null ? undefined : new Uint8Array(await request.arrayBuffer());
    const headers: Record<string, string> = {};
    request.headers.forEach((value, name) => void (headers[name] = value));
    const secrets = (): string[] => [...options.secrets(), ...bodySecrets(bytes)];
    for (let tries = 1; ; tries += 1) {
      const sent = options.signer ? await signedHeaders(options.signer, { method, url, headers, body: bytes }) : headers;
      const timeout = AbortSignal.timeout(options.timeoutMs);
      let answer: { status: number; statusText: string; headers: Headers; body: ArrayBuffer } | undefined;
      let failure: unknown;
      try {
        const response = await options.fetch(url, { method, headers: sent, ...(bytes !== undefined ? { body: bytes } : {}), signal: AbortSignal.any([caller, timeout]) });
        answer = { status: response.status, statusText: response.statusText, headers: response.headers, body: await response.arrayBuffer() };
      } catch (error) {
        if (caller.aborted) throw caller.reason;
        failure = error;
      }
      const retryable = answer === undefined || retryableStatus(answer.status);
      if (answer !== undefined && !retryable && answer.status < 300) {
        return new Response(answer.body.byteLength === 0 ? null : answer.body, { status: answer.status, statusText: answer.statusText, headers: answer.headers });
      }
      const fail = (): ContentSyncError => {
        if (answer !== undefined) {
          const requestId = answer.headers.get('apigw-requestid') ?? undefined;
          return errorOfAnswer({ status: answer.status, text: new TextDecoder().decode(answer.body), requestId }, { operation, tries, secrets: secrets() });
        }
        const timedOut = timeout.aborted;
        return new ContentSyncError({
          status: 0,
          code: timedOut ? 'timeout' : 'network',
          message: timedOut ? `no answer within ${options.timeoutMs} ms, ${tries} ${tries === 1 ? 'try' : 'tries'}` : `the request failed before an answer, ${tries} ${tries === 1 ? 'try' : 'tries'}`,
          operation,
          tries,
          cause: failure,
        });
      };
      if (!retryable || tries > options.retries) throw fail();
      const asked = answer === undefined ? undefined : retryAfterMs(answer.headers.get('retry-after'), options.now());
      if (asked !== undefined && asked > options.backoff.maxRetryAfterMs) throw fail();
      await options.sleep(asked ?? jitteredDelay(tries, options.backoff, options.random), caller);
    }
  };
}

/** A refresh token in a JSON body: a secret an error message must never hold. */
function bodySecrets(bytes: Uint8Array | undefined): string[] {
  if (bytes === undefined) return [];
  try {
    const body: unknown = JSON.parse(new TextDecoder().decode(bytes));
    const token = typeof body === 'object' && body !== null ? (body as Record<string, unknown>)['refreshToken'] : undefined;
    return typeof token === 'string' ? [token] : [];
  } catch {
    return [];
  }
}
