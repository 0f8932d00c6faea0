/**
 * KMS for the harness: symmetric encryption keys (SYMMETRIC_DEFAULT, customer managed) and the
 * operations the application sends them, GenerateDataKey and Decrypt (plus Encrypt), checked as
 * KMS checks them. kms-api.ts puts the model behind the SDK's protocol, in process
 * (in-process-aws.ts) and over HTTP (aws-emulator.ts).
 *
 * - A key is `arn:aws:kms:<region>:<account>:key/<uuid>` holding a random 256-bit root key in memory;
 *   requests name it by that ARN or by its bare key id (there are no aliases: an alias is not found).
 * - A ciphertext blob is `01 <key id, 36 ASCII characters> <12-byte IV> <AES-256-GCM ciphertext>
 *   <16-byte tag>` under the key's root key, with the header and the canonical encryption context
 *   (its pairs sorted by key, as JSON) as additional data: only this model can open it, only with
 *   the very encryption context it was made with (same keys and values, any order; none is `{}`).
 * - Refusals are KMS's, as ServiceErrors the SDK raises as its own exceptions: ValidationException
 *   (a parameter out of its bounds), NotFoundException (no such key), DisabledException (a disabled
 *   key), KMSInvalidStateException (a key pending deletion), IncorrectKeyException (Decrypt's KeyId is not the blob's key), InvalidCiphertextException
 *   (a blob tampered with, of no key here, or opened with another encryption context),
 *   InvalidKeyUsageException (an asymmetric algorithm on a symmetric key). DryRun and Recipient
 *   (Nitro enclaves) are not modelled: a request using them is refused (UnsupportedOperationException).
 * - Every request is counted by operation in `calls`, refused or not (KMS bills both).
 */
import { createCipheriv, createDecipheriv, randomBytes, randomUUID } from 'node:crypto';
import { LOCAL_ACCOUNT_ID, LOCAL_REGION } from './local-aws.js';
import { ServiceError } from './service-error.js';

export const MAX_DATA_KEY_BYTES = 1024;
export const MAX_PLAINTEXT_BYTES = 4096;
export const MAX_CIPHERTEXT_BYTES = 6144;
export const MAX_KEY_ID_LENGTH = 2048;
export const MAX_GRANT_TOKENS = 10;

/** Data key sizes by KeySpec. */
export const KEY_SPEC_BYTES: Readonly<Record<string, number>> = { AES_256: 32, AES_128: 16 };
/** The encryption algorithms KMS knows; a symmetric key takes SYMMETRIC_DEFAULT only. */
export const ENCRYPTION_ALGORITHMS = ['SYMMETRIC_DEFAULT', 'RSAES_OAEP_SHA_1', 'RSAES_OAEP_SHA_256', 'SM2PKE'] as const;

export type EncryptionContext = Record<string, string>;
export type KeyState = 'Enabled' | 'Disabled' | 'PendingDeletion';

/** Requests and results carry the SDK's member names; blobs are bytes. */
export interface GenerateDataKeyRequest {
  KeyId?: string;
  KeySpec?: string;
  NumberOfBytes?: number;
  EncryptionContext?: EncryptionContext;
  GrantTokens?: string[];
  DryRun?: boolean;
  Recipient?: unknown;
}

export interface GenerateDataKeyResult {
  CiphertextBlob: Uint8Array;
  Plaintext: Uint8Array;
  KeyId: string;
  KeyMaterialId: string;
}

export interface DecryptRequest {
  CiphertextBlob?: Uint8Array;
  KeyId?: string;
  EncryptionContext?: EncryptionContext;
  EncryptionAlgorithm?: string;
  GrantTokens?: string[];
  DryRun?: boolean;
  Recipient?: unknown;
}

export interface DecryptResult {
  KeyId: string;
  Plaintext: Uint8Array;
  EncryptionAlgorithm: 'SYMMETRIC_DEFAULT';
  KeyMaterialId: string;
}

export interface EncryptRequest {
  KeyId?: string;
  Plaintext?: Uint8Array;
  EncryptionContext?: EncryptionContext;
  EncryptionAlgorithm?: string;
  GrantTokens?: string[];
  DryRun?: boolean;
}

export interface EncryptResult {
  CiphertextBlob: Uint8Array;
  KeyId: string;
  EncryptionAlgorithm: 'SYMMETRIC_DEFAULT';
}

export interface KmsModelOptions {
  region?: string;
  accountId?: string;
}

