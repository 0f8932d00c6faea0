/**
 * The guard of a webhook endpoint's URL (contract "Webhooks"): https only, no user name or
 * password, no fragment, at most 2,048 characters, and a host that stands only for public
 * addresses. It runs when an endpoint is put and again before each delivery (DNS may have changed
 * since); a deployment may allow loopback addresses for local runs. Redirects are not followed by
 * the delivery, so the address checked is the address posted to.
 *
 * No message quotes the URL, its user name, password or query (a secret may be there): each names
 * the part at fault.
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';

export const MAX_URL_LENGTH = 2048;

export interface GuardOptions {
  /** Accept loopback addresses (127.0.0.0/8, ::1, localhost): local runs only. */
  readonly allowLoopback?: boolean;
}

/** The addresses a host name stands for; rejects (or answers none) when it does not resolve. */
export type Resolver = (host: string) => Promise<string[]>;

export type EndpointCheck = { ok: true; addresses: string[] } | { ok: false; reason: string };

/** The syntax check: undefined for an acceptable URL, else what is wrong with it. */
export function urlProblem(url: string): string | undefined {
  if (url.length > MAX_URL_LENGTH) return `the URL is longer than ${MAX_URL_LENGTH} characters`;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'the URL is not an absolute URL';
  }
  if (parsed.protocol !== 'https:') return 'the URL must be https';
  if (parsed.username !== '' || parsed.password !== '') return 'the URL must not carry a user name or password';
  if (parsed.hostname === '') return 'the URL has no host';
  // An empty fragment ("…#") leaves `hash` empty but is still serialized; a `#` appears in `href`
  // only as the fragment's start.
  if (parsed.hash !== '' || parsed.href.includes('#')) return 'the URL must not carry a fragment';
  return undefined;
}

interface Range {
  /** The first address, as a number (IPv4) or bigint (IPv6). */
  readonly base: bigint;
  readonly prefix: number;
  readonly cidr: string;
  readonly what: string;
  readonly loopback?: boolean;
}

function range(cidr: string, what: string, loopback = false): Range {
  const [address, prefix] = cidr.split('/') as [string, string];
  const base = isIP(address) === 4 ? ipv4Value(address) : ipv6Value(address);
  return { base, prefix: Number(prefix), cidr, what, loopback };
}

/** Non-public IPv4 ranges, the narrower before any wider one holding it. */
const IPV4_RANGES: readonly Range[] = [
  range('0.0.0.0/8', 'a "this network" address'),
  range('10.0.0.0/8', 'a private address'),
  range('100.64.0.0/10', 'a shared (carrier-grade NAT) address'),
  range('127.0.0.0/8', 'a loopback address', true),
  range('169.254.0.0/16', 'a link-local address (cloud metadata among them)'),
  range('172.16.0.0/12', 'a private address'),
  range('192.0.0.0/24', 'an IETF protocol assignment address'),
  range('192.0.2.0/24', 'a documentation address'),
  range('192.168.0.0/16', 'a private address'),
  range('198.18.0.0/15', 'a benchmarking address'),
  range('198.51.100.0/24', 'a documentation address'),
  range('203.0.113.0/24', 'a documentation address'),
  range('224.0.0.0/4', 'a multicast address'),
  range('255.255.255.255/32', 'the broadcast address'),
  range('240.0.0.0/4', 'a reserved address'),
];

/** IPv6 ranges that embed an IPv4 address in their last 32 bits: it is classified instead. */
const IPV6_EMBEDDING: readonly Range[] = [
  range('::ffff:0:0/96', 'an IPv4-mapped address'),
  range('64:ff9b::/96', 'a NAT64 address'),
];

/** Non-public IPv6 ranges; then anything outside global unicast (2000::/3) is refused too. */
const IPV6_RANGES: readonly Range[] = [
  range('::/128', 'the unspecified address'),
  range('::1/128', 'a loopback address', true),
  range('fc00::/7', 'a unique local address (EC2 metadata fd00:ec2::254 among them)'),
  range('fe80::/10', 'a link-local address'),
  range('ff00::/8', 'a multicast address'),
  range('2001:db8::/32', 'a documentation address'),
  range('2000::/3', 'a global unicast address'),
];

function inRange(value: bigint, bits: number, r: Range): boolean {
  const shift = BigInt(bits - r.prefix);
  return value >> shift === r.base >> shift;
}

function ipv4Value(address: string): bigint {
  return address.split('.').reduce((value, part) => (value << 8n) | BigInt(Number(part)), 0n);
}

