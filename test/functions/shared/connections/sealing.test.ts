/**
 * Sealed tokens (functions/shared/connections/sealing.ts): the TokenSealer over the application's
 * KMS adapter and a real KMSClient answered by the KMS model (test/support/sealer.ts), and over a
 * hand-written DataKeys where the sealer's own checks are the point (a data key handed out for any
 * connection: the additional authenticated data still refuses it). The KMS commands themselves:
 * kms-data-keys.test.ts; the table: sealed-store.dynamodb.test.ts.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { KmsDataKeys } from '../../../../functions/shared/adapters/kms-data-keys.js';
import {
  KeyUnavailableError,
  isSealed,
  NO_TOKENS,
  OPENED_CACHE_SIZE,
  SEALED_PREFIX,
  SealError,
  stampOf,
  TokenSealer,
  type DataKeys,
} from '../../../../functions/shared/connections/sealing.js';
import { PermanentError, TransientError } from '../../../../functions/shared/errors.js';
import { testSealing, type TestSealing } from '../../../support/sealer.js';
import { kmsApi } from '../../../../functions/shared/adapters/kms-api.js';

const TOKEN = 'rt-sealing-secret-0001-abcdefghijklmnop';
const PART = /^[A-Za-z0-9_-]+$/;

/** The sealer a new container builds over the same KMS key: nothing opened yet. */
function freshSealer(sealing: TestSealing, options: { cacheSize?: number } = {}): TokenSealer {
  return new TokenSealer(new KmsDataKeys(kmsApi(sealing.kms), sealing.keyArn), options);
}

/** The three parts of a stored value, decoded. */
function partsOf(stored: string): [Buffer, Buffer, Buffer] {
  const parts = stored.slice(SEALED_PREFIX.length).split('.');
  expect(parts).toHaveLength(3);
  return parts.map((part) => Buffer.from(part, 'base64url')) as [Buffer, Buffer, Buffer];
}

function storedOf(parts: [Buffer, Buffer, Buffer]): string {
  return `${SEALED_PREFIX}${parts.map((part) => part.toString('base64url')).join('.')}`;
}

/** `stored` with one bit flipped in part `index` (0: the data key, 1: the IV, 2: ciphertext and tag) at byte `at` (negative: from the end). */
function flipped(stored: string, index: 0 | 1 | 2, at: number): string {
  const parts = partsOf(stored);
  const part = Buffer.from(parts[index]);
  const i = at < 0 ? part.length + at : at;
  part[i] = part[i]! ^ 0x01;
  parts[index] = part;
  return storedOf(parts);
}

/** The error `promise` was rejected with (fails the test when it was not). */
async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(Error);
    return error as Error;
  }
  throw new Error('expected a rejection');
}

/** Every way a token could show in a text: as it is, base64, base64url, hex. */
function encodingsOf(token: string): string[] {
  const bytes = Buffer.from(token, 'utf8');
  return [token, bytes.toString('base64'), bytes.toString('base64url'), bytes.toString('hex')];
}

/** One data key for every connection (so only the sealer's additional authenticated data tells them apart); records each request. */
class OneKeyForAll implements DataKeys {
  readonly key = randomBytes(32);
  readonly generated: string[] = [];
  readonly decrypted: Array<{ connection: string; encrypted: Buffer }> = [];
  /** The plaintext keys handed out, as the sealer received them. */
  readonly handedOut: Uint8Array[] = [];

  async generate(connection: string): Promise<{ plaintext: Uint8Array; encrypted: Uint8Array }> {
    this.generated.push(connection);
    const plaintext = Uint8Array.from(this.key);
    this.handedOut.push(plaintext);
    return { plaintext, encrypted: Buffer.from(`wrapped-key-${this.generated.length}`, 'utf8') };
  }

  async decrypt(connection: string, encrypted: Uint8Array): Promise<Uint8Array> {
    this.decrypted.push({ connection, encrypted: Buffer.from(encrypted) });
    const plaintext = Uint8Array.from(this.key);
    this.handedOut.push(plaintext);
    return plaintext;
  }
}

