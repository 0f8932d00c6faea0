/**
 * DynamoDB's key size limits for dynalite, counted as DynamoDB counts them: a partition key up to
 * 2,048 bytes and a sort key up to 1,024 bytes, a string in its UTF-8 bytes, a binary in its bytes
 * (a number has no such limit). dynalite counts a string in UTF-16 code units, so an id of 600 `é`
 * (1,200 bytes in UTF-8) passes it and fails in AWS; with checkKeySizesInBytes, it fails here too.
 *
 * The check is added to dynalite's own key validation (its `db` module), which every request that
 * takes a key goes through: PutItem and BatchWriteItem puts (the item's key), GetItem, UpdateItem,
 * DeleteItem, BatchGetItem and BatchWriteItem deletes (the key), Query and Scan (ExclusiveStartKey),
 * and Query's key condition on the table's partition key. dynalite runs its own checks first; a key
 * they let through but that is too large in bytes is answered as DynamoDB answers it: HTTP 400,
 * ValidationException, with DynamoDB's messages word for word (the partition key's lacks a space
 * before 2048 in AWS's answers too). TransactWriteItems (dynalite-transactions.ts) checks each
 * action's key with the same functions (a Put's item, the other actions' key): a key too large is
 * refused before the transaction runs, as DynamoDB refuses it. No table of the harness has a
 * secondary index.
 *
 * Applied once per process, to every dynalite server of that process: dynalite.ts applies it in this
 * process, and dynalite-child.ts in a child process.
 */
import { createRequire } from 'node:module';

/** The most bytes of a partition key (hash key). */
export const MAX_PARTITION_KEY_BYTES = 2048;
/** The most bytes of a sort key (range key). */
export const MAX_SORT_KEY_BYTES = 1024;

export const PARTITION_KEY_TOO_LARGE =
  'One or more parameter values were invalid: Size of hashkey has exceeded the maximum size limit of2048 bytes';
export const SORT_KEY_TOO_LARGE = 'One or more parameter values were invalid: Aggregated size of all range keys has exceeded the size limit of 1024 bytes';

/** An attribute value as dynalite holds it (the JSON of the request): `{"S": "…"}`, `{"B": "<base64>"}`, `{"N": "…"}`… */
type Value = Record<string, unknown>;
interface KeyElement {
  AttributeName: string;
  KeyType: string;
}
interface Table {
  KeySchema: KeyElement[];
}
/** dynalite's error: an Error carrying the HTTP status and the JSON body it answers. */
type DynaliteError = Error & { statusCode: number; body: unknown };
type Check = DynaliteError | undefined | null;

/** The part of dynalite's `db` module that is wrapped. */
interface DynaliteDb {
  validationError(message: string): DynaliteError;
  validateItem(item: Record<string, Value>, table: Table): Check;
  validateKey(key: Record<string, Value>, table: Table, keySchema?: KeyElement[]): Check;
  validateKeyPiece(key: Record<string, Value>, attr: string, type: string, isHash: boolean): Check;
  queryTable(store: unknown, table: Table, data: QueryData, ...rest: unknown[]): void;
}
interface QueryData {
  IndexName?: string;
  KeyConditions?: Record<string, { AttributeValueList?: Value[] }>;
}

const CHECKED = Symbol.for('content-sync.dynalite-key-bytes');

/** The size DynamoDB counts for a key value: a string's UTF-8 bytes, a binary's bytes; undefined for anything else. */
export function keyValueBytes(value: Value | undefined): number | undefined {
  if (value === undefined || value === null || typeof value !== 'object') return undefined;
  if (typeof value['S'] === 'string') return Buffer.byteLength(value['S'], 'utf8');
  if (typeof value['B'] === 'string') return Buffer.from(value['B'], 'base64').byteLength;
  return undefined;
}

/** DynamoDB's message for a key value over its limit, or undefined. */
export function keySizeProblem(value: Value | undefined, isPartitionKey: boolean): string | undefined {
  const bytes = keyValueBytes(value);
  if (bytes === undefined) return undefined;
  if (isPartitionKey) return bytes > MAX_PARTITION_KEY_BYTES ? PARTITION_KEY_TOO_LARGE : undefined;
  return bytes > MAX_SORT_KEY_BYTES ? SORT_KEY_TOO_LARGE : undefined;
}

/** Makes the dynalite of this process check key sizes in bytes (once; calling it again changes nothing). */
export function checkKeySizesInBytes(): void {
  const db = createRequire(import.meta.url)('dynalite/db') as DynaliteDb & { [CHECKED]?: true };
  if (db[CHECKED]) return;
  db[CHECKED] = true;

  const problemOf = (values: Record<string, Value>, keySchema: readonly KeyElement[]): Check => {
    for (const element of keySchema) {
      const problem = keySizeProblem(values[element.AttributeName], element.KeyType === 'HASH');
      if (problem !== undefined) return db.validationError(problem);
    }
    return undefined;
  };

  const { validateItem, validateKey, validateKeyPiece, queryTable } = db;
  db.validateItem = (item, table) => validateItem(item, table) ?? problemOf(item, table.KeySchema);
  db.validateKey = (key, table, keySchema) => validateKey(key, table, keySchema) ?? problemOf(key, keySchema ?? table.KeySchema);
  db.validateKeyPiece = (key, attr, type, isHash) => {
    const found = validateKeyPiece(key, attr, type, isHash);
    if (found) return found;
    const problem = keySizeProblem(key[attr], isHash);
    return problem === undefined ? undefined : db.validationError(problem);
  };
  // Every Query ends here, after dynalite's own checks; the callback is the last argument.
  db.queryTable = (store, table, data, ...rest) => {
    const partitionKey = table.KeySchema.find((element) => element.KeyType === 'HASH')?.AttributeName;
    if (data.IndexName === undefined && partitionKey !== undefined) {
      const problem = keySizeProblem(data.KeyConditions?.[partitionKey]?.AttributeValueList?.[0], true);
      if (problem !== undefined) {
        const callback = rest[rest.length - 1] as (error: DynaliteError) => void;
        return callback(db.validationError(problem));
      }
    }
    return queryTable(store, table, data, ...rest);
  };
}
