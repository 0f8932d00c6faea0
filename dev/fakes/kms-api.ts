/**
 * KMS's protocol (awsJson1_1, `X-Amz-Target: TrentService.<Operation>`) over the KMS model
 * (kms-model.ts): GenerateDataKey, Decrypt and Encrypt. `handleKms` takes a request as the SDK
 * puts it on the wire (blobs as base64 strings, for the HTTP emulator) or hands it to its middleware
 * (blobs as Uint8Array, for the in-process clients), checks the members' types as KMS's
 * deserializer does (SerializationException), and answers in the same form.
 */
import type { DecryptRequest, EncryptionContext, EncryptRequest, GenerateDataKeyRequest, KmsModel } from './kms-model.js';
import { isObject, ServiceError } from './service-error.js';

type Input = Record<string, unknown>;

/** How blobs travel: bytes (the SDK's own values, in process) or base64 strings (JSON, over HTTP). */
export type BlobEncoding = 'bytes' | 'base64';

export function handleKms(model: KmsModel, operation: string, input: Input, blobs: BlobEncoding): unknown {
  const codec = new Codec(blobs);
  switch (operation) {
    case 'GenerateDataKey': {
      const request: GenerateDataKeyRequest = {
        ...common(input),
        KeyId: optionalString(input, 'KeyId'),
        KeySpec: optionalString(input, 'KeySpec'),
        NumberOfBytes: optionalInteger(input, 'NumberOfBytes'),
        EncryptionContext: encryptionContext(input),
      };
      return codec.encode(model.generateDataKey(request), ['CiphertextBlob', 'Plaintext']);
    }
    case 'Decrypt': {
      const request: DecryptRequest = {
        ...common(input),
        CiphertextBlob: codec.decode(input, 'CiphertextBlob'),
        KeyId: optionalString(input, 'KeyId'),
        EncryptionContext: encryptionContext(input),
        EncryptionAlgorithm: optionalString(input, 'EncryptionAlgorithm'),
      };
      return codec.encode(model.decrypt(request), ['Plaintext']);
    }
    case 'Encrypt': {
      const request: EncryptRequest = {
        ...common(input),
        KeyId: optionalString(input, 'KeyId'),
        Plaintext: codec.decode(input, 'Plaintext'),
        EncryptionContext: encryptionContext(input),
        EncryptionAlgorithm: optionalString(input, 'EncryptionAlgorithm'),
      };
      return codec.encode(model.encrypt(request), ['CiphertextBlob']);
    }
    default:
      throw new ServiceError('UnknownOperationException', `The KMS model does not support TrentService.${operation}.`);
  }
}

class Codec {
  constructor(private readonly encoding: BlobEncoding) {}

  decode(input: Input, member: string): Uint8Array | undefined {
    const value = input[member];
    if (value === undefined || value === null) return undefined;
    if (this.encoding === 'bytes') {
      if (!(value instanceof Uint8Array)) throw serialization(member, 'a Uint8Array');
      return value;
    }
    if (typeof value !== 'string' || value.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(value)) throw serialization(member, 'base64');
    return new Uint8Array(Buffer.from(value, 'base64'));
  }

  encode<T extends object>(output: T, members: ReadonlyArray<keyof T & string>): Input {
    const out: Input = { ...(output as Input) };
    if (this.encoding === 'base64') {
      for (const member of members) out[member] = Buffer.from(output[member] as Uint8Array).toString('base64');
    }
    return out;
  }
}

function common(input: Input): { GrantTokens?: string[]; DryRun?: boolean; Recipient?: unknown } {
  const out: { GrantTokens?: string[]; DryRun?: boolean; Recipient?: unknown } = {};
  const tokens = input.GrantTokens;
  if (tokens !== undefined && tokens !== null) {
    if (!Array.isArray(tokens) || !tokens.every((token) => typeof token === 'string')) throw serialization('GrantTokens', 'a list of strings');
    out.GrantTokens = tokens as string[];
  }
  const dryRun = input.DryRun;
  if (dryRun !== undefined && dryRun !== null) {
    if (typeof dryRun !== 'boolean') throw serialization('DryRun', 'a boolean');
    out.DryRun = dryRun;
  }
  if (input.Recipient !== undefined && input.Recipient !== null) out.Recipient = input.Recipient;
  return out;
}

function optionalString(input: Input, member: string): string | undefined {
  const value = input[member];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw serialization(member, 'a string');
  return value;
}

function optionalInteger(input: Input, member: string): number | undefined {
  const value = input[member];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value)) throw serialization(member, 'an integer');
  return value;
}

function encryptionContext(input: Input): EncryptionContext | undefined {
  const value = input.EncryptionContext;
  if (value === undefined || value === null) return undefined;
  if (!isObject(value) || !Object.values(value).every((entry) => typeof entry === 'string')) {
    throw serialization('EncryptionContext', 'a map of strings to strings');
  }
  return { ...(value as EncryptionContext) };
}

function serialization(member: string, expected: string): ServiceError {
  return new ServiceError('SerializationException', `${member} must be ${expected}.`);
}