describe('TokenSealer over KMS (the KMS model)', () => {
  it('seals a token for its connection and opens it again, in this container and in a new one', async () => {
    const sealing = testSealing();
    const stored = await sealing.sealer.seal('acme', TOKEN);
    expect(sealing.calls).toEqual({ GenerateDataKey: 1 });
    expect(await sealing.sealer.open('acme', stored)).toBe(TOKEN);
    const other = freshSealer(sealing);
    expect(await other.open('acme', stored)).toBe(TOKEN);
    expect(sealing.calls).toEqual({ GenerateDataKey: 1, Decrypt: 1 });
  });

  it('round-trips any token: empty, unicode, long', async () => {
    const sealing = testSealing();
    const opener = freshSealer(sealing);
    for (const token of ['', 'x', 'jeton-Résumé-✓-🔑', 'a'.repeat(5000)]) {
      const stored = await sealing.sealer.seal('acme', token);
      expect(isSealed(stored)).toBe(true);
      expect(await opener.open('acme', stored)).toBe(token);
    }
  });

  it('the stored form: the prefix, then the data key KMS made, a 12-byte IV and the ciphertext with its 16-byte tag, each base64url', async () => {
    const sealing = testSealing();
    const stored = await sealing.sealer.seal('acme', TOKEN);
    expect(stored.startsWith('cs-sealed-v1 ')).toBe(true);
    expect(SEALED_PREFIX).toBe('cs-sealed-v1 ');
    const text = stored.slice('cs-sealed-v1 '.length);
    const parts = text.split('.');
    expect(parts).toHaveLength(3);
    for (const part of parts) expect(part).toMatch(PART);
    expect(text).not.toContain(' ');
    const [key, iv, body] = partsOf(stored);
    // The KMS model's blob: version 1, the key id (36 characters), IV, 32 encrypted bytes, tag.
    expect(key[0]).toBe(1);
    expect(key.subarray(1, 37).toString('latin1')).toBe(sealing.keyArn.slice(-36));
    expect(key).toHaveLength(1 + 36 + 12 + 32 + 16);
    expect(iv).toHaveLength(12);
    expect(body).toHaveLength(Buffer.byteLength(TOKEN, 'utf8') + 16);
  });

  it('the stored form never holds the token, in clear or encoded', async () => {
    const sealing = testSealing();
    for (const token of [TOKEN, 'short-token-1', 'a'.repeat(300)]) {
      const stored = await sealing.sealer.seal('acme', token);
      for (const form of encodingsOf(token)) expect(stored).not.toContain(form);
      const [, , body] = partsOf(stored);
      expect(body.includes(Buffer.from(token, 'utf8'))).toBe(false);
    }
  });

  it('two seals of the same token differ in every part, each with its own data key, and both open', async () => {
    const sealing = testSealing();
    const one = await sealing.sealer.seal('acme', TOKEN);
    const two = await sealing.sealer.seal('acme', TOKEN);
    expect(one).not.toBe(two);
    const [keyOne, ivOne, bodyOne] = partsOf(one);
    const [keyTwo, ivTwo, bodyTwo] = partsOf(two);
    expect(keyOne.equals(keyTwo)).toBe(false);
    expect(ivOne.equals(ivTwo)).toBe(false);
    expect(bodyOne.equals(bodyTwo)).toBe(false);
    expect(sealing.calls.GenerateDataKey).toBe(2);
    const opener = freshSealer(sealing);
    expect(await opener.open('acme', one)).toBe(TOKEN);
    expect(await opener.open('acme', two)).toBe(TOKEN);
  });

  it('a value sealed for one connection does not open for another: KMS refuses its data key (SealError), in this container and a new one', async () => {
    const sealing = testSealing();
    const stored = await sealing.sealer.seal('acme', TOKEN);
    for (const sealer of [sealing.sealer, freshSealer(sealing)]) {
      const before = sealing.calls.Decrypt ?? 0;
      const error = await rejection(sealer.open('globex', stored));
      expect(error).toBeInstanceOf(SealError);
      expect(error).toBeInstanceOf(PermanentError);
      expect(error.message).toContain('connection "globex"');
      expect(error.message).toContain('KMS Decrypt refused');
      expect(error.message).toContain('InvalidCiphertextException');
      for (const form of encodingsOf(TOKEN)) expect(error.message).not.toContain(form);
      expect(error.message).not.toContain(stored.slice(SEALED_PREFIX.length));
      // KMS was asked (the cached opening is acme's, not globex's).
      expect(sealing.calls.Decrypt).toBe(before + 1);
    }
    // It still opens for its own connection.
    expect(await freshSealer(sealing).open('acme', stored)).toBe(TOKEN);
  });

  it('a value sealed under another KMS key does not open (SealError)', async () => {
    const sealing = testSealing();
    const stored = await sealing.sealer.seal('acme', TOKEN);
    const otherKey = sealing.model.createKey();
    const error = await rejection(new TokenSealer(new KmsDataKeys(kmsApi(sealing.kms), otherKey)).open('acme', stored));
    expect(error).toBeInstanceOf(SealError);
    expect(error.message).toContain('IncorrectKeyException');
  });

  it.each([
    ['the data key', 0, -20],
    ['the IV', 1, 0],
    ['the ciphertext', 2, 0],
    ['the tag', 2, -1],
  ] as const)('a stored value with %s altered does not open (SealError, the token never in its message)', async (_what, index, at) => {
    const sealing = testSealing();
    const stored = await sealing.sealer.seal('acme', TOKEN);
    const tampered = flipped(stored, index, at);
    expect(tampered).not.toBe(stored);
    for (const sealer of [sealing.sealer, freshSealer(sealing)]) {
      const error = await rejection(sealer.open('acme', tampered));
      expect(error).toBeInstanceOf(SealError);
      expect(error.message).toContain('connection "acme"');
      for (const form of encodingsOf(TOKEN)) expect(error.message).not.toContain(form);
      expect(error.message).not.toContain(tampered.slice(SEALED_PREFIX.length));
    }
  });

  it('a malformed stored value is a SealError, KMS not asked', async () => {
    const sealing = testSealing();
    const stored = await sealing.sealer.seal('acme', TOKEN);
    const [key, iv, body] = stored.slice(SEALED_PREFIX.length).split('.') as [string, string, string];
    const malformed = [
      SEALED_PREFIX,
      `${SEALED_PREFIX}${key}`,
      `${SEALED_PREFIX}${key}.${iv}`,
      `${SEALED_PREFIX}${key}.${iv}.${body}.${body}`,
      `${SEALED_PREFIX}.${iv}.${body}`,
      `${SEALED_PREFIX}${key}..${body}`,
      `${SEALED_PREFIX}${key}.${iv}.`,
      `${SEALED_PREFIX}${key}.${Buffer.alloc(11).toString('base64url')}.${body}`,
      `${SEALED_PREFIX}${key}.${Buffer.alloc(13).toString('base64url')}.${body}`,
      `${SEALED_PREFIX}${key}.${iv}.${Buffer.alloc(15).toString('base64url')}`,
      `${SEALED_PREFIX}!!!!.${iv}.${body}`,
    ];
    for (const value of malformed) {
      const error = await rejection(sealing.sealer.open('acme', value));
      expect(error, value).toBeInstanceOf(SealError);
      expect(error.message).toBe('connection "acme": a sealed token in its row is malformed');
    }
    expect(sealing.calls.Decrypt).toBeUndefined();
  });

  it('a clear value (a deployment that did not seal yet) is answered as it is, KMS not asked', async () => {
    const sealing = testSealing();
    for (const clear of ['rt-legacy-clear-0001', '', 'cs-sealed-v1', 'cs-sealed-v1.abc.def.ghi', ' cs-sealed-v1 abc']) {
      expect(isSealed(clear)).toBe(false);
      expect(await sealing.sealer.open('acme', clear)).toBe(clear);
    }
    expect(sealing.calls).toEqual({});
  });

  it('an opened value is cached: a second opening asks KMS nothing; another container asks once', async () => {
    const sealing = testSealing();
    const stored = await sealing.sealer.seal('acme', TOKEN);
    const container = freshSealer(sealing);
    expect(await container.open('acme', stored)).toBe(TOKEN);
    expect(sealing.calls.Decrypt).toBe(1);
    expect(await container.open('acme', stored)).toBe(TOKEN);
    expect(await container.open('acme', stored)).toBe(TOKEN);
    expect(sealing.calls.Decrypt).toBe(1);
    // What this container sealed is cached from the start.
    expect(await sealing.sealer.open('acme', stored)).toBe(TOKEN);
    expect(sealing.calls.Decrypt).toBe(1);
    const another = freshSealer(sealing);
    expect(await another.open('acme', stored)).toBe(TOKEN);
    expect(sealing.calls.Decrypt).toBe(2);
    // A failed opening for another connection caches nothing: it fails again, and KMS is asked again.
    await expect(another.open('globex', stored)).rejects.toBeInstanceOf(SealError);
    await expect(another.open('globex', stored)).rejects.toBeInstanceOf(SealError);
    expect(sealing.calls.Decrypt).toBe(4);
    expect(await another.open('acme', stored)).toBe(TOKEN);
    expect(sealing.calls.Decrypt).toBe(4);
  });

  it('the cache is bounded (cacheSize): beyond it, the value used least recently is opened again', async () => {
    const sealing = testSealing();
    const [a, b, c] = [await sealing.sealer.seal('acme', 'token-a'), await sealing.sealer.seal('acme', 'token-b'), await sealing.sealer.seal('acme', 'token-c')];
    const sealer = freshSealer(sealing, { cacheSize: 2 });
    const decrypts = () => sealing.calls.Decrypt ?? 0;
    expect(await sealer.open('acme', a)).toBe('token-a');
    expect(await sealer.open('acme', b)).toBe('token-b');
    expect(decrypts()).toBe(2);
    // Both held.
    expect(await sealer.open('acme', a)).toBe('token-a');
    expect(await sealer.open('acme', b)).toBe('token-b');
    expect(decrypts()).toBe(2);
    // c leaves room for two: a, used least recently, is dropped; b is kept.
    expect(await sealer.open('acme', c)).toBe('token-c');
    expect(decrypts()).toBe(3);
    expect(await sealer.open('acme', b)).toBe('token-b');
    expect(decrypts()).toBe(3);
    expect(await sealer.open('acme', a)).toBe('token-a');
    expect(decrypts()).toBe(4);
    // Now c was used least recently.
    expect(await sealer.open('acme', b)).toBe('token-b');
    expect(decrypts()).toBe(4);
    expect(await sealer.open('acme', c)).toBe('token-c');
    expect(decrypts()).toBe(5);
  });

  it('seals bound to the cache: a sealer of cacheSize 1 keeps only the value it sealed last', async () => {
    const sealing = testSealing();
    const sealer = freshSealer(sealing, { cacheSize: 1 });
    const first = await sealer.seal('acme', 'token-1');
    const second = await sealer.seal('acme', 'token-2');
    expect(await sealer.open('acme', second)).toBe('token-2');
    expect(sealing.calls.Decrypt).toBeUndefined();
    expect(await sealer.open('acme', first)).toBe('token-1');
    expect(sealing.calls.Decrypt).toBe(1);
  });

  it('refuses a cache of no entry', () => {
    const sealing = testSealing();
    expect(() => freshSealer(sealing, { cacheSize: 0 })).toThrow(RangeError);
  });

  it.each([
    ['disabled', (sealing: TestSealing) => sealing.model.disable(sealing.keyArn)],
    ['pending deletion', (sealing: TestSealing) => sealing.model.scheduleDeletion(sealing.keyArn)],
  ] as const)('a key %s: seal and open fail with a KeyUnavailableError (an outage of the key, not a SealError), nothing cached', async (_what, takeOut) => {
    const sealing = testSealing();
    const stored = await sealing.sealer.seal('acme', TOKEN);
    takeOut(sealing);
    const sealer = freshSealer(sealing);
    for (const attempt of [sealer.seal('acme', TOKEN), sealer.open('acme', stored)]) {
      const error = await attempt.then(
        () => undefined,
        (reason: unknown) => reason,
      );
      expect(error).toBeInstanceOf(KeyUnavailableError);
      expect(error).toBeInstanceOf(TransientError);
      expect(error).not.toBeInstanceOf(SealError);
      expect((error as Error).message).toContain('CONNECTIONS_KEY_ARN');
    }
    if (sealing.model.state(sealing.keyArn) === 'PendingDeletion') sealing.model.cancelDeletion(sealing.keyArn);
    sealing.model.enable(sealing.keyArn);
    expect(await sealer.open('acme', stored)).toBe(TOKEN);
  });
});

