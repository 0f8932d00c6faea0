/**
 * What a usable item is (docs/item-sync.md, "How each message ends", the dead ones): a JSON object whose `id` is the id
 * asked for, whose `type` is `file` or `folder`, and which holds a revision at the configured dot
 * path, a number or a non-empty string. Anything else is a PermanentError (the record is dead).
 * Error messages name fields and types, never values taken from the body (but the id, shortened).
 */
import { PermanentError } from '../shared/errors.js';
import { getPath, isLosslessNumber, isObject, jsonType } from '../shared/json.js';

export interface ValidItem {
  type: 'file' | 'folder';
  /** The revision as text: a number in its JSON form, a string as is. */
  revision: string;
  item: Record<string, unknown>;
}

export function validateItem(body: unknown, requestedId: string, revisionField: string): ValidItem {
  if (!isObject(body)) {
    throw new PermanentError(`the provider's 200 answer is ${jsonType(body)}, not an item object`);
  }
  const id = body['id'];
  if (typeof id !== 'string') {
    throw new PermanentError(`the provider's item has no string "id" (found ${jsonType(id)})`);
  }
  if (id !== requestedId) {
    throw new PermanentError(`the provider answered with another item (id ${quote(id)}) than the one asked for`);
  }
  const type = body['type'];
  if (type !== 'file' && type !== 'folder') {
    const found =
      type === undefined ? 'no "type"' : typeof type === 'string' ? `type ${quote(type)}` : `${jsonType(type)} as "type"`;
    throw new PermanentError(`the provider's item has ${found}; expected "file" or "folder"`);
  }
  const revision = revisionText(getPath(body, revisionField));
  if (revision === undefined) {
    const found = getPath(body, revisionField);
    const what = found === undefined ? 'no value' : found === '' ? 'an empty string' : jsonType(found);
    throw new PermanentError(
      `the provider's item has ${what} at the revision field "${revisionField}"; expected a number or a non-empty string`,
    );
  }
  return { type, revision, item: body };
}

/** A number in its JSON form (exactly as the provider wrote it when a JS number cannot hold it), a non-empty string as is. */
export function revisionText(value: unknown): string | undefined {
  if (typeof value === 'number' && Number.isFinite(value)) return JSON.stringify(value);
  if (isLosslessNumber(value)) return value.toString();
  if (typeof value === 'string' && value !== '') return value;
  return undefined;
}

function quote(text: string): string {
  const short = text.length > 80 ? `${text.slice(0, 80)}…` : text;
  return JSON.stringify(short);
}
