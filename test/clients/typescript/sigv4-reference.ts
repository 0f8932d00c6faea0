/**
 * SigV4 written out from AWS's description of it (Signature Version 4, "Create a signed request"),
 * on node:crypto alone, for the client's signing tests: what a request's Authorization header must
 * be, computed apart from @smithy/signature-v4. Checked itself against AWS's published test vector
 * (signing.test.ts).
 */
import { createHash, createHmac } from 'node:crypto';

export interface ReferenceRequest {
  method: string;
  /** The path as sent, percent-encoded. */
  path: string;
  /** The query string as sent, without `?`. */
  query: string;
  /** Lower-case names. */
  headers: Record<string, string>;
  body: Buffer;
  signedHeaders: string[];
}

export interface ReferenceScope {
  accessKeyId: string;
  secretAccessKey: string;
  region: string;
  service: string;
  /** `YYYYMMDDTHHMMSSZ`. */
  amzDate: string;
}

const sha256 = (data: string | Buffer): string => createHash('sha256').update(data).digest('hex');
const hmac = (key: string | Buffer, data: string): Buffer => createHmac('sha256', key).update(data, 'utf8').digest();

/** RFC 3986 encoding: every byte but the unreserved `A-Z a-z 0-9 - . _ ~`. */
export const uriEncode = (text: string): string => encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

export function canonicalRequest(request: ReferenceRequest): string {
  // Every service but S3: each segment of the path as sent, encoded once more.
  const uri = request.path.split('/').map(uriEncode).join('/');
  const query = request.query === '' ? [] : request.query.split('&').map((pair) => pair.split('=').map((part) => uriEncode(decodeURIComponent(part.replace(/\+/g, ' ')))) as [string, string]);
  query.sort(([a, x], [b, y]) => (a < b ? -1 : a > b ? 1 : x! < y! ? -1 : x! > y! ? 1 : 0));
  const names = [...request.signedHeaders].sort();
  const headers = names.map((name) => `${name}:${(request.headers[name] ?? '').trim().replace(/\s+/g, ' ')}\n`).join('');
  return [request.method, uri, query.map(([k, v]) => `${k}=${v ?? ''}`).join('&'), headers, names.join(';'), sha256(request.body)].join('\n');
}

/** The Authorization header AWS expects for `request`. */
export function referenceAuthorization(request: ReferenceRequest, scope: ReferenceScope): string {
  const day = scope.amzDate.slice(0, 8);
  const credentialScope = `${day}/${scope.region}/${scope.service}/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', scope.amzDate, credentialScope, sha256(canonicalRequest(request))].join('\n');
  const key = hmac(hmac(hmac(hmac(`AWS4${scope.secretAccessKey}`, day), scope.region), scope.service), 'aws4_request');
  const signature = createHmac('sha256', key).update(stringToSign, 'utf8').digest('hex');
  return `AWS4-HMAC-SHA256 Credential=${scope.accessKeyId}/${credentialScope}, SignedHeaders=${[...request.signedHeaders].sort().join(';')}, Signature=${signature}`;
}
