/**
 * The sync queue's message body (docs/item-sync.md, "Messages"): `{"connection": "<connection id>",
 * "id": "<item id>"}`; without `connection` (`{"id": "<item id>"}`), or when the body does not start
 * with `{` (the bare id, surrounding whitespace trimmed), it belongs to the connection `default`. An
 * id is 1 to 1,024 bytes in UTF-8 with no control characters (itemIdProblem, the one rule every
 * sender and reader of ids applies); a connection id is what functions/shared/connections/connection.ts
 * says. Every problem is a PermanentError whose message is the dead-letter reason; it never quotes
 * the body (which may hold anything).
 */
import { DEFAULT_CONNECTION, validateConnectionId } from '../shared/connections/connection.js';
import { PermanentError } from '../shared/errors.js';
import { isObject, jsonType } from '../shared/json.js';

/** What a message asks for: one item of one connection. */
export interface SyncMessage {
  connection: string;
  id: string;
}

/**
 * The most UTF-8 bytes an item id may have: the bound DynamoDB puts on a sort key (the items table's
 * `id`) and S3 on an object key. A longer id could be stored only under a key derived from it, and
 * the row's `id` would then not be the id a reader looks up.
 */
export const MAX_ID_BYTES = 1024;

/** C0 controls, DEL and C1 controls. */
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f]/;
/** A lone UTF-16 surrogate (JSON can carry one as `\ud800`); it cannot be percent-encoded. */
const LONE_SURROGATE = /\p{Cs}/u;

export function parseMessageBody(body: string): SyncMessage {
  const trimmed = body.trim();
  if (!trimmed.startsWith('{')) return { connection: DEFAULT_CONNECTION, id: validateItemId(trimmed) };

  let parsed: unknown;
  try {
    parsed = JSON.parse(trimmed);
  } catch {
    throw new PermanentError('the message body starts with "{" but is not valid JSON; expected {"id": "<item id>"}');
  }
  if (!isObject(parsed)) {
    throw new PermanentError('the message body is not a JSON object; expected {"id": "<item id>"}');
  }
  // A connection named but not valid is dead with its own reason (connection.ts): never taken for `default`.
  const connection = Object.hasOwn(parsed, 'connection') ? validateConnectionId(parsed['connection']) : DEFAULT_CONNECTION;
  if (!Object.hasOwn(parsed, 'id')) {
    throw new PermanentError('the message body has no "id"; expected {"id": "<item id>"}');
  }
  const id = parsed['id'];
  if (typeof id !== 'string') {
    throw new PermanentError(`the message body's "id" is ${jsonType(id)}, not a string`);
  }
  return { connection, id: validateItemId(id) };
}

/** Characters SQS cannot carry in a message that the id rules (contract) do not already exclude. */
const NOT_SENDABLE = /[\uFFFE\uFFFF]/;

/**
 * The reason an id cannot be sent for the sync (what `npm run enqueue` and the client API check
 * before they send anything): not a valid item id (itemIdProblem: 1 to 1,024 bytes in UTF-8, no
 * control characters, well-formed Unicode), or holding what SQS cannot carry; undefined when it can be.
 */
export function sendableIdProblem(id: string): string | undefined {
  const problem = itemIdProblem(id);
  if (problem !== undefined) return problem;
  const bad = NOT_SENDABLE.exec(id);
  if (bad) {
    return `the item id contains U+${bad[0].charCodeAt(0).toString(16).toUpperCase()} at position ${bad.index}, which SQS cannot carry`;
  }
  return undefined;
}

/** The message body: exactly `{"id":"…"}`, or `{"connection":"…","id":"…"}` when a connection is given. */
export function messageBody(id: string, connection?: string): string {
  return connection === undefined ? JSON.stringify({ id }) : JSON.stringify({ connection, id });
}

/** The reason `id` is not a valid item id (docs/item-sync.md, "Messages"), or undefined when it is one. */
export function itemIdProblem(id: string): string | undefined {
  if (id.length === 0) return 'the item id is empty';
  if (LONE_SURROGATE.test(id)) return 'the item id is not well-formed Unicode (a lone surrogate)';
  const bytes = Buffer.byteLength(id, 'utf8');
  if (bytes > MAX_ID_BYTES) return `the item id is ${bytes} bytes long in UTF-8; the limit is ${MAX_ID_BYTES} bytes`;
  const control = CONTROL_CHARACTER.exec(id);
  if (control) {
    const code = control[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0');
    return `the item id contains a control character (U+${code}) at position ${control.index}`;
  }
  return undefined;
}

/** The id itself, or a PermanentError whose message is the reason (itemIdProblem). */
export function validateItemId(id: string): string {
  const problem = itemIdProblem(id);
  if (problem !== undefined) throw new PermanentError(problem);
  return id;
}
