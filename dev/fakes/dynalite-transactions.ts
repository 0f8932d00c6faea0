/**
 * TransactWriteItems for the harness's dynalite, which has none (it answers
 * UnknownOperationException), as strict as DynamoDB: `dynaliteWithTransactions(settings)` is
 * `dynalite(settings)` with the operation added to its server; dynalite.ts starts it so in this
 * process, dynalite-child.ts in a child process (with or without the proxy, in memory or on disk).
 *
 * dynalite keeps its operations, its HTTP handler and its store to itself: the store a server works
 * on is taken as dynalite makes it (its `db` module's `create`, wrapped once per process, as
 * dynalite-key-sizes.ts wraps its key checks), and a request whose X-Amz-Target is
 * `DynamoDB_20120810.TransactWriteItems` is answered here, the others by dynalite's own handler. The
 * request is read and answered as dynalite answers any (its checks of the body, the signature's
 * presence, its error bodies), its members checked by dynalite's validation framework, the
 * transaction run by dynalite-transact-write.ts.
 *
 * ClientRequestToken, as DynamoDB documents it: for 10 minutes after a request with a token has
 * completed, the same request with that token is answered as it was without being applied again
 * (ConsumedCapacity then counts the rows read, not written), and another request with that token is
 * refused (IdempotentParameterMismatchException); while it is running, the same request is refused
 * with TransactionInProgressException (which the SDK tries again). A request that was cancelled can
 * be sent again with its token and runs again (it applied nothing); one refused by a
 * ValidationException leaves the token free. Tokens are kept per store, at most MAX_TOKENS.
 *
 * Every commit is told (dynalite-commits.ts) with the rows each action replaced and wrote.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import dynalite, { type DynaliteOptions } from 'dynalite';
import { REPORT_COMMIT_HEADER, tellCommit } from './dynalite-commits.js';
import { checkKeySizesInBytes } from './dynalite-key-sizes.js';
import {
  checkActions,
  prepare,
  runTransaction,
  TRANSACT_WRITE_TYPES,
  type ConsumedCapacity,
  type DynaliteError,
  type Store,
  type TransactWriteData,
} from './dynalite-transact-write.js';

export const TRANSACT_WRITE_TARGET = 'DynamoDB_20120810.TransactWriteItems';
/** How long a token stays bound to its request after the request completed. */
export const TOKEN_WINDOW_MS = 10 * 60_000;
/** The most tokens kept per store (the oldest completed ones go first). */
export const MAX_TOKENS = 10_000;
/** dynalite's limit on a request's body. */
const MAX_REQUEST_BYTES = 16 * 1024 * 1024;
export const IN_PROGRESS_MESSAGE = 'Transaction from previous request is still in progress';
/** DynamoDB's wording for this one is not documented; this one says what happened. */
export const MISMATCH_MESSAGE = 'The request uses the same client token as a previous, but non-identical request';

interface Validations {
  checkTypes(data: unknown, types: object): TransactWriteData;
  checkValidations(data: unknown, types: object, custom: (data: TransactWriteData, store: Store) => string | undefined, store: Store): void;
}
interface TokenUse {
  /** The SHA-256 of the request without its token, as canonical JSON. */
  request: string;
  state: 'running' | 'committed' | 'cancelled';
  /** When the token is free again (running: never). */
  until: number;
  replayConsumed?: ConsumedCapacity[] | undefined;
}

const require = createRequire(import.meta.url);
/** dynalite's own CRC32 of a body (its dependency buffer-crc32). */
const crc32 = createRequire(require.resolve('dynalite'))('buffer-crc32') as { unsigned(text: string): number };
const CAPTURE = Symbol.for('content-sync.dynalite-store-capture');
const tokensByStore = new WeakMap<Store, { uses: Map<string, TokenUse>; prunedAt: number }>();

/** dynalite(settings), with TransactWriteItems (and key sizes counted in bytes: dynalite-key-sizes.ts). */
export function dynaliteWithTransactions(settings: DynaliteOptions): Server {
  checkKeySizesInBytes();
  const db = require('dynalite/db') as { create(options: object): Store; [CAPTURE]?: { made?: Store } };
  if (!db[CAPTURE]) {
    const capture: { made?: Store } = {};
    const create = db.create;
    db.create = (options) => (capture.made = create(options));
    db[CAPTURE] = capture;
  }
  const capture = db[CAPTURE]!;
  capture.made = undefined;
  const server = dynalite(settings);
  const store = capture.made as Store | undefined;
  if (!store) throw new Error('dynalite made no store: its db module was not the one dynalite-transactions.ts wraps');
  const handlers = server.listeners('request') as Array<(req: IncomingMessage, res: ServerResponse) => void>;
  server.removeAllListeners('request');
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (req.method === 'POST' && req.headers['x-amz-target'] === TRANSACT_WRITE_TARGET) return serve(store, req, res);
    for (const handler of handlers) handler.call(server, req, res);
  });
  return server;
}

/** Reads the request, then answers it as dynalite answers any request (index.js httpHandler). */
function serve(store: Store, req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size > MAX_REQUEST_BYTES) {
      req.removeAllListeners();
      res.statusCode = 413;
      res.end();
      return;
    }
    chunks.push(chunk);
  });
  req.on('end', () => {
    if (size > MAX_REQUEST_BYTES) return;
    answer(store, req, res, Buffer.concat(chunks).toString('utf8')).catch((error: unknown) => {
      if (res.headersSent) return void res.destroy(error as Error);
      send(res, 500, { __type: 'com.amazonaws.dynamodb.v20120810#InternalServerError', message: String(error) });
    });
  });
}

