/**
 * Ports of the token refresher's core (refresh.ts) beyond the shared ones in
 * functions/shared/ports.ts. The Secrets Manager adapter is in ./adapters/secrets-manager.ts.
 */
import type { Credentials } from '../shared/ports.js';

/** The credentials secret (CREDENTIALS_SECRET_ID): only the token refresher reads and writes it. */
export interface CredentialsStore {
  /** Throws CredentialsNotConfiguredError while the secret holds the deploy-time placeholder. */
  read(): Promise<Credentials>;
  /** Stores a refresh token the provider rotated (keeping `clientId`). */
  write(credentials: Credentials): Promise<void>;
}
