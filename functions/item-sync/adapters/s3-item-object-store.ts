/**
 * The items bucket (ITEMS_BUCKET_NAME) as the ItemObjectStore port, over @aws-sdk/client-s3.
 *
 * PutObject carries the object's SHA-256 (ChecksumSHA256, base64 as S3 wants it): S3 refuses bytes
 * that do not match it and keeps it with the object, where GetObject/HeadObject with ChecksumMode
 * ENABLED return it. The bucket's default encryption applies; the role may PutObject and
 * DeleteObject on the bucket's objects, and GetObject only with discovery on (a large folder's
 * previous copy, read for its list of children: docs/discovery.md). Every failure that survived the SDK's own
 * retries is a TransientError: nothing points to an object that could not be written, and a
 * configuration problem (no such bucket, access denied) must not dead-letter every large item.
 * One exception: a configured endpoint (AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL) whose host does not
 * resolve (ENOTFOUND) can never be reached as configured: a ConfigError naming the variable, which
 * fails the invocation (no record could succeed).
 *
 * With a configured endpoint the client addresses the bucket path-style (`<endpoint>/<bucket>/<key>`):
 * a local endpoint (`http://localhost:PORT`, `http://127.0.0.1:PORT`) serves no `<bucket>.<host>`
 * names. Without one, the SDK's standard configuration (virtual-hosted AWS endpoints) applies.
 *
 * The item sync loads this module only when an item too large for a row comes (lazy-item-object-
 * store.ts); its bundle leaves it, with the S3 client, in a module of its own (ITEM_SYNC_LAZY_MODULES).
 */
import { DeleteObjectCommand, GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import type { ConfiguredEndpoint } from '../../shared/config.js';
import { ConfigError, TransientError } from '../../shared/errors.js';
import type { ItemObjectStore } from '../ports.js';
import { withoutSdkLogger } from '../../shared/adapters/sdk-client.js';

/**
 * The store over `client`, or over a client of its own: the SDK's standard configuration, with the
 * configured endpoint (SyncConfig.s3Endpoint), if any, addressed path-style.
 */
export function createS3ItemObjectStore(bucketName: string, client?: S3Client, endpoint?: ConfiguredEndpoint): S3ItemObjectStore {
  return new S3ItemObjectStore(client ?? withoutSdkLogger(new S3Client(s3ClientConfig(endpoint))), bucketName, endpoint);
}

/** The S3 client's own settings: none, or the configured endpoint, path-style. */
export function s3ClientConfig(endpoint: ConfiguredEndpoint | undefined): { endpoint?: string; forcePathStyle?: boolean } {
  return endpoint ? { endpoint: endpoint.url, forcePathStyle: true } : {};
}

export class S3ItemObjectStore implements ItemObjectStore {
  constructor(
    private readonly client: S3Client,
    readonly bucketName: string,
    /** The configured endpoint the client uses, if any (SyncConfig.s3Endpoint). */
    private readonly endpoint?: ConfiguredEndpoint,
  ) {}

  async put(key: string, body: Uint8Array, sha256: string): Promise<void> {
    try {
      await this.client.send(
        new PutObjectCommand({
          Bucket: this.bucketName,
          Key: key,
          Body: body,
          ContentLength: body.byteLength,
          ContentType: 'application/json',
          ChecksumSHA256: Buffer.from(sha256, 'hex').toString('base64'),
        }),
      );
    } catch (cause) {
      throw this.failure('PutObject', cause);
    }
  }

  async delete(key: string): Promise<void> {
    try {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucketName, Key: key }));
    } catch (cause) {
      throw this.failure('DeleteObject', cause);
    }
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    try {
      const output = await this.client.send(new GetObjectCommand({ Bucket: this.bucketName, Key: key }));
      if (output.Body === undefined) throw new Error('GetObject returned no body');
      return await output.Body.transformToByteArray();
    } catch (cause) {
      if ((cause as { name?: string })?.name === 'NoSuchKey') return undefined;
      throw this.failure('GetObject', cause);
    }
  }

  /** A TransientError; a ConfigError when the configured endpoint's host does not resolve. */
  private failure(operation: string, cause: unknown): Error {
    const name = (cause as { name?: string })?.name ?? 'Error';
    const message = String((cause as { message?: string })?.message ?? cause).slice(0, 300);
    if (this.endpoint && isNotFound(cause)) {
      return new ConfigError(
        this.endpoint.variable,
        `the items bucket cannot be reached at ${new URL(this.endpoint.url).origin}: S3 ${operation} failed (${name}: ${message}); check the endpoint`,
      );
    }
    return new TransientError(`S3 ${operation} failed (${name}: ${message})`, { cause });
  }
}

/** A DNS answer that the host does not exist (getaddrinfo ENOTFOUND), on the error or its cause. */
function isNotFound(error: unknown): boolean {
  const { code, cause } = (error ?? {}) as { code?: unknown; cause?: { code?: unknown } };
  return code === 'ENOTFOUND' || cause?.code === 'ENOTFOUND';
}
