/**
 * The content provider as a model, without transport: its accounts (each with its own grants and
 * items, provider-accounts.ts), programmable faults and an optional rate limit (a token bucket
 * answering 429 with Retry-After). The HTTP simulator (provider-simulator.ts) serves it on
 * 127.0.0.1; simulations in virtual time call it in process through a `fetch` (dev/sim). One model
 * of the provider for both.
 *
 *   GET {prefix}/getToken?client_id=<id>   Authorization: bearer <refresh token>
 *   GET {prefix}/items/<one percent-encoded segment>   Authorization: Bearer <access token>
 *
 * A refresh token names its account (and must come with that account's client id); the access token
 * getToken gives reaches that account's items only: another account's id answers 404. The account
 * `default` is made of the options' clientId, refreshToken and items, and the methods without an
 * account (setItem, getItem, issueAccessToken, ...) act on it, so a one-account setup reads as before.
 *
 * Routing works on the raw request target (req.url, never normalised): `/items/..%2FgetToken` is the
 * item `../getToken`, and `/items/../getToken` (two raw segments) is no route at all.
 *
 * Imports node built-ins (and the seeded PRNG of random.ts) only, so it can be loaded from tests,
 * tsx scripts and benchmarks alike.
 */
import { mulberry32 } from './random.js';
import { AccountRegistry, DEFAULT_ACCOUNT, ProviderAccount, type Bucket } from './provider-accounts.js';
import { childrenSettings } from './provider-children.js';
import { bearer, defaultMessage, errorBody, JSON_TYPE, normalizePrefix, response, splitPath, validateFault } from './provider-answers.js';
import type {
  AccountCounters,
  AccountOptions,
  Fault,
  FaultRule,
  IncomingRequest,
  Pending,
  ProviderAnswer,
  ProviderModelOptions,
  RateLimit,
  ReauthorizeOptions,
  RecordedRequest,
  Route,
  SimulatorItem,
} from './provider-types.js';

// The provider's shapes, for those who use the model.
export type * from './provider-types.js';
export { DEFAULT_ACCOUNT, ProviderAccount };

export class ProviderModel {
  readonly requests: RecordedRequest[] = [];
  /** Requests answered 429 by the rate limit. */
  rateLimited = 0;

  protected readonly prefix: string;
  protected readonly now: () => number;
  private readonly latencyMs: number;
  private readonly faultRng: () => number;
  private readonly tokenRng: () => number;
  private readonly registry: AccountRegistry;
  private faults: FaultRule[] = [];
  private limit:
    | {
        rate: number;
        burst: number;
        retryAfterSeconds: number;
        perAccount: boolean;
        shared: Bucket;
        /** An account's own rate (scope 'account'), or undefined for `rate`. */
        accountRate: (accountId: string) => number | undefined;
        /** The burst given, if any (else one second of each account's own rate). */
        givenBurst: number | undefined;
        /** Rates set since by `setAccountRateLimit`, by account id. */
        changed: Map<string, number>;
      }
    | undefined;
  /** Keep only this many recorded requests (oldest dropped); default all. */
  private recordLimit = Infinity;

  constructor(options: ProviderModelOptions = {}) {
    this.prefix = normalizePrefix(options.prefix ?? '/api/v2');
    this.now = options.now ?? Date.now;
    const seed = options.seed ?? 1;
    this.faultRng = mulberry32(seed);
    this.tokenRng = mulberry32((seed ^ 0x9e3779b9) >>> 0);
    this.latencyMs = Math.max(0, options.latencyMs ?? 0);
    this.registry = new AccountRegistry(
      {
        clientId: options.clientId ?? 'test-client',
        rotate: options.rotateRefreshToken ?? false,
        revokeOnReplay: options.revokeOnReplay ?? true,
        revisionPath: splitPath(options.revisionField ?? 'revision'),
        children: childrenSettings(options.children),
        now: this.now,
      },
      (chars) => this.randomHex(chars),
    );
    const initial = { id: DEFAULT_ACCOUNT, ...(options.refreshToken !== undefined ? { refreshToken: options.refreshToken } : {}), items: options.items ?? [] };
    this.registry.add(initial, () => `rt-initial-${this.randomHex(16)}`);
    for (const account of options.accounts ?? []) this.addAccount(account);
    if (options.rateLimit) this.setRateLimit(options.rateLimit);
  }

