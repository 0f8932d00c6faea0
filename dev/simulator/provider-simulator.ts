/**
 * A stand-in for the content provider's HTTP API (see the "third-party service" section of the
 * operator contract), served by a real node:http server on 127.0.0.1 with an ephemeral port, with
 * programmable faults. Used by the integration tests, the local demo run and the benchmark/soak.
 *
 *   GET {prefix}/getToken?client_id=<id>   Authorization: bearer <refresh token>
 *   GET {prefix}/items/<one percent-encoded segment>   Authorization: Bearer <access token>
 *
 * Routing works on the raw request target (req.url, never normalised): `/items/..%2FgetToken` is the
 * item `../getToken`, and `/items/../getToken` (two raw segments) is no route at all.
 *
 * Imports node built-ins (and the seeded PRNG of item-tree.ts) only, so it can be loaded from tests,
 * tsx scripts and benchmarks alike.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { listenOnLoopback } from '../fakes/loopback.js';
import { mulberry32 } from './item-tree.js';

export interface SimulatorItem {
  id: string;
  type: 'file' | 'folder';
  [field: string]: unknown;
}

export type Fault =
  /** Respond with this status. Default body `{"error":{"code":status,"message":"..."}}`; `body` is
   *  sent as JSON, `rawBody` verbatim; `headers` are added last (they may override Content-Type). */
  | { kind: 'status'; status: number; body?: unknown; rawBody?: string; headers?: Record<string, string> }
  /** Wait `ms`, then answer normally (auth and lookup are evaluated after the wait). */
  | { kind: 'delay'; ms: number }
  /** Respond (200 by default) with this raw body; Content-Type defaults to application/json. */
  | { kind: 'body'; rawBody: string; status?: number; contentType?: string }
  /** Destroy the socket without writing anything. */
  | { kind: 'drop' }
  /** Never answer; the socket stays open until the client gives up or the simulator closes. */
  | { kind: 'hang' };

export interface FaultRule {
  /** Default 'any' (every request, including ones that match no route). */
  endpoint?: 'token' | 'items' | 'any';
  /** Only requests for this (decoded) item id. */
  itemId?: string;
  /** How many requests the rule applies to; default unlimited. The rule is removed when used up. */
  times?: number;
  /** 0..1, drawn from the simulator's seeded PRNG; default 1. */
  probability?: number;
  fault: Fault;
}

export interface RecordedRequest {
  method: string;
  /** req.url exactly as received. */
  rawUrl: string;
  /** The raw path: rawUrl up to the first `?` or `#`. */
  path: string;
  endpoint: 'token' | 'items' | 'other';
  /** The decoded item id (items endpoint with a well-formed segment only). */
  itemId?: string;
  /** The Authorization header as received. */
  authorization?: string;
  /** The status written; 0 while unanswered and for requests never answered (drop, hang, client gone). */
  status: number;
  /** The kind of the fault applied to this request, if any (extension). */
  fault?: Fault['kind'];
  /** Date.now() when the request arrived (extension). */
  receivedAt?: number;
  /** Date.now() when the response was written (extension). */
  respondedAt?: number;
}

export interface SimulatorOptions {
  /** Path prefix of the base URL, default '/api/v2'; '' or '/' for none. */
  prefix?: string;
  /** Default 'test-client'. */
  clientId?: string;
  /** Initial valid refresh token, default 'rt-initial-<random from the seed>'. */
  refreshToken?: string;
  /** When true every successful getToken returns a new refresh_token and the old one stops working. */
  rotateRefreshToken?: boolean;
  /** Added to every response, default 0. */
  latencyMs?: number;
  /** Dot path of the revision inside an item ('revision', 'meta.rev'); default 'revision'. */
  revisionField?: string;
  items?: SimulatorItem[];
  /** PRNG seed for probability faults and generated tokens; default 1. */
  seed?: number;
}

const JSON_TYPE = 'application/json; charset=utf-8';

function normalizePrefix(prefix: string): string {
  let p = prefix.trim().replace(/\/+$/, '');
  if (p !== '' && !p.startsWith('/')) p = `/${p}`;
  return p;
}

function bearer(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const m = /^\s*bearer\s+(\S+)\s*$/i.exec(header);
  return m?.[1];
}

function errorBody(code: number, message: string): string {
  return JSON.stringify({ error: { code, message } });
}

function defaultMessage(status: number): string {
  switch (status) {
    case 400: return 'bad request';
    case 401: return 'unauthorized';
    case 403: return 'forbidden';
    case 404: return 'not found';
    case 408: return 'request timeout';
    case 429: return 'too many requests';
    case 500: return 'internal server error';
    case 502: return 'bad gateway';
    case 503: return 'service unavailable';
    case 504: return 'gateway timeout';
    default: return `simulated status ${status}`;
  }
}

