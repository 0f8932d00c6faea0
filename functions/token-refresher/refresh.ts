/**
 * Token refresh, the core: trade the refresh token for an access token and store it. No AWS imports.
 * A rotated refresh token is stored before anything else can fail and lose it. Any failure throws
 * and leaves the stored access token as it was.
 */
import type { AccessTokenStore, Clock, CredentialsStore, Log, ProviderClient } from '../shared/ports.js';

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
  const credentials = await deps.credentials.read();
  const grant = await deps.provider.getToken(credentials);

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
