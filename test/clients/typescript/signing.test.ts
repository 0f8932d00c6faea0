/**
 * The client's SigV4 signing (clients/typescript/src/signing.ts): for fixed credentials and a fixed
 * date its Authorization header is the one SigV4 defines (a reference written from AWS's
 * description, itself checked against AWS's published test vector), the session token is sent and
 * signed, the body's hash is signed, a path holding `%2F` is signed as SigV4 wants it for
 * execute-api (encoded once more); the region comes from the option, the API's host or AWS_REGION;
 * and on the wire, the request a server receives carries a signature that holds for what it
 * received, with the credentials given or the AWS SDK's default chain's.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../../clients/typescript/src/index.js';
import { createSigner, regionOfUrl, signedHeaders, signingRegion } from '../../../clients/typescript/src/signing.js';
import { referenceAuthorization, type ReferenceRequest } from './sigv4-reference.js';
import { startServer, type Received, type TestServer } from './servers.js';

const KEY = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' };
const SESSION = { ...KEY, sessionToken: 'session-token-of-the-test-0123456789' };
const DATE = new Date('2026-11-24T10:00:00.000Z');
const AMZ_DATE = '20261124T100000Z';
const API = 'https://abc123.execute-api.eu-west-1.amazonaws.com';
const sha256 = (data: string | Buffer): string => createHash('sha256').update(data).digest('hex');

/** The reference's view of a request the client signed: its path, query and headers as they go. */
function asSent(url: URL, method: string, headers: Record<string, string>, body: string): ReferenceRequest {
  const signedHeaders = /SignedHeaders=([^,]+)/.exec(headers['authorization'] ?? '')?.[1]?.split(';') ?? [];
  return { method, path: url.pathname, query: url.search.replace(/^\?/, ''), headers: { ...headers, host: url.host }, body: Buffer.from(body), signedHeaders };
}

describe('the SigV4 reference', () => {
  it("matches AWS's test vector get-vanilla", () => {
    const authorization = referenceAuthorization(
      { method: 'GET', path: '/', query: '', headers: { host: 'example.amazonaws.com', 'x-amz-date': '20150830T123600Z' }, body: Buffer.alloc(0), signedHeaders: ['host', 'x-amz-date'] },
      { ...KEY, region: 'us-east-1', service: 'service', amzDate: '20150830T123600Z' },
    );
    expect(authorization).toBe(
      'AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31',
    );
  });
});

describe('signedHeaders', () => {
  const scope = { ...KEY, region: 'eu-west-1', service: 'execute-api', amzDate: AMZ_DATE };

  it('a PUT with a body: the Authorization header SigV4 defines for execute-api, the body hash signed and sent, no host header, no token', async () => {
    const url = new URL(`${API}/connections/acme`);
    const body = JSON.stringify({ clientId: 'client-1', refreshToken: 'rt-signing-secret' });
    const headers = await signedHeaders(createSigner({ region: 'eu-west-1', credentials: KEY }), { method: 'PUT', url, headers: { 'content-type': 'application/json' }, body: Buffer.from(body) }, DATE);
    expect(Object.keys(headers).sort()).toEqual(['authorization', 'content-type', 'x-amz-content-sha256', 'x-amz-date']);
    expect(headers['x-amz-date']).toBe(AMZ_DATE);
    expect(headers['x-amz-content-sha256']).toBe(sha256(body));
    expect(headers['authorization']).toContain(`Credential=AKIDEXAMPLE/20261124/eu-west-1/execute-api/aws4_request, SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date, `);
    expect(headers['authorization']).toBe(referenceAuthorization(asSent(url, 'PUT', headers, body), scope));
  });

  it('with a session token: x-amz-security-token sent and signed', async () => {
    const url = new URL(`${API}/connections/acme`);
    const headers = await signedHeaders(createSigner({ region: 'eu-west-1', credentials: SESSION }), { method: 'GET', url, headers: {} }, DATE);
    expect(headers['x-amz-security-token']).toBe(SESSION.sessionToken);
    expect(headers['authorization']).toContain('SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, ');
    expect(headers['authorization']).toBe(referenceAuthorization(asSent(url, 'GET', headers, ''), scope));
  });

  it('the body is signed: another body, another signature, each the reference', async () => {
    const url = new URL(`${API}/connections/acme/items`);
    const signer = createSigner({ region: 'eu-west-1', credentials: KEY });
    const sign = async (body: string) => {
      const headers = await signedHeaders(signer, { method: 'POST', url, headers: { 'content-type': 'application/json' }, body: Buffer.from(body) }, DATE);
      expect(headers['authorization']).toBe(referenceAuthorization(asSent(url, 'POST', headers, body), scope));
      return headers['authorization'];
    };
    expect(await sign('{"ids":["a"]}')).not.toBe(await sign('{"ids":["b"]}'));
  });

  it('a path holding %2F and a query: signed as sent, each segment encoded once more', async () => {
    const url = new URL(`${API}/connections/acme/items/fil%2F1%20x`);
    const headers = await signedHeaders(createSigner({ region: 'eu-west-1', credentials: KEY }), { method: 'GET', url, headers: {} }, DATE);
    expect(headers['authorization']).toBe(referenceAuthorization(asSent(url, 'GET', headers, ''), scope));
    const feed = new URL(`${API}/connections/acme/changes?limit=2&after=eyJ2IjoxfQ`);
    const feedHeaders = await signedHeaders(createSigner({ region: 'eu-west-1', credentials: KEY }), { method: 'GET', url: feed, headers: {} }, DATE);
    expect(feedHeaders['authorization']).toBe(referenceAuthorization(asSent(feed, 'GET', feedHeaders, ''), scope));
  });
});

