/**
 * HTTP client for the content provider's API. No AWS imports. Every call either returns the parsed
 * 200 body or throws a ProviderError whose `kind` classifies the outcome (see errors.ts). Tokens are
 * sent in headers only and never appear in an error message: whatever the provider echoes back is
 * redacted with the tokens of that call, and a token that cannot go into a header is refused before
 * the request (fetch would quote it in its error). getToken refuses, as malformed, an answer whose
 * tokens could never be sent in a header.
 */
import { ProviderError, redact, type ProviderErrorKind } from '../errors.js';
import type { Credentials, ProviderClient, RequestOptions, TokenGrant } from '../ports.js';
import type { ProviderConfig } from '../config.js';
import { isObject, parseJson } from '../json.js';

const MAX_REDIRECTS = 3;
/** Error bodies are small; read at most this much of one to find the error object. */
const MAX_ERROR_BODY_BYTES = 64 * 1024;
const USER_AGENT = 'content-sync/0.1';

export type FetchFn = typeof fetch;

export interface HttpProviderClientOptions extends ProviderConfig {
  /** Injected for tests; defaults to the global fetch. */
  fetch?: FetchFn;
}

interface CallSpec {
  operation: 'getToken' | 'getItem';
  url: string;
  /** What the Authorization header carries, for messages: `the refresh token`, `the access token`. */
  credential: string;
  authorization: string;
  /** Secrets to strip from anything echoed back. */
  secrets: string[];
  signal?: AbortSignal;
}

export class HttpProviderClient implements ProviderClient {
  private readonly baseUrl: string;
  private readonly timeoutMs: number;
  private readonly maxResponseBytes: number;
  private readonly fetchFn: FetchFn;

  constructor(options: HttpProviderClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.timeoutMs = options.timeoutMs;
    this.maxResponseBytes = options.maxResponseBytes;
    this.fetchFn = options.fetch ?? globalThis.fetch;
  }

  tokenUrl(clientId: string): string {
    return `${this.baseUrl}/getToken?client_id=${encodeURIComponent(clientId)}`;
  }

  /**
   * `{base}/items/<id as one percent-encoded segment>`. Throws a permanent ProviderError for an id
   * that cannot be one path segment (`.`/`..`, which URL parsing would resolve, or a lone surrogate).
   */
  itemUrl(id: string): string {
    if (id === '.' || id === '..') {
      throw new ProviderError(`item id "${id}" cannot be sent as a URL path segment`, {
        kind: 'permanent',
        operation: 'getItem',
      });
    }
    let segment: string;
    try {
      segment = encodeURIComponent(id);
    } catch (cause) {
      throw new ProviderError('item id is not well-formed Unicode and cannot be sent', {
        kind: 'permanent',
        operation: 'getItem',
        cause,
      });
    }
    return `${this.baseUrl}/items/${segment}`;
  }

  async getToken(credentials: Credentials, options: RequestOptions = {}): Promise<TokenGrant> {
    const body = await this.call({
      operation: 'getToken',
      url: this.tokenUrl(credentials.clientId),
      credential: 'the refresh token',
      authorization: `bearer ${credentials.refreshToken}`,
      secrets: [credentials.refreshToken],
      ...(options.signal ? { signal: options.signal } : {}),
    });
    if (!isObject(body)) {
      throw malformed('getToken', 'the 200 body is not a JSON object');
    }
    const accessToken = body['access_token'];
    if (typeof accessToken !== 'string' || accessToken.trim() === '') {
      throw malformed('getToken', 'the 200 body has no non-empty string "access_token"');
    }
    const accessProblem = tokenHeaderProblem(accessToken);
    if (accessProblem !== undefined) {
      throw malformed('getToken', `the 200 body has an "access_token" that cannot be sent in an HTTP header (${accessProblem})`);
    }
    const refreshToken = body['refresh_token'];
    if (refreshToken === undefined || refreshToken === null) {
      return { accessToken };
    }
    if (typeof refreshToken !== 'string' || refreshToken.trim() === '') {
      throw malformed('getToken', 'the 200 body has a "refresh_token" that is not a non-empty string');
    }
    const refreshProblem = tokenHeaderProblem(refreshToken);
    if (refreshProblem !== undefined) {
      throw malformed('getToken', `the 200 body has a "refresh_token" that cannot be sent in an HTTP header (${refreshProblem})`);
    }
    return { accessToken, refreshToken };
  }

