/**
 * The client API's routes (contract, "The client API"; docs/client-api.md): an HTTP request as API
 * Gateway's HTTP API gives it (payload 2.0, reduced to what is read here) to one call of the
 * connections' core (functions/shared/connections/operations.ts), and its outcome to a status and a
 * JSON body. No AWS import.
 *
 * The path is split on `/` and each segment percent-decoded once (an id holding `/` is sent as
 * `%2F`). A refusal is `{"error": {"code", "message"}}`: 400 `bad-request`, 404 `not-found` (an
 * unknown route too), 409 `conflict`, 413 `too-large` (a body over MAX_BODY_BYTES). A body is read
 * only where the route takes one, and must be a JSON object with the route's fields and no other;
 * no answer ever quotes a refused value or a token.
 */
import { connectionIdProblem } from '../shared/connections/connection.js';
import { LANES, type ConnectionOperations, type Lane, type Outcome } from '../shared/connections/operations.js';
import type { ConnectionView } from '../shared/connections/view.js';
import type { FeedPage } from '../shared/changes/feed.js';
import type { SnapshotPage } from './changes.js';
import type { ItemAnswer } from './items.js';

/** The largest body accepted (contract: 1 MiB). */
export const MAX_BODY_BYTES = 1024 * 1024;

export interface ApiRequest {
  method: string;
  /** The path as sent, percent-encoded (API Gateway's `rawPath`). */
  rawPath: string;
  query: Readonly<Record<string, string | undefined>>;
  headers: Readonly<Record<string, string | undefined>>;
  /** The body's bytes; undefined when there is none. */
  body: Buffer | undefined;
}

export interface ApiResponse {
  statusCode: number;
  body: unknown;
  /** The route as matched (`PUT /connections/{connection}`), for the log line; undefined for none. */
  route?: string;
  /** The connection the request was for, when it named a valid one (log lines know their connection). */
  connection?: string;
}

export type ErrorCode = 'bad-request' | 'not-found' | 'conflict' | 'too-large' | 'cursor-expired';

const STATUS: Record<ErrorCode, number> = { 'bad-request': 400, 'not-found': 404, conflict: 409, 'cursor-expired': 410, 'too-large': 413 };

export function errorResponse(code: ErrorCode, message: string, extra: Record<string, unknown> = {}): ApiResponse {
  return { statusCode: STATUS[code], body: { error: { code, message }, ...extra } };
}

/** A refusal of the request's input, before any route runs. */
class BadInput extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The route a request is for, as its log line names it (a pattern, never a refused value), and its
 * connection when it names a valid one.
 */
export function describeRoute(request: Pick<ApiRequest, 'method' | 'rawPath'>): { route: string; connection?: string } {
  let segments: string[];
  try {
    segments = splitPath(request.rawPath);
  } catch {
    return { route: 'none' };
  }
  const [root, connection, sub, id, ...rest] = segments;
  const method = request.method.toUpperCase();
  if (root !== 'connections' || rest.length > 0) return { route: 'none' };
  const valid = connection !== undefined && connectionIdProblem(connection) === undefined ? { connection } : {};
  const path =
    connection === undefined
      ? '/connections'
      : sub === undefined
        ? '/connections/{connection}'
        : id === undefined && ['pause', 'resume', 'items', 'changes'].includes(sub)
          ? `/connections/{connection}/${sub}`
          : id !== undefined && sub === 'items'
            ? '/connections/{connection}/items/{id}'
            : undefined;
  return path === undefined ? { route: 'none' } : { route: `${method} ${path}`, ...valid };
}

/** What the routes call: the connections' core, the item reads (items.ts), the feed and the snapshot (changes.ts). */
export interface RouteCore {
  operations: ConnectionOperations;
  readItem(connection: string, id: string): Promise<Outcome<ItemAnswer>>;
  readFeed(connection: string, after: string | undefined, limit: number): Promise<Outcome<FeedPage>>;
  readSnapshot(connection: string, cursor: string | undefined, limit: number): Promise<Outcome<SnapshotPage>>;
}

