/**
 * KMS as the local system reaches it (dev/system/aws.ts): a real KMSClient answered in process
 * (attachKms) and one pointed at the HTTP emulator, the same checks run through both. Each refusal
 * comes out as the SDK's own exception class, and the application's DataKeys adapter works on it.
 */
import {
  DecryptCommand,
  DisabledException,
  EncryptCommand,
  GenerateDataKeyCommand,
  IncorrectKeyException,
  InvalidCiphertextException,
  KMSClient,
  KMSServiceException,
  NotFoundException,
} from '@aws-sdk/client-kms';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attachKms, type CallCounts } from '../../../dev/fakes/in-process-aws.js';
import { KmsModel } from '../../../dev/fakes/kms-model.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../../../dev/fakes/local-aws.js';
import { emulatorAws, inProcessAws, type AwsBackend } from '../../../dev/system/aws.js';
import { KmsDataKeys } from '../../../functions/shared/adapters/kms-data-keys.js';
import { SealError } from '../../../functions/shared/connections/sealing.js';
import { kmsApi } from '../../../functions/shared/adapters/kms-api.js';

/** What `promise` was rejected with (fails the test when it was not). */
async function refusal(promise: Promise<unknown>): Promise<KMSServiceException> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(KMSServiceException);
    return error as KMSServiceException;
  }
  throw new Error('expected a refusal');
}

