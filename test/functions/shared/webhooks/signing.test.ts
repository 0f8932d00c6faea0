/**
 * Webhook signing (functions/shared/webhooks/signing.ts) held against the Standard Webhooks
 * reference library (`standardwebhooks`), as a receiver verifies a delivery: our signature is the
 * library's, a delivery verifies under its secret and under either secret during a rotation, a
 * retry keeps its id, and a changed body, timestamp or id, or another secret, does not verify. No
 * error names a secret.
 */
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { newSecret, SECRET_BYTES, SECRET_PREFIX, signatureOf, webhookBody, webhookHeaders } from '../../../../functions/shared/webhooks/signing.js';

const BODY = webhookBody('ConnectionFailing', new Date('2026-12-08T10:00:00.000Z'), { connection: 'acme', status: 'failing', previousStatus: 'active', reason: 'token-unreadable', at: '2026-12-08T10:00:00.000Z' });
const now = (): number => Math.floor(Date.now() / 1000);

/** What the receiver's library makes of a delivery: its parsed body, or the error it throws. */
function verified(secret: string, body: string, headers: Record<string, string>): unknown {
  try {
    return new Webhook(secret).verify(body, headers);
  } catch (error) {
    return error;
  }
}

describe('webhook signing, as the Standard Webhooks library verifies it', () => {
  it('a new secret is whsec_ and the base64 of 32 random bytes, a new one each time', () => {
    const secret = newSecret();
    expect(secret.startsWith(SECRET_PREFIX)).toBe(true);
    expect(Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64')).toHaveLength(SECRET_BYTES);
    expect(newSecret()).not.toBe(secret);
  });

  it("signs exactly as the library signs: v1, and the base64 HMAC-SHA256 of id.timestamp.body", () => {
    const secret = newSecret();
    const at = new Date('2026-12-08T10:00:00.000Z');
    expect(signatureOf(secret, 'dlv_0001', at.getTime() / 1000, BODY)).toBe(new Webhook(secret).sign('dlv_0001', at, BODY));
  });

  it('a delivery verifies under its secret, and the library hands back the body', () => {
    const secret = newSecret();
    const headers = webhookHeaders({ id: 'dlv_0001', timestampSeconds: now(), body: BODY, secrets: [secret] });
    expect(Object.keys(headers).sort()).toEqual(['webhook-id', 'webhook-signature', 'webhook-timestamp']);
    expect(verified(secret, BODY, { ...headers })).toEqual(JSON.parse(BODY));
    expect(JSON.parse(BODY)).toEqual({ type: 'ConnectionFailing', timestamp: '2026-12-08T10:00:00.000Z', data: expect.objectContaining({ connection: 'acme', reason: 'token-unreadable' }) });
  });

  it('during a rotation both secrets sign: a receiver holding either verifies', () => {
    const [previous, next] = [newSecret(), newSecret()];
    const headers = webhookHeaders({ id: 'dlv_0002', timestampSeconds: now(), body: BODY, secrets: [next, previous] });
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2);
    expect(verified(previous, BODY, { ...headers })).toEqual(JSON.parse(BODY));
    expect(verified(next, BODY, { ...headers })).toEqual(JSON.parse(BODY));
    expect(verified(newSecret(), BODY, { ...headers })).toBeInstanceOf(WebhookVerificationError);
  });

  it('a retry keeps its webhook-id and is signed again for its own timestamp: both verify, a receiver drops the duplicate by id', () => {
    const secret = newSecret();
    const first = webhookHeaders({ id: 'dlv_0003', timestampSeconds: now() - 60, body: BODY, secrets: [secret] });
    const retry = webhookHeaders({ id: 'dlv_0003', timestampSeconds: now(), body: BODY, secrets: [secret] });
    expect(retry['webhook-id']).toBe(first['webhook-id']);
    expect(retry['webhook-signature']).not.toBe(first['webhook-signature']);
    for (const headers of [first, retry]) expect(verified(secret, BODY, { ...headers })).toEqual(JSON.parse(BODY));
  });

  it('a changed body, id or timestamp, another secret, or a timestamp out of the receiver\'s tolerance does not verify', () => {
    const secret = newSecret();
    const headers = webhookHeaders({ id: 'dlv_0004', timestampSeconds: now(), body: BODY, secrets: [secret] });
    expect(verified(secret, BODY.replace('acme', 'acmf'), { ...headers })).toBeInstanceOf(WebhookVerificationError);
    expect(verified(secret, BODY, { ...headers, 'webhook-id': 'dlv_0005' })).toBeInstanceOf(WebhookVerificationError);
    expect(verified(secret, BODY, { ...headers, 'webhook-timestamp': String(Number(headers['webhook-timestamp']) + 1) })).toBeInstanceOf(WebhookVerificationError);
    expect(verified(newSecret(), BODY, { ...headers })).toBeInstanceOf(WebhookVerificationError);
    const old = webhookHeaders({ id: 'dlv_0006', timestampSeconds: now() - 3600, body: BODY, secrets: [secret] });
    expect(verified(secret, BODY, { ...old })).toBeInstanceOf(WebhookVerificationError);
  });

  it('refuses a malformed secret, an empty list of secrets, a bad id or timestamp, and never names the secret', () => {
    const shortKey = `${SECRET_PREFIX}${Buffer.from('too-short-a-key').toString('base64')}`;
    for (const secret of ['not-a-secret-at-all-1234567890', shortKey, `${SECRET_PREFIX}!!!notbase64!!!`]) {
      let message = '';
      try {
        signatureOf(secret, 'dlv_0007', now(), BODY);
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message).toMatch(/^a webhook secret must/);
      expect(message).not.toContain(secret.slice(SECRET_PREFIX.length, SECRET_PREFIX.length + 8));
    }
    expect(() => webhookHeaders({ id: 'dlv_0008', timestampSeconds: now(), body: BODY, secrets: [] })).toThrow('at least one secret');
    expect(() => webhookHeaders({ id: 'dlv 0008', timestampSeconds: now(), body: BODY, secrets: [newSecret()] })).toThrow('a webhook id');
    expect(() => webhookHeaders({ id: 'dlv_0008', timestampSeconds: 1.5, body: BODY, secrets: [newSecret()] })).toThrow('whole epoch seconds');
  });
});