/** What makes a key: its id and its root key. */
export interface KeyMaterial {
  id: string;
  rootKey: Buffer;
}

interface Key {
  readonly id: string;
  readonly arn: string;
  readonly rootKey: Buffer;
  readonly materialId: string;
  state: KeyState;
}

const BLOB_VERSION = 1;
const KEY_ID_LENGTH = 36;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const HEADER_BYTES = 1 + KEY_ID_LENGTH;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export class KmsModel {
  readonly region: string;
  readonly accountId: string;
  /** Requests by operation (`GenerateDataKey`, `Decrypt`, `Encrypt`), refused ones included. */
  readonly calls: Record<string, number> = {};

  private readonly keys = new Map<string, Key>();

  constructor(options: KmsModelOptions = {}) {
    this.region = options.region ?? LOCAL_REGION;
    this.accountId = options.accountId ?? LOCAL_ACCOUNT_ID;
  }

  // ---- keys ----

  /**
   * A new enabled symmetric encryption key; returns its ARN. `material`: the key's id and 32-byte
   * root key (a local run keeps them beside its tables, so the tokens it sealed open in the next run).
   */
  createKey(material?: KeyMaterial): string {
    if (material !== undefined && (!UUID.test(material.id) || material.rootKey.length !== 32)) throw new Error('key material: a UUID id and a 32-byte root key');
    const id = material?.id ?? randomUUID();
    const key: Key = { id, arn: this.arnOf(id), rootKey: material?.rootKey ?? randomBytes(32), materialId: randomBytes(32).toString('hex'), state: 'Enabled' };
    this.keys.set(id, key);
    return key.arn;
  }

  /** A key's id and root key. */
  material(keyId: string): KeyMaterial {
    const key = this.key(keyId);
    return { id: key.id, rootKey: Buffer.from(key.rootKey) };
  }

  /** As DisableKey: the key refuses every cryptographic operation (DisabledException) until enabled. */
  disable(keyId: string): void {
    this.key(keyId).state = 'Disabled';
  }

  /** As EnableKey. */
  enable(keyId: string): void {
    this.key(keyId).state = 'Enabled';
  }

  /** As ScheduleKeyDeletion: the key refuses every cryptographic operation (KMSInvalidStateException) until its deletion is cancelled. */
  scheduleDeletion(keyId: string): void {
    this.key(keyId).state = 'PendingDeletion';
  }

  /** As CancelKeyDeletion: the key is disabled again (KMS leaves it so), to be enabled. */
  cancelDeletion(keyId: string): void {
    const key = this.key(keyId);
    if (key.state !== 'PendingDeletion') throw new ServiceError('KMSInvalidStateException', `${key.arn} is not pending deletion.`);
    key.state = 'Disabled';
  }

  state(keyId: string): KeyState {
    return this.key(keyId).state;
  }

  // ---- operations ----

  generateDataKey(request: GenerateDataKeyRequest): GenerateDataKeyResult {
    this.count('GenerateDataKey');
    checkKeyId(request.KeyId);
    checkCommon(request);
    if ((request.KeySpec === undefined) === (request.NumberOfBytes === undefined)) {
      throw validation('Please specify either number of bytes or key spec.');
    }
    let size: number;
    if (request.KeySpec !== undefined) {
      const bytes = KEY_SPEC_BYTES[request.KeySpec];
      if (bytes === undefined) {
        throw constraint(`Value '${request.KeySpec}' at 'keySpec'`, `Member must satisfy enum value set: [${Object.keys(KEY_SPEC_BYTES).join(', ')}]`);
      }
      size = bytes;
    } else {
      size = checkNumberOfBytes(request.NumberOfBytes!);
    }
    const key = this.usable(request.KeyId);
    const plaintext = randomBytes(size);
    return {
      CiphertextBlob: this.seal(key, plaintext, request.EncryptionContext ?? {}),
      Plaintext: bytesOf(plaintext),
      KeyId: key.arn,
      KeyMaterialId: key.materialId,
    };
  }

  decrypt(request: DecryptRequest): DecryptResult {
    this.count('Decrypt');
    const blob = request.CiphertextBlob;
    checkLength(blob, 'ciphertextBlob', MAX_CIPHERTEXT_BYTES);
    if (request.KeyId !== undefined) checkKeyId(request.KeyId);
    checkAlgorithm(request.EncryptionAlgorithm);
    checkCommon(request);
    const named = request.KeyId === undefined ? undefined : this.key(request.KeyId);
    const blobKeyId = keyIdOf(blob!);
    if (blobKeyId === undefined) throw invalidCiphertext();
    if (named && named.id !== blobKeyId) {
      throw new ServiceError('IncorrectKeyException', 'The key ID in the request does not identify a CMK that can perform this operation.');
    }
    const key = this.keys.get(blobKeyId);
    if (!key) throw invalidCiphertext();
    if (key.state !== 'Enabled') throw notEnabled(key);
    symmetricOnly(request.EncryptionAlgorithm);
    return {
      KeyId: key.arn,
      Plaintext: bytesOf(this.open(key, blob!, request.EncryptionContext ?? {})),
      EncryptionAlgorithm: 'SYMMETRIC_DEFAULT',
      KeyMaterialId: key.materialId,
    };
  }

  encrypt(request: EncryptRequest): EncryptResult {
    this.count('Encrypt');
    checkKeyId(request.KeyId);
    checkLength(request.Plaintext, 'plaintext', MAX_PLAINTEXT_BYTES);
    checkAlgorithm(request.EncryptionAlgorithm);
    checkCommon(request);
    const key = this.usable(request.KeyId);
    symmetricOnly(request.EncryptionAlgorithm);
    return {
      CiphertextBlob: this.seal(key, Buffer.from(request.Plaintext!), request.EncryptionContext ?? {}),
      KeyId: key.arn,
      EncryptionAlgorithm: 'SYMMETRIC_DEFAULT',
    };
  }

  // ---- internals ----

  private count(operation: string): void {
    this.calls[operation] = (this.calls[operation] ?? 0) + 1;
  }

  private arnOf(id: string): string {
    return `arn:aws:kms:${this.region}:${this.accountId}:key/${id}`;
  }

  /** The key a KeyId names (its ARN or its bare id), or NotFoundException. */
  private key(keyId: string): Key {
    const prefix = `arn:aws:kms:${this.region}:${this.accountId}:`;
    if (keyId.startsWith('alias/') || /^arn:aws[a-z-]*:kms:[^:]*:[^:]*:alias\//.test(keyId)) {
      const alias = keyId.startsWith('alias/') ? `${prefix}${keyId}` : keyId;
      throw new ServiceError('NotFoundException', `Alias ${alias} is not found.`, 404);
    }
    const id = keyId.startsWith(`${prefix}key/`) ? keyId.slice(prefix.length + 'key/'.length) : keyId;
    const key = this.keys.get(id);
    if (!key) throw new ServiceError('NotFoundException', `Key '${keyId.startsWith('arn:') ? keyId : this.arnOf(keyId)}' does not exist`, 404);
    return key;
  }

  /** The key, enabled, or the refusal KMS gives. */
  private usable(keyId: string | undefined): Key {
    const key = this.key(keyId!);
    if (key.state !== 'Enabled') throw notEnabled(key);
    return key;
  }

  private seal(key: Key, plaintext: Buffer, context: EncryptionContext): Uint8Array {
    const header = Buffer.concat([Buffer.from([BLOB_VERSION]), Buffer.from(key.id, 'ascii')]);
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', key.rootKey, iv);
    cipher.setAAD(additionalData(header, context));
    const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
    return bytesOf(Buffer.concat([header, iv, body, cipher.getAuthTag()]));
  }

  private open(key: Key, blob: Uint8Array, context: EncryptionContext): Buffer {
    const bytes = Buffer.from(blob);
    if (bytes.length < HEADER_BYTES + IV_BYTES + TAG_BYTES) throw invalidCiphertext();
    const header = bytes.subarray(0, HEADER_BYTES);
    const iv = bytes.subarray(HEADER_BYTES, HEADER_BYTES + IV_BYTES);
    const body = bytes.subarray(HEADER_BYTES + IV_BYTES, bytes.length - TAG_BYTES);
    try {
      const decipher = createDecipheriv('aes-256-gcm', key.rootKey, iv);
      decipher.setAAD(additionalData(header, context));
      decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
      return Buffer.concat([decipher.update(body), decipher.final()]);
    } catch {
      throw invalidCiphertext();
    }
  }
}

