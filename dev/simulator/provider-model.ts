/**
 * The content provider as a model, without transport: its items, tokens, programmable faults and an
 * optional rate limit (a token bucket answering 429 with Retry-After). The HTTP simulator
 * (provider-simulator.ts) serves it on 127.0.0.1; simulations in virtual time call it in process
 * through a `fetch` (dev/sim). One model of the provider for both.
 *
 *   GET {prefix}/getToken?client_id=<id>   Authorization: bearer <refresh token>
 *   GET {prefix}/items/<one percent-encoded segment>   Authorization: Bearer <access token>
 *
 * Routing works on the raw request target (req.url, never normalised): `/items/..%2FgetToken` is the
 * item `../getToken`, and `/items/../getToken` (two raw segments) is no route at all.
 *
 * Imports node built-ins (and the seeded PRNG of random.ts) only, so it can be loaded from tests,
 * tsx scripts and benchmarks alike.
 */
import { mulberry32 } from './random.js';
import { bearer, defaultMessage, errorBody, isRecord, JSON_TYPE, nextStringRevision, normalizePrefix, response, splitPath, validateFault } from './provider-answers.js';
import type {
  Fault,
  FaultRule,
  IncomingRequest,
  Pending,
  ProviderAnswer,
  ProviderModelOptions,
  RateLimit,
  RecordedRequest,
  Route,
  SimulatorItem,
  StoredItem,
} from './provider-types.js';

// The provider's shapes, for those who use the model.
export type * from './provider-types.js';

export class ProviderModel {
  clientId: string;
  refreshToken: string;
  readonly requests: RecordedRequest[] = [];
  /** Requests answered 429 by the rate limit. */
  rateLimited = 0;

  protected readonly prefix: string;
  protected readonly now: () => number;
  private readonly rotate: boolean;
  private readonly latencyMs: number;
  private readonly revisionPath: string[];
  private readonly faultRng: () => number;
  private readonly tokenRng: () => number;
  private readonly items = new Map<string, StoredItem>();
  private readonly accessTokens = new Set<string>();
  private faults: FaultRule[] = [];
  private tokenCounter = 0;
  private limit: { rate: number; burst: number; retryAfterSeconds: number; tokens: number; at: number } | undefined;
  /** Keep only this many recorded requests (oldest dropped); default all. */
  private recordLimit = Infinity;

