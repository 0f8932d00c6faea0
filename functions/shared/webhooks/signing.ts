/**
 * Webhook deliveries signed per the Standard Webhooks specification (contract, "Webhooks"): the
 * headers `webhook-id` (the same on every retry of one delivery), `webhook-timestamp` (epoch
 * seconds of this attempt) and `webhook-signature`, `v1,<base64 HMAC-SHA256 of
 * "<id>.<timestamp>.<body>">` under the endpoint's secret, one such signature per secret in use,
 * space-separated (during a rotation the old and the new secret both sign). A secret is `whsec_`
 * and the base64 of its key bytes, as the specification's libraries (`standardwebhooks`, `svix`)
 * read it. The body is `{"type", "timestamp", "data"}`. No AWS import; never logs, returns or puts
 * in an error a secret.
 */
import { createHmac, randomBytes } from 'node:crypto';

/** The prefix of every secret. */
export const SECRET_PREFIX = 'whsec_';
/** Key bytes of a new secret (the specification asks for 24 to 64). */
export const SECRET_BYTES = 32;
/** The specification's bounds of a secret's key, in bytes. */
const SECRET_MIN_BYTES = 24;
const SECRET_MAX_BYTES = 64;

/** A new secret: `whsec_` and the base64 of SECRET_BYTES random bytes. */
export function newSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(SECRET_BYTES).toString('base64')}`;
}

/** The key bytes of a secret; throws (naming no part of it) when it is not one. */
function keyOf(secret: string): Buffer {
  if (!secret.startsWith(SECRET_PREFIX)) throw new Error('a webhook secret must start with whsec_');
  const encoded = secret.slice(SECRET_PREFIX.length);
  const key = Buffer.from(encoded, 'base64');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded) || key.length < SECRET_MIN_BYTES || key.length > SECRET_MAX_BYTES) {
    throw new Error(`a webhook secret must be whsec_ and the base64 of ${SECRET_MIN_BYTES} to ${SECRET_MAX_BYTES} bytes`);
  }
  return key;
}

/** `v1,<base64 HMAC-SHA256>` of one delivery attempt under one secret. */
export function signatureOf(secret: string, id: string, timestampSeconds: number, body: string): string {
  return `v1,${createHmac('sha256', keyOf(secret)).update(`${id}.${timestampSeconds}.${body}`, 'utf8').digest('base64')}`;
}

export interface WebhookHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

/**
 * The headers of one attempt: `secrets` are the endpoint's secrets in use (one, or the new and the
 * old during a rotation), each signing the same id, timestamp and body.
 */
export function webhookHeaders(delivery: { id: string; timestampSeconds: number; body: string; secrets: readonly string[] }): WebhookHeaders {
  if (delivery.secrets.length === 0) throw new Error('a webhook delivery needs at least one secret');
  if (!Number.isSafeInteger(delivery.timestampSeconds) || delivery.timestampSeconds < 0) throw new Error('a webhook timestamp is whole epoch seconds');
  if (delivery.id.length === 0 || /[\s.]/.test(delivery.id)) throw new Error('a webhook id is not empty and holds no space or dot');
  return {
    'webhook-id': delivery.id,
    'webhook-timestamp': String(delivery.timestampSeconds),
    'webhook-signature': delivery.secrets.map((secret) => signatureOf(secret, delivery.id, delivery.timestampSeconds, delivery.body)).join(' '),
  };
}

/** The body of a delivery (contract): the event's detail-type, when it happened, its detail. */
export function webhookBody(type: string, at: Date, data: unknown): string {
  return JSON.stringify({ type, timestamp: at.toISOString(), data });
}
