/** The provider's shapes: its items, faults, recorded requests, routes and answers (provider-model.ts). */

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
