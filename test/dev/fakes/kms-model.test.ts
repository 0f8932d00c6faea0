/**
 * The KMS model behaves as KMS does where the application relies on it (GenerateDataKey and Decrypt
 * under one symmetric key, bound to an encryption context), its blobs open only through it, and the
 * emulator speaks KMS's JSON 1.1 protocol on the wire (base64 blobs, `__type` errors).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AwsEmulator } from '../../../dev/fakes/aws-emulator.js';
import { handleKms } from '../../../dev/fakes/kms-api.js';
import { canonicalContext, KmsModel, type EncryptionContext } from '../../../dev/fakes/kms-model.js';
import { LOCAL_ACCOUNT_ID, LOCAL_REGION } from '../../../dev/fakes/local-aws.js';
import { ServiceError } from '../../../dev/fakes/service-error.js';

const KEY_ARN = new RegExp(`^arn:aws:kms:${LOCAL_REGION}:${LOCAL_ACCOUNT_ID}:key/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`);

/** The ServiceError `call` throws (fails the test when it does not throw one). */
function refusal(call: () => unknown): ServiceError {
  try {
    call();
  } catch (error) {
    if (error instanceof ServiceError) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

function setup() {
  const kms = new KmsModel();
  const key = kms.createKey();
  return { kms, key, id: key.slice(key.lastIndexOf('/') + 1) };
}

describe('KmsModel', () => {
  it('creates keys as ARNs of the local account and region, each with its own root key', () => {
    const kms = new KmsModel();
    const a = kms.createKey();
    const b = kms.createKey();
    expect(a).toMatch(KEY_ARN);
    expect(b).toMatch(KEY_ARN);
    expect(a).not.toBe(b);
    expect(kms.state(a)).toBe('Enabled');
    const blob = kms.encrypt({ KeyId: a, Plaintext: new Uint8Array([1, 2, 3]) }).CiphertextBlob;
    // The blob names key a: b cannot open it, even when the header is rewritten to name b.
    const forged = Buffer.from(blob);
    forged.write(b.slice(b.lastIndexOf('/') + 1), 1, 'ascii');
    expect(refusal(() => kms.decrypt({ CiphertextBlob: forged })).type).toBe('InvalidCiphertextException');
  });

  it('generates data keys of the size asked for, their blob naming the key that made them', () => {
    const { kms, key, id } = setup();
    const aes256 = kms.generateDataKey({ KeyId: key, KeySpec: 'AES_256', EncryptionContext: { connection: 'a' } });
    expect(aes256.Plaintext).toBeInstanceOf(Uint8Array);
    expect(Buffer.isBuffer(aes256.Plaintext)).toBe(false);
    expect(aes256.Plaintext).toHaveLength(32);
    expect(aes256.KeyId).toBe(key);
    expect(aes256.KeyMaterialId).toMatch(/^[0-9a-f]{64}$/);
    expect(aes256.CiphertextBlob[0]).toBe(1);
    expect(Buffer.from(aes256.CiphertextBlob.subarray(1, 37)).toString('ascii')).toBe(id);
    // Header, IV, the key itself, GCM tag.
    expect(aes256.CiphertextBlob).toHaveLength(37 + 12 + 32 + 16);
    expect(Buffer.from(aes256.CiphertextBlob).includes(Buffer.from(aes256.Plaintext))).toBe(false);
    expect(kms.generateDataKey({ KeyId: id, KeySpec: 'AES_128' }).Plaintext).toHaveLength(16);
    expect(kms.generateDataKey({ KeyId: key, NumberOfBytes: 1 }).Plaintext).toHaveLength(1);
    expect(kms.generateDataKey({ KeyId: key, NumberOfBytes: 1024 }).Plaintext).toHaveLength(1024);
  });

  it('decrypts only with the very encryption context the data key was made with (any order)', () => {
    const { kms, key } = setup();
    const made = kms.generateDataKey({ KeyId: key, KeySpec: 'AES_256', EncryptionContext: { connection: 'a', tenant: 't' } });
    const opened = kms.decrypt({ CiphertextBlob: made.CiphertextBlob, KeyId: key, EncryptionContext: { tenant: 't', connection: 'a' } });
    expect(opened).toEqual({ KeyId: key, Plaintext: made.Plaintext, EncryptionAlgorithm: 'SYMMETRIC_DEFAULT', KeyMaterialId: made.KeyMaterialId });
    const contexts: Array<EncryptionContext | undefined> = [{ connection: 'b', tenant: 't' }, { connection: 'a' }, { connection: 'a', tenant: 't', extra: '' }, undefined];
    for (const context of contexts) {
      const error = refusal(() => kms.decrypt({ CiphertextBlob: made.CiphertextBlob, KeyId: key, EncryptionContext: context }));
      expect([error.type, error.status]).toEqual(['InvalidCiphertextException', 400]);
    }
    // No context is the empty one.
    const bare = kms.generateDataKey({ KeyId: key, NumberOfBytes: 8 });
    expect(kms.decrypt({ CiphertextBlob: bare.CiphertextBlob, EncryptionContext: {} }).Plaintext).toEqual(bare.Plaintext);
    expect(canonicalContext({ b: '2', a: '1' })).toBe('[["a","1"],["b","2"]]');
  });

  it('refuses a blob changed in any byte, cut short, or of another model', () => {
    const { kms, key } = setup();
    const blob = kms.generateDataKey({ KeyId: key, KeySpec: 'AES_256' }).CiphertextBlob;
    for (let i = 0; i < blob.length; i++) {
      const tampered = new Uint8Array(blob);
      tampered[i]! ^= 0x01;
      expect(refusal(() => kms.decrypt({ CiphertextBlob: tampered })).type).toBe('InvalidCiphertextException');
    }
    expect(refusal(() => kms.decrypt({ CiphertextBlob: blob.subarray(0, 64) })).type).toBe('InvalidCiphertextException');
    expect(refusal(() => kms.decrypt({ CiphertextBlob: new Uint8Array([7]) })).type).toBe('InvalidCiphertextException');
    expect(refusal(() => setup().kms.decrypt({ CiphertextBlob: blob })).type).toBe('InvalidCiphertextException');
  });

  it('refuses a Decrypt whose KeyId is not the key of the blob, and an unknown key', () => {
    const { kms, key, id } = setup();
    const other = kms.createKey();
    const blob = kms.generateDataKey({ KeyId: key, KeySpec: 'AES_256' }).CiphertextBlob;
    expect(kms.decrypt({ CiphertextBlob: blob, KeyId: id }).KeyId).toBe(key);
    const incorrect = refusal(() => kms.decrypt({ CiphertextBlob: blob, KeyId: other }));
    expect([incorrect.type, incorrect.status]).toEqual(['IncorrectKeyException', 400]);
    const unknown = key.replace(/[0-9a-f]{12}$/, '000000000000');
    const notFound = refusal(() => kms.decrypt({ CiphertextBlob: blob, KeyId: unknown }));
    expect([notFound.type, notFound.status, notFound.message]).toEqual(['NotFoundException', 404, `Key '${unknown}' does not exist`]);
    expect(refusal(() => kms.generateDataKey({ KeyId: unknown, KeySpec: 'AES_256' })).type).toBe('NotFoundException');
    expect(refusal(() => kms.generateDataKey({ KeyId: key.replace(LOCAL_REGION, 'us-east-1'), KeySpec: 'AES_256' })).type).toBe('NotFoundException');
    expect(refusal(() => kms.generateDataKey({ KeyId: 'alias/tokens', KeySpec: 'AES_256' })).message).toBe(
      `Alias arn:aws:kms:${LOCAL_REGION}:${LOCAL_ACCOUNT_ID}:alias/tokens is not found.`,
    );
    expect(refusal(() => kms.disable(unknown)).type).toBe('NotFoundException');
  });

  it('refuses every operation on a disabled key until it is enabled again', () => {
    const { kms, key } = setup();
    const made = kms.generateDataKey({ KeyId: key, KeySpec: 'AES_256' });
    kms.disable(key);
    expect(kms.state(key)).toBe('Disabled');
    for (const call of [
      () => kms.generateDataKey({ KeyId: key, KeySpec: 'AES_256' }),
      () => kms.decrypt({ CiphertextBlob: made.CiphertextBlob }),
      () => kms.encrypt({ KeyId: key, Plaintext: new Uint8Array([1]) }),
    ]) {
      const error = refusal(call);
      expect([error.type, error.status, error.message]).toEqual(['DisabledException', 409, `${key} is disabled.`]);
    }
    kms.enable(key);
    expect(kms.decrypt({ CiphertextBlob: made.CiphertextBlob }).Plaintext).toEqual(made.Plaintext);
  });

  it('checks parameters as KMS does (ValidationException)', () => {
    const { kms, key } = setup();
    const cases: Array<[() => unknown, string]> = [
      [() => kms.generateDataKey({ KeySpec: 'AES_256' }), "1 validation error detected: Value null at 'keyId' failed to satisfy constraint: Member must not be null"],
      [() => kms.generateDataKey({ KeyId: '', KeySpec: 'AES_256' }), "1 validation error detected: Value '' at 'keyId' failed to satisfy constraint: Member must have length greater than or equal to 1"],
      [() => kms.generateDataKey({ KeyId: key }), 'Please specify either number of bytes or key spec.'],
      [() => kms.generateDataKey({ KeyId: key, KeySpec: 'AES_256', NumberOfBytes: 32 }), 'Please specify either number of bytes or key spec.'],
      [
        () => kms.generateDataKey({ KeyId: key, KeySpec: 'AES_512' }),
        "1 validation error detected: Value 'AES_512' at 'keySpec' failed to satisfy constraint: Member must satisfy enum value set: [AES_256, AES_128]",
      ],
      [() => kms.generateDataKey({ KeyId: key, NumberOfBytes: 0 }), "1 validation error detected: Value '0' at 'numberOfBytes' failed to satisfy constraint: Member must have value greater than or equal to 1"],
      [() => kms.generateDataKey({ KeyId: key, NumberOfBytes: 1025 }), "1 validation error detected: Value '1025' at 'numberOfBytes' failed to satisfy constraint: Member must have value less than or equal to 1024"],
      [() => kms.decrypt({}), "1 validation error detected: Value null at 'ciphertextBlob' failed to satisfy constraint: Member must not be null"],
      [() => kms.decrypt({ CiphertextBlob: new Uint8Array(0) }), "1 validation error detected: Value at 'ciphertextBlob' failed to satisfy constraint: Member must have length greater than or equal to 1"],
      [() => kms.decrypt({ CiphertextBlob: new Uint8Array(6145) }), "1 validation error detected: Value at 'ciphertextBlob' failed to satisfy constraint: Member must have length less than or equal to 6144"],
      [() => kms.encrypt({ KeyId: key, Plaintext: new Uint8Array(4097) }), "1 validation error detected: Value at 'plaintext' failed to satisfy constraint: Member must have length less than or equal to 4096"],
      [() => kms.encrypt({ KeyId: key }), "1 validation error detected: Value null at 'plaintext' failed to satisfy constraint: Member must not be null"],
      [
        () => kms.encrypt({ KeyId: key, Plaintext: new Uint8Array(1), EncryptionAlgorithm: 'AES' }),
        "1 validation error detected: Value 'AES' at 'encryptionAlgorithm' failed to satisfy constraint: Member must satisfy enum value set: [SYMMETRIC_DEFAULT, RSAES_OAEP_SHA_1, RSAES_OAEP_SHA_256, SM2PKE]",
      ],
    ];
    for (const [call, message] of cases) {
      const error = refusal(call);
      expect([error.type, error.status, error.message]).toEqual(['ValidationException', 400, message]);
    }
    // A blob at the bounds is no longer a ValidationException: it is read, and is no ciphertext.
    expect(refusal(() => kms.decrypt({ CiphertextBlob: new Uint8Array(6144) })).type).toBe('InvalidCiphertextException');
    expect(refusal(() => kms.encrypt({ KeyId: key, Plaintext: new Uint8Array(1), EncryptionAlgorithm: 'RSAES_OAEP_SHA_256' })).type).toBe(
      'InvalidKeyUsageException',
    );
    expect(refusal(() => kms.generateDataKey({ KeyId: key, KeySpec: 'AES_256', DryRun: true })).type).toBe('UnsupportedOperationException');
  });

  it('encrypts and decrypts up to 4 KiB, and counts every request by operation, refused ones too', () => {
    const { kms, key } = setup();
    const plaintext = new Uint8Array(4096).fill(7);
    const sealed = kms.encrypt({ KeyId: key, Plaintext: plaintext, EncryptionContext: { connection: 'a' } });
    expect(sealed.KeyId).toBe(key);
    expect(sealed.EncryptionAlgorithm).toBe('SYMMETRIC_DEFAULT');
    expect(kms.decrypt({ CiphertextBlob: sealed.CiphertextBlob, EncryptionContext: { connection: 'a' }, EncryptionAlgorithm: 'SYMMETRIC_DEFAULT' }).Plaintext).toEqual(
      plaintext,
    );
    refusal(() => kms.decrypt({ CiphertextBlob: sealed.CiphertextBlob }));
    kms.generateDataKey({ KeyId: key, KeySpec: 'AES_256' });
    expect(kms.calls).toEqual({ Encrypt: 1, Decrypt: 2, GenerateDataKey: 1 });
  });
});

describe('handleKms', () => {
  it('checks member types as the deserializer does, and refuses other operations', () => {
    const { kms, key } = setup();
    const cases: Array<[string, Record<string, unknown>, 'bytes' | 'base64', string]> = [
      ['GenerateDataKey', { KeyId: key, NumberOfBytes: 1.5 }, 'bytes', 'NumberOfBytes must be an integer.'],
      ['GenerateDataKey', { KeyId: 7, KeySpec: 'AES_256' }, 'bytes', 'KeyId must be a string.'],
      ['GenerateDataKey', { KeyId: key, KeySpec: 'AES_256', EncryptionContext: { connection: 1 } }, 'bytes', 'EncryptionContext must be a map of strings to strings.'],
      ['Decrypt', { CiphertextBlob: 'AQID' }, 'bytes', 'CiphertextBlob must be a Uint8Array.'],
      ['Decrypt', { CiphertextBlob: 'not base64!' }, 'base64', 'CiphertextBlob must be base64.'],
      ['Encrypt', { KeyId: key, Plaintext: new Uint8Array(1), GrantTokens: [1] }, 'bytes', 'GrantTokens must be a list of strings.'],
    ];
    for (const [operation, input, blobs, message] of cases) {
      const error = refusal(() => handleKms(kms, operation, input, blobs));
      expect([error.type, error.message]).toEqual(['SerializationException', message]);
    }
    expect(refusal(() => handleKms(kms, 'CreateKey', {}, 'bytes')).type).toBe('UnknownOperationException');
  });
});

describe('the emulator (KMS, JSON 1.1 on the wire)', () => {
  let emulator: AwsEmulator;
  let key: string;

  beforeAll(async () => {
    emulator = await AwsEmulator.start({ region: LOCAL_REGION });
    key = emulator.kms.createKey();
  });

  afterAll(() => emulator.close());

  const post = (operation: string, body: unknown) =>
    fetch(emulator.endpoint, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-amz-json-1.1', 'X-Amz-Target': `TrentService.${operation}` },
      body: JSON.stringify(body),
    });

  it('answers with base64 blobs and takes them back', async () => {
    const response = await post('GenerateDataKey', { KeyId: key, KeySpec: 'AES_256', EncryptionContext: { connection: 'a' } });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/x-amz-json-1.1');
    const made = (await response.json()) as { CiphertextBlob: string; Plaintext: string; KeyId: string };
    expect(made.KeyId).toBe(key);
    expect(Buffer.from(made.Plaintext, 'base64')).toHaveLength(32);
    const opened = await post('Decrypt', { CiphertextBlob: made.CiphertextBlob, KeyId: key, EncryptionContext: { connection: 'a' } });
    expect(((await opened.json()) as { Plaintext: string }).Plaintext).toBe(made.Plaintext);
    expect(emulator.requests.slice(-2)).toEqual([
      { service: 'kms', operation: 'GenerateDataKey', status: 200 },
      { service: 'kms', operation: 'Decrypt', status: 200 },
    ]);
  });

  it('answers refusals in the `__type` form with their HTTP status', async () => {
    const wrong = await post('Decrypt', { CiphertextBlob: Buffer.from('x').toString('base64'), KeyId: key });
    expect(wrong.status).toBe(400);
    expect(wrong.headers.get('x-amzn-errortype')).toBe('InvalidCiphertextException');
    expect(await wrong.json()).toMatchObject({ __type: 'InvalidCiphertextException' });
    const missing = await post('GenerateDataKey', { KeyId: key.replace(/[0-9a-f]{12}$/, '000000000000'), KeySpec: 'AES_256' });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ __type: 'NotFoundException' });
    const malformed = await post('Decrypt', { CiphertextBlob: '%%%' });
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toEqual({ __type: 'SerializationException', message: 'CiphertextBlob must be base64.' });
    const unknown = await post('ScheduleKeyDeletion', { KeyId: key });
    expect(await unknown.json()).toMatchObject({ __type: 'UnknownOperationException' });
    expect(emulator.requests.at(-1)).toEqual({ service: 'kms', operation: 'ScheduleKeyDeletion', status: 400 });
  });
});
