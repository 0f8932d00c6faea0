/**
 * Secrets Manager, as the functions use it: reading and writing a secret's JSON string, and the
 * access-token secret as the shared AccessTokenStore port (the token refresher writes it, the item
 * sync reads it). The credentials store, which only the refresher uses, is in
 * functions/token-refresher/adapters/secrets-manager.ts.
 */
import {
  GetSecretValueCommand,
  PutSecretValueCommand,
  type SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import type { AccessToken, AccessTokenStore } from '../ports.js';
import { parseAccessToken } from '../secrets.js';

/** Reads a secret's string; AWS failures are re-thrown naming the secret (AWS messages hold no values). */
export async function readSecret(client: SecretsManagerClient, secretId: string): Promise<string | undefined> {
  try {
    const output = await client.send(new GetSecretValueCommand({ SecretId: secretId }));
    return output.SecretString;
  } catch (cause) {
    throw new Error(`reading secret ${secretId} failed: ${(cause as Error).name}`, { cause });
  }
}

/** Writes `value` as the secret's JSON string; AWS failures are re-thrown naming the secret. */
export async function writeSecret(client: SecretsManagerClient, secretId: string, value: object): Promise<void> {
  try {
    await client.send(new PutSecretValueCommand({ SecretId: secretId, SecretString: JSON.stringify(value) }));
  } catch (cause) {
    throw new Error(`writing secret ${secretId} failed: ${(cause as Error).name}`, { cause });
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