describe('TokenSealer over a data key handed out for any connection', () => {
  it('asks for a data key for the connection, stores its encrypted form, and hands it back to open', async () => {
    const keys = new OneKeyForAll();
    const stored = await new TokenSealer(keys).seal('acme', TOKEN);
    expect(keys.generated).toEqual(['acme']);
    const [key] = partsOf(stored);
    expect(key.toString('utf8')).toBe('wrapped-key-1');
    expect(await new TokenSealer(keys).open('acme', stored)).toBe(TOKEN);
    expect(keys.decrypted).toEqual([{ connection: 'acme', encrypted: Buffer.from('wrapped-key-1', 'utf8') }]);
  });

  it('opening for another connection fails on the additional authenticated data even with the right data key (SealError)', async () => {
    const keys = new OneKeyForAll();
    const sealer = new TokenSealer(keys);
    const stored = await sealer.seal('acme', TOKEN);
    for (const opener of [sealer, new TokenSealer(keys)]) {
      const error = await rejection(opener.open('globex', stored));
      expect(error).toBeInstanceOf(SealError);
      expect(error.message).toBe('connection "globex": a sealed token in its row does not open for this connection (sealed for another, or altered)');
    }
    expect(keys.decrypted.map((call) => call.connection)).toEqual(['globex', 'globex']);
    expect(await new TokenSealer(keys).open('acme', stored)).toBe(TOKEN);
  });

  it('a data key of the wrong size does not open (SealError)', async () => {
    const keys = new OneKeyForAll();
    const stored = await new TokenSealer(keys).seal('acme', TOKEN);
    const short: DataKeys = { generate: (c) => keys.generate(c), decrypt: async () => new Uint8Array(16) };
    await expect(new TokenSealer(short).open('acme', stored)).rejects.toBeInstanceOf(SealError);
  });

  it('a failure of the key service passes as it is (not a SealError)', async () => {
    const keys = new OneKeyForAll();
    const stored = await new TokenSealer(keys).seal('acme', TOKEN);
    const failure = new Error('key service down');
    const failing: DataKeys = { generate: () => Promise.reject(failure), decrypt: () => Promise.reject(failure) };
    await expect(new TokenSealer(failing).open('acme', stored)).rejects.toBe(failure);
    await expect(new TokenSealer(failing).seal('acme', TOKEN)).rejects.toBe(failure);
  });

  it('wipes every plaintext data key once used', async () => {
    const keys = new OneKeyForAll();
    const stored = await new TokenSealer(keys).seal('acme', TOKEN);
    expect(await new TokenSealer(keys).open('acme', stored)).toBe(TOKEN);
    await expect(new TokenSealer(keys).open('globex', stored)).rejects.toBeInstanceOf(SealError);
    expect(keys.handedOut).toHaveLength(3);
    for (const key of keys.handedOut) expect(Array.from(key)).toEqual(new Array(32).fill(0));
  });

  it(`holds ${OPENED_CACHE_SIZE} opened values by default`, async () => {
    const keys = new OneKeyForAll();
    const sealer = new TokenSealer(keys);
    const stored: string[] = [];
    for (let i = 0; i <= OPENED_CACHE_SIZE; i++) stored.push(await sealer.seal('acme', `token-${i}`));
    // The first is gone; the second, now the oldest, is still held.
    expect(await sealer.open('acme', stored[1]!)).toBe('token-1');
    expect(keys.decrypted).toHaveLength(0);
    expect(await sealer.open('acme', stored[0]!)).toBe('token-0');
    expect(keys.decrypted).toHaveLength(1);
  });
});