  // ---- accounts -------------------------------------------------------------------------------

  /** The account `default`'s client id. */
  get clientId(): string {
    return this.defaultAccount().clientId;
  }

  /** The account `default`'s refresh token (its newest grant's). */
  get refreshToken(): string {
    return this.defaultAccount().refreshToken;
  }

  /** A new account, authorized (one grant, its refresh token in `.refreshToken`), with its items. */
  addAccount(options: AccountOptions): ProviderAccount {
    return this.registry.add(options);
  }

  /** The account with this id (throws when there is none). */
  account(id: string): ProviderAccount {
    return this.registry.get(id);
  }

  hasAccount(id: string): boolean {
    return this.registry.accounts.has(id);
  }

  /** Every account's id, `default` first, then in the order they were added. */
  accountIds(): string[] {
    return [...this.registry.accounts.keys()];
  }

  /** The account's refresh and access tokens answer 401 from now on, until `reauthorizeAccount`. */
  revokeAccount(id: string): void {
    this.registry.get(id).revoke();
  }

  /** The account authorizes the application again: the new refresh token (for the system's operator). */
  reauthorizeAccount(id: string, options?: ReauthorizeOptions): string {
    return this.registry.get(id).reauthorize(options);
  }

  /** A copy of one account's counters. */
  accountCounters(id: string): AccountCounters {
    return this.registry.get(id).counters();
  }

  /** Every account's counters start again from 0. */
  resetCounters(): void {
    for (const account of this.registry.accounts.values()) account.resetCounters();
  }

  private defaultAccount(): ProviderAccount {
    return this.registry.get(DEFAULT_ACCOUNT);
  }

  // ---- the account `default`'s items and tokens -----------------------------------------------

  /** Stores a deep copy under `storeAs` (default item.id) in the account `default`; a different key
   *  lets a test serve an item whose body names another id. */
  setItem(item: SimulatorItem, storeAs: string = item.id): void {
    this.defaultAccount().setItem(item, storeAs);
  }

  getItem(id: string): SimulatorItem | undefined {
    return this.defaultAccount().getItem(id);
  }

  /** The item as the items endpoint answers it (with its children, when folders embed them), a copy. */
  servedItem(id: string): Record<string, unknown> | undefined {
    return this.defaultAccount().servedItem(id);
  }

  deleteItem(id: string): void {
    this.defaultAccount().deleteItem(id);
  }

  /** number -> +1; string -> trailing digits incremented (width kept) or '-1' appended; missing -> 1. */
  bumpRevision(id: string): void {
    this.defaultAccount().bumpRevision(id);
  }

  itemIds(): string[] {
    return this.defaultAccount().itemIds();
  }

  /** An access token as getToken gives, for the account (default `default`): bound to the grant of
   *  `refreshToken` when given, else to its newest live grant. getToken issues through this method. */
  issueAccessToken(accountId: string = DEFAULT_ACCOUNT, refreshToken?: string): string {
    return this.registry.get(accountId).issueAccessToken(refreshToken);
  }

  /** Every access token issued so far to the account, or to every account, stops working. */
  revokeAccessTokens(accountId?: string): void {
    if (accountId !== undefined) this.registry.get(accountId).revokeAccessTokens();
    else for (const account of this.registry.accounts.values()) account.revokeAccessTokens();
  }

  // ---- faults ---------------------------------------------------------------------------------

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

