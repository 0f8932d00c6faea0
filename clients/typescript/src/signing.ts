/**
 * SigV4 signing of the client API's requests (every route is authorized by IAM: docs/client-api.md,
 * "Who may call it"): service `execute-api`, the region given, or read from the API's
 * `<api>.execute-api.<region>.amazonaws.com` host, or AWS_REGION; the credentials given, or the AWS
 * SDK's default chain (`fromNodeProviderChain`: environment, profiles, SSO, web identity, container
 * and instance roles), loaded at the first request and renewed by the chain before they expire.
 *
 * The body's SHA-256 is signed (and sent as `x-amz-content-sha256`). The path is signed as sent,
 * percent-encoded, and encoded once more in the canonical request, as SigV4 does for every service
 * but S3: an id holding `/` goes as `%2F`, signed as `%252F`.
 */
import { Hash } from '@smithy/hash-node';
import { SignatureV4 } from '@smithy/signature-v4';

export interface Credentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiration?: Date;
}

/** A function that answers credentials, such as the AWS SDK's providers. */
export type CredentialsProvider = () => Promise<Credentials>;

/** A request as a SigV4 signer takes it (the fields of Smithy's HttpRequest that are used here). */
export interface SigningRequest {
  method: string;
  protocol: string;
  hostname: string;
  port?: number;
  /** Percent-encoded, as sent. */
  path: string;
  /** Decoded values. */
  query: Record<string, string | string[]>;
  /** Lower-case names; `host` included. */
  headers: Record<string, string>;
  body?: Uint8Array;
}

/** What signs a request: @smithy/signature-v4's SignatureV4, or any signer of the same shape. */
export interface RequestSigner {
  sign(request: SigningRequest, options?: { signingDate?: Date }): Promise<{ headers: Record<string, string> }>;
}

export const SERVICE = 'execute-api';

/** The region of an `https://<api>.execute-api.<region>.amazonaws.com[.cn]/` URL; undefined for another host. */
export function regionOfUrl(url: URL): string | undefined {
  return /^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$/.exec(url.hostname)?.[1];
}

/** The region to sign for: the one given, else the API's host's, else AWS_REGION, else AWS_DEFAULT_REGION. */
export function signingRegion(url: URL, given: string | undefined, env: NodeJS.ProcessEnv = process.env): string | undefined {
  return given ?? regionOfUrl(url) ?? (env['AWS_REGION'] || undefined) ?? (env['AWS_DEFAULT_REGION'] || undefined);
}

let defaultChain: Promise<CredentialsProvider> | undefined;

/** The AWS SDK's default credential chain, loaded once a process (a local API without signing never loads it). */
export const defaultCredentials: CredentialsProvider = async () => {
  defaultChain ??= import('@aws-sdk/credential-providers').then((module) => module.fromNodeProviderChain());
  return (await defaultChain)();
};

/**
 * A SigV4 signer of the client API for `region`; `seen` is told each set of credentials used,
 * so that an error's message can be searched for their secrets.
 */
export function createSigner(options: { region: string; credentials?: Credentials | CredentialsProvider; seen?: (credentials: Credentials) => void }): RequestSigner {
  const given = options.credentials ?? defaultCredentials;
  const provider: CredentialsProvider = typeof given === 'function' ? given : async () => given;
  const credentials: CredentialsProvider = async () => {
    const resolved = await provider();
    options.seen?.(resolved);
    return resolved;
  };
  return new SignatureV4({ service: SERVICE, region: options.region, credentials, sha256: Hash.bind(null, 'sha256') });
}

/**
 * The headers to send `request` with, signed: its own, `x-amz-date`, `x-amz-content-sha256`,
 * `x-amz-security-token` with a session token, and `authorization`. Without `host`: fetch sends
 * the URL's, which is the one signed.
 */
export async function signedHeaders(
  signer: RequestSigner,
  request: { method: string; url: URL; headers: Record<string, string>; body?: Uint8Array | undefined },
  signingDate?: Date,
): Promise<Record<string, string>> {
  const { url } = request;
  const query: Record<string, string | string[]> = {};
  for (const [name, value] of url.searchParams) {
    const before = query[name];
    query[name] = before === undefined ? value : [...(Array.isArray(before) ? before : [before]), value];
  }
  const signed = await signer.sign(
    {
      method: request.method,
      protocol: url.protocol,
      hostname: url.hostname,
      ...(url.port !== '' ? { port: Number(url.port) } : {}),
      path: url.pathname,
      query,
      headers: { ...request.headers, host: url.host },
      ...(request.body !== undefined ? { body: request.body } : {}),
    },
    signingDate === undefined ? {} : { signingDate },
  );
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(signed.headers)) if (name.toLowerCase() !== 'host') headers[name] = value;
  return headers;
}
