/**
 * The ObjectLinks port (../items.ts) on the items bucket (ITEMS_BUCKET_NAME): a presigned GetObject
 * URL (SigV4 query string, signed with the function's own credentials: it reads that one object
 * until it expires). Signing is local: no request is made. A module of its own
 * (../lazy-modules.ts): the S3 client and the signer load at the first item held in the bucket.
 */
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import type { ConfiguredEndpoint } from '../../shared/config.js';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { ObjectLinks } from '../items.js';
import { withoutSdkLogger } from '../../shared/adapters/sdk-client.js';

/** The links of the items bucket, with an S3 client of their own (path-style at a configured endpoint, as the item sync's). */
export function createObjectLinks(bucket: string, endpoint: ConfiguredEndpoint | undefined): ObjectLinks {
  return new S3ObjectLinks(withoutSdkLogger(new S3Client(endpoint ? { endpoint: endpoint.url, forcePathStyle: true } : {})), bucket);
}

export class S3ObjectLinks implements ObjectLinks {
  constructor(
    private readonly s3: S3Client,
    private readonly bucket: string,
  ) {}

  urlFor(key: string, seconds: number): Promise<string> {
    return getSignedUrl(this.s3, new GetObjectCommand({ Bucket: this.bucket, Key: key }), { expiresIn: seconds });
  }
}
