/**
 * The DataKeys port on KMS (functions/shared/adapters/kms-data-keys.ts) with the SDK's KMSClient
 * mocked: the exact GenerateDataKey and Decrypt commands (the operator's key, AES_256, the
 * connection id as encryption context), how each AWS failure is re-thrown (never with a value), the
 * replies it refuses, and the lazily loaded client. Against the KMS model: sealing.test.ts.
 */
import 'aws-sdk-client-mock-vitest/extend';
import {
  DecryptCommand,
  DependencyTimeoutException,
  DisabledException,
  GenerateDataKeyCommand,
  IncorrectKeyException,
  InvalidCiphertextException,
  InvalidGrantTokenException,
  InvalidKeyUsageException,
  KMSClient,
  KMSInternalException,
  KMSInvalidStateException,
  KMSServiceException,
  NotFoundException,
} from '@aws-sdk/client-kms';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { encryptionContextOf, KmsDataKeys } from '../../../../functions/shared/adapters/kms-data-keys.js';
import { KeyUnavailableError, SealError } from '../../../../functions/shared/connections/sealing.js';
import { ConfigError, PermanentError, TransientError } from '../../../../functions/shared/errors.js';
import { kmsApi } from '../../../../functions/shared/adapters/kms-api.js';

const KEY_ARN = 'arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab';
/** A plaintext data key and its encrypted form, recognisable in any text they could leak into. */
const PLAINTEXT = Uint8Array.from({ length: 32 }, (_, i) => 0xa0 + i);
const BLOB = Uint8Array.from({ length: 184 }, (_, i) => (i * 7 + 3) % 256);

/** Every way bytes could show in a message. */
function encodingsOf(bytes: Uint8Array): string[] {
  const buffer = Buffer.from(bytes);
  return [buffer.toString('base64'), buffer.toString('base64url'), buffer.toString('hex'), buffer.toString('latin1'), Array.from(bytes).join(',')];
}