/** The most changes or rows a page answers, and how many by default (contract: limit 1–1000). */
export const PAGE_LIMIT = { max: 1000, default: 100 } as const;

export async function route(core: RouteCore, request: ApiRequest): Promise<ApiResponse> {
  const { operations } = core;
  let segments: string[];
  try {
    segments = splitPath(request.rawPath);
  } catch (error) {
    if (error instanceof BadInput) return errorResponse(error.code, error.message);
    throw error;
  }
  const method = request.method.toUpperCase();
  const [root, connection, sub, id, ...rest] = segments;
  const described = describeRoute(request);
  const named = (response: ApiResponse, routeKey: string): ApiResponse => ({
    ...response,
    route: routeKey,
    ...(described.connection !== undefined ? { connection: described.connection } : {}),
  });
  try {
    if (root !== 'connections' || rest.length > 0) return notFound(method, request.rawPath);
    if (connection === undefined) {
      if (method !== 'GET') return wrongMethod(method, '/connections', ['GET']);
      noBody(request);
      return { ...(await list(operations, request.query)), route: 'GET /connections' };
    }
    if (sub === undefined) {
      switch (method) {
        case 'PUT': {
          onlyParameters(request, 'PUT /connections/{connection}', []);
          const body = jsonBody(request, ['clientId', 'refreshToken'], ['clientId', 'refreshToken']);
          const clientId = stringField(body, 'clientId');
          const refreshToken = stringField(body, 'refreshToken');
          const outcome = await operations.put(connection, { clientId, refreshToken });
          return named(answer(outcome, (value) => ({ statusCode: 200, body: value.view })), 'PUT /connections/{connection}');
        }
        case 'GET':
          noBody(request);
          onlyParameters(request, 'GET /connections/{connection}', []);
          return named(answer(await operations.get(connection), view200), 'GET /connections/{connection}');
        case 'DELETE': {
          noBody(request);
          onlyParameters(request, 'DELETE /connections/{connection}', ['erase']);
          const erase = request.query['erase'];
          if (erase !== undefined && erase !== 'true') throw new BadInput('bad-request', 'erase must be true (leave it out to remove the connection without erasing it)');
          if (erase === 'true') return named(answer(await operations.erase(connection), (view) => ({ statusCode: 202, body: view })), 'DELETE /connections/{connection}?erase=true');
          return named(answer(await operations.remove(connection), view200), 'DELETE /connections/{connection}');
        }
        default:
          return wrongMethod(method, '/connections/{connection}', ['PUT', 'GET', 'DELETE']);
      }
    }
    if (id === undefined && (sub === 'pause' || sub === 'resume')) {
      if (method !== 'POST') return wrongMethod(method, `/connections/{connection}/${sub}`, ['POST']);
      noBody(request);
      onlyParameters(request, `POST /connections/{connection}/${sub}`, []);
      const outcome = sub === 'pause' ? await operations.pause(connection) : await operations.resume(connection);
      return named(answer(outcome, view200), `POST /connections/{connection}/${sub}`);
    }
    if (id !== undefined && sub === 'items') {
      if (method !== 'GET') return wrongMethod(method, '/connections/{connection}/items/{id}', ['GET']);
      noBody(request);
      onlyParameters(request, 'GET /connections/{connection}/items/{id}', []);
      return named(answer(await core.readItem(connection, id), (item) => ({ statusCode: 200, body: item })), 'GET /connections/{connection}/items/{id}');
    }
    if (id === undefined && sub === 'changes') {
      if (method !== 'GET') return wrongMethod(method, '/connections/{connection}/changes', ['GET']);
      noBody(request);
      const { cursor: after, limit } = pageQuery(request.query, 'after', 'GET /connections/{connection}/changes');
      return named(answer(await core.readFeed(connection, after, limit), (page) => ({ statusCode: 200, body: page })), 'GET /connections/{connection}/changes');
    }
    if (id === undefined && sub === 'items' && method === 'GET') {
      noBody(request);
      const { cursor, limit } = pageQuery(request.query, 'cursor', 'GET /connections/{connection}/items');
      return named(answer(await core.readSnapshot(connection, cursor, limit), (page) => ({ statusCode: 200, body: page })), 'GET /connections/{connection}/items');
    }
    if (id === undefined && sub === 'items' && method === 'POST') {
      onlyParameters(request, 'POST /connections/{connection}/items', []);
      const body = jsonBody(request, ['ids', 'lane'], ['ids']);
      const ids = body['ids'];
      if (!Array.isArray(ids)) throw new BadInput('bad-request', 'ids must be an array of item ids');
      const lane = body['lane'] ?? 'users';
      if (typeof lane !== 'string' || !(LANES as readonly string[]).includes(lane)) throw new BadInput('bad-request', `lane must be one of ${LANES.join(', ')}`);
      const outcome = await operations.send(connection, { ids, lane: lane as Lane });
      return named(answer(outcome, (value) => ({ statusCode: 200, body: value })), 'POST /connections/{connection}/items');
    }
    return notFound(method, request.rawPath);
  } catch (error) {
    if (error instanceof BadInput) return named(errorResponse(error.code, error.message), described.route);
    throw error;
  }
}

