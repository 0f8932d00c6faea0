/**
 * S3 for the harness: s3rver (a real S3 API over HTTP, objects in files) on 127.0.0.1 with an
 * ephemeral port, the one way the tests, the local run, the bench and the soak start it. Clients
 * use path-style requests (`forcePathStyle`), as s3rver serves no virtual-host buckets on an IP
 * address. s3rver accepts only its own access key (S3RVER): every client made here signs with it.
 *
 * s3rver checks no signature and no checksum (a wrong ChecksumSHA256 is accepted, none is echoed
 * back): the harness compares sizes and SHA-256 digests itself (readItemObject). Its last release
 * is years old: for development and tests only. It has no limit on the length of an object key:
 * S3's, 1,024 bytes in UTF-8, is checked in front of it (refuseLongKeys), with S3's answer.
 *
 * Also here: reading an item object back as the items table's `itemObject` describes it, for the
 * checks of the local run and the soak.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CreateBucketCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import S3rver from 's3rver';
import { parseJson, isObject } from '../../functions/shared/json.js';
import { LOCAL_REGION, withoutSdkLogger } from './local-aws.js';

/** The only key s3rver knows. */
export const S3_LOCAL_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } as const;

export interface S3StartOptions {
  /** Folder for the objects (created if need be, kept at close); a temporary one, removed at close, when undefined. */
  directory?: string;
}

export interface LocalS3 {
  /** `http://127.0.0.1:<port>` */
  endpoint: string;
  /** Where the objects are kept. */
  directory: string;
  /** A path-style client for this endpoint (region and s3rver's key set). */
  client(config?: S3ClientConfig): S3Client;
  /** Creates the bucket unless it exists. */
  createBucket(name: string): Promise<void>;
  /** Every key in the bucket (under `prefix`), with its size, in key order. */
  listObjects(bucket: string, prefix?: string): Promise<Map<string, number>>;
  close(): Promise<void>;
}

export async function startS3(options: S3StartOptions = {}): Promise<LocalS3> {
  const temporary = options.directory === undefined;
  const directory = options.directory ?? mkdtempSync(join(tmpdir(), 'content-sync-s3-'));
  mkdirSync(directory, { recursive: true });
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory });
  const address = await server.run();
  refuseLongKeys(server.httpServer!);
  const endpoint = `http://127.0.0.1:${address.port}`;
  const client = (config: S3ClientConfig = {}): S3Client =>
    withoutSdkLogger(new S3Client({ endpoint, region: LOCAL_REGION, credentials: S3_LOCAL_CREDENTIALS, forcePathStyle: true, ...config }));
  const admin = client();
  return {
    endpoint,
    directory,
    client,
    async createBucket(name) {
      try {
        await admin.send(new CreateBucketCommand({ Bucket: name }));
      } catch (error) {
        const code = (error as { name?: string }).name;
        if (code !== 'BucketAlreadyOwnedByYou' && code !== 'BucketAlreadyExists') throw error;
      }
    },
    listObjects: (bucket, prefix) => listObjects(admin, bucket, prefix),
    async close() {
      admin.destroy();
      // Pooled keep-alive sockets of the clients would hold close() until they time out.
      server.httpServer?.closeAllConnections();
      await server.close();
      if (temporary) rmSync(directory, { recursive: true, force: true });
    },
  };
}

/** S3's limit on an object key: 1,024 bytes in UTF-8. */
export const MAX_OBJECT_KEY_BYTES = 1024;

/**
 * The UTF-8 bytes of the object key of a path-style request (`/<bucket>/<key>`, the key
 * percent-encoded), or undefined when the request names no object (or its path cannot be decoded:
 * s3rver answers it).
 */