/** An encryption context as its pairs sorted by key, as JSON: equal contexts give equal text. */
export function canonicalContext(context: EncryptionContext): string {
  return JSON.stringify(Object.keys(context).sort().map((name) => [name, context[name]]));
}

function additionalData(header: Buffer, context: EncryptionContext): Buffer {
  return Buffer.concat([header, Buffer.from(canonicalContext(context), 'utf8')]);
}

/** The key id a blob's header names, if it has one. */
function keyIdOf(blob: Uint8Array): string | undefined {
  if (blob.length < HEADER_BYTES || blob[0] !== BLOB_VERSION) return undefined;
  const id = Buffer.from(blob.subarray(1, HEADER_BYTES)).toString('latin1');
  return UUID.test(id) ? id : undefined;
}

/** A plain Uint8Array, as the SDK hands blobs out (not a Buffer). */
function bytesOf(buffer: Uint8Array): Uint8Array {
  return new Uint8Array(buffer);
}

function checkKeyId(keyId: string | undefined): void {
  if (keyId === undefined) throw constraint(`Value null at 'keyId'`, 'Member must not be null');
  if (keyId.length < 1) throw constraint(`Value '' at 'keyId'`, 'Member must have length greater than or equal to 1');
  if (keyId.length > MAX_KEY_ID_LENGTH) throw constraint(`Value at 'keyId'`, `Member must have length less than or equal to ${MAX_KEY_ID_LENGTH}`);
}

