/**
 * The client of content-sync's client API (docs/client-api.md): one method a route, its arguments
 * and answers typed from the OpenAPI document (schema.d.ts, generated from docs/openapi.json), over
 * openapi-fetch; iterators over every page of a list, a snapshot and the changes feed, handing each
 * page's cursor to the caller to store. Each request is signed, timed out and tried again as
 * transport.ts says; an answer that is not a 2xx throws a ContentSyncError (errors.ts).
 *
 * Answers are parsed with `parseJson` (JSON.parse by default): an item's numbers are sent exact, so
 * a caller whose items hold integers beyond 2^53 passes a parser that keeps them (lossless-json's
 * `parse`, say).
 */
import createFetchClient from 'openapi-fetch';
import type { paths } from './schema.js';
import { defaultCredentials, createSigner, signingRegion, type Credentials, type CredentialsProvider, type RequestSigner } from './signing.js';
import { DEFAULT_BACKOFF, DEFAULT_RETRIES, DEFAULT_TIMEOUT_MS, realSleep, transport, type Backoff, type Fetch, type Sleep, type TransportOptions } from './transport.js';

type Method = 'get' | 'put' | 'post' | 'delete';
type Operation<P extends keyof paths, M extends Method> = NonNullable<paths[P][M]>;
type JsonOf<R> = R extends { content: { 'application/json': infer B } } ? B : never;
type Answer<P extends keyof paths, M extends Method, S extends number = 200> = Operation<P, M> extends { responses: Record<S, infer R> } ? JsonOf<R> : never;
type BodyOf<P extends keyof paths, M extends Method> = Operation<P, M> extends { requestBody?: infer B } ? JsonOf<NonNullable<B>> : never;
type QueryOf<P extends keyof paths, M extends Method> = Operation<P, M> extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;

/** A connection's view (docs/client-api.md, "A connection's view"): never a token. */
export type ConnectionView = Answer<'/connections/{connection}', 'get'>;
export type ConnectionStatus = NonNullable<QueryOf<'/connections', 'get'>['status']>;
/** What `PUT /connections/{connection}` takes. */
export type ConnectionCredentials = BodyOf<'/connections/{connection}', 'put'>;
/** The view `deleteConnection` answers: status `removed`. */
export type RemovedConnectionView = Answer<'/connections/{connection}', 'delete', 200>;
/** The view `deleteConnection(…, { erase: true })` answers: status `removed`, with `erase`. */
export type ErasingConnectionView = Answer<'/connections/{connection}', 'delete', 202>;
export type ConnectionsPage = Answer<'/connections', 'get'>;
/** An item as stored: `item`, or `itemUrl` (presigned, 5 minutes) for one held in the items bucket. */
export type Item = Answer<'/connections/{connection}/items/{id}', 'get'>;
export type SnapshotPage = Answer<'/connections/{connection}/items', 'get'>;
export type ChangesPage = Answer<'/connections/{connection}/changes', 'get'>;
export type Change = ChangesPage['changes'][number];
export type Lane = NonNullable<BodyOf<'/connections/{connection}/items', 'post'>['lane']>;
export type SendResult = Answer<'/connections/{connection}/items', 'post'>;

export interface ClientOptions {
  /** The API's URL: the stack output `ApiUrl` (`https://<api>.execute-api.<region>.amazonaws.com/`), or a local one. */
  baseUrl: string;
  /** The region to sign for; default the one in `baseUrl`'s host, else AWS_REGION. */
  region?: string;
  /** Default: the AWS SDK's default chain (environment, profiles, SSO, roles). */
  credentials?: Credentials | CredentialsProvider;
  /** `false`: send requests unsigned (the local API, `npm run serve`); or a signer of your own. Default SigV4 for `execute-api`. */
  signer?: false | RequestSigner;
  /** Each try's limit, the answer's body included (default 30,000 ms: API Gateway's integration limit). */
  timeoutMs?: number;
  /** Tries after the first, on a 429, a 5xx, a time-out or a failed connection (default 3). */
  retries?: number;
  /** The waits between tries (default base 200 ms, cap 10,000 ms, Retry-After up to 60,000 ms). */
  backoff?: Partial<Backoff>;
  /** The fetch requests go through (default globalThis.fetch). */
  fetch?: Fetch;
  /** Parses each answer (default JSON.parse). */
  parseJson?: (text: string) => unknown;
  /** How a wait is made, between tries and between the polls of `changes(…, { follow })` (default setTimeout). */
  sleep?: Sleep;
  /** The jitter's random numbers in [0, 1) (default Math.random). */
  random?: () => number;
  /** The time, for a `Retry-After` that is a date (default Date.now). */
  now?: () => number;
}

/** Every method takes a signal: aborting it ends the request, and its waits, at once. */
export interface CallOptions {
  signal?: AbortSignal;
}

export interface PageOptions extends CallOptions {
  /** 1–1000; the API's default 100. */
  limit?: number;
}