export function objectKeyBytes(url: string): number | undefined {
  const path = url.split('?', 1)[0]!;
  const slash = path.indexOf('/', 1);
  if (!path.startsWith('/') || slash < 0 || slash === path.length - 1) return undefined;
  try {
    return Buffer.byteLength(decodeURIComponent(path.slice(slash + 1)), 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * Answers a request for an object whose key is over MAX_OBJECT_KEY_BYTES as S3 does (HTTP 400,
 * KeyTooLongError, "Your key is too long"), before s3rver sees it; passes every other request on.
 */
function refuseLongKeys(httpServer: Server): void {
  const handlers = httpServer.listeners('request') as Array<(req: IncomingMessage, res: ServerResponse) => void>;
  httpServer.removeAllListeners('request');
  httpServer.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const size = objectKeyBytes(req.url ?? '');
    if (size === undefined || size <= MAX_OBJECT_KEY_BYTES) {
      for (const handler of handlers) handler(req, res);
      return;
    }
    req.resume();
    const body =
      '<?xml version="1.0" encoding="UTF-8"?>\n' +
      `<Error><Code>KeyTooLongError</Code><Message>Your key is too long</Message><Size>${size}</Size><MaxSizeAllowed>${MAX_OBJECT_KEY_BYTES}</MaxSizeAllowed></Error>`;
    res.writeHead(400, { 'Content-Type': 'application/xml', 'Content-Length': Buffer.byteLength(body), 'x-amz-error-code': 'KeyTooLongError' });
    res.end(req.method === 'HEAD' ? undefined : body);
  });
}

/** Every key in the bucket (under `prefix`), with its size, in key order (all pages). */
export async function listObjects(s3: S3Client, bucket: string, prefix?: string): Promise<Map<string, number>> {
  const objects = new Map<string, number>();
  let token: string | undefined;
  do {
    const page = await s3.send(
      new ListObjectsV2Command({ Bucket: bucket, ...(prefix ? { Prefix: prefix } : {}), ...(token ? { ContinuationToken: token } : {}) }),
    );
    for (const object of page.Contents ?? []) if (object.Key !== undefined) objects.set(object.Key, object.Size ?? 0);
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  return objects;
}

/** An `itemObject` attribute, unmarshalled. */
export interface ItemObjectPointer {
  key: string;
  size: number;
  sha256: string;
}

/** The item an `itemObject` row points to, read back and checked; or why it could not be. */
export type ItemObjectRead =
  | { kind: 'found'; item: Record<string, unknown> }
  /** No such object: the row points to nothing. */
  | { kind: 'missing' }
  /** The object is there, but its size, digest or content is not what the row says. */
  | { kind: 'mismatch'; why: string }
  /** S3 could not be asked (the check cannot say anything about this row). */
  | { kind: 'unreadable'; error: string };

/** The pointer of an unmarshalled row, or undefined when the row has no well-formed `itemObject`. */
export function itemObjectOf(row: Record<string, unknown>): ItemObjectPointer | undefined {
  const pointer = row['itemObject'];
  if (!isObject(pointer)) return undefined;
  const { key, size, sha256 } = pointer;
  if (typeof key !== 'string' || typeof sha256 !== 'string' || typeof size !== 'number') return undefined;
  return { key, size, sha256 };
}

/** Reads the object, checks its size and SHA-256 against the pointer, parses it as the sync parses items. */
export async function readItemObject(s3: S3Client, bucket: string, pointer: ItemObjectPointer): Promise<ItemObjectRead> {
  let body: Buffer;
  try {
    const output = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: pointer.key }));
    body = Buffer.from(await output.Body!.transformToByteArray());
  } catch (error) {
    const name = (error as { name?: string }).name;
    if (name === 'NoSuchKey' || name === 'NotFound') return { kind: 'missing' };
    return { kind: 'unreadable', error: `${name ?? 'Error'}: ${(error as Error).message}` };
  }
  if (body.byteLength !== pointer.size) return { kind: 'mismatch', why: `${body.byteLength} bytes, the row says ${pointer.size}` };
  const digest = createHash('sha256').update(body).digest('hex');
  if (digest !== pointer.sha256) return { kind: 'mismatch', why: `SHA-256 ${digest}, the row says ${pointer.sha256}` };
  let item: unknown;
  try {
    item = parseJson(body.toString('utf8'));
  } catch (error) {
    return { kind: 'mismatch', why: `not JSON (${(error as Error).message})` };
  }
  if (!isObject(item)) return { kind: 'mismatch', why: 'not a JSON object' };
  return { kind: 'found', item };
}