describe.each([
  ['in process', () => Promise.resolve(inProcessAws())],
  ['over the emulator', emulatorAws],
] as const)('KMS %s', (_name, start) => {
  let aws: AwsBackend;
  let kms: KMSClient;

  beforeAll(async () => {
    aws = await start();
    kms = aws.kmsClient();
  });

  afterAll(() => aws.close());

  const generate = (connection: string, keyId = aws.tokensKeyArn) =>
    kms.send(new GenerateDataKeyCommand({ KeyId: keyId, KeySpec: 'AES_256', EncryptionContext: { connection } }));

  it('holds one key from the start, the tokens key', () => {
    expect(aws.tokensKeyArn).toMatch(new RegExp(`^arn:aws:kms:${LOCAL_REGION}:000000000000:key/[0-9a-f-]{36}$`));
    expect(aws.kms.state(aws.tokensKeyArn)).toBe('Enabled');
  });

  it('makes a 256-bit data key bound to its connection, and opens it for that connection', async () => {
    const made = await generate('a');
    expect(made.Plaintext).toBeInstanceOf(Uint8Array);
    expect(made.Plaintext).toHaveLength(32);
    expect(made.KeyId).toBe(aws.tokensKeyArn);
    expect(made.CiphertextBlob!.length).toBeGreaterThan(32);
    expect(made.$metadata.httpStatusCode).toBe(200);
    const opened = await kms.send(
      new DecryptCommand({ KeyId: aws.tokensKeyArn, CiphertextBlob: made.CiphertextBlob, EncryptionContext: { connection: 'a' } }),
    );
    expect(Array.from(opened.Plaintext!)).toEqual(Array.from(made.Plaintext!));
    expect(opened.KeyId).toBe(aws.tokensKeyArn);
    expect(opened.EncryptionAlgorithm).toBe('SYMMETRIC_DEFAULT');
    // The same, without naming the key (the blob names it).
    const again = await kms.send(new DecryptCommand({ CiphertextBlob: made.CiphertextBlob, EncryptionContext: { connection: 'a' } }));
    expect(Array.from(again.Plaintext!)).toEqual(Array.from(made.Plaintext!));
  });

  it("refuses a data key made for connection a when asked to open it for b (or with no context)", async () => {
    const made = await generate('a');
    for (const EncryptionContext of [{ connection: 'b' }, undefined, { connection: 'a', extra: 'x' }] as Array<Record<string, string> | undefined>) {
      const error = await refusal(kms.send(new DecryptCommand({ KeyId: aws.tokensKeyArn, CiphertextBlob: made.CiphertextBlob, EncryptionContext })));
      expect(error).toBeInstanceOf(InvalidCiphertextException);
      expect(error.$metadata.httpStatusCode).toBe(400);
    }
  });

  it('refuses a tampered blob (InvalidCiphertextException)', async () => {
    const made = await generate('a');
    const tampered = new Uint8Array(made.CiphertextBlob!);
    tampered[tampered.length - 20] = tampered[tampered.length - 20]! ^ 0x80;
    const error = await refusal(kms.send(new DecryptCommand({ KeyId: aws.tokensKeyArn, CiphertextBlob: tampered, EncryptionContext: { connection: 'a' } })));
    expect(error).toBeInstanceOf(InvalidCiphertextException);
  });

  it('refuses a Decrypt naming another key (IncorrectKeyException) and an unknown key (NotFoundException)', async () => {
    const made = await generate('a');
    const other = aws.kms.createKey();
    const incorrect = await refusal(kms.send(new DecryptCommand({ KeyId: other, CiphertextBlob: made.CiphertextBlob, EncryptionContext: { connection: 'a' } })));
    expect(incorrect).toBeInstanceOf(IncorrectKeyException);
    const unknown = aws.tokensKeyArn.replace(/[0-9a-f]{12}$/, '000000000000');
    const notFound = await refusal(generate('a', unknown));
    expect(notFound).toBeInstanceOf(NotFoundException);
    expect(notFound.message).toBe(`Key '${unknown}' does not exist`);
    expect(notFound.$metadata.httpStatusCode).toBe(404);
    expect(await refusal(kms.send(new DecryptCommand({ KeyId: unknown, CiphertextBlob: made.CiphertextBlob })))).toBeInstanceOf(NotFoundException);
  });

  it('refuses a disabled key (DisabledException) until it is enabled', async () => {
    const key = aws.kms.createKey();
    const made = await generate('a', key);
    aws.kms.disable(key);
    const disabled = await refusal(generate('a', key));
    expect(disabled).toBeInstanceOf(DisabledException);
    expect(disabled.$metadata.httpStatusCode).toBe(409);
    const decrypt = () => kms.send(new DecryptCommand({ KeyId: key, CiphertextBlob: made.CiphertextBlob, EncryptionContext: { connection: 'a' } }));
    expect(await refusal(decrypt())).toBeInstanceOf(DisabledException);
    aws.kms.enable(key);
    expect((await decrypt()).Plaintext).toHaveLength(32);
  });

  it('refuses parameters out of bounds as ValidationException (no modelled class: the service exception named so)', async () => {
    const refusals = [
      kms.send(new GenerateDataKeyCommand({ KeyId: aws.tokensKeyArn, KeySpec: 'AES_256', NumberOfBytes: 32 })),
      kms.send(new GenerateDataKeyCommand({ KeyId: aws.tokensKeyArn })),
      kms.send(new GenerateDataKeyCommand({ KeyId: aws.tokensKeyArn, NumberOfBytes: 1025 })),
      kms.send(new DecryptCommand({ CiphertextBlob: new Uint8Array(6145) })),
      kms.send(new DecryptCommand({ CiphertextBlob: new Uint8Array(0) })),
      kms.send(new EncryptCommand({ KeyId: aws.tokensKeyArn, Plaintext: new Uint8Array(4097) })),
    ];
    for (const promise of refusals) {
      const error = await refusal(promise);
      expect([error.name, error.$fault, error.$metadata.httpStatusCode]).toEqual(['ValidationException', 'client', 400]);
    }
  });

  it('encrypts and decrypts small values (Encrypt)', async () => {
    const plaintext = new TextEncoder().encode('Résumé ✓');
    const sealed = await kms.send(new EncryptCommand({ KeyId: aws.tokensKeyArn, Plaintext: plaintext, EncryptionContext: { connection: 'a' } }));
    expect(sealed.KeyId).toBe(aws.tokensKeyArn);
    const opened = await kms.send(new DecryptCommand({ CiphertextBlob: sealed.CiphertextBlob, EncryptionContext: { connection: 'a' } }));
    expect(new TextDecoder().decode(opened.Plaintext)).toBe('Résumé ✓');
  });

  it("serves the application's DataKeys adapter: a data key opens for its connection only", async () => {
    const keys = new KmsDataKeys(kmsApi(kms), aws.tokensKeyArn);
    const { plaintext, encrypted } = await keys.generate('conn-1');
    expect(Array.from(await keys.decrypt('conn-1', encrypted))).toEqual(Array.from(plaintext));
    await expect(keys.decrypt('conn-2', encrypted)).rejects.toBeInstanceOf(SealError);
  });

  it('counts the requests by operation, on the client and in the model', async () => {
    const client = aws.kmsClient({ calls: {} });
    const counted: CallCounts = {};
    const counting = aws.kmsClient({ calls: counted });
    const before = { ...aws.kms.calls };
    const made = await counting.send(new GenerateDataKeyCommand({ KeyId: aws.tokensKeyArn, KeySpec: 'AES_256' }));
    await counting.send(new DecryptCommand({ CiphertextBlob: made.CiphertextBlob }));
    await refusal(counting.send(new DecryptCommand({ CiphertextBlob: made.CiphertextBlob, EncryptionContext: { connection: 'x' } })));
    await client.send(new DecryptCommand({ CiphertextBlob: made.CiphertextBlob }));
    expect(counted).toEqual({ GenerateDataKey: 1, Decrypt: 2 });
    expect(aws.kms.calls).toEqual({ ...before, GenerateDataKey: (before.GenerateDataKey ?? 0) + 1, Decrypt: (before.Decrypt ?? 0) + 3 });
  });
});

describe('attachKms', () => {
  it('answers a bare KMSClient from a model, counting its calls', async () => {
    const model = new KmsModel();
    const key = model.createKey();
    const calls: CallCounts = {};
    const kms = attachKms(new KMSClient({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS }), model, calls);
    const made = await kms.send(new GenerateDataKeyCommand({ KeyId: key.slice(key.lastIndexOf('/') + 1), NumberOfBytes: 64, EncryptionContext: { connection: 'a' } }));
    expect(made.Plaintext).toHaveLength(64);
    expect(made.KeyId).toBe(key);
    const error = await refusal(kms.send(new DecryptCommand({ CiphertextBlob: made.CiphertextBlob, EncryptionContext: { connection: 'b' } })));
    expect(error).toBeInstanceOf(InvalidCiphertextException);
    expect(calls).toEqual({ GenerateDataKey: 1, Decrypt: 1 });
    expect(model.calls).toEqual({ GenerateDataKey: 1, Decrypt: 1 });
    kms.destroy();
  });
});