describe('isSealed and stampOf', () => {
  it('isSealed: the prefix, space included, at the very start', () => {
    expect(isSealed(`${SEALED_PREFIX}a.b.c`)).toBe(true);
    expect(isSealed(SEALED_PREFIX)).toBe(true);
    expect(isSealed('cs-sealed-v1')).toBe(false);
    expect(isSealed('cs-sealed-v1a.b.c')).toBe(false);
    expect(isSealed(` ${SEALED_PREFIX}a.b.c`)).toBe(false);
    expect(isSealed('CS-SEALED-V1 a.b.c')).toBe(false);
    expect(isSealed('cs-sealed-v2 a.b.c')).toBe(false);
    expect(isSealed(TOKEN)).toBe(false);
  });

  it('stampOf: stable, 22 base64url characters, one per stored value, holding neither the value nor its token', async () => {
    const sealing = testSealing();
    const one = await sealing.sealer.seal('acme', TOKEN);
    const two = await sealing.sealer.seal('acme', TOKEN);
    const stamp = stampOf(one);
    expect(stamp).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(stampOf(one)).toBe(stamp);
    expect(stampOf(`${one}`)).toBe(stamp);
    expect(stampOf(two)).not.toBe(stamp);
    expect(stampOf(TOKEN)).not.toBe(stamp);
    for (const part of one.slice(SEALED_PREFIX.length).split('.')) expect(stamp).not.toContain(part);
    for (const form of encodingsOf(TOKEN)) expect(stamp).not.toContain(form);
    expect(one).not.toContain(stamp);
    // A clear value too.
    expect(stampOf(TOKEN)).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(stampOf(TOKEN)).not.toContain(TOKEN.slice(0, 8));
    expect(stampOf('')).toMatch(/^[A-Za-z0-9_-]{22}$/);
  });
});

describe('NO_TOKENS', () => {
  it('refuses to seal or open anything', async () => {
    await expect(NO_TOKENS.seal('acme', TOKEN)).rejects.toThrow('this caller seals no token');
    await expect(NO_TOKENS.open('acme', TOKEN)).rejects.toThrow('this caller opens no token');
    await expect(NO_TOKENS.open('acme', `${SEALED_PREFIX}a.b.c`)).rejects.toThrow('this caller opens no token');
  });
});