const view200 = (view: ConnectionView): { statusCode: number; body: unknown } => ({ statusCode: 200, body: view });

function answer<T>(outcome: Outcome<T>, ok: (value: T) => { statusCode: number; body: unknown }): ApiResponse {
  if (outcome.ok) return ok(outcome.value);
  return errorResponse(outcome.code, outcome.message, outcome.rejected ? { rejected: outcome.rejected } : {});
}

async function list(operations: ConnectionOperations, query: ApiRequest['query']): Promise<ApiResponse> {
  onlyParameters({ query }, 'GET /connections', ['status', 'limit', 'cursor']);
  const limitText = query['limit'];
  if (limitText !== undefined && !/^\d{1,7}$/.test(limitText)) throw new BadInput('bad-request', 'limit must be a whole number from 1 to 1000');
  const after = query['cursor'] === undefined ? undefined : decodeCursor(query['cursor']);
  const outcome = await operations.list({
    ...(query['status'] !== undefined ? { status: query['status'] } : {}),
    ...(limitText !== undefined ? { limit: Number(limitText) } : {}),
    ...(after !== undefined ? { after } : {}),
  });
  return answer(outcome, (page) => ({ statusCode: 200, body: { connections: page.connections, cursor: page.after === undefined ? null : encodeCursor(page.after) } }));
}

/** A page route's query: its cursor parameter (`name`) and `limit` (1–1000, default 100), nothing else. */
function pageQuery(query: ApiRequest['query'], name: 'after' | 'cursor', routeName: string): { cursor: string | undefined; limit: number } {
  onlyParameters({ query }, routeName, [name, 'limit']);
  const limitText = query['limit'];
  let limit: number = PAGE_LIMIT.default;
  if (limitText !== undefined) {
    limit = /^\d{1,4}$/.test(limitText) ? Number(limitText) : 0;
    if (limit < 1 || limit > PAGE_LIMIT.max) throw new BadInput('bad-request', `limit must be a whole number from 1 to ${PAGE_LIMIT.max}`);
  }
  const cursor = query[name];
  if (cursor === '') throw new BadInput('bad-request', `${name} must be a cursor this API gave, not empty`);
  return { cursor, limit };
}

/** A page's cursor: opaque to the caller (base64url of where the next page starts). */
export function encodeCursor(after: string): string {
  return Buffer.from(JSON.stringify({ v: 1, after }), 'utf8').toString('base64url');
}

function decodeCursor(cursor: string): string {
  try {
    const parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { v?: unknown; after?: unknown };
    if (parsed.v === 1 && typeof parsed.after === 'string') return parsed.after;
  } catch {
    // Below.
  }
  throw new BadInput('bad-request', 'the cursor is not one this API gave: pass the cursor of the previous page as it was');
}

