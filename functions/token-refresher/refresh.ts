/**
 * Token refresh, the core: trade the refresh token for an access token and store it. No AWS imports.
 * A rotated refresh token is stored before anything else can fail and lose it. Any failure throws
 * and leaves the stored access token as it was.
 */
import { ProviderError } from '../shared/errors.js';
import type { AccessTokenStore, Clock, Credentials, Log, ProviderClient, TokenGrant } from '../shared/ports.js';
import type { CredentialsStore } from './ports.js';

export interface RefreshDeps {
  provider: ProviderClient;
  credentials: CredentialsStore;
  accessTokens: AccessTokenStore;
  clock: Clock;
  log: Log;
}

export interface RefreshResult {
  refreshedAt: string;
  /** True when the provider rotated the refresh token and the new one was stored. */
  rotated: boolean;
}

/** The provider rotated the refresh token but it could not be stored: an operator must act. */
export class RotatedTokenNotStoredError extends Error {
  override readonly name = 'RotatedTokenNotStoredError';
}

export async function refreshAccessToken(deps: RefreshDeps): Promise<RefreshResult> {
  const { credentials, grant } = await requestToken(deps);

  const rotated = grant.refreshToken !== undefined && grant.refreshToken !== credentials.refreshToken;
  if (rotated) {
    try {
      await deps.credentials.write({ clientId: credentials.clientId, refreshToken: grant.refreshToken! });
    } catch (cause) {
      throw new RotatedTokenNotStoredError(
        'the provider rotated the refresh token but storing the new one failed; the stored refresh token may no ' +
          'longer work: put valid credentials in the credentials secret',
        { cause },
      );
    }
    deps.log.info('refresh token rotated by the provider and stored');
  }

  const refreshedAt = deps.clock.now().toISOString();
  await deps.accessTokens.write({ accessToken: grant.accessToken, refreshedAt });
  deps.log.info('access token refreshed', { refreshedAt, rotated });
  return { refreshedAt, rotated };
}

/**
 * getToken with the stored credentials. Two runs can overlap (a scheduled run and the deploy-time
 * run): when the provider rotates refresh tokens, the one that loses gets a 401 for a refresh token
 * the other has just replaced. So a 401 re-reads the credentials once, and tries again only if the
 * stored refresh token changed meanwhile.
 */
async function requestToken(deps: RefreshDeps): Promise<{ credentials: Credentials; grant: TokenGrant }> {
  const credentials = await deps.credentials.read();
  try {
    return { credentials, grant: await deps.provider.getToken(credentials) };
  } catch (error) {
    if (!(error instanceof ProviderError) || error.kind !== 'unauthorized') throw error;
    const latest = await deps.credentials.read();
    if (latest.refreshToken === credentials.refreshToken) throw error;
    deps.log.info('refresh token refused, but another run had stored a new one; retrying with it');
    return { credentials: latest, grant: await deps.provider.getToken(latest) };
  }
}
