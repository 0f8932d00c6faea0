/**
 * How the provider model (provider-model.ts) reads requests and writes its answers: routes, bearer
 * tokens, error bodies, revisions, fault checks.
 */
import type { Fault, ProviderAnswer } from './provider-types.js';

export const JSON_TYPE = 'application/json; charset=utf-8';

export function normalizePrefix(prefix: string): string {
  let p = prefix.trim().replace(/\/+$/, '');
  if (p !== '' && !p.startsWith('/')) p = `/${p}`;
  return p;
}

export function bearer(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const m = /^\s*bearer\s+(\S+)\s*$/i.exec(header);
  return m?.[1];
}

export function errorBody(code: number, message: string): string {
  return JSON.stringify({ error: { code, message } });
}

export function defaultMessage(status: number): string {
  switch (status) {
    case 400: return 'bad request';
    case 401: return 'unauthorized';
    case 403: return 'forbidden';
    case 404: return 'not found';
    case 408: return 'request timeout';
    case 429: return 'too many requests';
    case 500: return 'internal server error';
    case 502: return 'bad gateway';
    case 503: return 'service unavailable';
    case 504: return 'gateway timeout';
    default: return `simulated status ${status}`;
  }
}

export function splitPath(path: string): string[] {
  const parts = path.split('.');
  if (parts.some((p) => p === '')) throw new Error(`invalid revision field path "${path}"`);
  return parts;
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function nextStringRevision(value: string): string {
  const m = /^(.*?)(\d+)$/.exec(value);
  if (!m) return `${value}-1`;
  const digits = m[2]!;
  const next = (BigInt(digits) + 1n).toString().padStart(digits.length, '0');
  return `${m[1]}${next}`;
}

export function validateFault(fault: Fault): void {
  switch (fault.kind) {
    case 'status':
      if (!Number.isInteger(fault.status) || fault.status < 200 || fault.status > 999) {
        throw new RangeError(`fault status must be an integer 200..999, got ${fault.status}`);
      }
      return;
    case 'body':
      if (fault.status !== undefined && (!Number.isInteger(fault.status) || fault.status < 200 || fault.status > 999)) {
        throw new RangeError(`fault status must be an integer 200..999, got ${fault.status}`);
      }
      return;
    case 'delay':
      if (!Number.isFinite(fault.ms) || fault.ms < 0) throw new RangeError(`delay ms must be >= 0, got ${fault.ms}`);
      return;
    case 'drop':
    case 'hang':
      return;
    default:
      throw new RangeError(`unknown fault kind ${(fault as { kind: unknown }).kind as string}`);
  }
}

export function response(
  status: number,
  body: string | Buffer,
  contentType: string = JSON_TYPE,
  headers: Record<string, string> = {},
): ProviderAnswer {
  return { kind: 'response', status, body, contentType, headers };
}