function splitPath(path: string): string[] {
  const parts = path.split('.');
  if (parts.some((p) => p === '')) throw new Error(`invalid revision field path "${path}"`);
  return parts;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function nextStringRevision(value: string): string {
  const m = /^(.*?)(\d+)$/.exec(value);
  if (!m) return `${value}-1`;
  const digits = m[2]!;
  const next = (BigInt(digits) + 1n).toString().padStart(digits.length, '0');
  return `${m[1]}${next}`;
}

function validateFault(fault: Fault): void {
  switch (fault.kind) {
    case 'status':
      if (!Number.isInteger(fault.status) || fault.status < 200 || fault.status > 999) {
        throw new RangeError(`fault status must be an integer 200..999, got ${fault.status}`);
      }
      return;
    case 'body':
      if (fault.status !== undefined && (!Number.isInteger(fault.status) || fault.status < 200 || fault.status > 999)) {
        throw new RangeError(`fault status must be an integer 200..999, got ${fault.status}`);
      }
      return;
    case 'delay':
      if (!Number.isFinite(fault.ms) || fault.ms < 0) throw new RangeError(`delay ms must be >= 0, got ${fault.ms}`);
      return;
    case 'drop':
    case 'hang':
      return;
    default:
      throw new RangeError(`unknown fault kind ${(fault as { kind: unknown }).kind as string}`);
  }
}

interface Route {
  endpoint: RecordedRequest['endpoint'];
  path: string;
  query: string;
  itemId?: string;
  badSegment?: boolean;
}

interface StoredItem {
  item: SimulatorItem;
  /** Serialised body, cached until the item changes. */
  json?: Buffer;
}

export class ProviderSimulator {
  readonly baseUrl: string;
  clientId: string;
  refreshToken: string;
  readonly requests: RecordedRequest[] = [];

  private readonly server: Server;
  private readonly prefix: string;
  private readonly rotate: boolean;
  private readonly latencyMs: number;
  private readonly revisionPath: string[];
  private readonly faultRng: () => number;
  private readonly tokenRng: () => number;
  private readonly items = new Map<string, StoredItem>();
  private readonly accessTokens = new Set<string>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private faults: FaultRule[] = [];
  private tokenCounter = 0;
  private closing: Promise<void> | undefined;

  private constructor(server: Server, port: number, options: SimulatorOptions) {
    this.server = server;
    this.prefix = normalizePrefix(options.prefix ?? '/api/v2');
    this.baseUrl = `http://127.0.0.1:${port}${this.prefix}`;
    const seed = options.seed ?? 1;
    this.faultRng = mulberry32(seed);
    this.tokenRng = mulberry32((seed ^ 0x9e3779b9) >>> 0);
    this.clientId = options.clientId ?? 'test-client';
    this.refreshToken = options.refreshToken ?? `rt-initial-${this.randomHex(16)}`;
    this.rotate = options.rotateRefreshToken ?? false;
    this.latencyMs = Math.max(0, options.latencyMs ?? 0);
    this.revisionPath = splitPath(options.revisionField ?? 'revision');
    for (const item of options.items ?? []) this.setItem(item);
  }

  static async start(options: SimulatorOptions = {}): Promise<ProviderSimulator> {
    // Long ids percent-encode to long request lines; allow more than the 16 KiB default.
    const server = createServer({ maxHeaderSize: 64 * 1024 });
    // A little longer than the usual client idle time-out (undici: 4 s), so the server is not the one
    // closing a pooled connection just as the client reuses it.
    server.keepAliveTimeout = 30_000;
    const sim = new ProviderSimulator(server, await listenOnLoopback(server), options);
    server.on('request', (req: IncomingMessage, res: ServerResponse) => sim.onRequest(req, res));
    return sim;
  }

  /** Stops listening, cancels pending delays and destroys every open socket (hanging ones included). */
  close(): Promise<void> {
    if (!this.closing) {
      this.closing = new Promise<void>((resolve) => {
        this.server.close(() => resolve());
        for (const timer of this.timers) clearTimeout(timer);
        this.timers.clear();
        // Every connection, hanging requests included (not only idle ones).
        this.server.closeAllConnections();
      });
    }
    return this.closing;
  }

  // ---- state ----------------------------------------------------------------------------------

  /** Stores a deep copy under `storeAs` (default item.id); a different key lets a test serve an item
   *  whose body names another id. */
  setItem(item: SimulatorItem, storeAs: string = item.id): void {
    if (typeof storeAs !== 'string') throw new TypeError('item id must be a string');
    this.items.set(storeAs, { item: structuredClone(item) });
  }

  getItem(id: string): SimulatorItem | undefined {
    const stored = this.items.get(id);
    return stored ? structuredClone(stored.item) : undefined;
  }

  deleteItem(id: string): void {
    this.items.delete(id);
  }

  /** number -> +1; string -> trailing digits incremented (width kept) or '-1' appended; missing -> 1. */
  bumpRevision(id: string): void {
    const stored = this.items.get(id);
    if (!stored) throw new Error(`no item ${JSON.stringify(id)}`);
    let holder: Record<string, unknown> = stored.item;
    const path = this.revisionPath;
    for (const key of path.slice(0, -1)) {
      const next = holder[key];
      if (next === undefined) {
        holder[key] = {};
      } else if (!isRecord(next)) {
        throw new TypeError(`cannot bump revision of ${id}: "${key}" is not an object`);
      }
      holder = holder[key] as Record<string, unknown>;
    }
    const last = path[path.length - 1]!;
    const current = holder[last];
    if (current === undefined) holder[last] = 1;
    else if (typeof current === 'number') holder[last] = current + 1;
    else if (typeof current === 'string') holder[last] = nextStringRevision(current);
    else throw new TypeError(`cannot bump revision of ${id}: value is a ${typeof current}`);
    stored.json = undefined;
  }

  itemIds(): string[] {
    return [...this.items.keys()];
  }

  issueAccessToken(): string {
    this.tokenCounter += 1;
    const token = `at-${this.randomHex(16)}-${this.tokenCounter.toString(36)}`;
    this.accessTokens.add(token);
    return token;
  }

  revokeAccessTokens(): void {
    this.accessTokens.clear();
  }

  addFault(rule: FaultRule): () => void {
    validateFault(rule.fault);
    if (rule.times !== undefined && (!Number.isInteger(rule.times) || rule.times < 0)) {
      throw new RangeError(`times must be a non-negative integer, got ${rule.times}`);
    }
    if (rule.probability !== undefined && !(rule.probability >= 0 && rule.probability <= 1)) {
      throw new RangeError(`probability must be within 0..1, got ${rule.probability}`);
    }
    const own: FaultRule = { ...rule, fault: structuredClone(rule.fault) };
    if (own.times !== 0) this.faults.push(own);
    return () => {
      this.faults = this.faults.filter((r) => r !== own);
    };
  }

  clearFaults(): void {
    this.faults = [];
  }

  resetRequests(): void {
    this.requests.length = 0;
  }

  // ---- request handling -----------------------------------------------------------------------

  private randomHex(chars: number): string {
    let out = '';
    while (out.length < chars) out += Math.floor(this.tokenRng() * 0x100000000).toString(16).padStart(8, '0');
    return out.slice(0, chars);
  }

  private route(method: string, rawUrl: string): Route {
    let target = rawUrl;
    // Absolute-form request target (proxies): keep only the path and what follows.
    const origin = /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\/[^/?#]*/.exec(target);
    if (origin) target = target.slice(origin[0].length) || '/';
    const q = target.search(/[?#]/);
    const path = q < 0 ? target : target.slice(0, q);
    let query = '';
    if (q >= 0 && target[q] === '?') {
      const hash = target.indexOf('#', q);
      query = target.slice(q + 1, hash < 0 ? undefined : hash);
    }
    if (method !== 'GET') return { endpoint: 'other', path, query };
    if (path === `${this.prefix}/getToken`) return { endpoint: 'token', path, query };
    const itemsPrefix = `${this.prefix}/items/`;
    if (path.startsWith(itemsPrefix)) {
      const segment = path.slice(itemsPrefix.length);
      if (segment === '' || segment.includes('/')) return { endpoint: 'other', path, query };
      try {
        return { endpoint: 'items', path, query, itemId: decodeURIComponent(segment) };
      } catch {
        return { endpoint: 'items', path, query, badSegment: true };
      }
    }
    return { endpoint: 'other', path, query };
  }

  private pickFault(route: Route): Fault | undefined {
    for (const rule of this.faults) {
      const endpoint = rule.endpoint ?? 'any';
      if (endpoint !== 'any' && endpoint !== route.endpoint) continue;
      if (rule.itemId !== undefined && (route.endpoint !== 'items' || rule.itemId !== route.itemId)) continue;
      const p = rule.probability ?? 1;
      if (p < 1 && !(p > 0 && this.faultRng() < p)) continue;
      if (rule.times !== undefined) {
        rule.times -= 1;
        if (rule.times <= 0) this.faults = this.faults.filter((r) => r !== rule);
      }
      return rule.fault;
    }
    return undefined;
  }

  private later(ms: number, fn: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      fn();
    }, ms);
    this.timers.add(timer);
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    const method = req.method ?? 'GET';
    const rawUrl = req.url ?? '';
    const route = this.route(method, rawUrl);
    const record: RecordedRequest = {
      method,
      rawUrl,
      path: route.path,
      endpoint: route.endpoint,
      status: 0,
      receivedAt: Date.now(),
    };
    if (route.itemId !== undefined) record.itemId = route.itemId;
    if (req.headers.authorization !== undefined) record.authorization = req.headers.authorization;
    this.requests.push(record);
    req.resume(); // discard any request body
    req.on('error', () => undefined);
    res.on('error', () => undefined);

    const fault = this.pickFault(route);
    if (fault) record.fault = fault.kind;
    if (fault?.kind === 'hang') return;

    const act = (): void => {
      if (this.closing) return;
      try {
        this.answer(req, res, route, record, fault);
      } catch (error) {
        this.send(res, record, 500, errorBody(500, `simulator error: ${String(error)}`));
      }
    };
    const wait = this.latencyMs + (fault?.kind === 'delay' ? fault.ms : 0);
    if (wait > 0) this.later(wait, act);
    else act();
  }

  private answer(req: IncomingMessage, res: ServerResponse, route: Route, record: RecordedRequest, fault: Fault | undefined): void {
    if (fault) {
      switch (fault.kind) {
        case 'drop':
          req.socket.destroy();
          return;
        case 'status': {
          let body: string;
          if (fault.rawBody !== undefined) body = fault.rawBody;
          else if (fault.body !== undefined) body = JSON.stringify(fault.body);
          else body = errorBody(fault.status, defaultMessage(fault.status));
          this.send(res, record, fault.status, body, JSON_TYPE, fault.headers);
          return;
        }
        case 'body':
          this.send(res, record, fault.status ?? 200, fault.rawBody, fault.contentType ?? JSON_TYPE);
          return;
        default:
          break; // delay: answer normally
      }
    }

    if (route.endpoint === 'token') {
      const ids = new URLSearchParams(route.query).getAll('client_id');
      if (ids.length !== 1 || ids[0] !== this.clientId) {
        this.send(res, record, 400, errorBody(400, ids.length === 0 ? 'client_id is required' : 'unknown client_id'));
        return;
      }
      const presented = bearer(req.headers.authorization);
      if (presented === undefined || presented !== this.refreshToken) {
        this.send(res, record, 401, errorBody(401, presented === undefined ? 'missing refresh token' : 'invalid refresh token'));
        return;
      }
      const grant: Record<string, unknown> = {
        access_token: this.issueAccessToken(),
        token_type: 'bearer',
        expires_in: 3600,
      };
      if (this.rotate) {
        this.refreshToken = `rt-${this.randomHex(24)}`;
        grant.refresh_token = this.refreshToken;
      }
      this.send(res, record, 200, JSON.stringify(grant));
      return;
    }

    if (route.endpoint === 'items') {
      if (route.badSegment) {
        this.send(res, record, 400, errorBody(400, 'malformed percent-encoding in item id'));
        return;
      }
      const presented = bearer(req.headers.authorization);
      if (presented === undefined || !this.accessTokens.has(presented)) {
        this.send(res, record, 401, errorBody(401, presented === undefined ? 'missing access token' : 'invalid or expired access token'));
        return;
      }
      const stored = this.items.get(route.itemId!);
      if (!stored) {
        this.send(res, record, 404, errorBody(404, 'item not found'));
        return;
      }
      stored.json ??= Buffer.from(JSON.stringify(stored.item), 'utf8');
      this.send(res, record, 200, stored.json);
      return;
    }

    this.send(res, record, 404, errorBody(404, 'no such endpoint'));
  }

  private send(
    res: ServerResponse,
    record: RecordedRequest,
    status: number,
    body: string | Buffer,
    contentType: string = JSON_TYPE,
    extraHeaders?: Record<string, string>,
  ): void {
    if (res.headersSent || res.writableEnded || res.destroyed || res.socket?.destroyed !== false) return;
    const noBody = status === 204 || status === 304;
    const buffer = noBody ? undefined : typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
    res.statusCode = status;
    if (buffer) {
      res.setHeader('Content-Type', contentType);
      res.setHeader('Content-Length', buffer.length);
    }
    res.setHeader('Cache-Control', 'no-store');
    for (const [name, value] of Object.entries(extraHeaders ?? {})) res.setHeader(name, value);
    record.status = status;
    record.respondedAt = Date.now();
    res.end(buffer);
  }
}