function expectNoValues(error: Error): void {
  for (const text of [error.message, String(error.stack ?? '')]) {
    for (const form of [...encodingsOf(PLAINTEXT), ...encodingsOf(BLOB)]) expect(text).not.toContain(form);
    expect(text).not.toContain(LEAK);
  }
  expect(error.cause).toBeUndefined();
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

/** What an AWS error message could echo: the adapter never passes it on. */
const LEAK = `echoed ${Buffer.from(BLOB).toString('base64')}`;
const metadata = (httpStatusCode: number) => ({ $metadata: { httpStatusCode } });
/** An AWS error the SDK has no class for (or a generic one), as the SDK builds it. */
function serviceError(name: string, httpStatusCode: number): KMSServiceException {
  return new KMSServiceException({ name, $fault: httpStatusCode >= 500 ? 'server' : 'client', message: LEAK, ...metadata(httpStatusCode) });
}

type Kind = 'seal' | 'config' | 'key' | 'transient' | 'error';

const FAILURES: Array<[string, () => Error, Kind, string]> = [
  ['InvalidCiphertextException', () => new InvalidCiphertextException({ message: LEAK, ...metadata(400) }), 'seal', 'InvalidCiphertextException, HTTP 400'],
  ['IncorrectKeyException', () => new IncorrectKeyException({ message: LEAK, ...metadata(400) }), 'seal', 'IncorrectKeyException, HTTP 400'],
  ['NotFoundException', () => new NotFoundException({ message: LEAK, ...metadata(404) }), 'config', 'NotFoundException, HTTP 404'],
  ['DisabledException', () => new DisabledException({ message: LEAK, ...metadata(409) }), 'key', 'DisabledException, HTTP 409'],
  ['AccessDeniedException', () => serviceError('AccessDeniedException', 400), 'config', 'AccessDeniedException, HTTP 400'],
  ['KMSInvalidStateException', () => new KMSInvalidStateException({ message: LEAK, ...metadata(409) }), 'key', 'KMSInvalidStateException, HTTP 409'],
  ['InvalidKeyUsageException', () => new InvalidKeyUsageException({ message: LEAK, ...metadata(400) }), 'config', 'InvalidKeyUsageException, HTTP 400'],
  ['ThrottlingException', () => serviceError('ThrottlingException', 400), 'transient', 'ThrottlingException, HTTP 400'],
  ['KMSInternalException', () => new KMSInternalException({ message: LEAK, ...metadata(500) }), 'transient', 'KMSInternalException, HTTP 500'],
  ['DependencyTimeoutException', () => new DependencyTimeoutException({ message: LEAK, ...metadata(503) }), 'transient', 'DependencyTimeoutException, HTTP 503'],
  ['a 500 of no modelled name', () => serviceError('InternalFailure', 500), 'transient', 'InternalFailure, HTTP 500'],
  ['a 503', () => serviceError('ServiceUnavailable', 503), 'transient', 'ServiceUnavailable, HTTP 503'],
  ['a network error (no $metadata)', () => Object.assign(new Error(`connect ECONNRESET ${LEAK}`), { code: 'ECONNRESET' }), 'transient', 'Error'],
  ['a time-out (no $metadata)', () => Object.assign(new Error(LEAK), { name: 'TimeoutError' }), 'transient', 'TimeoutError'],
  ['ValidationException', () => serviceError('ValidationException', 400), 'error', 'ValidationException, HTTP 400'],
  ['InvalidGrantTokenException', () => new InvalidGrantTokenException({ message: LEAK, ...metadata(400) }), 'error', 'InvalidGrantTokenException, HTTP 400'],
  ['a 4xx of no modelled name', () => serviceError('SomethingNewException', 422), 'error', 'SomethingNewException, HTTP 422'],
];

describe('KmsDataKeys: the exact KMS commands', () => {
  const kms = new KMSClient({});
  const mock = mockClient(kms);
  const keys = new KmsDataKeys(kmsApi(kms), KEY_ARN);

  beforeEach(() => mock.reset());

  it('the encryption context of a connection is {"connection": <id>}', () => {
    expect(encryptionContextOf('acme')).toStrictEqual({ connection: 'acme' });
  });

  it("generate: one GenerateDataKey under the operator's key, AES_256, bound to the connection; answers KMS's key and blob", async () => {
    mock.on(GenerateDataKeyCommand).resolves({ Plaintext: PLAINTEXT, CiphertextBlob: BLOB, KeyId: KEY_ARN });
    const made = await keys.generate('acme');
    expect(made.plaintext).toBe(PLAINTEXT);
    expect(made.encrypted).toBe(BLOB);
    expect(mock).toReceiveCommandExactlyOnceWith(GenerateDataKeyCommand, { KeyId: KEY_ARN, KeySpec: 'AES_256', EncryptionContext: { connection: 'acme' } });
    expect(mock.calls()).toHaveLength(1);
    expect(mock.commandCalls(GenerateDataKeyCommand)[0]!.args[0].input).toStrictEqual({
      KeyId: KEY_ARN,
      KeySpec: 'AES_256',
      EncryptionContext: { connection: 'acme' },
    });
  });

  it("decrypt: one Decrypt naming the operator's key, the blob as it is, bound to the connection; answers the plaintext", async () => {
    mock.on(DecryptCommand).resolves({ Plaintext: PLAINTEXT, KeyId: KEY_ARN, EncryptionAlgorithm: 'SYMMETRIC_DEFAULT' });
    expect(await keys.decrypt('acme', BLOB)).toBe(PLAINTEXT);
    expect(mock).toReceiveCommandExactlyOnceWith(DecryptCommand, { KeyId: KEY_ARN, CiphertextBlob: BLOB, EncryptionContext: { connection: 'acme' } });
    expect(mock.calls()).toHaveLength(1);
    const input = mock.commandCalls(DecryptCommand)[0]!.args[0].input;
    expect(input).toStrictEqual({ KeyId: KEY_ARN, CiphertextBlob: BLOB, EncryptionContext: { connection: 'acme' } });
    expect(input.CiphertextBlob).toBe(BLOB);
  });

  it('each connection its own context: a data key for one is asked for with that one only', async () => {
    mock.on(GenerateDataKeyCommand).resolves({ Plaintext: PLAINTEXT, CiphertextBlob: BLOB });
    mock.on(DecryptCommand).resolves({ Plaintext: PLAINTEXT });
    await keys.generate('globex');
    await keys.decrypt('initech.eu', BLOB);
    expect(mock.commandCalls(GenerateDataKeyCommand).map((call) => call.args[0].input.EncryptionContext)).toStrictEqual([{ connection: 'globex' }]);
    expect(mock.commandCalls(DecryptCommand).map((call) => call.args[0].input.EncryptionContext)).toStrictEqual([{ connection: 'initech.eu' }]);
  });

  describe.each([
    ['GenerateDataKey', (k: KmsDataKeys) => k.generate('acme'), GenerateDataKeyCommand],
    ['Decrypt', (k: KmsDataKeys) => k.decrypt('acme', BLOB), DecryptCommand],
  ] as const)('%s failures', (operation, call, command) => {
    it.each(FAILURES)('%s', async (_what, make, kind, what) => {
      // The command type differs per row; the mock accepts either.
      mock.on(command as typeof DecryptCommand).rejects(make());
      const error = await rejection(call(keys));
      expectNoValues(error);
      expect(error.message).toContain(`KMS ${operation}`);
      expect(error.message).toContain(`(${what})`);
      switch (kind) {
        case 'seal':
          expect(error).toBeInstanceOf(SealError);
          expect(error).toBeInstanceOf(PermanentError);
          expect(error.message).toContain('connection "acme"');
          break;
        case 'config':
          expect(error).toBeInstanceOf(ConfigError);
          expect((error as ConfigError).key).toBe('CONNECTIONS_KEY_ARN');
          expect(error.message.startsWith('CONNECTIONS_KEY_ARN: ')).toBe(true);
          expect(error.message).toContain(KEY_ARN);
          break;
        case 'key':
          expect(error).toBeInstanceOf(KeyUnavailableError);
          expect(error).toBeInstanceOf(TransientError);
          expect(error.message).toContain(`CONNECTIONS_KEY_ARN ${KEY_ARN}`);
          expect(error.message).toContain('disabled or pending deletion');
          break;
        case 'transient':
          expect(error).toBeInstanceOf(TransientError);
          expect(error).not.toBeInstanceOf(KeyUnavailableError);
          break;
        case 'error':
          expect(Object.getPrototypeOf(error)).toBe(Error.prototype);
          break;
      }
      if (kind !== 'seal') expect(error).not.toBeInstanceOf(SealError);
      if (kind !== 'config') expect(error).not.toBeInstanceOf(ConfigError);
      if (kind !== 'transient' && kind !== 'key') expect(error).not.toBeInstanceOf(TransientError);
      expect(mock.calls()).toHaveLength(1);
    });
  });

  it('a thrown value that is no Error at all (no name, no status) is a TransientError too', async () => {
    mock.on(DecryptCommand).callsFake(() => {
      throw undefined;
    });
    const error = await rejection(keys.decrypt('acme', BLOB));
    expect(error).toBeInstanceOf(TransientError);
    expectNoValues(error);
  });

  it.each([
    ['no Plaintext', { CiphertextBlob: BLOB }],
    ['a 16-byte Plaintext', { Plaintext: PLAINTEXT.slice(0, 16), CiphertextBlob: BLOB }],
    ['a 33-byte Plaintext', { Plaintext: Uint8Array.from([...PLAINTEXT, 1]), CiphertextBlob: BLOB }],
    ['no CiphertextBlob', { Plaintext: PLAINTEXT }],
    ['an empty CiphertextBlob', { Plaintext: PLAINTEXT, CiphertextBlob: new Uint8Array(0) }],
  ])('generate: a reply with %s is an Error naming CONNECTIONS_KEY_ARN, without values', async (_what, reply) => {
    mock.on(GenerateDataKeyCommand).resolves(reply);
    const error = await rejection(keys.generate('acme'));
    expect(Object.getPrototypeOf(error)).toBe(Error.prototype);
    expect(error.message).toBe('KMS GenerateDataKey with CONNECTIONS_KEY_ARN answered without a 256-bit data key');
    expectNoValues(error);
  });

  it.each([
    ['no Plaintext', {}],
    ['an empty Plaintext', { Plaintext: new Uint8Array(0) }],
    ['a 16-byte Plaintext', { Plaintext: PLAINTEXT.slice(0, 16) }],
    ['a 64-byte Plaintext', { Plaintext: Uint8Array.from([...PLAINTEXT, ...PLAINTEXT]) }],
  ])('decrypt: a reply with %s is an Error naming CONNECTIONS_KEY_ARN, without values', async (_what, reply) => {
    mock.on(DecryptCommand).resolves(reply);
    const error = await rejection(keys.decrypt('acme', BLOB));
    expect(Object.getPrototypeOf(error)).toBe(Error.prototype);
    expect(error.message).toBe('KMS Decrypt with CONNECTIONS_KEY_ARN answered without a 256-bit data key');
    expectNoValues(error);
  });
});

describe('KmsDataKeys: a client loaded when first needed', () => {
  it('asks for the client on the first request only, and sends every request through it', async () => {
    const kms = new KMSClient({});
    const mock = mockClient(kms);
    mock.on(GenerateDataKeyCommand).resolves({ Plaintext: PLAINTEXT, CiphertextBlob: BLOB });
    mock.on(DecryptCommand).resolves({ Plaintext: PLAINTEXT });
    let loads = 0;
    const keys = new KmsDataKeys(async () => {
      loads += 1;
      await new Promise((resolve) => setTimeout(resolve, 5));
      return kmsApi(kms);
    }, KEY_ARN);
    expect(keys.keyArn).toBe(KEY_ARN);
    expect(loads).toBe(0);
    // Many at once, while the client is still loading, then more.
    await Promise.all([keys.generate('a'), keys.decrypt('b', BLOB), keys.generate('c'), keys.decrypt('d', BLOB)]);
    await keys.generate('e');
    await keys.decrypt('f', BLOB);
    expect(loads).toBe(1);
    expect(mock).toReceiveCommandTimes(GenerateDataKeyCommand, 3);
    expect(mock).toReceiveCommandTimes(DecryptCommand, 3);
    expect(mock.commandCalls(DecryptCommand).map((call) => call.args[0].input.EncryptionContext?.['connection'])).toEqual(['b', 'd', 'f']);
  });
});