  /** Takes a request in: records it (with the account its token names), picks its fault or rate-limit
   *  answer, and says how long to wait. */
  receive(request: IncomingRequest): Pending {
    const route = this.route(request.method, request.rawUrl);
    const receivedAt = this.now();
    const record: RecordedRequest = {
      method: request.method,
      rawUrl: request.rawUrl,
      path: route.path,
      endpoint: route.endpoint,
      status: 0,
      receivedAt,
    };
    if (route.itemId !== undefined) record.itemId = route.itemId;
    if (request.authorization !== undefined) record.authorization = request.authorization;
    const account = this.accountOf(route, request.authorization);
    if (account) {
      record.account = account.id;
      account.countRequest(route.endpoint as 'token' | 'items', receivedAt);
    }
    this.requests.push(record);
    if (this.requests.length > this.recordLimit) this.requests.splice(0, this.requests.length - this.recordLimit);
    const fault = this.pickFault(route, account) ?? this.rateLimitFault(route, account);
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
    const now = this.now();
    const own = limit.accountRequestsPerSecond;
    if (own && typeof own !== 'function') {
      for (const [accountId, rate] of Object.entries(own)) {
        if (!(rate > 0)) throw new RangeError(`the requests a second of account ${JSON.stringify(accountId)} must be > 0, got ${rate}`);
      }
    }
    const accountRate = typeof own === 'function' ? own : (accountId: string) => (own && Object.hasOwn(own, accountId) ? own[accountId] : undefined);
    this.limit = {
      rate: limit.requestsPerSecond,
      burst,
      retryAfterSeconds: limit.retryAfterSeconds ?? 1,
      perAccount: limit.scope === 'account',
      shared: { tokens: this.limit ? Math.min(this.limit.shared.tokens, burst) : burst, at: now },
      accountRate: (accountId) => {
        const rate = accountRate(accountId);
        if (rate !== undefined && !(rate > 0)) throw new RangeError(`the requests a second of account ${JSON.stringify(accountId)} must be > 0, got ${rate}`);
        return rate;
      },
      givenBurst: limit.burst,
      changed: new Map(),
    };
    // The accounts' buckets start full under a new limit.
    for (const account of this.registry.accounts.values()) account.bucket = undefined;
  }

  /**
   * With a rate limit of scope 'account': one account's own requests a second from now on (its
   * bucket kept, no fuller than its new burst); every other account's bucket untouched.
   */
  setAccountRateLimit(accountId: string, requestsPerSecond: number): void {
    const limit = this.limit;
    if (!limit?.perAccount) throw new Error('setAccountRateLimit needs a rate limit of scope account');
    if (!(requestsPerSecond > 0)) throw new RangeError(`requestsPerSecond must be > 0, got ${requestsPerSecond}`);
    const account = this.registry.get(accountId);
    this.refill(account.bucket, this.accountLimit(account.id));
    limit.changed.set(accountId, requestsPerSecond);
    if (account.bucket) account.bucket.tokens = Math.min(account.bucket.tokens, this.accountLimit(accountId).burst);
  }

  /** An account's own rate and burst under the limit of scope 'account'. */
  private accountLimit(accountId: string): { rate: number; burst: number } {
    const limit = this.limit!;
    const own = limit.changed.get(accountId) ?? limit.accountRate(accountId);
    if (own === undefined) return { rate: limit.rate, burst: limit.burst };
    return { rate: own, burst: limit.givenBurst ?? own };
  }

  /** Brings a bucket up to now at `rate`, holding at most `burst`. */
  private refill(bucket: Bucket | undefined, { rate, burst }: { rate: number; burst: number }): void {
    if (!bucket) return;
    const now = this.now();
    bucket.tokens = Math.min(burst, bucket.tokens + ((now - bucket.at) * rate) / 1000);
    bucket.at = now;
  }

  /** Keeps only the latest `count` recorded requests (long simulations). */
  limitRecordedRequests(count: number): void {
    this.recordLimit = count;
  }

