import { describe, it, expect, beforeEach } from 'vitest';
import { mockClient } from 'aws-sdk-client-mock';
import {
  GetSecretValueCommand,
  PutSecretValueCommand,
  ResourceNotFoundException,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { createRefresherHandler } from '../../../functions/token-refresher/app.js';
import { RotatedTokenNotStoredError } from '../../../functions/token-refresher/refresh.js';
import {
  CredentialsNotConfiguredError,
  ProviderError,
  SecretFormatError,
} from '../../../functions/shared/errors.js';
import type { Credentials, ProviderClient, TokenGrant } from '../../../functions/shared/ports.js';
import { HttpProviderClient } from '../../../functions/shared/provider/provider-client.js';
import type { RefresherConfig } from '../../../functions/shared/config.js';
import { captureOutput, jsonLines } from '../../../dev/fakes/capture-output.js';

const CREDS_ID = 'content-sync/credentials';
const TOKEN_ID = 'content-sync/access-token';
const REFRESH_TOKEN = 'rt-secret-value-0001';
const ACCESS_TOKEN = 'at-secret-value-0001';
const ROTATED = 'rt-secret-value-0002';
const NOW = new Date('2026-11-21T10:00:00.000Z');

const config: RefresherConfig = {
  provider: { baseUrl: 'https://provider.example.com/api', timeoutMs: 1000, maxResponseBytes: 1024 },
  credentialsSecretId: CREDS_ID,
  accessTokenSecretId: TOKEN_ID,
};

const secretsMock = mockClient(SecretsManagerClient);

class FakeProvider implements ProviderClient {
  calls: Credentials[] = [];
  constructor(private readonly answer: () => Promise<TokenGrant>) {}
  async getToken(credentials: Credentials): Promise<TokenGrant> {
    this.calls.push(credentials);
    return this.answer();
  }
  async getItem(): Promise<unknown> {
    throw new Error('not used');
  }
}

function credentialsSecret(value: unknown) {
  secretsMock
    .on(GetSecretValueCommand, { SecretId: CREDS_ID })
    .resolves({ SecretString: typeof value === 'string' ? value : JSON.stringify(value) });
}

function build(provider: ProviderClient) {
  return createRefresherHandler({
    config,
    secrets: new SecretsManagerClient({ region: 'eu-west-1' }),
    provider,
    clock: { now: () => NOW },
  });
}

beforeEach(() => {
  secretsMock.reset();
  secretsMock.on(PutSecretValueCommand).resolves({});
});

describe('token refresher', () => {
  it('trades the refresh token and stores {accessToken, refreshedAt} in the access-token secret', async () => {
    credentialsSecret({ clientId: 'client-1', refreshToken: REFRESH_TOKEN });
    const provider = new FakeProvider(async () => ({ accessToken: ACCESS_TOKEN }));

    const { result, output } = await captureOutput(() => build(provider)({ trigger: 'schedule' }));

    expect(result).toEqual({ status: 'refreshed', refreshedAt: NOW.toISOString(), rotated: false });
    expect(provider.calls).toEqual([{ clientId: 'client-1', refreshToken: REFRESH_TOKEN }]);
    expect(secretsMock).toReceiveCommandWith(GetSecretValueCommand, { SecretId: CREDS_ID });
    expect(secretsMock).toReceiveCommandTimes(PutSecretValueCommand, 1);
    expect(secretsMock).toReceiveCommandWith(PutSecretValueCommand, {
      SecretId: TOKEN_ID,
      SecretString: JSON.stringify({ accessToken: ACCESS_TOKEN, refreshedAt: '2026-11-21T10:00:00.000Z' }),
    });
    const metrics = jsonLines(output).find((line) => typeof line === 'object' && '_aws' in line) as Record<string, unknown>;
    expect(metrics).toMatchObject({ TokenRefreshed: 1, service: 'token-refresher' });
    expect(JSON.stringify(metrics['_aws'])).toContain('"Namespace":"ContentSync"');
    expect(output).not.toContain(ACCESS_TOKEN);
    expect(output).not.toContain(REFRESH_TOKEN);
  });

  it('stores a rotated refresh token, keeping clientId, before the access token', async () => {
    credentialsSecret({ clientId: 'client-1', refreshToken: REFRESH_TOKEN });
    const provider = new FakeProvider(async () => ({ accessToken: ACCESS_TOKEN, refreshToken: ROTATED }));

    const { result, output } = await captureOutput(() => build(provider)({}));

    expect(result).toMatchObject({ status: 'refreshed', rotated: true });
    const puts = secretsMock.commandCalls(PutSecretValueCommand).map((call) => call.args[0].input);
    expect(puts).toEqual([
      { SecretId: CREDS_ID, SecretString: JSON.stringify({ clientId: 'client-1', refreshToken: ROTATED }) },
      { SecretId: TOKEN_ID, SecretString: JSON.stringify({ accessToken: ACCESS_TOKEN, refreshedAt: NOW.toISOString() }) },
    ]);
    expect(output).toContain('RefreshTokenRotated');
    for (const token of [ACCESS_TOKEN, REFRESH_TOKEN, ROTATED]) expect(output).not.toContain(token);
  });

  it('does not rewrite the credentials when the provider returns the same refresh token', async () => {
    credentialsSecret({ clientId: 'client-1', refreshToken: REFRESH_TOKEN });
    const provider = new FakeProvider(async () => ({ accessToken: ACCESS_TOKEN, refreshToken: REFRESH_TOKEN }));

    await captureOutput(() => build(provider)({}));

    expect(secretsMock).toReceiveCommandTimes(PutSecretValueCommand, 1);
    expect(secretsMock).toReceiveCommandWith(PutSecretValueCommand, { SecretId: TOKEN_ID });
  });

  it('fails loudly and leaves the access token untouched when storing a rotated refresh token fails', async () => {
    credentialsSecret({ clientId: 'client-1', refreshToken: REFRESH_TOKEN });
    secretsMock.on(PutSecretValueCommand, { SecretId: CREDS_ID }).rejects(new Error('AccessDenied'));
    const provider = new FakeProvider(async () => ({ accessToken: ACCESS_TOKEN, refreshToken: ROTATED }));

    const { error, output } = await captureOutput(() => build(provider)({}));

    expect(error).toBeInstanceOf(RotatedTokenNotStoredError);
    expect((error as Error).message).toMatch(/rotated the refresh token but storing the new one failed/);
    expect(secretsMock).not.toReceiveCommandWith(PutSecretValueCommand, { SecretId: TOKEN_ID });
    expect(output).toContain('TokenRefreshFailed');
    for (const token of [ACCESS_TOKEN, REFRESH_TOKEN, ROTATED]) {
      expect(output).not.toContain(token);
      expect(String(error)).not.toContain(token);
    }
  });

  it('fails with the provider error and writes nothing when the provider refuses', async () => {
    credentialsSecret({ clientId: 'client-1', refreshToken: REFRESH_TOKEN });
    const refused = new ProviderError('the provider refused the credentials', {
      kind: 'unauthorized',
      operation: 'getToken',
      status: 401,
      providerCode: 1001,
      providerMessage: 'refresh token expired',
    });
    const provider = new FakeProvider(async () => Promise.reject(refused));

    const { error, output } = await captureOutput(() => build(provider)({}));

    expect(error).toBe(refused);
    expect((error as Error).message).toBe(
      'getToken: the provider refused the credentials; HTTP 401; provider error 1001: refresh token expired',
    );
    expect(secretsMock).not.toReceiveCommand(PutSecretValueCommand);
    const logged = jsonLines(output).find((line) => typeof line === 'object' && line['message'] === 'token refresh failed');
    expect(logged).toMatchObject({ level: 'ERROR', trigger: 'schedule', error: { name: 'ProviderError' } });
  });

  describe('an answer whose tokens could never be sent in an HTTP header is malformed: nothing is stored', () => {
    /** The real HTTP client, answered by a stand-in fetch with this 200 body. */
    function answering(body: object): HttpProviderClient {
      return new HttpProviderClient({
        ...config.provider,
        fetch: async () => new Response(JSON.stringify(body), { status: 200, headers: { 'content-type': 'application/json' } }),
      });
    }

    it.each([
      ['a line break', `${ACCESS_TOKEN}\r\nX-Injected: 1`, 'a line break, U+000D'],
      ['a NUL', `${ACCESS_TOKEN}\u0000`, 'the control character U+0000'],
      ['a tab', `${ACCESS_TOKEN}\tx`, 'the control character U+0009'],
    ])('access_token with %s', async (_label, accessToken, reason) => {
      credentialsSecret({ clientId: 'client-1', refreshToken: REFRESH_TOKEN });

      const { error, output } = await captureOutput(() => build(answering({ access_token: accessToken }))({ trigger: 'schedule' }));

      expect(error).toBeInstanceOf(ProviderError);
      expect(error).toMatchObject({ kind: 'malformed', operation: 'getToken' });
      expect((error as Error).message).toBe(
        `getToken: the 200 body has an "access_token" that cannot be sent in an HTTP header (it holds ${reason})`,
      );
      expect(secretsMock.calls().map((call) => call.args[0].constructor.name)).toEqual(['GetSecretValueCommand']);
      expect(secretsMock).toReceiveCommandWith(GetSecretValueCommand, { SecretId: CREDS_ID });
      expect(secretsMock).not.toReceiveCommand(PutSecretValueCommand);
      expect(output).toContain('TokenRefreshFailed');
      for (const text of [output, String(error)]) {
        expect(text).not.toContain(ACCESS_TOKEN);
        expect(text).not.toContain(REFRESH_TOKEN);
      }
    });

    it('a rotated refresh_token with a line break: neither secret changes', async () => {
      credentialsSecret({ clientId: 'client-1', refreshToken: REFRESH_TOKEN });

      const { error, output } = await captureOutput(() =>
        build(answering({ access_token: ACCESS_TOKEN, refresh_token: `${ROTATED}\n` }))({ trigger: 'schedule' }),
      );

      expect(error).toMatchObject({ kind: 'malformed', operation: 'getToken' });
      expect((error as Error).message).toBe(
        'getToken: the 200 body has a "refresh_token" that cannot be sent in an HTTP header (it holds a line break, U+000A)',
      );
      expect(secretsMock.calls().map((call) => call.args[0].constructor.name)).toEqual(['GetSecretValueCommand']);
      expect(secretsMock).not.toReceiveCommand(PutSecretValueCommand);
      for (const text of [output, String(error)]) {
        for (const token of [ACCESS_TOKEN, REFRESH_TOKEN, ROTATED]) expect(text).not.toContain(token);
      }
    });
  });

  it('retries once with the refresh token another run stored meanwhile, after a 401', async () => {
    secretsMock
      .on(GetSecretValueCommand, { SecretId: CREDS_ID })
      .resolvesOnce({ SecretString: JSON.stringify({ clientId: 'client-1', refreshToken: REFRESH_TOKEN }) })
      .resolves({ SecretString: JSON.stringify({ clientId: 'client-1', refreshToken: ROTATED }) });
    const unauthorized = new ProviderError('the provider refused the credentials', { kind: 'unauthorized', operation: 'getToken', status: 401 });
    let calls = 0;
    const provider = new FakeProvider(async () => (++calls === 1 ? Promise.reject(unauthorized) : { accessToken: ACCESS_TOKEN }));

    const { result } = await captureOutput(() => build(provider)({}));

    expect(result).toMatchObject({ status: 'refreshed', rotated: false });
    expect(provider.calls).toEqual([
      { clientId: 'client-1', refreshToken: REFRESH_TOKEN },
      { clientId: 'client-1', refreshToken: ROTATED },
    ]);
    expect(secretsMock).toReceiveCommandTimes(GetSecretValueCommand, 2);
    expect(secretsMock).toReceiveCommandTimes(PutSecretValueCommand, 1);
    expect(secretsMock).toReceiveCommandWith(PutSecretValueCommand, { SecretId: TOKEN_ID });
  });

  it('fails on a 401 without a second call when the stored refresh token did not change', async () => {
    credentialsSecret({ clientId: 'client-1', refreshToken: REFRESH_TOKEN });
    const unauthorized = new ProviderError('the provider refused the credentials', { kind: 'unauthorized', operation: 'getToken', status: 401 });
    const provider = new FakeProvider(async () => Promise.reject(unauthorized));

    const { error } = await captureOutput(() => build(provider)({}));

    expect(error).toBe(unauthorized);
    expect(provider.calls).toHaveLength(1);
    expect(secretsMock).toReceiveCommandTimes(GetSecretValueCommand, 2);
    expect(secretsMock).not.toReceiveCommand(PutSecretValueCommand);
  });

  it('names the secret when the credentials secret does not exist', async () => {
    secretsMock
      .on(GetSecretValueCommand, { SecretId: CREDS_ID })
      .rejects(new ResourceNotFoundException({ message: 'not found', $metadata: {} }));
    const provider = new FakeProvider(async () => ({ accessToken: ACCESS_TOKEN }));

    const { error } = await captureOutput(() => build(provider)({}));

    expect((error as Error).message).toBe(`reading secret ${CREDS_ID} failed: ResourceNotFoundException`);
    expect(provider.calls).toHaveLength(0);
    expect(secretsMock).not.toReceiveCommand(PutSecretValueCommand);
  });

  it.each([
    ['not JSON', 'clientId=client-1;refreshToken=' + REFRESH_TOKEN, /is not JSON/],
    ['an array', JSON.stringify([REFRESH_TOKEN]), /is not a JSON object/],
    ['no refreshToken', JSON.stringify({ clientId: 'client-1' }), /"refreshToken" must be a non-empty string/],
    ['an empty clientId', JSON.stringify({ clientId: '', refreshToken: REFRESH_TOKEN }), /"clientId" must be a non-empty string/],
  ])('rejects a credentials secret that is %s without quoting it', async (_label, value, message) => {
    credentialsSecret(value);
    const provider = new FakeProvider(async () => ({ accessToken: ACCESS_TOKEN }));

    const { error, output } = await captureOutput(() => build(provider)({}));

    expect(error).toBeInstanceOf(SecretFormatError);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).toContain(CREDS_ID);
    expect(String(error)).not.toContain(REFRESH_TOKEN);
    expect(output).not.toContain(REFRESH_TOKEN);
    expect(provider.calls).toHaveLength(0);
    expect(secretsMock).not.toReceiveCommand(PutSecretValueCommand);
  });

  it('fails a scheduled run while the credentials are the deploy-time placeholder', async () => {
    credentialsSecret({ clientId: 'REPLACE_ME', refreshToken: 'REPLACE_ME' });
    const provider = new FakeProvider(async () => ({ accessToken: ACCESS_TOKEN }));

    const { error } = await captureOutput(() => build(provider)({ trigger: 'schedule' }));

    expect(error).toBeInstanceOf(CredentialsNotConfiguredError);
    expect(provider.calls).toHaveLength(0);
  });

  it('skips, without failing, the deploy-time run while the credentials are the placeholder', async () => {
    credentialsSecret({ clientId: 'REPLACE_ME', refreshToken: 'REPLACE_ME' });
    const provider = new FakeProvider(async () => ({ accessToken: ACCESS_TOKEN }));

    const { result, error } = await captureOutput(() => build(provider)({ trigger: 'deploy' }));

    expect(error).toBeUndefined();
    expect(result).toEqual({
      status: 'skipped',
      reason: `secret ${CREDS_ID} still holds the deploy-time placeholder: put {"clientId": "...", "refreshToken": "..."} in it`,
    });
    expect(secretsMock).not.toReceiveCommand(PutSecretValueCommand);
  });

  it('fails a deploy-time run for any other reason', async () => {
    credentialsSecret({ clientId: 'client-1', refreshToken: REFRESH_TOKEN });
    const provider = new FakeProvider(async () =>
      Promise.reject(new ProviderError('the provider failed (may pass)', { kind: 'transient', operation: 'getToken', status: 503 })),
    );

    const { error } = await captureOutput(() => build(provider)({ trigger: 'deploy' }));

    expect(error).toBeInstanceOf(ProviderError);
  });

  it('fails when the access-token secret cannot be written', async () => {
    credentialsSecret({ clientId: 'client-1', refreshToken: REFRESH_TOKEN });
    secretsMock.on(PutSecretValueCommand, { SecretId: TOKEN_ID }).rejects(Object.assign(new Error('denied'), { name: 'AccessDeniedException' }));
    const provider = new FakeProvider(async () => ({ accessToken: ACCESS_TOKEN }));

    const { error, output } = await captureOutput(() => build(provider)({}));

    expect((error as Error).message).toBe(`writing secret ${TOKEN_ID} failed: AccessDeniedException`);
    expect(output).not.toContain(ACCESS_TOKEN);
  });
});