async function answer(store: Store, req: IncomingMessage, res: ServerResponse, body: string): Promise<void> {
  res.setHeader('x-amzn-RequestId', randomBytes(39).toString('base64').toUpperCase().replace(/\+|\//g, '0'));
  const contentType = (req.headers['content-type'] ?? '').split(';')[0]!.trim();
  if (body && contentType !== 'application/json' && contentType !== 'application/x-amz-json-1.0') {
    res.statusCode = 404;
    res.end('<UnknownOperationException/>\n');
    return;
  }
  res.setHeader('Content-Type', contentType === 'application/x-amz-json-1.0' ? contentType : 'application/json');
  const authorization = req.headers.authorization;
  if ((!authorization && !/[?&]X-Amz-Algorithm=/.test(req.url ?? '')) || (authorization && !authorization.trim().startsWith('AWS4-'))) {
    return send(res, 400, { __type: 'com.amazon.coral.service#MissingAuthenticationTokenException', message: 'Request is missing Authentication Token' });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return send(res, 400, { __type: 'com.amazon.coral.service#SerializationException' });
  }
  if (parsed === null || typeof parsed !== 'object') return send(res, 400, { __type: 'com.amazon.coral.service#SerializationException' });
  const { ClientRequestToken: _token, ...rest } = parsed as Record<string, unknown>;
  const request = createHash('sha256').update(canonical(rest)).digest('base64');
  const validations = require('dynalite/validations') as Validations;
  let data: TransactWriteData;
  try {
    data = validations.checkTypes(parsed, TRANSACT_WRITE_TYPES);
    validations.checkValidations(data, TRANSACT_WRITE_TYPES, checkActions, store);
  } catch (error) {
    return refuse(res, error);
  }

  const token = data.ClientRequestToken;
  const tokens = tokensOf(store);
  if (token !== undefined) {
    const found = tokens.get(token);
    const use = found && found.until > Date.now() ? found : undefined;
    if (use && use.request !== request) return send(res, 400, { __type: 'com.amazonaws.dynamodb.v20120810#IdempotentParameterMismatchException', message: MISMATCH_MESSAGE });
    if (use?.state === 'running') return send(res, 400, { __type: 'com.amazonaws.dynamodb.v20120810#TransactionInProgressException', message: IN_PROGRESS_MESSAGE });
    if (use?.state === 'committed') return send(res, 200, use.replayConsumed ? { ConsumedCapacity: use.replayConsumed } : {});
    tokens.delete(token);
    tokens.set(token, { request, state: 'running', until: Number.POSITIVE_INFINITY });
  }
  const reportAsked = req.headers[REPORT_COMMIT_HEADER] !== undefined;
  try {
    const actions = await prepare(store, data);
    const committed = await runTransaction(store, data, actions, (writes) => tellCommit({ token, writes, reportAsked }));
    if (token !== undefined) tokens.set(token, { request, state: 'committed', until: Date.now() + TOKEN_WINDOW_MS, replayConsumed: committed.replayConsumed });
    return send(res, 200, committed.consumed ? { ConsumedCapacity: committed.consumed } : {});
  } catch (error) {
    if (token !== undefined) {
      const cancelled = String((error as Partial<DynaliteError>).body?.['__type']).endsWith('#TransactionCanceledException');
      if (cancelled) tokens.set(token, { request, state: 'cancelled', until: Date.now() + TOKEN_WINDOW_MS });
      else tokens.delete(token);
    }
    return refuse(res, error);
  }
}

/**
 * The tokens of a store bound to a request: those whose window has passed are dropped (looked for at
 * most once a second), then the oldest beyond MAX_TOKENS. Both walks stop at the first token they
 * keep, the running ones aside: the map is in the order of first use, and a completed token's window
 * ends in that order (the window starts at completion: a token left behind a few ms is dropped at
 * the next walk, and never used, its window checked at use). A walk of every token at each request
 * (what this once did at MAX_TOKENS) made a long run's every transaction slower.
 */
function tokensOf(store: Store): Map<string, TokenUse> {
  let tokens = tokensByStore.get(store);
  if (!tokens) tokensByStore.set(store, (tokens = { uses: new Map(), prunedAt: 0 }));
  const { uses } = tokens;
  const now = Date.now();
  if (now - tokens.prunedAt >= 1000) {
    tokens.prunedAt = now;
    for (const [token, use] of uses) {
      if (use.until <= now) uses.delete(token);
      else if (use.state !== 'running') break;
    }
  }
  // In the order of first use: the first ones are the oldest.
  for (const [token, use] of uses) {
    if (uses.size < MAX_TOKENS) break;
    if (use.state !== 'running') uses.delete(token);
  }
  return uses;
}

/** JSON with every object's keys sorted: two requests with the same members in another order are the same request. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, member: unknown) =>
    member && typeof member === 'object' && !Array.isArray(member)
      ? Object.fromEntries(Object.entries(member as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : member,
  );
}

function refuse(res: ServerResponse, error: unknown): void {
  const refusal = error as Partial<DynaliteError>;
  if (refusal.statusCode && refusal.body) return send(res, refusal.statusCode, refusal.body);
  throw error;
}

/** As dynalite's sendData: the JSON body with its CRC32 and length. */
function send(res: ServerResponse, statusCode: number, data: unknown): void {
  const body = JSON.stringify(data);
  res.statusCode = statusCode;
  res.setHeader('x-amz-crc32', crc32.unsigned(body));
  if (!res.hasHeader('Content-Type')) res.setHeader('Content-Type', 'application/x-amz-json-1.0');
  res.setHeader('Content-Length', Buffer.byteLength(body, 'utf8'));
  res.end(body);
}
