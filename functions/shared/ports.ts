/**
 * Ports every function uses: the provider's API, the clock and logging. Each function's own ports
 * are in its ports.ts (functions/item-sync/ports.ts...); the connections' ports (the connections
 * table, a connection's access for the item sync) are in functions/shared/connections/ports.ts. The
 * core modules import these types only; adapters implement them (HttpProviderClient in
 * functions/shared/provider/provider-client.ts), tests with fakes.
 */

/** What getToken sends: a connection's client id and refresh token (the connections table holds them). */
export interface Credentials {
  clientId: string;
  refreshToken: string;
}

/** What a successful getToken call yields. `refreshToken` is set only when the provider rotated it. */
export interface TokenGrant {
  accessToken: string;
  refreshToken?: string;
}

export interface RequestOptions {
  /** Aborts the request (for example when the invocation runs out of time). */
  signal?: AbortSignal;
}

/**
 * The content provider's HTTP API: getToken for the token refresher, getItem for the item sync (one
 * adapter serves both). Every failure is thrown as a ProviderError with its kind.
 */
export interface ProviderClient {
  getToken(credentials: Credentials, options?: RequestOptions): Promise<TokenGrant>;
  /** Returns the parsed JSON body of a 200; the caller validates its shape. */
  getItem(id: string, accessToken: string, options?: RequestOptions): Promise<unknown>;
}

export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/** Logging as the core needs it; Powertools' Logger satisfies it. */
export interface Log {
  debug(message: string, ...attributes: Record<string, unknown>[]): void;
  info(message: string, ...attributes: Record<string, unknown>[]): void;
  warn(message: string, ...attributes: Record<string, unknown>[]): void;
  error(message: string, ...attributes: Record<string, unknown>[]): void;
}
