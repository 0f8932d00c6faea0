/**
 * Ports both functions use: the provider's API, the access-token secret (the refresher writes it,
 * the item sync reads it), the clock and logging. Each function's own ports are in its ports.ts
 * (functions/token-refresher/ports.ts, functions/item-sync/ports.ts). The core modules import these
 * types only; adapters implement them (HttpProviderClient in functions/shared/provider/provider-client.ts,
 * the Secrets Manager access-token store in functions/shared/adapters/), tests with fakes.
 */

/** `{"clientId": "...", "refreshToken": "..."}` in the secret named by CREDENTIALS_SECRET_ID. */
export interface Credentials {
  clientId: string;
  refreshToken: string;
}

/** `{"accessToken": "...", "refreshedAt": "<ISO-8601 UTC>"}` in the secret named by ACCESS_TOKEN_SECRET_ID. */
export interface AccessToken {
  accessToken: string;
  refreshedAt: string;
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

export interface AccessTokenStore {
  read(): Promise<AccessToken>;
  write(token: AccessToken): Promise<void>;
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
