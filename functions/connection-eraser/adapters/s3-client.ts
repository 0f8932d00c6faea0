/**
 * The eraser's S3 client, in a module of its own (../lazy-modules.ts): loaded when an erase first
 * deletes objects, so the S3 client is not part of the cold start's index.mjs.
 */
import { S3Client } from '@aws-sdk/client-s3';
import { withoutSdkLogger } from '../../shared/adapters/sdk-client.js';

export function createS3Client(): S3Client {
  return withoutSdkLogger(new S3Client({}));
}