/** A blob's length (sensitive: the message names no value, as KMS's does not). */
function checkLength(value: Uint8Array | undefined, member: string, max: number): void {
  if (value === undefined) throw constraint(`Value null at '${member}'`, 'Member must not be null');
  if (value.length < 1) throw constraint(`Value at '${member}'`, 'Member must have length greater than or equal to 1');
  if (value.length > max) throw constraint(`Value at '${member}'`, `Member must have length less than or equal to ${max}`);
}

function checkNumberOfBytes(value: number): number {
  if (!Number.isInteger(value)) throw new ServiceError('SerializationException', 'NumberOfBytes must be an integer.');
  if (value < 1) throw constraint(`Value '${value}' at 'numberOfBytes'`, 'Member must have value greater than or equal to 1');
  if (value > MAX_DATA_KEY_BYTES) throw constraint(`Value '${value}' at 'numberOfBytes'`, `Member must have value less than or equal to ${MAX_DATA_KEY_BYTES}`);
  return value;
}

function checkAlgorithm(algorithm: string | undefined): void {
  if (algorithm !== undefined && !(ENCRYPTION_ALGORITHMS as readonly string[]).includes(algorithm)) {
    throw constraint(`Value '${algorithm}' at 'encryptionAlgorithm'`, `Member must satisfy enum value set: [${ENCRYPTION_ALGORITHMS.join(', ')}]`);
  }
}

function symmetricOnly(algorithm: string | undefined): void {
  if (algorithm !== undefined && algorithm !== 'SYMMETRIC_DEFAULT') {
    throw new ServiceError('InvalidKeyUsageException', `The encryption algorithm ${algorithm} is not compatible with the key spec SYMMETRIC_DEFAULT.`);
  }
}

function checkCommon(request: { GrantTokens?: string[]; DryRun?: boolean; Recipient?: unknown }): void {
  if (request.GrantTokens !== undefined && request.GrantTokens.length > MAX_GRANT_TOKENS) {
    throw constraint(`Value at 'grantTokens'`, `Member must have length less than or equal to ${MAX_GRANT_TOKENS}`);
  }
  if (request.DryRun === true) throw new ServiceError('UnsupportedOperationException', 'The KMS model does not model DryRun.');
  if (request.Recipient !== undefined) throw new ServiceError('UnsupportedOperationException', 'The KMS model does not model Recipient (attested enclaves).');
}

function constraint(what: string, rule: string): ServiceError {
  return validation(`1 validation error detected: ${what} failed to satisfy constraint: ${rule}`);
}

function validation(message: string): ServiceError {
  return new ServiceError('ValidationException', message);
}

function invalidCiphertext(): ServiceError {
  return new ServiceError('InvalidCiphertextException', 'The ciphertext is corrupted, not of a key of this account, or its encryption context is not the one given.');
}

/** KMS's refusal of a key that is not enabled: disabled, or pending deletion. */
function notEnabled(key: Key): ServiceError {
  return key.state === 'PendingDeletion'
    ? new ServiceError('KMSInvalidStateException', `${key.arn} is pending deletion.`)
    : new ServiceError('DisabledException', `${key.arn} is disabled.`, 409);
}
