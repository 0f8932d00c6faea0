/**
 * Error classes shared by every function. None of them ever carries a token: messages are built
 * from status codes, provider error codes/messages (redacted) and ids only.
 */

/**
 * `instanceof` for ConfigError, PermanentError (and its subclasses) and TransientError holds across
 * copies of this module. The item sync's lazily loaded modules are bundled on their own
 * (functions/item-sync/lazy-modules.ts), each with its own copy of these classes, and an error one
 * of them throws must be known by the checks of index.mjs (functions/item-sync/outcome/decide.ts).
 * An instance carries the kinds of its class and its ancestors under a global symbol; a class is
 * known by its `kind`, not its name (a minified bundle renames classes).
 */
const KINDS = Symbol.for('content-sync.error-kinds');

interface Kinded {
  readonly kind?: string;
}

function brand(error: Error, target: unknown): void {
  const kinds: string[] = [];
  for (let type = target as (Kinded & object) | null; type !== null && type !== Error; type = Object.getPrototypeOf(type) as (Kinded & object) | null) {
    if (Object.hasOwn(type, 'kind') && typeof type.kind === 'string') kinds.push(type.kind);
  }
  Object.defineProperty(error, KINDS, { value: kinds, enumerable: false });
}

/** A class's own `kind`: a subclass without one is known by no instance (none is made of it here). */
function ownKind(type: object): string | undefined {
  return Object.hasOwn(type, 'kind') ? (type as Kinded).kind : undefined;
}

function isKind(value: unknown, kind: string | undefined): boolean {
  if (typeof value !== 'object' || value === null || kind === undefined) return false;
  const kinds = (value as { [KINDS]?: unknown })[KINDS];
  return Array.isArray(kinds) && kinds.includes(kind);
}

/** A configuration value (environment variable or CDK context key) is missing or malformed. */
export class ConfigError extends Error {
  static readonly kind: string = 'ConfigError';
  static override [Symbol.hasInstance](value: unknown): boolean {
    return isKind(value, ownKind(this));
  }
  override readonly name = 'ConfigError';
  constructor(
    /** The environment variable or context key at fault. */
    readonly key: string,
    message: string,
  ) {
    super(`${key}: ${message}`);
    brand(this, new.target);
  }
}

/**
 * How a provider call ended when it did not return a usable 200 (what the item sync then does with
 * a record is decided in functions/item-sync/outcome/decide.ts alone):
 * - unauthorized: 401 (the token is wrong or expired)
 * - not-found: 404
 * - rate-limited: 429 (retryAfterSeconds when the provider sent Retry-After)
 * - transient: network failure, time-out, 408, 5xx — may pass on a retry
 * - permanent: 400, 403 and every other 4xx, a redirect we refuse, a body over the size cap
 * - malformed: a 200 whose body is not the JSON we expect
 */
export type ProviderErrorKind =
  | 'unauthorized'
  | 'not-found'
  | 'rate-limited'
  | 'transient'
  | 'permanent'
  | 'malformed';

export interface ProviderErrorDetails {
  kind: ProviderErrorKind;
  /** Which call failed, e.g. `getToken` or `getItem`. */
  operation: string;
  status?: number;
  /** `error.code` from the provider's error body, when it sent one. */
  providerCode?: number;
  /** `error.message` from the provider's error body (already redacted). */
  providerMessage?: string;
  retryAfterSeconds?: number;
  cause?: unknown;
}

/** The provider answered with something other than a usable 200, or could not be reached. */
export class ProviderError extends Error {
  override readonly name = 'ProviderError';
  readonly kind: ProviderErrorKind;
  readonly operation: string;
  readonly status: number | undefined;
  readonly providerCode: number | undefined;
  readonly providerMessage: string | undefined;
  readonly retryAfterSeconds: number | undefined;

  constructor(summary: string, details: ProviderErrorDetails) {
    const parts = [`${details.operation}: ${summary}`];
    if (details.status !== undefined) parts.push(`HTTP ${details.status}`);
    if (details.providerCode !== undefined || details.providerMessage !== undefined) {
      parts.push(`provider error ${details.providerCode ?? '?'}: ${details.providerMessage ?? ''}`.trim());
    }
    super(parts.join('; '), details.cause === undefined ? undefined : { cause: details.cause });
    this.kind = details.kind;
    this.operation = details.operation;
    this.status = details.status;
    this.providerCode = details.providerCode;
    this.providerMessage = details.providerMessage;
    this.retryAfterSeconds = details.retryAfterSeconds;
  }
}

/** The input can never succeed as sent; the record is dead-lettered with this message as the reason. */
export class PermanentError extends Error {
  /** Each subclass has its own (SealError): `instanceof` a subclass holds for it and its subclasses only. */
  static readonly kind: string = 'PermanentError';
  static override [Symbol.hasInstance](value: unknown): boolean {
    return isKind(value, ownKind(this));
  }
  override readonly name = 'PermanentError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    brand(this, new.target);
  }
}

/** A failure that may pass later (AWS throttling, a lost write race after bounded retries...). */
export class TransientError extends Error {
  static readonly kind: string = 'TransientError';
  static override [Symbol.hasInstance](value: unknown): boolean {
    return isKind(value, ownKind(this));
  }
  override readonly name = 'TransientError';
  constructor(
    message: string,
    options?: { cause?: unknown; retryAfterSeconds?: number },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.retryAfterSeconds = options?.retryAfterSeconds;
    brand(this, new.target);
  }
  readonly retryAfterSeconds: number | undefined;
}

/** Replaces every occurrence of the given secrets in a text. Used on anything the provider echoes back. */
export function redact(text: string, secrets: ReadonlyArray<string | undefined>): string {
  let out = text;
  for (const secret of secrets) {
    if (secret && secret.length >= 4) out = out.split(secret).join('[redacted]');
  }
  return out;
}

/**
 * What an AWS SDK error says of itself, without any value of the request: its name, its HTTP
 * status, and both as the adapters quote them (`ThrottlingException, HTTP 400`; `Error` without a name).
 */
export function awsErrorOf(error: unknown): { name: string | undefined; status: number | undefined; summary: string } {
  const { name, $metadata } = (error ?? {}) as { name?: string; $metadata?: { httpStatusCode?: number } };
  const status = $metadata?.httpStatusCode;
  return { name, status, summary: `${name ?? 'Error'}${status !== undefined ? `, HTTP ${status}` : ''}` };
}

/**
 * A failed AWS read (or a write whose caller hands every failure back alike), named by `what` (`DynamoDB Query on the changes table <name>`) and the error's
 * name and status, never a value: a TransientError for throttling and 5xx (trying again may pass),
 * an Error otherwise.
 */
export function readFailure(what: string, error: unknown): Error {
  const { name, status, summary } = awsErrorOf(error);
  const message = `${what} failed (${summary})`;
  return status === undefined || status >= 500 || name === 'ProvisionedThroughputExceededException' || name === 'ThrottlingException'
    ? new TransientError(message)
    : new Error(message);
}
