/**
 * The provider's shapes: its items, accounts, faults, recorded requests, routes and answers
 * (provider-model.ts, provider-accounts.ts).
 */

export interface SimulatorItem {
  id: string;
  type: 'file' | 'folder';
  /** The folder holding it (null or absent: none). With `children`, a folder lists the items whose
   *  parentId is its id. */
  parentId?: string | null;
  /** With `children`, a folder's list also names these ids (those the account holds), though their
   *  parentId is another: a folder listed inside its own descendant makes a cycle. Never served. */
  extraChildren?: string[];
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
  /** Only requests presenting one of this account's tokens (a refresh token to getToken, an access
   *  token to items); requests with no token or an unknown one never match. */
  account?: string;
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
  /** The account whose token the request presented, valid or not (extension). */
  account?: string;
  /** The status written; 0 while unanswered and for requests never answered (drop, hang, client gone). */
  status: number;
  /** The kind of the fault applied to this request, if any (extension). */
  fault?: Fault['kind'];
  /** Date.now() when the request arrived (extension). */
  receivedAt?: number;
  /** Date.now() when the response was written (extension). */
  respondedAt?: number;
}

/**
 * The provider as configured. `clientId`, `refreshToken` and `items` make the account `default`
 * (every simulator has it); `accounts` adds more.
 */
export interface SimulatorOptions {
  /** Path prefix of the base URL, default '/api/v2'; '' or '/' for none. */
  prefix?: string;
  /** The client application's id: the account `default`'s, and every other account's unless it
   *  names its own. Default 'test-client'. */
  clientId?: string;
  /** The account `default`'s initial refresh token, default 'rt-initial-<random from the seed>'. */
  refreshToken?: string;
  /** When true every successful getToken returns a new refresh_token and the old one stops working
   *  (each account's own; an account may say otherwise). */
  rotateRefreshToken?: boolean;
  /** With rotation, a rotated-away refresh token presented again revokes the grant it belonged to, as
   *  real providers do: its refresh and access tokens answer 401 until the account is re-authorized.
   *  Default true; false: the old token is only refused (401) and the grant lives on. */
  revokeOnReplay?: boolean;
  /** Added to every response, default 0. */
  latencyMs?: number;
  /** Dot path of the revision inside an item ('revision', 'meta.rev'); default 'revision'. */
  revisionField?: string;
  /** The account `default`'s items. */
  items?: SimulatorItem[];
  /** More accounts, made in this order after `default`. */
  accounts?: AccountOptions[];
  /** PRNG seed for probability faults and generated tokens; default 1. */
  seed?: number;
  /** Folders embed their children, in every account (off when absent: items are served as stored).
   *  See provider-children.ts; `cap`: at most this many entries in a folder's list, default 1,000. */
  children?: { cap?: number };
}

/** One account that authorized the client application (a connection, to the system). */
export interface AccountOptions {
  /** 1-64 characters of A-Z a-z 0-9 . _ - (as a connection id). */
  id: string;
  /** Default: the simulator's `clientId`. */
  clientId?: string;
  /** The refresh token of its first grant; default 'rt-<random from the seed>'. No two accounts share one. */
  refreshToken?: string;
  /** Its own items (deep copies are kept): two accounts may hold the same id with different contents. */
  items?: SimulatorItem[];
  /** Default: the simulator's `rotateRefreshToken`. */
  rotateRefreshToken?: boolean;
  /** Default: the simulator's `revokeOnReplay`. */
  revokeOnReplay?: boolean;
}

export interface ReauthorizeOptions {
  /** The new grant's refresh token; default 'rt-<random from the seed>'. */
  refreshToken?: string;
  /** Keep the account's other live grants working (a second authorization); default false: the new
   *  grant replaces them (their refresh and access tokens answer 401). */
  keepOtherGrants?: boolean;
}

/** What one account was asked, counted from the account's tokens (see `ProviderAccount.counters`). */
export interface AccountCounters {
  /** getToken requests presenting one of its refresh tokens: current, rotated away or revoked. */
  tokenRequests: number;
  /** getToken requests answered 200 (an access token issued). */
  tokensIssued: number;
  /** Item requests presenting one of its access tokens, valid or not. */
  itemRequests: number;
  /** Item requests answered 200. */
  itemsServed: number;
  /** Item requests answered 404: an id this account does not hold. */
  notFound: number;
  /** Its requests answered 401, both endpoints (a refused token or a 401 fault). */
  unauthorized: number;
  /** Its item requests answered 429 by the rate limit. */
  rateLimited: number;
  /** Rotated-away refresh tokens presented again. */
  replays: number;
  /** The model's clock (epoch ms) at its latest request; undefined before any. */
  lastRequestAt: number | undefined;
}


export interface Route {
  endpoint: RecordedRequest['endpoint'];
  path: string;
  query: string;
  itemId?: string;
  badSegment?: boolean;
}

export interface StoredItem {
  item: SimulatorItem;
  /** Serialised body, cached until the item changes. */
  json?: Buffer;
}


/** What the provider answers one request with; `drop` closes the connection, `hang` never answers. */
export type ProviderAnswer =
  | { kind: 'response'; status: number; body: string | Buffer; contentType: string; headers: Record<string, string> }
  | { kind: 'drop' }
  | { kind: 'hang' };

/** The provider's rate limit: a token bucket of `requestsPerSecond`, holding at most `burst` tokens. */
export interface RateLimit {
  requestsPerSecond: number;
  /** 'provider' (default): one bucket for every item request (a limit on the client application);
   *  'account': one bucket per account (item requests with no known token share one more). */
  scope?: 'provider' | 'account';
  /** With scope 'account': the accounts whose limit is not `requestsPerSecond`, their own requests a
   *  second, by account id or as a function of it (undefined: `requestsPerSecond`). An account's
   *  burst is then one second of its own rate unless `burst` is given. Ignored with scope 'provider'. */
  accountRequestsPerSecond?: Readonly<Record<string, number>> | ((accountId: string) => number | undefined);
  /** Default: one second's worth. */
  burst?: number;
  /** Sent as Retry-After (seconds) with each 429; default 1. */
  retryAfterSeconds?: number;
}

/** A request as received: what the model needs of it. */
export interface IncomingRequest {
  method: string;
  rawUrl: string;
  authorization?: string;
}

/** A received request on its way to its answer (see `receive` and `respond`). */
export interface Pending {
  route: Route;
  record: RecordedRequest;
  fault: Fault | undefined;
  authorization: string | undefined;
  /** How long to wait before `respond` (latency and delay faults). */
  waitMs: number;
}

export interface ProviderModelOptions extends SimulatorOptions {
  /** Epoch ms; default Date.now (simulations pass their virtual clock). */
  now?: () => number;
  rateLimit?: RateLimit;
}