  /** The account whose token the request presents (a refresh token to getToken, an access token to items). */
  private accountOf(route: Route, authorization: string | undefined): ProviderAccount | undefined {
    if (route.endpoint === 'other') return undefined;
    const token = bearer(authorization);
    if (token === undefined) return undefined;
    return route.endpoint === 'token' ? this.registry.refreshGrant(token)?.account : this.registry.accessGeneration(token)?.grant.account;
  }

  private rateLimitFault(route: Route, account: ProviderAccount | undefined): Fault | undefined {
    const limit = this.limit;
    if (!limit || route.endpoint !== 'items') return undefined;
    const now = this.now();
    let bucket = limit.shared;
    let own = { rate: limit.rate, burst: limit.burst };
    if (limit.perAccount && account) {
      own = this.accountLimit(account.id);
      bucket = account.bucket ??= { tokens: own.burst, at: now };
    }
    this.refill(bucket, own);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
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
      if (record.account !== undefined) this.registry.accounts.get(record.account)?.countAnswer(route.endpoint as 'token' | 'items', answer.status);
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
    if (route.endpoint === 'token') return this.answerToken(route, authorization);
    if (route.endpoint === 'items') return this.answerItem(route, authorization);
    return response(404, errorBody(404, 'no such endpoint'));
  }

  /** getToken: the refresh token names the account, which must be the client id's. */
  private answerToken(route: Route, authorization: string | undefined): ProviderAnswer {
    const ids = new URLSearchParams(route.query).getAll('client_id');
    if (ids.length !== 1 || !this.registry.knowsClient(ids[0]!)) {
      return response(400, errorBody(400, ids.length === 0 ? 'client_id is required' : 'unknown client_id'));
    }
    const presented = bearer(authorization);
    const grant = presented === undefined ? undefined : this.registry.refreshGrant(presented);
    if (!grant) {
      return response(401, errorBody(401, presented === undefined ? 'missing refresh token' : 'invalid refresh token'));
    }
    const account = grant.account;
    if (account.clientId !== ids[0]) {
      return response(400, errorBody(400, 'client_id does not match the refresh token'));
    }
    if (grant.revoked) {
      return response(401, errorBody(401, 'refresh token revoked'));
    }
    if (grant.refreshToken !== presented) {
      // Rotated away and presented again: the whole grant ends (when so configured).
      account.replayed(grant);
      return response(401, errorBody(401, account.revokesOnReplay ? 'refresh token reused: grant revoked' : 'invalid refresh token'));
    }
    const body: Record<string, unknown> = {
      access_token: this.issueAccessToken(account.id, presented),
      token_type: 'bearer',
      expires_in: 3600,
    };
    if (account.rotates) body.refresh_token = account.rotate(grant);
    return response(200, JSON.stringify(body));
  }

  /** An item of the access token's account; never another account's. */
  private answerItem(route: Route, authorization: string | undefined): ProviderAnswer {
    if (route.badSegment) {
      return response(400, errorBody(400, 'malformed percent-encoding in item id'));
    }
    const presented = bearer(authorization);
    const generation = presented === undefined ? undefined : this.registry.accessGeneration(presented);
    if (!generation?.valid || generation.grant.revoked) {
      return response(401, errorBody(401, presented === undefined ? 'missing access token' : 'invalid or expired access token'));
    }
    const body = generation.grant.account.body(route.itemId!);
    if (!body) {
      return response(404, errorBody(404, 'item not found'));
    }
    return response(200, body);
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

  private pickFault(route: Route, account: ProviderAccount | undefined): Fault | undefined {
    for (const rule of this.faults) {
      const endpoint = rule.endpoint ?? 'any';
      if (endpoint !== 'any' && endpoint !== route.endpoint) continue;
      if (rule.itemId !== undefined && (route.endpoint !== 'items' || rule.itemId !== route.itemId)) continue;
      if (rule.account !== undefined && rule.account !== account?.id) continue;
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
