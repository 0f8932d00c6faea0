/**
 * The client's one error, ContentSyncError: every answer that is not a 2xx, and every request that
 * got no answer once its tries were spent, typed by its `code`.
 *
 * - The API's own refusals carry `{"error": {"code", "message"}}` (docs/client-api.md, "Errors"):
 *   their code is kept as sent.
 * - API Gateway answers some requests before the API runs, in its own shape `{"message": …}`: 403
 *   (unsigned, or signed by a principal the policy does not allow) is `forbidden`, 429 (the stage's
 *   throttle) is `throttled`; any other status without a code of the API is named by its class.
 * - No answer: `timeout` (no answer within `timeoutMs`) or `network` (the connection failed), with
 *   `status` 0.
 *
 * A message never holds a token: API Gateway's signature refusal quotes the canonical request it
 * expected, which holds the session token; that part is cut, and every secret the request carried
 * (the session token, the secret key, a refresh token in its body) is replaced wherever it appears.
 */

import type { components } from './schema.js';

type Schemas = components['schemas'];

/** The codes the API answers: the `code` of every `{"error": {…}}` body the OpenAPI document describes. */
export type ApiErrorCode = { [K in keyof Schemas]: Schemas[K] extends { error: { code: infer C } } ? C : never }[keyof Schemas];

/** ApiErrorCode's values, for a code read from an answer. */
export const API_ERROR_CODES = ['bad-request', 'not-found', 'conflict', 'cursor-expired', 'too-large', 'internal', 'unavailable'] as const satisfies readonly ApiErrorCode[];

/** API Gateway's own refusals, before the API runs: 403 and 429 `{"message": …}`. */
export type GatewayErrorCode = 'forbidden' | 'throttled';

/** No answer: none within the time-out, or the connection failed. */
export type TransportErrorCode = 'timeout' | 'network';

export type ErrorCode = ApiErrorCode | GatewayErrorCode | TransportErrorCode;

/** An id the API refused in `POST /connections/{connection}/items`: its place in `ids`, and why. */
export interface RejectedId {
  index: number;
  reason: string;
}

/** The codes worth trying again later: the client's retries have been spent on them already. */
const RETRYABLE: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['throttled', 'unavailable', 'internal', 'timeout', 'network']);

export class ContentSyncError extends Error {
  override readonly name = 'ContentSyncError';
  /** The HTTP status; 0 when no answer came (`timeout`, `network`). */
  readonly status: number;
  readonly code: ErrorCode;
  /** The ids refused, when the API names them (a 400 of `sendIds`). */
  readonly rejected?: RejectedId[];
  /** The route, as a pattern: `PUT /connections/{connection}`. */
  readonly operation: string;
  /** How many requests were made, the first one included. */
  readonly tries: number;
  /** API Gateway's id of the last request (`apigw-requestid`), for its access log. */
  readonly requestId?: string;

  constructor(fields: { status: number; code: ErrorCode; message: string; operation: string; tries: number; rejected?: RejectedId[]; requestId?: string; cause?: unknown }) {
    super(fields.message, fields.cause === undefined ? undefined : { cause: fields.cause });
    this.status = fields.status;
    this.code = fields.code;
    this.operation = fields.operation;
    this.tries = fields.tries;
    if (fields.rejected !== undefined) this.rejected = fields.rejected;
    if (fields.requestId !== undefined) this.requestId = fields.requestId;
  }

  /** Whether the same request may pass later (throttled, unavailable, internal, no answer). */
  get retryable(): boolean {
    return RETRYABLE.has(this.code);
  }
}

/** The code of a status that came without one of the API's codes. */
export function codeOfStatus(status: number): ErrorCode {
  switch (status) {
    case 400:
      return 'bad-request';
    case 401:
    case 403:
      return 'forbidden';
    case 404:
      return 'not-found';
    case 409:
      return 'conflict';
    case 410:
      return 'cursor-expired';
    case 413:
      return 'too-large';
    case 429:
      return 'throttled';
    case 502:
    case 503:
    case 504:
      return 'unavailable';
    default:
      return status >= 400 && status < 500 ? 'bad-request' : 'internal';
  }
}

/** Where API Gateway's signature refusal starts quoting the request it expected. */
const CANONICAL_QUOTE = /\s*The Canonical String for this request should have been[\s\S]*$/;
/** The longest message kept; the rest is cut (`…`). */
const MAX_MESSAGE_LENGTH = 1000;
/** Shorter values are not searched for: they could not be told from ordinary words. */
const MIN_SECRET_LENGTH = 8;

/** `text` without the parts that could quote a secret: the canonical request, and each of `secrets`. */
export function cleanMessage(text: string, secrets: Iterable<string>): string {
  let clean = text.replace(CANONICAL_QUOTE, '');
  for (const secret of secrets) if (secret.length >= MIN_SECRET_LENGTH) clean = clean.split(secret).join('[redacted]');
  return clean.length > MAX_MESSAGE_LENGTH ? `${clean.slice(0, MAX_MESSAGE_LENGTH)}…` : clean;
}

/** The error of an answer that is not a 2xx: its status, and its body as text. */
export function errorOfAnswer(answer: { status: number; text: string; requestId?: string | undefined }, context: { operation: string; tries: number; secrets: Iterable<string> }): ContentSyncError {
  let body: unknown;
  try {
    body = JSON.parse(answer.text);
  } catch {
    body = undefined;
  }
  const fields = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
  const error = typeof fields['error'] === 'object' && fields['error'] !== null ? (fields['error'] as Record<string, unknown>) : undefined;
  const sent = error?.['code'];
  const code: ErrorCode = typeof sent === 'string' && (API_ERROR_CODES as readonly string[]).includes(sent) ? (sent as ApiErrorCode) : codeOfStatus(answer.status);
  const said = typeof error?.['message'] === 'string' ? error['message'] : typeof fields['message'] === 'string' ? fields['message'] : `HTTP ${answer.status}`;
  const rejected = Array.isArray(fields['rejected']) ? rejectedOf(fields['rejected']) : undefined;
  return new ContentSyncError({
    status: answer.status,
    code,
    message: cleanMessage(said, context.secrets),
    operation: context.operation,
    tries: context.tries,
    ...(rejected !== undefined ? { rejected } : {}),
    ...(answer.requestId !== undefined ? { requestId: answer.requestId } : {}),
  });
}

function rejectedOf(list: unknown[]): RejectedId[] {
  return list
    .filter((entry): entry is Record<string, unknown> => typeof entry === 'object' && entry !== null)
    .map((entry) => ({ index: Number(entry['index']), reason: String(entry['reason'] ?? '') }));
}
