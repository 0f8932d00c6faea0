/**
 * The harness's S3 (dev/fakes/s3.ts) limits object keys as S3 does: 1,024 bytes in UTF-8, a longer
 * key answered with KeyTooLongError before s3rver sees it.
 */
import { GetObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { objectKeyBytes, startS3, type LocalS3 } from '../../../dev/fakes/s3.js';

const BUCKET = 'items-bucket';

/** A key of exactly `bytes` UTF-8 bytes: `é` (2 bytes) in folders of 100, an ASCII tail (s3rver keeps each folder as a directory). */
function keyOf(bytes: number): string {
  const parts: string[] = [];
  let size = 0;
  while (bytes - size > 260) {
    parts.push('é'.repeat(100));
    size += 201; // 200 bytes and the slash
  }
  parts.push('x'.repeat(bytes - size));
  const key = parts.join('/');
  expect(Buffer.byteLength(key, 'utf8')).toBe(bytes);
  return key;
}

describe('object keys in the local S3', () => {
  let s3: LocalS3;
  let client: S3Client;

  beforeAll(async () => {
    s3 = await startS3();
    await s3.createBucket(BUCKET);
    client = s3.client({ maxAttempts: 1 });
  });

  afterAll(async () => {
    client?.destroy();
    await s3?.close();
  });

  it('reads the key of a path-style request in bytes', () => {
    expect(objectKeyBytes('/bucket/items/a%C3%A9?x-id=PutObject')).toBe(9); // items/aé
    expect(objectKeyBytes('/bucket')).toBeUndefined();
    expect(objectKeyBytes('/bucket/')).toBeUndefined();
    expect(objectKeyBytes('/bucket/%E0%A4%A')).toBeUndefined();
  });

  it('stores and reads back an object whose key is exactly 1,024 bytes in UTF-8', async () => {
    const key = keyOf(1024);
    await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: 'at the limit' }));
    const read = await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: key }));
    expect(await read.Body!.transformToString()).toBe('at the limit');
  });

  it('answers KeyTooLongError for a key of 1,025 bytes, and stores nothing', async () => {
    const key = keyOf(1025);
    const error = await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: 'over' })).then(
      () => undefined,
      (e: { name: string; message: string; $metadata: { httpStatusCode?: number } }) => e,
    );
    expect(error).toMatchObject({ name: 'KeyTooLongError', message: 'Your key is too long', $metadata: { httpStatusCode: 400 } });
    expect([...(await s3.listObjects(BUCKET)).keys()]).toEqual([keyOf(1024)]);
  });
});
