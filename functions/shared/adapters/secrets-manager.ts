/** Secrets Manager adapters for the credentials and access-token ports. */
import {
  GetSecretValueCommand,
  PutSecretValueCommand,
  type SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import type { AccessToken, AccessTokenStore, Credentials, CredentialsStore } from '../ports.js';
import { parseAccessToken, parseCredentials } from '../secrets.js';

/** Reads a secret's string; AWS failures are re-thrown naming the secret (AWS messages hold no values). */
async function readSecret(client: SecretsManagerClient, secretId: string): Promise<string | undefined> {
  try {
    const output = await client.send(new GetSecretValueCommand({ SecretId: secretId }));
    return output.SecretString;
  } catch (cause) {
    throw new Error(`reading secret ${secretId} failed: ${(cause as Error).name}`, { cause });
  }
}

async function writeSecret(client: SecretsManagerClient, secretId: string, value: object): Promise<void> {
  try {
    await client.send(new PutSecretValueCommand({ SecretId: secretId, SecretString: JSON.stringify(value) }));
  } catch (cause) {
    throw new Error(`writing secret ${secretId} failed: ${(cause as Error).name}`, { cause });
  }
}

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

export class SecretsManagerAccessTokenStore implements AccessTokenStore {
  constructor(
    private readonly client: SecretsManagerClient,
    readonly secretId: string,
  ) {}

  async read(): Promise<AccessToken> {
    return parseAccessToken(this.secretId, await readSecret(this.client, this.secretId));
  }

  async write(token: AccessToken): Promise<void> {
    await writeSecret(this.client, this.secretId, { accessToken: token.accessToken, refreshedAt: token.refreshedAt });
  }
}