export interface SnapshotCursors {
  /** Where the snapshot continues (pass it back as `cursor`); null once it was read to its end. */
  cursor: string | null;
  /** Where the changes feed continues after this snapshot: the `after` of `changes()` once the snapshot is read. */
  changesCursor: string;
}

export interface ClientCore {
  putConnection(connection: string, credentials: ConnectionCredentials, options?: CallOptions): Promise<ConnectionView>;
  getConnection(connection: string, options?: CallOptions): Promise<ConnectionView>;
  /** Removes the connection; with `erase: true`, erases its data too (202: the erase runs in the background). */
  deleteConnection(connection: string, options: CallOptions & { erase: true }): Promise<ErasingConnectionView>;
  deleteConnection(connection: string, options?: CallOptions & { erase?: false }): Promise<RemovedConnectionView>;
  pauseConnection(connection: string, options?: CallOptions): Promise<ConnectionView>;
  resumeConnection(connection: string, options?: CallOptions): Promise<ConnectionView>;
  sendIds(connection: string, ids: string[], options?: CallOptions & { lane?: Lane }): Promise<SendResult>;
  getItem(connection: string, id: string, options?: CallOptions): Promise<Item>;
  listConnectionsPage(options?: PageOptions & { status?: ConnectionStatus; cursor?: string }): Promise<ConnectionsPage>;
  snapshotPage(connection: string, options?: PageOptions & { cursor?: string }): Promise<SnapshotPage>;
  changesPage(connection: string, options?: PageOptions & { after?: string }): Promise<ChangesPage>;
}

export interface ContentSyncClient extends ClientCore {
  /** Every connection (of `status` when given), page after page. */
  connections(options?: PageOptions & { status?: ConnectionStatus }): AsyncGenerator<ConnectionView, void, undefined>;
  /**
   * A connection's items as stored, in id order, page after page, from `cursor` (the start when
   * undefined). Once a page's items have all been taken, `onCursor` gets where the snapshot
   * continues and where its feed continues: store them, and a snapshot stopped midway resumes at
   * the page it was in.
   */
  snapshot(connection: string, options?: PageOptions & { cursor?: string; onCursor?: (cursors: SnapshotCursors) => unknown }): AsyncGenerator<Item, void, undefined>;
  /**
   * A connection's changes after `after` (from its first change when undefined). Once a page's
   * changes have all been taken, `onCursor` gets the cursor after them: store it, and pass it
   * back as `after` to resume where it stopped. Ends at an empty page; with `follow`, polls every
   * `intervalMs` instead, until `signal` aborts (then it ends without an error).
   */
  changes(
    connection: string,
    options?: PageOptions & { after?: string; onCursor?: (next: string) => unknown; follow?: { intervalMs: number } },
  ): AsyncGenerator<Change, void, undefined>;
}

