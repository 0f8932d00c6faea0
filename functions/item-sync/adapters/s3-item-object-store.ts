/**
 * The items bucket (ITEMS_BUCKET_NAME) as the ItemObjectStore port, over @aws-sdk/client-s3.
 *
 * PutObject carries the object's SHA-256 (ChecksumSHA256, base64 as S3 wants it): S3 refuses bytes
 * that do not match it and keeps it with the object, where GetObject/HeadObject with ChecksumMode
 * ENABLED return it. The bucket's default encryption applies; the role may PutObject and
 * DeleteObject on the bucket's objects and nothing else. Every failure that survived the SDK's own
 * retries is a TransientError: nothing points to an object that could not be written, and a
 * configuration problem (no such bucket, access denied) must not dead-letter every large item.
 *
 * The item sync loads this module only when an item too large for a row comes (lazy-item-object-
 * store.ts); its bundle leaves it, with the S3 client, in a module of its own (ITEM_SYNC_LAZY_MODULES).
 */
import { DeleteObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { TransientError } from '../../shared/errors.js';
import type { ItemObjectStore } from '../ports.js';

/** The store over `client`, or over a client of its own with the SDK's standard configuration. */
export function createS3ItemObjectStore(bucketName: string, client?: S3Client): S3ItemObjectStore {
  return new S3ItemObjectStore(client ?? new S3Client({}), bucketName);
}

export class S3ItemObjectStore implements ItemObjectStore {
  constructor(
    private readonly client: S3Client,
    readonly bucketName: string,
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
      throw s3Failure('PutObject', cause);
    }
  }

  async delete(key: string): Promise<void> {
    try {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucketName, Key: key }));
    } catch (cause) {
      throw s3Failure('DeleteObject', cause);
    }
  }
}

function s3Failure(operation: string, cause: unknown): TransientError {
  const name = (cause as { name?: string })?.name ?? 'Error';
  const message = String((cause as { message?: string })?.message ?? cause).slice(0, 300);
  return new TransientError(`S3 ${operation} failed (${name}: ${message})`, { cause });
}
