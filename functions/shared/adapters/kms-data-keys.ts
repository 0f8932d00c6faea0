/**
 * The DataKeys port (functions/shared/connections/sealing.ts) on AWS KMS: one GenerateDataKey
 * (AES_256) per sealed token and one Decrypt per token opened (then cached by the sealer), both
 * under the operator's key (CONNECTIONS_KEY_ARN, the connections key) with the encryption context
 * `{"connection": <connection id>}`. KMS binds the data key to that context: a sealed value copied
 * into another connection's row fails its Decrypt there (InvalidCiphertextException), and
 * CloudTrail shows each use of the key with the connection it was for.
 *
 * AWS failures are re-thrown without values: a SealError for a data key that is not this
 * connection's or this key's; a KeyUnavailableError (a TransientError) for a key that is disabled or
 * pending deletion, an outage of the key that enabling it (or cancelling its deletion) ends; a
 * ConfigError naming CONNECTIONS_KEY_ARN for a key that does not exist or may not be used; a
 * TransientError for throttling, 5xx and network failures.
 */
import type { DecryptCommand, GenerateDataKeyCommand, KMSClient } from '@aws-sdk/client-kms';
import { ENV } from '../config.js';
import { KeyUnavailableError, SealError, type DataKeys } from '../connections/sealing.js';
import { awsErrorOf, ConfigError, TransientError } from '../errors.js';

/** The encryption context every data key of a connection is bound to. */
export function encryptionContextOf(connection: string): Record<string, string> {
  return { connection };
}

const CONFIG_NAMES = new Set(['NotFoundException', 'AccessDeniedException', 'InvalidKeyUsageException']);
/** The key's state (disabled, pending deletion): an outage of the key. */
const KEY_STATE_NAMES = new Set(['DisabledException', 'KMSInvalidStateException']);
const SEAL_NAMES = new Set(['InvalidCiphertextException', 'IncorrectKeyException']);

/**
 * A KMS client with the two commands the data keys send (kms-api.ts builds it). This module imports
 * the SDK's types only, so that a bundle that loads the KMS client lazily (the item sync:
 * functions/item-sync/lazy-modules.ts) does not carry the commands' code in its cold start either.
 */
export interface KmsApi {
  readonly client: KMSClient;
  readonly DecryptCommand: typeof DecryptCommand;
  readonly GenerateDataKeyCommand: typeof GenerateDataKeyCommand;
}

/** The KMS API, or how to get it when first needed (a module loaded lazily). */
export type KmsClientSource = KmsApi | (() => Promise<KmsApi>);

export class KmsDataKeys implements DataKeys {
  private api: Promise<KmsApi> | undefined;

  constructor(
    private readonly kms: KmsClientSource,
    readonly keyArn: string,
  ) {}

  private kmsApi(): Promise<KmsApi> {
    // A client that failed to load is loaded again at the next request.
    this.api ??= (typeof this.kms === 'function' ? this.kms() : Promise.resolve(this.kms)).catch((error: unknown) => {
      this.api = undefined;
      throw error;
    });
    return this.api;
  }

  async generate(connection: string): Promise<{ plaintext: Uint8Array; encrypted: Uint8Array }> {
    const kms = await this.kmsApi();
    const output = await this.send('GenerateDataKey', connection, () =>
      kms.client.send(new kms.GenerateDataKeyCommand({ KeyId: this.keyArn, KeySpec: 'AES_256', EncryptionContext: encryptionContextOf(connection) })),
    );
    if (output.Plaintext?.length !== 32 || !output.CiphertextBlob?.length) {
      throw new Error(`KMS GenerateDataKey with ${ENV.connectionsKeyArn} answered without a 256-bit data key`);
    }
    return { plaintext: output.Plaintext, encrypted: output.CiphertextBlob };
  }

  async decrypt(connection: string, encrypted: Uint8Array): Promise<Uint8Array> {
    const kms = await this.kmsApi();
    const output = await this.send('Decrypt', connection, () =>
      kms.client.send(new kms.DecryptCommand({ KeyId: this.keyArn, CiphertextBlob: encrypted, EncryptionContext: encryptionContextOf(connection) })),
    );
    if (output.Plaintext?.length !== 32) throw new Error(`KMS Decrypt with ${ENV.connectionsKeyArn} answered without a 256-bit data key`);
    return output.Plaintext;
  }

  private async send<T>(operation: string, connection: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      const { name, status, summary: what } = awsErrorOf(error);
      if (name !== undefined && SEAL_NAMES.has(name)) {
        throw new SealError(`connection "${connection}": KMS ${operation} refused a sealed token of its row (${what}): it was sealed for another connection or under another key`);
      }
      if (name !== undefined && KEY_STATE_NAMES.has(name)) {
        throw new KeyUnavailableError(`KMS ${operation} on ${ENV.connectionsKeyArn} ${this.keyArn} failed (${what}): the key is disabled or pending deletion; enable it (or cancel its deletion) and refreshes resume`);
      }
      if (name !== undefined && CONFIG_NAMES.has(name)) {
        throw new ConfigError(ENV.connectionsKeyArn, `KMS ${operation} on ${this.keyArn} failed (${what}): check that the key exists and may be used`);
      }
      if (name === 'ThrottlingException' || name === 'KMSInternalException' || name === 'DependencyTimeoutException' || name === 'KeyUnavailableException' || status === undefined || status >= 500) {
        throw new TransientError(`KMS ${operation} failed (${what})`);
      }
      throw new Error(`KMS ${operation} failed (${what})`);
    }
  }
}
