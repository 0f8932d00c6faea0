/** Small helpers for JSON values of unknown shape. */
import { LosslessNumber, isLosslessNumber, parse } from 'lossless-json';

export { LosslessNumber, isLosslessNumber };

/**
 * A JSON number as a value: a JS number when it reads back as exactly the same text (`5`, `0.1`),
 * otherwise a LosslessNumber holding the text (`12345678901234567891`, `1.0`, `1e3`), so no number is
 * ever rounded (two revisions beyond 2^53 must not compare equal).
 */
export function jsonNumber(text: string): number | LosslessNumber {
  const value = Number(text);
  return String(value) === text ? value : new LosslessNumber(text);
}

/**
 * JSON.parse that keeps every number exactly (see jsonNumber). Throws a SyntaxError for text that is
 * not JSON, including an object with a duplicate key.
 */
export function parseJson(text: string): unknown {
  return parse(text, null, jsonNumber);
}

/** A JSON object (not null, an array or a LosslessNumber). */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !isLosslessNumber(value);
}

/** What a JSON value is, with its article, for messages: `null`, `an array`, `an object`, `a number`, `nothing`. */
export function jsonType(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'an array';
  if (isLosslessNumber(value)) return 'a number';
  if (typeof value === 'object') return 'an object';
  return `a ${typeof value}`;
}

/** The value at a dot path (`meta.rev`) inside a JSON object, or undefined when any step is missing. */
export function getPath(value: unknown, path: string): unknown {
  let current: unknown = value;
  for (const segment of path.split('.')) {
    if (!isObject(current) || !Object.hasOwn(current, segment)) return undefined;
    current = current[segment];
  }
  return current;
}
