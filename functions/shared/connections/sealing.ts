/**
 * Tokens sealed by the application (docs/connections.md, "Sealed tokens"): every refresh and access
 * token is encrypted before it is written to the connections table, so a read of the table, of its
 * stream, a backup or an export shows only ciphertext.
 *
 * Envelope encryption: each sealed value has its own 256-bit data key, made by the DataKeys port
 * (the operator's KMS key in a deployment: adapters/kms-data-keys.ts; a local key in the
 * development harness) and bound there to the connection id (KMS's encryption context): a sealed
 * value copied into another connection's row cannot be opened there. The token is encrypted with
 * AES-256-GCM under that data key, the connection id bound again as additional authenticated data.
 *
 * The stored form is one string: `cs-sealed-v1 <data key>.<iv>.<ciphertext and tag>`, each part
 * base64url. The space cannot occur in a token (a refresh token with whitespace is refused, and an
 * access token goes in a Bearer header), so a stored value is either sealed or a clear token from a
 * deployment that did not seal yet: `open` answers the latter as it is (`npm run connections -- seal`
 * seals those rows: docs/connections.md).
 *
 * Opening is cached per container: a stored value, once opened, is answered from memory until it
 * leaves the bounded cache (a new token is a new stored value). No AWS import.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { BoundedMap } from '../bounded-map.js';
import { PermanentError, TransientError } from '../errors.js';

/** Data keys under the operator's key, each bound to one connection. */
export interface DataKeys {
  /** A new 256-bit data key for `connection`: its plaintext (32 bytes) and its encrypted form. */
  generate(connection: string): Promise<{ plaintext: Uint8Array; encrypted: Uint8Array }>;
  /**
   * The plaintext of a data key `generate` made for `connection`. Throws a SealError when it was made
   * for another connection or under another key; a TransientError when the key service fails for now.
   */
  decrypt(connection: string, encrypted: Uint8Array): Promise<Uint8Array>;
}

/** Seals and opens a connection's tokens. */
export interface Sealer {
  /** The stored form of `token`, bound to `connection`. */
  seal(connection: string, token: string): Promise<string>;
  /** The token a stored value holds (a clear value as it is). Throws a SealError when it cannot be opened for `connection`. */
  open(connection: string, stored: string): Promise<string>;
}

/** The sealer of a caller that handles no token (the eraser; CLI commands that open none): any use is a bug. */
export const NO_TOKENS: Sealer = {
  seal: () => Promise.reject(new Error('this caller seals no token')),
  open: () => Promise.reject(new Error('this caller opens no token')),
};

/** A stored value that cannot be opened for the connection it is read for (never quotes a value). */
export class SealError extends PermanentError {
  static override readonly kind: string = 'SealError';
}

/**
 * The operator's key is disabled or pending deletion: an outage of the key, not of any connection.
 * Nothing sealed opens and nothing new is sealed until it is enabled again (or its deletion is
 * cancelled); every refresh waits, and no connection turns `failing` (docs/operations.md, "The
 * connections key is unavailable").
 */
export class KeyUnavailableError extends TransientError {
  static override readonly kind: string = 'KeyUnavailableError';
}

/**
 * A connection's `lastFailureReason` when its sealed refresh token can never be opened (corrupt, or
 * sealed for another connection or under another key): it is `failing` until its credentials are
 * put again, and never tried again meanwhile.
 */
export const TOKEN_UNREADABLE = 'token-unreadable';

export const SEALED_PREFIX = 'cs-sealed-v1 ';
const AES = 'aes-256-gcm';
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** Opened values kept per container: a connection has two tokens. */
export const OPENED_CACHE_SIZE = 20_000;

/** Whether a stored value is sealed (else it is a clear token a deployment wrote before sealing). */
export function isSealed(stored: string): boolean {
  return stored.startsWith(SEALED_PREFIX);
}

/**
 * A short, one-way name of a stored value (the refresher compares what it scanned with what it
 * leased by it): never the value, and useless to open it.
 */
export function stampOf(stored: string): string {
  return createHash('sha256').update(stored).digest('base64url').slice(0, 22);
}

/** The additional authenticated data of a connection's tokens. */
function aad(connection: string): Buffer {
  return Buffer.from(`content-sync token v1\n${connection}`, 'utf8');
}

export class TokenSealer implements Sealer {
  private readonly opened: BoundedMap<string, { connection: string; token: string }>;

  constructor(
    private readonly keys: DataKeys,
    options: { cacheSize?: number } = {},
  ) {
    this.opened = new BoundedMap(options.cacheSize ?? OPENED_CACHE_SIZE);
  }

  async seal(connection: string, token: string): Promise<string> {
    const key = await this.keys.generate(connection);
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv(AES, key.plaintext, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(aad(connection));
    const body = Buffer.concat([cipher.update(token, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    Buffer.from(key.plaintext.buffer, key.plaintext.byteOffset, key.plaintext.byteLength).fill(0);
    const stored = `${SEALED_PREFIX}${[Buffer.from(key.encrypted), iv, body].map((part) => part.toString('base64url')).join('.')}`;
    this.opened.set(stored, { connection, token });
    return stored;
  }

  async open(connection: string, stored: string): Promise<string> {
    if (!isSealed(stored)) return stored;
    const cached = this.opened.use(stored);
    if (cached !== undefined && cached.connection === connection) return cached.token;
    const parts = stored.slice(SEALED_PREFIX.length).split('.');
    const [encryptedKey, iv, body] = parts.map((part) => Buffer.from(part, 'base64url'));
    if (parts.length !== 3 || !encryptedKey?.length || iv?.length !== IV_BYTES || body === undefined || body.length < TAG_BYTES) {
      throw new SealError(`connection "${connection}": a sealed token in its row is malformed`);
    }
    const dataKey = await this.keys.decrypt(connection, encryptedKey);
    let token: string;
    try {
      const decipher = createDecipheriv(AES, dataKey, iv, { authTagLength: TAG_BYTES });
      decipher.setAAD(aad(connection));
      decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
      token = Buffer.concat([decipher.update(body.subarray(0, body.length - TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch {
      throw new SealError(`connection "${connection}": a sealed token in its row does not open for this connection (sealed for another, or altered)`);
    } finally {
      Buffer.from(dataKey.buffer, dataKey.byteOffset, dataKey.byteLength).fill(0);
    }
    this.opened.set(stored, { connection, token });
    return token;
  }
}