function splitPath(rawPath: string): string[] {
  const path = rawPath.split('?')[0] ?? '';
  const parts = path.split('/').filter((part, i, all) => !(part === '' && (i === 0 || i === all.length - 1)));
  return parts.map((part) => {
    if (part === '') throw new BadInput('not-found', 'no route has an empty path segment');
    try {
      return decodeURIComponent(part);
    } catch {
      throw new BadInput('bad-request', 'a path segment is not well-formed percent-encoded UTF-8');
    }
  });
}

function notFound(method: string, rawPath: string): ApiResponse {
  void rawPath;
  return errorResponse('not-found', `no route ${method} for that path: the routes are listed in docs/client-api.md`);
}

function wrongMethod(method: string, path: string, allowed: string[]): ApiResponse {
  return errorResponse('not-found', `no route ${method} ${path}: it takes ${allowed.join(', ')}`);
}

function contentTypeOf(request: ApiRequest): string | undefined {
  const entry = Object.entries(request.headers).find(([name]) => name.toLowerCase() === 'content-type');
  return entry?.[1]?.split(';')[0]?.trim().toLowerCase();
}

/** Longest unknown parameter name a refusal quotes whole; a longer one is cut (`…`). */
const QUOTED_NAME_LENGTH = 40;

/**
 * Refuses a query parameter the route does not take, naming each (JSON-quoted, never its value):
 * a typo such as `?erse=true` is a refusal, not a plain removal.
 */
export function onlyParameters(request: Pick<ApiRequest, 'query'>, routeName: string, allowed: readonly string[]): void {
  const unknown = Object.keys(request.query).filter((key) => !allowed.includes(key));
  if (unknown.length === 0) return;
  const names = unknown.map((key) => JSON.stringify(key.length > QUOTED_NAME_LENGTH ? `${key.slice(0, QUOTED_NAME_LENGTH)}…` : key)).join(', ');
  const takes =
    allowed.length === 0
      ? 'takes no query parameter'
      : `takes the parameter${allowed.length > 1 ? 's' : ''} ${allowed.slice(0, -1).join(', ')}${allowed.length > 1 ? ' and ' : ''}${allowed.at(-1)} only`;
  throw new BadInput('bad-request', `${routeName} ${takes}: not ${names}`);
}

function noBody(request: ApiRequest): void {
  if (request.body !== undefined && request.body.length > 0) throw new BadInput('bad-request', 'this route takes no body');
}

/** The body as a JSON object with only `allowed` fields, `required` among them. */
function jsonBody(request: ApiRequest, allowed: readonly string[], required: readonly string[]): Record<string, unknown> {
  const { body } = request;
  if (body === undefined || body.length === 0) throw new BadInput('bad-request', `this route takes a JSON body with ${required.join(' and ')}`);
  if (body.length > MAX_BODY_BYTES) throw new BadInput('too-large', `the body is ${body.length} bytes; the limit is ${MAX_BODY_BYTES} bytes (1 MiB)`);
  const type = contentTypeOf(request);
  if (type !== 'application/json') throw new BadInput('bad-request', 'the body must be JSON, sent with Content-Type: application/json');
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body));
  } catch {
    throw new BadInput('bad-request', 'the body is not well-formed JSON in UTF-8');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new BadInput('bad-request', 'the body must be a JSON object');
  const fields = parsed as Record<string, unknown>;
  const extra = Object.keys(fields).filter((key) => !allowed.includes(key));
  if (extra.length > 0) throw new BadInput('bad-request', `the body may hold only ${allowed.join(', ')}; it holds ${extra.length} other field${extra.length === 1 ? '' : 's'}`);
  const missing = required.filter((key) => !(key in fields));
  if (missing.length > 0) throw new BadInput('bad-request', `the body lacks ${missing.join(' and ')}`);
  return fields;
}

function stringField(body: Record<string, unknown>, name: string): string {
  const value = body[name];
  if (typeof value !== 'string') throw new BadInput('bad-request', `${name} must be a string`);
  return value;
}