describe('the region', () => {
  it("the option, else the API's host, else AWS_REGION, else AWS_DEFAULT_REGION", () => {
    expect(regionOfUrl(new URL(API))).toBe('eu-west-1');
    expect(regionOfUrl(new URL('https://a1b2c3.execute-api.cn-north-1.amazonaws.com.cn/'))).toBe('cn-north-1');
    expect(regionOfUrl(new URL('https://api.example.com/'))).toBeUndefined();
    expect(signingRegion(new URL(API), 'us-east-2', { AWS_REGION: 'ap-south-1' })).toBe('us-east-2');
    expect(signingRegion(new URL(API), undefined, { AWS_REGION: 'ap-south-1' })).toBe('eu-west-1');
    expect(signingRegion(new URL('https://api.example.com/'), undefined, { AWS_REGION: 'ap-south-1' })).toBe('ap-south-1');
    expect(signingRegion(new URL('https://api.example.com/'), undefined, { AWS_DEFAULT_REGION: 'sa-east-1' })).toBe('sa-east-1');
    expect(signingRegion(new URL('https://api.example.com/'), undefined, {})).toBeUndefined();
  });
});

describe('on the wire', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer((request) => ({ status: 200, body: request.method === 'PUT' ? { connection: 'acme' } : { id: 'fil/1' } }));
  });
  afterAll(() => server.close());

  /** The signature of what the server received, recomputed from what it received. */
  function check(received: Received, credentials: { accessKeyId: string; secretAccessKey: string }, region: string): void {
    const headers = Object.fromEntries(Object.entries(received.headers).map(([name, value]) => [name, String(value)]));
    const url = new URL(received.url, server.url);
    const request = asSent(url, received.method, headers, received.body.toString('utf8'));
    expect(request.signedHeaders).toEqual(expect.arrayContaining(['host', 'x-amz-date', 'x-amz-content-sha256']));
    expect(headers['authorization']).toBe(referenceAuthorization({ ...request, headers }, { ...credentials, region, service: 'execute-api', amzDate: headers['x-amz-date']! }));
  }

  it('the requests a server receives hold a valid signature of what it received: the credentials given, a session token, the body, %2F', async () => {
    const client = createClient({ baseUrl: server.url, region: 'eu-west-1', credentials: SESSION });
    await client.putConnection('acme', { clientId: 'client-1', refreshToken: 'rt-wire-secret' });
    await client.getItem('acme', 'fil/1');
    const [put, get] = server.received.slice(-2);
    expect(put!.headers['x-amz-security-token']).toBe(SESSION.sessionToken);
    expect(put!.headers['x-amz-content-sha256']).toBe(sha256(put!.body));
    check(put!, SESSION, 'eu-west-1');
    expect(get!.url).toBe('/connections/acme/items/fil%2F1');
    check(get!, SESSION, 'eu-west-1');
  });

  it("without credentials, the AWS SDK's default chain (here the environment's AWS_ACCESS_KEY_ID), the region AWS_REGION", async () => {
    const client = createClient({ baseUrl: server.url });
    await client.getConnection('acme');
    const received = server.received.at(-1)!;
    expect(received.headers['authorization']).toContain(`Credential=${process.env['AWS_ACCESS_KEY_ID']}/`);
    expect(received.headers['authorization']).toContain(`/${process.env['AWS_REGION']}/execute-api/aws4_request`);
    check(received, { accessKeyId: process.env['AWS_ACCESS_KEY_ID']!, secretAccessKey: process.env['AWS_SECRET_ACCESS_KEY']! }, process.env['AWS_REGION']!);
  });

  it('signer: false sends requests unsigned', async () => {
    const client = createClient({ baseUrl: server.url, signer: false });
    await client.getConnection('acme');
    const headers = server.received.at(-1)!.headers;
    expect(headers['authorization']).toBeUndefined();
    expect(headers['x-amz-date']).toBeUndefined();
  });
});