export function createClient(options: ClientOptions): ContentSyncClient {
  const baseUrl = new URL(options.baseUrl);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const retries = options.retries ?? DEFAULT_RETRIES;
  if (!(timeoutMs > 0) || !Number.isFinite(timeoutMs)) throw new RangeError('timeoutMs must be a positive number of milliseconds');
  if (!Number.isSafeInteger(retries) || retries < 0) throw new RangeError('retries must be a whole number, 0 or more');
  const secrets = new Set<string>();
  const seen = (credentials: Credentials): void => {
    if (secrets.size > 100) secrets.clear();
    secrets.add(credentials.secretAccessKey);
    if (credentials.sessionToken) secrets.add(credentials.sessionToken);
  };
  let signer: RequestSigner | undefined;
  if (options.signer === false) signer = undefined;
  else if (options.signer !== undefined) signer = options.signer;
  else {
    const region = signingRegion(baseUrl, options.region);
    if (region === undefined) {
      throw new TypeError('no region to sign for: give `region`, or use the ApiUrl (https://<api>.execute-api.<region>.amazonaws.com/), or set AWS_REGION');
    }
    signer = createSigner({ region, credentials: options.credentials ?? defaultCredentials, seen });
  }
  const transportOptions: TransportOptions = {
    fetch: options.fetch ?? ((input, init) => globalThis.fetch(input, init)),
    signer,
    timeoutMs,
    retries,
    backoff: { ...DEFAULT_BACKOFF, ...options.backoff },
    sleep: options.sleep ?? realSleep,
    random: options.random ?? Math.random,
    now: options.now ?? Date.now,
    secrets: () => secrets,
  };
  const sleep = transportOptions.sleep;
  const parse = options.parseJson ?? JSON.parse;
  const api = createFetchClient<paths>({ baseUrl: baseUrl.href });
  const via = (operation: string) => ({ fetch: transport(transportOptions, operation), parseAs: 'text' as const });

  /** The parsed answer of a call: one that did not pass threw in the transport. */
  async function answer<T>(call: Promise<{ data?: string | undefined; response: Response }>): Promise<T> {
    const { data } = await call;
    return (data === undefined || data === '' ? undefined : parse(data)) as T;
  }

  const core: ClientCore = {
    putConnection: async (connection, credentials, { signal } = {}) =>
      answer(
        api.PUT('/connections/{connection}', {
          ...via('PUT /connections/{connection}'),
          params: { path: { connection: segment(connection, 'connection') } },
          body: { clientId: credentials.clientId, refreshToken: credentials.refreshToken },
          signal,
        }),
      ),
    getConnection: async (connection, { signal } = {}) =>
      answer(api.GET('/connections/{connection}', { ...via('GET /connections/{connection}'), params: { path: { connection: segment(connection, 'connection') } }, signal })),
    deleteConnection: (async (connection: string, { signal, erase }: CallOptions & { erase?: boolean } = {}) =>
      answer<RemovedConnectionView | ErasingConnectionView>(
        api.DELETE('/connections/{connection}', {
          ...via(erase ? 'DELETE /connections/{connection}?erase=true' : 'DELETE /connections/{connection}'),
          params: { path: { connection: segment(connection, 'connection') }, query: erase ? { erase: 'true' } : {} },
          signal,
        }),
      )) as ClientCore['deleteConnection'],
    pauseConnection: async (connection, { signal } = {}) =>
      answer(api.POST('/connections/{connection}/pause', { ...via('POST /connections/{connection}/pause'), params: { path: { connection: segment(connection, 'connection') } }, signal })),
    resumeConnection: async (connection, { signal } = {}) =>
      answer(api.POST('/connections/{connection}/resume', { ...via('POST /connections/{connection}/resume'), params: { path: { connection: segment(connection, 'connection') } }, signal })),
    sendIds: async (connection, ids, { signal, lane } = {}) =>
      answer(
        api.POST('/connections/{connection}/items', {
          ...via('POST /connections/{connection}/items'),
          params: { path: { connection: segment(connection, 'connection') } },
          body: { ids, ...(lane !== undefined ? { lane } : {}) },
          signal,
        }),
      ),
    getItem: async (connection, id, { signal } = {}) =>
      answer(
        api.GET('/connections/{connection}/items/{id}', {
          ...via('GET /connections/{connection}/items/{id}'),
          params: { path: { connection: segment(connection, 'connection'), id: segment(id, 'id') } },
          signal,
        }),
      ),
    listConnectionsPage: async ({ signal, status, limit, cursor } = {}) =>
      answer(api.GET('/connections', { ...via('GET /connections'), params: { query: defined({ status, limit, cursor }) }, signal })),
    snapshotPage: async (connection, { signal, limit, cursor } = {}) =>
      answer(
        api.GET('/connections/{connection}/items', {
          ...via('GET /connections/{connection}/items'),
          params: { path: { connection: segment(connection, 'connection') }, query: defined({ limit, cursor }) },
          signal,
        }),
      ),
    changesPage: async (connection, { signal, limit, after } = {}) =>
      answer(
        api.GET('/connections/{connection}/changes', {
          ...via('GET /connections/{connection}/changes'),
          params: { path: { connection: segment(connection, 'connection') }, query: defined({ limit, after }) },
          signal,
        }),
      ),
  };

  return {
    ...core,
    async *connections({ status, limit, signal } = {}) {
      let cursor: string | undefined;
      do {
        const page = await core.listConnectionsPage(defined({ status, limit, cursor, signal }));
        yield* page.connections;
        cursor = page.cursor ?? undefined;
      } while (cursor !== undefined);
    },
    async *snapshot(connection, { cursor, limit, signal, onCursor } = {}) {
      let at = cursor;
      for (;;) {
        const page = await core.snapshotPage(connection, defined({ cursor: at, limit, signal }));
        yield* page.items;
        await onCursor?.({ cursor: page.cursor, changesCursor: page.changesCursor });
        if (page.cursor === null) return;
        at = page.cursor;
      }
    },
    async *changes(connection, { after, limit, signal, onCursor, follow } = {}) {
      let at = after;
      for (;;) {
        let page: ChangesPage;
        try {
          page = await core.changesPage(connection, defined({ after: at, limit, signal }));
        } catch (error) {
          if (follow && signal?.aborted) return;
          throw error;
        }
        yield* page.changes;
        if (page.next !== at) {
          at = page.next;
          await onCursor?.(at);
        }
        if (page.changes.length > 0) continue;
        if (!follow) return;
        try {
          await sleep(follow.intervalMs, signal);
        } catch (error) {
          if (signal?.aborted) return;
          throw error;
        }
      }
    },
  };
}

/**
 * A path segment as given (openapi-fetch percent-encodes it: `/` goes as `%2F`). Refused before any
 * request: an empty one, and `.` or `..`, which a URL takes for a step in the path, not a segment.
 */
function segment(value: string, name: string): string {
  if (value === '' || value === '.' || value === '..') throw new TypeError(`${name} cannot be sent in a URL's path: it is empty, "." or ".."`);
  return value;
}

/** `fields` without its undefined values (a query parameter given as undefined is left out). */
function defined<T extends Record<string, unknown>>(fields: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined)) as { [K in keyof T]?: Exclude<T[K], undefined> };
}
