/**
 * The token refresher against the provider simulator (real HTTP on 127.0.0.1), with Secrets Manager
 * mocked. Every scenario's output is collected and checked for tokens at the end.
 */
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { mockClient } from 'aws-sdk-client-mock';
import { GetSecretValueCommand, PutSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { createRefresherHandler } from '../../../functions/token-refresher/app.js';
import { ProviderError } from '../../../functions/shared/errors.js';
import { loadRefresherConfig } from '../../../functions/shared/config.js';
import { ProviderSimulator } from '../../../dev/simulator/provider-simulator.js';
import { captureOutput } from '../../../dev/fakes/capture-output.js';

const CREDS_ID = 'creds-secret';
const TOKEN_ID = 'token-secret';
const secretsMock = mockClient(SecretsManagerClient);

/** Every token any scenario handled, and everything printed: checked together at the end. */
const seenTokens = new Set<string>();
/** The tokens of the answers refused as malformed (their printable part). */
const refusedTokens = ['at-linebreaksecret', 'at-fineaccesssecret', 'rt-rotatedsecret'];
const allOutput: string[] = [];
const simulators: ProviderSimulator[] = [];

/** A secrets fake backed by a map: GetSecretValue reads it, PutSecretValue writes it. */
function secretStore(initial: Record<string, object>) {
  const store = new Map(Object.entries(initial).map(([id, value]) => [id, JSON.stringify(value)]));
  secretsMock.on(GetSecretValueCommand).callsFake((input: { SecretId: string }) => {
    const value = store.get(input.SecretId);
    if (value === undefined) throw Object.assign(new Error('missing'), { name: 'ResourceNotFoundException' });
    return { SecretString: value };
  });
  secretsMock.on(PutSecretValueCommand).callsFake((input: { SecretId: string; SecretString: string }) => {
    store.set(input.SecretId, input.SecretString);
    return {};
  });
  return { get: (id: string) => JSON.parse(store.get(id) ?? 'null') as Record<string, string> | null };
}

async function setup(options: { rotate?: boolean; timeoutMs?: string } = {}) {
  const sim = await ProviderSimulator.start({ clientId: 'client-42', refreshToken: 'rt-original-secret', rotateRefreshToken: options.rotate ?? false });
  simulators.push(sim);
  seenTokens.add(sim.refreshToken);
  const secrets = secretStore({ [CREDS_ID]: { clientId: 'client-42', refreshToken: sim.refreshToken } });
  const config = loadRefresherConfig({
    PROVIDER_BASE_URL: sim.baseUrl,
    CREDENTIALS_SECRET_ID: CREDS_ID,
    ACCESS_TOKEN_SECRET_ID: TOKEN_ID,
    ...(options.timeoutMs ? { PROVIDER_TIMEOUT_MS: options.timeoutMs } : {}),
  });
  const handler = createRefresherHandler({ config, secrets: new SecretsManagerClient({ region: 'eu-west-1' }) });
  const run = async (event: { trigger?: string } = { trigger: 'schedule' }) => {
    const captured = await captureOutput(() => handler(event));
    allOutput.push(captured.output, String(captured.error ?? ''), JSON.stringify(captured.result ?? null));
    return captured;
  };
  return { sim, secrets, run };
}

beforeEach(() => {
  secretsMock.reset();
});

afterAll(async () => {
  await Promise.all(simulators.map((sim) => sim.close()));
});

describe('token refresher against the provider simulator', () => {
  it('stores a working access token', async () => {
    const { sim, secrets, run } = await setup();

    const { result, error } = await run();

    expect(error).toBeUndefined();
    expect(result).toMatchObject({ status: 'refreshed', rotated: false });
    const stored = secrets.get(TOKEN_ID)!;
    seenTokens.add(stored['accessToken']!);
    expect(Object.keys(stored).sort()).toEqual(['accessToken', 'refreshedAt']);
    expect(stored['refreshedAt']).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    // The stored token works against the provider.
    const response = await fetch(`${sim.baseUrl}/items/nothing`, { headers: { Authorization: `Bearer ${stored['accessToken']}` } });
    expect(response.status).toBe(404);
    expect(sim.requests[0]).toMatchObject({ rawUrl: '/api/v2/getToken?client_id=client-42', authorization: 'bearer rt-original-secret' });
  });

  it('stores the rotated refresh token so the next run still works', async () => {
    const { sim, secrets, run } = await setup({ rotate: true });

    await run();
    const afterFirst = secrets.get(CREDS_ID)!;
    seenTokens.add(afterFirst['refreshToken']!);
    expect(afterFirst).toEqual({ clientId: 'client-42', refreshToken: sim.refreshToken });
    expect(afterFirst['refreshToken']).not.toBe('rt-original-secret');

    const second = await run();
    expect(second.error).toBeUndefined();
    expect(second.result).toMatchObject({ status: 'refreshed', rotated: true });
    seenTokens.add(sim.refreshToken);
    seenTokens.add(secrets.get(TOKEN_ID)!['accessToken']!);
    expect(secrets.get(CREDS_ID)!['refreshToken']).toBe(sim.refreshToken);
  });

  it('two overlapping runs against a rotating provider both succeed and leave working credentials', async () => {
    const { sim, secrets, run } = await setup({ rotate: true });
    // The first request to arrive is held back: the other run rotates and stores the refresh token
    // meanwhile, so the held one is answered 401 for a refresh token that is no longer valid.
    sim.addFault({ endpoint: 'token', times: 1, fault: { kind: 'delay', ms: 300 } });

    const [first, second] = await Promise.all([run(), run()]);

    expect(first.error).toBeUndefined();
    expect(second.error).toBeUndefined();
    seenTokens.add(sim.refreshToken);
    seenTokens.add(secrets.get(TOKEN_ID)!['accessToken']!);
    expect(secrets.get(CREDS_ID)!['refreshToken']).toBe(sim.refreshToken);
    expect(sim.requests.filter((request) => request.endpoint === 'token').map((request) => request.status)).toEqual([401, 200, 200]);
  });

  it.each([
    ['an unauthorized refresh token', { kind: 'status', status: 401, body: { error: { code: 4011, message: 'refresh token revoked' } } }, /HTTP 401; provider error 4011: refresh token revoked/],
    ['a server error', { kind: 'status', status: 503, body: { error: { code: 5030, message: 'maintenance' } } }, /HTTP 503; provider error 5030: maintenance/],
    ['a bad request', { kind: 'status', status: 400, body: { error: { code: 17, message: 'unknown client' } } }, /HTTP 400; provider error 17: unknown client/],
    ['an HTML 200', { kind: 'body', rawBody: '<html>oops</html>' }, /the 200 body is not JSON/],
    ['a 200 without a token', { kind: 'body', rawBody: '{"token_type":"bearer"}' }, /no non-empty string "access_token"/],
    ['an empty token', { kind: 'body', rawBody: '{"access_token":"   "}' }, /no non-empty string "access_token"/],
    ['a dropped connection', { kind: 'drop' }, /network failure/],
    [
      'an access_token with a line break',
      { kind: 'body', rawBody: JSON.stringify({ access_token: 'at-linebreaksecret\r\nX-Injected: 1' }) },
      /^getToken: the 200 body has an "access_token" that cannot be sent in an HTTP header \(it holds a line break, U\+000D\)$/,
    ],
    [
      'a rotated refresh_token with a control character',
      { kind: 'body', rawBody: JSON.stringify({ access_token: 'at-fineaccesssecret', refresh_token: 'rt-rotatedsecret\u0001' }) },
      /^getToken: the 200 body has a "refresh_token" that cannot be sent in an HTTP header \(it holds the control character U\+0001\)$/,
    ],
  ] as const)('fails on %s, saying why, and leaves the stored token untouched', async (_label, fault, message) => {
    const { sim, run } = await setup();
    sim.addFault({ endpoint: 'token', fault });

    const { error, output } = await run();

    expect(error).toBeInstanceOf(ProviderError);
    expect((error as Error).message).toMatch(message);
    expect(secretsMock).not.toReceiveCommand(PutSecretValueCommand);
    expect(output).toContain('"message":"token refresh failed"');
  });

  it('fails with a time-out when the provider hangs', async () => {
    const { sim, run } = await setup({ timeoutMs: '200' });
    sim.addFault({ endpoint: 'token', fault: { kind: 'hang' } });

    const { error } = await run();

    expect((error as Error).message).toBe('getToken: timed out after 200 ms');
    expect(secretsMock).not.toReceiveCommand(PutSecretValueCommand);
  });

  it('fails when the credentials secret is missing', async () => {
    const { run } = await setup();
    secretsMock.on(GetSecretValueCommand).rejects(Object.assign(new Error('gone'), { name: 'ResourceNotFoundException' }));

    const { error } = await run();

    expect((error as Error).message).toBe(`reading secret ${CREDS_ID} failed: ResourceNotFoundException`);
  });

  it('never printed, returned or threw a token in any scenario', () => {
    const text = allOutput.join('\n');
    expect(seenTokens.size).toBeGreaterThanOrEqual(4);
    expect(text.length).toBeGreaterThan(1000);
    for (const token of [...seenTokens, ...refusedTokens]) expect(text).not.toContain(token);
    expect(text).not.toMatch(/\bat-[A-Za-z0-9]{6,}/);
  });
});