/** The 128-bit value of a valid IPv6 address (zone id dropped, a trailing dotted IPv4 accepted). */
function ipv6Value(address: string): bigint {
  const bare = address.split('%')[0] as string;
  const hextets = (part: string): number[] => {
    if (part === '') return [];
    return part.split(':').flatMap((piece) => {
      if (!piece.includes('.')) return [parseInt(piece, 16)];
      const v4 = Number(ipv4Value(piece));
      return [v4 >>> 16, v4 & 0xffff];
    });
  };
  const [head, tail] = bare.split('::') as [string, string | undefined];
  const left = hextets(head);
  const right = tail === undefined ? [] : hextets(tail);
  const all = [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right];
  return all.reduce((value, hextet) => (value << 16n) | BigInt(hextet), 0n);
}

function ipv4Text(value: bigint): string {
  return [24n, 16n, 8n, 0n].map((shift) => String((value >> shift) & 0xffn)).join('.');
}

function ipv4Problem(value: bigint, options: GuardOptions): string | undefined {
  const hit = IPV4_RANGES.find((r) => inRange(value, 32, r));
  if (hit === undefined || (hit.loopback && options.allowLoopback)) return undefined;
  return `${hit.what} (${hit.cidr})`;
}

/**
 * Undefined for a public IP address (v4 or v6), else a short reason naming the range it is in,
 * e.g. "a private address (10.0.0.0/8)". Anything not an IP literal is refused.
 */
export function addressProblem(address: string, options: GuardOptions = {}): string | undefined {
  const version = isIP(address);
  if (version === 4) return ipv4Problem(ipv4Value(address), options);
  if (version !== 6) return 'not an IP address';
  const value = ipv6Value(address);
  const embedding = IPV6_EMBEDDING.find((r) => inRange(value, 128, r));
  if (embedding !== undefined) {
    const embedded = ipv4Problem(value & 0xffffffffn, options);
    if (embedded === undefined) return undefined;
    return `${embedded} as ${embedding.what} (${embedding.cidr}, ${ipv4Text(value & 0xffffffffn)})`;
  }
  const hit = IPV6_RANGES.find((r) => inRange(value, 128, r));
  if (hit === undefined) return 'an address outside global unicast (outside 2000::/3)';
  if (hit.cidr === '2000::/3' || (hit.loopback && options.allowLoopback)) return undefined;
  return `${hit.what} (${hit.cidr})`;
}

function isLocalhostName(host: string): boolean {
  const name = host.toLowerCase().replace(/\.$/, '');
  return name === 'localhost' || name.endsWith('.localhost');
}

/**
 * The whole check of an endpoint: its syntax, then the addresses its host stands for. An IP
 * literal host is checked itself; `localhost` and `*.localhost` are loopback without asking DNS;
 * any other name must resolve, and every address it resolves to must be public (one bad address
 * refuses the URL: DNS rebinding). On success, the addresses checked, for the delivery to connect
 * to (so that a second resolution cannot swap them).
 */
export async function checkEndpoint(url: string, resolve: Resolver, options: GuardOptions = {}): Promise<EndpointCheck> {
  const syntax = urlProblem(url);
  if (syntax !== undefined) return { ok: false, reason: syntax };
  const hostname = new URL(url).hostname;
  const host = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;

  if (isIP(host) !== 0) {
    const problem = addressProblem(host, options);
    return problem === undefined ? { ok: true, addresses: [host] } : { ok: false, reason: `its host is ${problem}` };
  }
  if (isLocalhostName(host)) {
    return options.allowLoopback
      ? { ok: true, addresses: ['127.0.0.1', '::1'] }
      : { ok: false, reason: 'its host is a loopback name (localhost)' };
  }

  let addresses: string[];
  try {
    addresses = [...new Set(await resolve(host))];
  } catch {
    return { ok: false, reason: 'its host does not resolve' };
  }
  if (addresses.length === 0) return { ok: false, reason: 'its host does not resolve' };
  for (const address of addresses) {
    if (isIP(address) === 0) return { ok: false, reason: 'its host resolves to something not an IP address' };
    const problem = addressProblem(address, options);
    if (problem !== undefined) return { ok: false, reason: `its host resolves to ${problem}` };
  }
  return { ok: true, addresses };
}

/** The production resolver: every address the system resolver gives, in its order. */
export const dnsResolver: Resolver = async (host) => {
  const answers = await lookup(host, { all: true, verbatim: true });
  return answers.map((answer) => answer.address);
};