  async getItem(id: string, accessToken: string, options: RequestOptions = {}): Promise<unknown> {
    return this.call({
      operation: 'getItem',
      url: this.itemUrl(id),
      credential: 'the access token',
      authorization: `Bearer ${accessToken}`,
      secrets: [accessToken],
      ...(options.signal ? { signal: options.signal } : {}),
    });
  }

  private async call(spec: CallSpec): Promise<unknown> {
    const problem = unsendable(spec.authorization);
    if (problem !== undefined) {
      // fetch would refuse it with an error quoting the header. Transient, as that refusal was: the
      // stored token may be replaced meanwhile.
      throw new ProviderError(`${spec.credential} cannot be sent in an HTTP header (${problem})`, {
        kind: 'transient',
        operation: spec.operation,
      });
    }
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const signal = spec.signal ? AbortSignal.any([timeout, spec.signal]) : timeout;
    const origin = new URL(spec.url).origin;
    let url = spec.url;
    try {
      for (let hop = 0; ; hop++) {
        const response = await this.fetchFn(url, {
          method: 'GET',
          headers: { Authorization: spec.authorization, Accept: 'application/json', 'User-Agent': USER_AGENT },
          redirect: 'manual',
          signal,
        });
        if (response.status >= 300 && response.status < 400) {
          await discard(response);
          url = this.nextHop(spec, response, origin, url, hop);
          continue;
        }
        if (response.status === 200) {
          const text = await this.readText(response, this.maxResponseBytes, spec.operation);
          try {
            return parseJson(text);
          } catch (cause) {
            throw malformed(spec.operation, 'the 200 body is not JSON', cause, response.status);
          }
        }
        throw await this.failure(spec, response);
      }
    } catch (error) {
      if (error instanceof ProviderError) throw error;
      throw this.networkFailure(spec, error, timeout);
    }
  }

  /** Follows a same-origin redirect; refuses one to another origin (it would carry our credentials). */
  private nextHop(spec: CallSpec, response: Response, origin: string, current: string, hop: number): string {
    const location = response.headers.get('location');
    if (!location) {
      throw new ProviderError('redirect without a Location header', {
        kind: 'permanent',
        operation: spec.operation,
        status: response.status,
      });
    }
    const target = new URL(location, current);
    if (target.origin !== origin) {
      throw new ProviderError(`refused a redirect to another origin (${target.origin}) that would carry credentials`, {
        kind: 'permanent',
        operation: spec.operation,
        status: response.status,
      });
    }
    if (hop + 1 >= MAX_REDIRECTS) {
      throw new ProviderError(`more than ${MAX_REDIRECTS} redirects`, {
        kind: 'permanent',
        operation: spec.operation,
        status: response.status,
      });
    }
    return target.href;
  }

  private async failure(spec: CallSpec, response: Response): Promise<ProviderError> {
    const status = response.status;
    let providerCode: number | undefined;
    let providerMessage: string | undefined;
    try {
      const text = await this.readText(response, MAX_ERROR_BODY_BYTES, spec.operation);
      const parsed = parseJson(text);
      const error = isObject(parsed) ? parsed['error'] : undefined;
      if (isObject(error)) {
        if (Number.isInteger(error['code'])) providerCode = error['code'] as number;
        if (typeof error['message'] === 'string') {
          providerMessage = redact(error['message'], spec.secrets).slice(0, 500);
        }
      }
    } catch {
      // Not an error object (HTML from a proxy, an oversized or empty body): the status says enough.
    }
    const kind = classifyStatus(status);
    const retryAfterSeconds = kind === 'rate-limited' ? parseRetryAfter(response.headers.get('retry-after')) : undefined;
    return new ProviderError(describeStatus(status), {
      kind,
      operation: spec.operation,
      status,
      ...(providerCode !== undefined ? { providerCode } : {}),
      ...(providerMessage !== undefined ? { providerMessage } : {}),
      ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}),
    });
  }

  private networkFailure(spec: CallSpec, error: unknown, timeout: AbortSignal): ProviderError {
    const summary = timeout.aborted
      ? `timed out after ${this.timeoutMs} ms`
      : spec.signal?.aborted
        ? 'aborted by the caller'
        : `network failure (${redact(describeCause(error), spec.secrets)})`;
    return new ProviderError(summary, { kind: 'transient', operation: spec.operation, cause: error });
  }

  /** Reads a body as UTF-8 text, failing as soon as it exceeds `limit` bytes. */
  private async readText(response: Response, limit: number, operation: string): Promise<string> {
    const declared = Number(response.headers.get('content-length'));
    if (Number.isFinite(declared) && declared > limit) {
      await discard(response);
      throw tooLarge(operation, limit, response.status);
    }
    if (!response.body) return '';
    const chunks: Uint8Array[] = [];
    let size = 0;
    const reader = response.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > limit) {
        await reader.cancel().catch(() => undefined);
        throw tooLarge(operation, limit, response.status);
      }
      chunks.push(value);
    }
    return Buffer.concat(chunks).toString('utf8');
  }
}

