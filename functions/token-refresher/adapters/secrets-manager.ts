/** The credentials secret (CREDENTIALS_SECRET_ID) as the token refresher's CredentialsStore port. */
import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { readSecret, writeSecret } from '../../shared/adapters/secrets-manager.js';
import type { Credentials } from '../../shared/ports.js';
import { parseCredentials } from '../../shared/secrets.js';
import type { CredentialsStore } from '../ports.js';

export class SecretsManagerCredentialsStore implements CredentialsStore {
  constructor(
    private readonly client: SecretsManagerClient,
    readonly secretId: string,
  ) {}

  async read(): Promise<Credentials> {
    return parseCredentials(this.secretId, await readSecret(this.client, this.secretId));
  }

  async write(credentials: Credentials): Promise<void> {
    await writeSecret(this.client, this.secretId, {
      clientId: credentials.clientId,
      refreshToken: credentials.refreshToken,
    });
  }
}
