/**
 * The access token as one container uses it: read from the secret (ACCESS_TOKEN_SECRET_ID) at most
 * once per TTL, shared by every record and every invocation the container serves. After a 401,
 * `refresh(rejected)` reads the secret afresh, once for all the records that met the same rejected
 * token (concurrent callers share one read; a caller whose token was already replaced gets the new
 * one without another read). Read failures are TransientErrors: the records are retried later.
 */
import { TransientError } from '../errors.js';
import type { AccessTokenStore, Clock } from '../ports.js';

export interface AccessTokenSource {
  get(): Promise<string>;
  /** A token other than `rejected` if the secret holds one; the same token if the secret still holds it. */
  refresh(rejected: string): Promise<string>;
  /** Remembers that the provider refused this token although the secret still held it. */
  markRefused(token: string): void;
  /** Whether the provider refused this very token (the secret has not changed since). */
  isRefused(token: string): boolean;
}

export class CachedAccessToken implements AccessTokenSource {
  private token: string | undefined;
  private readAt = 0;
  private pending: Promise<string> | undefined;
  private refused: string | undefined;

  constructor(
    private readonly store: AccessTokenStore,
    private readonly ttlSeconds: number,
    private readonly clock: Clock,
  ) {}

  async get(): Promise<string> {
    if (this.token !== undefined && this.clock.now().getTime() - this.readAt < this.ttlSeconds * 1000) {
      return this.token;
    }
    return this.read();
  }

  markRefused(token: string): void {
    this.refused = token;
  }

  isRefused(token: string): boolean {
    return this.refused !== undefined && this.refused === token;
  }

  async refresh(rejected: string): Promise<string> {
    if (this.pending) return this.pending;
    if (this.token !== undefined && this.token !== rejected) return this.token;
    return this.read();
  }

  private read(): Promise<string> {
    if (this.pending) return this.pending;
    const pending = this.readOnce().finally(() => {
      if (this.pending === pending) this.pending = undefined;
    });
    this.pending = pending;
    return pending;
  }

  private async readOnce(): Promise<string> {
    try {
      const { accessToken } = await this.store.read();
      this.token = accessToken;
      this.readAt = this.clock.now().getTime();
      return accessToken;
    } catch (cause) {
      throw new TransientError(`reading the access token failed (${(cause as Error).message})`, { cause });
    }
  }
}