/**
 * Why a token the provider issued is unusable in an Authorization header, or undefined when it is
 * usable; never quotes it. Unusable: anything fetch refuses in a header (see unsendable), and any
 * other control character (tab, U+0080–U+009F), which fetch would send but no token holds.
 */
function tokenHeaderProblem(token: string): string | undefined {
  return headerProblem(token, true);
}

/**
 * Why fetch (undici) would refuse `value` in a header, or undefined: a line break, NUL, any other
 * C0 control character but tab, or DEL ("invalid header value", quoting the value), or a character
 * beyond U+00FF (a header value is bytes).
 */
function unsendable(value: string): string | undefined {
  return headerProblem(value, false);
}

function headerProblem(value: string, everyControl: boolean): string | undefined {
  for (const char of value) {
    const code = char.codePointAt(0)!;
    const name = `U+${code.toString(16).toUpperCase().padStart(4, '0')}`;
    if (code === 0x0a || code === 0x0d) return `it holds a line break, ${name}`;
    if ((code < 0x20 && code !== 0x09) || code === 0x7f) return `it holds the control character ${name}`;
    if (code > 0xff) return 'it holds a character beyond U+00FF, which a header cannot carry';
    if (everyControl && (code === 0x09 || (code >= 0x80 && code <= 0x9f))) return `it holds the control character ${name}`;
  }
  return undefined;
}

/** Status → kind, as HTTP defines the classes: the provider does not publish its codes. */
export function classifyStatus(status: number): ProviderErrorKind {
  if (status === 401) return 'unauthorized';
  if (status === 404) return 'not-found';
  if (status === 429) return 'rate-limited';
  if (status === 408 || (status >= 500 && status <= 599)) return 'transient';
  return 'permanent';
}

/** Retry-After as seconds: delta-seconds or an HTTP date. Undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now: Date = new Date()): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const date = Date.parse(trimmed);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, Math.ceil((date - now.getTime()) / 1000));
}

function describeStatus(status: number): string {
  switch (classifyStatus(status)) {
    case 'unauthorized':
      return 'the provider refused the credentials';
    case 'not-found':
      return 'not found';
    case 'rate-limited':
      return 'rate limited';
    case 'transient':
      return 'the provider failed (may pass)';
    default:
      return 'the provider rejected the request';
  }
}

function describeCause(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } })?.cause;
  if (cause?.code) return cause.code;
  if (error instanceof Error) return error.message;
  return String(error);
}

function malformed(operation: string, summary: string, cause?: unknown, status?: number): ProviderError {
  return new ProviderError(summary, {
    kind: 'malformed',
    operation,
    ...(status !== undefined ? { status } : {}),
    ...(cause !== undefined ? { cause } : {}),
  });
}

function tooLarge(operation: string, limit: number, status: number): ProviderError {
  return new ProviderError(`the response body exceeds ${limit} bytes`, { kind: 'permanent', operation, status });
}

async function discard(response: Response): Promise<void> {
  await response.body?.cancel().catch(() => undefined);
}