  constructor(options: ProviderModelOptions = {}) {
    this.prefix = normalizePrefix(options.prefix ?? '/api/v2');
    this.now = options.now ?? Date.now;
    const seed = options.seed ?? 1;
    this.faultRng = mulberry32(seed);
    this.tokenRng = mulberry32((seed ^ 0x9e3779b9) >>> 0);
    this.clientId = options.clientId ?? 'test-client';
    this.refreshToken = options.refreshToken ?? `rt-initial-${this.randomHex(16)}`;
    this.rotate = options.rotateRefreshToken ?? false;
    this.latencyMs = Math.max(0, options.latencyMs ?? 0);
    this.revisionPath = splitPath(options.revisionField ?? 'revision');
    for (const item of options.items ?? []) this.setItem(item);
    if (options.rateLimit) this.setRateLimit(options.rateLimit);
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

  /** Takes a request in: records it, picks its fault or rate-limit answer, and says how long to wait. */
  receive(request: IncomingRequest): Pending {
    const route = this.route(request.method, request.rawUrl);
    const record: RecordedRequest = {
      method: request.method,
      rawUrl: request.rawUrl,
      path: route.path,
      endpoint: route.endpoint,
      status: 0,
      receivedAt: this.now(),
    };
    if (route.itemId !== undefined) record.itemId = route.itemId;
    if (request.authorization !== undefined) record.authorization = request.authorization;
    this.requests.push(record);
    if (this.requests.length > this.recordLimit) this.requests.splice(0, this.requests.length - this.recordLimit);
    const fault = this.pickFault(route) ?? this.rateLimitFault(route);
    if (fault) record.fault = fault.kind;
    const waitMs = this.latencyMs + (fault?.kind === 'delay' ? fault.ms : 0);
    return { route, record, fault, authorization: request.authorization, waitMs };
  }

  /** Limits the items endpoint to a token bucket from now on (undefined: no limit). */
  setRateLimit(limit: RateLimit | undefined): void {
    if (limit === undefined) {
      this.limit = undefined;
      return;
    }
    if (!(limit.requestsPerSecond > 0)) throw new RangeError(`requestsPerSecond must be > 0, got ${limit.requestsPerSecond}`);
    const burst = limit.burst ?? limit.requestsPerSecond;
    this.limit = {
      rate: limit.requestsPerSecond,
      burst,
      retryAfterSeconds: limit.retryAfterSeconds ?? 1,
      tokens: this.limit ? Math.min(this.limit.tokens, burst) : burst,
      at: this.now(),
    };
  }

  /** Keeps only the latest `count` recorded requests (long simulations). */
  limitRecordedRequests(count: number): void {
    this.recordLimit = count;
  }

  private rateLimitFault(route: Route): Fault | undefined {
    const limit = this.limit;
    if (!limit || route.endpoint !== 'items') return undefined;
    const now = this.now();
    limit.tokens = Math.min(limit.burst, limit.tokens + ((now - limit.at) * limit.rate) / 1000);
    limit.at = now;
    if (limit.tokens >= 1) {
      limit.tokens -= 1;
      return undefined;
    }
    this.rateLimited += 1;
    return { kind: 'status', status: 429, headers: { 'Retry-After': String(limit.retryAfterSeconds) } };
  }

  /** The answer to a received request (auth and lookup are evaluated now, after any wait). */
  respond(pending: Pending): ProviderAnswer {
    const { route, record, fault } = pending;
    const answer = this.answer(route, fault, pending.authorization);
    if (answer.kind === 'response') {
      record.status = answer.status;
      record.respondedAt = this.now();
    }
    return answer;
  }

  private answer(route: Route, fault: Fault | undefined, authorization: string | undefined): ProviderAnswer {
    if (fault) {
      switch (fault.kind) {
        case 'drop':
          return { kind: 'drop' };
        case 'hang':
          return { kind: 'hang' };
        case 'status': {
          let body: string;
          if (fault.rawBody !== undefined) body = fault.rawBody;
          else if (fault.body !== undefined) body = JSON.stringify(fault.body);
          else body = errorBody(fault.status, defaultMessage(fault.status));
          return response(fault.status, body, JSON_TYPE, fault.headers);
        }
        case 'body':
          return response(fault.status ?? 200, fault.rawBody, fault.contentType ?? JSON_TYPE);
        default:
          break; // delay: answer normally
      }
    }

    if (route.endpoint === 'token') {
      const ids = new URLSearchParams(route.query).getAll('client_id');
      if (ids.length !== 1 || ids[0] !== this.clientId) {
        return response(400, errorBody(400, ids.length === 0 ? 'client_id is required' : 'unknown client_id'));
      }
      const presented = bearer(authorization);
      if (presented === undefined || presented !== this.refreshToken) {
        return response(401, errorBody(401, presented === undefined ? 'missing refresh token' : 'invalid refresh token'));
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
      return response(200, JSON.stringify(grant));
    }

    if (route.endpoint === 'items') {
      if (route.badSegment) {
        return response(400, errorBody(400, 'malformed percent-encoding in item id'));
      }
      const presented = bearer(authorization);
      if (presented === undefined || !this.accessTokens.has(presented)) {
        return response(401, errorBody(401, presented === undefined ? 'missing access token' : 'invalid or expired access token'));
      }
      const stored = this.items.get(route.itemId!);
      if (!stored) {
        return response(404, errorBody(404, 'item not found'));
      }
      stored.json ??= Buffer.from(JSON.stringify(stored.item), 'utf8');
      return response(200, stored.json);
    }

    return response(404, errorBody(404, 'no such endpoint'));
  }

  private randomHex(chars: number): string {
    let out = '';
    while (out.length < chars) out += Math.floor(this.tokenRng() * 0x100000000).toString(16).padStart(8, '0');
    return out.slice(0, chars);
  }

  protected route(method: string, rawUrl: string): Route {
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

}
