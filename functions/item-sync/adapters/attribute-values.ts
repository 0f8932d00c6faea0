/**
 * JSON values as DynamoDB AttributeValues and back, and the size DynamoDB counts for a row: the
 * items table's marshalling (dynamodb-item-store.ts). NULL, BOOL, N, S, L and M only; a number is
 * stored as N with its JSON text, so it reads back as the same number.
 */
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { PermanentError } from '../../shared/errors.js';
import { isLosslessNumber, jsonNumber } from '../../shared/json.js';

/** DynamoDB's limit of nested levels in a map or list. */
export const MAX_NESTING = 32;

/** A JSON value as a DynamoDB AttributeValue. Throws a PermanentError for what JSON cannot hold. */
export function toAttributeValue(value: unknown, depth = 0): AttributeValue {
  if (value === null) return { NULL: true };
  switch (typeof value) {
    case 'string':
      return { S: value };
    case 'boolean':
      return { BOOL: value };
    case 'number':
      if (!Number.isFinite(value)) throw new PermanentError(`the item holds a number DynamoDB cannot store (${value})`);
      return { N: JSON.stringify(value) };
    case 'object': {
      if (isLosslessNumber(value)) return { N: value.toString() };
      if (depth >= MAX_NESTING) {
        throw new PermanentError(`the item is nested more than ${MAX_NESTING} levels deep; DynamoDB cannot store it`);
      }
      if (Array.isArray(value)) return { L: value.map((element) => toAttributeValue(element, depth + 1)) };
      const map: Record<string, AttributeValue> = {};
      for (const [key, element] of Object.entries(value as Record<string, unknown>)) {
        map[key] = toAttributeValue(element, depth + 1);
      }
      return { M: map };
    }
    default:
      throw new PermanentError(`the item holds a ${typeof value}, which is not a JSON value`);
  }
}

/** The JSON value an AttributeValue written by toAttributeValue stands for (N back to a number, exactly: see jsonNumber). */
export function fromAttributeValue(value: AttributeValue): unknown {
  if (value.NULL) return null;
  if (value.S !== undefined) return value.S;
  if (value.N !== undefined) return jsonNumber(value.N);
  if (value.BOOL !== undefined) return value.BOOL;
  if (value.L !== undefined) return value.L.map(fromAttributeValue);
  if (value.M !== undefined) {
    const out: Record<string, unknown> = {};
    for (const [key, element] of Object.entries(value.M)) out[key] = fromAttributeValue(element);
    return out;
  }
  throw new TypeError(`unsupported attribute value type ${Object.keys(value).join(',')}`);
}

/**
 * The size DynamoDB counts for an item (its documented rules): attribute names and strings in UTF-8
 * bytes, numbers about one byte per two significant digits plus one, 1 byte for BOOL and NULL,
 * 3 bytes per map or list plus 1 byte per element.
 */
export function estimateItemSize(item: Record<string, AttributeValue>): number {
  let size = 0;
  for (const [name, value] of Object.entries(item)) size += Buffer.byteLength(name, 'utf8') + valueSize(value);
  return size;
}

function valueSize(value: AttributeValue): number {
  if (value.S !== undefined) return Buffer.byteLength(value.S, 'utf8');
  if (value.N !== undefined) {
    const digits = value.N.replace(/^-/, '').replace(/e.*$/i, '').replace('.', '').replace(/^0+/, '').replace(/0+$/, '');
    return Math.ceil(Math.max(1, digits.length) / 2) + 1 + (value.N.startsWith('-') ? 1 : 0);
  }
  if (value.BOOL !== undefined || value.NULL !== undefined) return 1;
  if (value.L !== undefined) return 3 + value.L.reduce((sum, element) => sum + 1 + valueSize(element), 0);
  if (value.M !== undefined) {
    return 3 + Object.entries(value.M).reduce((sum, [key, element]) => sum + 1 + Buffer.byteLength(key, 'utf8') + valueSize(element), 0);
  }
  return 0;
}
