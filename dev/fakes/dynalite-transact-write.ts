/**
 * The TransactWriteItems request and its transaction, with dynalite's own pieces (served over HTTP
 * by dynalite-transactions.ts): DynamoDB's request schema in dynalite's validation framework, each
 * action checked by dynalite's own check of the single-item operation it stands for (PutItem's,
 * UpdateItem's, DeleteItem's, and DeleteItem's for a ConditionCheck, which takes the same members:
 * the same messages, the same expression parser), dynalite's key checks (key sizes in UTF-8 bytes
 * with dynalite-key-sizes.ts), its condition evaluation (`checkConditional`) and its UpdateItem
 * itself (over a store that holds the write back) to apply an UpdateExpression.
 *
 * What DynamoDB refuses before the transaction runs is a ValidationException (or
 * ResourceNotFoundException), as it words it: a member's constraint (1 to 100 actions, a token of 1
 * to 36 characters, an unknown enum value), an action with not exactly one of ConditionCheck, Put,
 * Update and Delete, an expression that does not parse or a name or value it does not use, a Put
 * item over the size limit, an empty or too large key value, an Update of a key attribute, two
 * actions on one item, over 4 MB of items in all. What it can only find out while running is a
 * cancellation reason `ValidationError`: a key that does not match the table's schema (a wrong type,
 * a missing or extra attribute: paritysuite/dynamodb-conformance, captured against AWS), an
 * UpdateExpression that cannot apply to the row, an updated row over the size limit.
 *
 * The transaction: the rows' locks are taken (dynalite's per-table `itemDb.lock`, which its
 * PutItem, UpdateItem and DeleteItem take too) in one order (table, then key), every row read, every
 * action evaluated; then either all the writes are stored in one LevelDB batch (a reader sees all
 * of them or none) and told (`onCommitted`), or nothing is and the answer is TransactionCanceled
 * with one reason per action. Not modelled: TransactionConflict (a transaction waits for the locks
 * where DynamoDB cancels), ItemCollectionMetrics.
 */
import { createRequire } from 'node:module';
import type { CommittedWrite, Row } from './dynalite-commits.js';

/** The most actions in a transaction. */
export const MAX_ACTIONS = 100;
/** The most bytes of items in a transaction, in all. */
export const MAX_TRANSACTION_BYTES = 4 * 1024 * 1024;
export const MULTIPLE_OPERATIONS = 'Transaction request cannot include multiple operations on one item';
export const ONE_ACTION_EACH = 'TransactItems can only contain one of Check, Put, Update or Delete';
/** DynamoDB's wording for this one is not documented; this one says what happened. */
export const TRANSACTION_TOO_LARGE = 'Transaction request size has exceeded the maximum allowed size of 4 MB';
export const CONDITION_FAILED_MESSAGE = 'The conditional request failed';

export type ReasonCode = 'None' | 'ConditionalCheckFailed' | 'ValidationError' | 'TransactionConflict' | 'ThrottlingError' | 'ProvisionedThroughputExceeded';
export interface CancellationReason {
  Code: ReasonCode;
  Message?: string;
  Item?: Row;
}
/** DynamoDB's messages of the reasons the harness can give or inject, word for word (the API reference's, without the final period). */
export const REASON_MESSAGES: Record<Exclude<ReasonCode, 'None' | 'ValidationError'>, string> = {
  ConditionalCheckFailed: CONDITION_FAILED_MESSAGE,
  TransactionConflict: 'Transaction is ongoing for the item',
  ThrottlingError:
    'Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly. ' +
    'If exceptions persist, check if you have a hot key: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html',
  ProvisionedThroughputExceeded:
    'The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API',
};

/** The body of DynamoDB's TransactionCanceledException for these reasons (one per action, in order). */
export function cancellationBody(reasons: readonly CancellationReason[]): Record<string, unknown> {
  return {
    __type: 'com.amazonaws.dynamodb.v20120810#TransactionCanceledException',
    CancellationReasons: reasons,
    Message: `Transaction cancelled, please refer cancellation reasons for specific reasons [${reasons.map((reason) => reason.Code).join(', ')}]`,
  };
}

type Kind = 'ConditionCheck' | 'Put' | 'Update' | 'Delete';
const KINDS: readonly Kind[] = ['ConditionCheck', 'Put', 'Update', 'Delete'];

/** dynalite's error: an Error carrying the HTTP status and the JSON body it answers. */
export type DynaliteError = Error & { statusCode: number; body: Record<string, unknown> };
interface KeyElement {
  AttributeName: string;
  KeyType: string;
}
interface Index {
  IndexName: string;
}
interface Table {
  TableName: string;
  KeySchema: KeyElement[];
  LocalSecondaryIndexes?: Index[];
  GlobalSecondaryIndexes?: Index[];
}
type Release = (done?: () => void) => () => void;
interface ItemDb {
  lock(key: string, exec: (release: Release) => void): void;
  get(key: string, cb: (error: (Error & { name: string }) | null, row?: Row) => void): void;
}
/** The part of dynalite's store (db/index.js `create`) used here. */
export interface Store {
  options: { maxItemSize: number };
  db: { batch(ops: BatchOp[], cb: (error?: Error | null) => void): void };
  getTable(name: string, checkStatus: boolean, cb: (error: DynaliteError | null, table?: Table) => void): void;
  getItemDb(name: string): ItemDb;
}
type BatchOp = { type: 'put'; key: string; value: Row } | { type: 'del'; key: string };

/** One action as validated (dynalite's checks add the parsed `_condition`, `_updates`). */
interface ActionData {
  TableName: string;
  Item?: Row;
  Key?: Row;
  ReturnValuesOnConditionCheckFailure?: string;
  [member: string]: unknown;
}
export interface TransactWriteData {
  TransactItems: Array<Partial<Record<Kind, ActionData>>>;
  ClientRequestToken?: string;
  ReturnConsumedCapacity?: string;
  ReturnItemCollectionMetrics?: string;
}

interface Db {
  validationError(message: string): DynaliteError;
  validateItem(item: Row, table: Table): DynaliteError | undefined | null;
  validateKey(key: Row, table: Table): DynaliteError | undefined | null;
  validateUpdates(attributeUpdates: unknown, updates: unknown, table: Table): DynaliteError | undefined | null;
  createKey(item: Row, table: Table): string;
  checkConditional(data: ActionData, existing: Row | undefined): DynaliteError | undefined | null;
  itemSize(item: Row): number;
  capacityUnits(item: Row | undefined, isRead: boolean, isConsistent?: boolean): number;
  getIndexActions(indexes: Index[], existing: Row | undefined, item: Row | undefined, table: Table): IndexActions;
}
interface IndexActions {
  puts: Array<{ index: string; key: string; item: Row }>;
  deletes: Array<{ index: string; key: string }>;
}
type Custom = (data: ActionData, store: Store) => string | undefined;
type UpdateItem = (store: object, data: ActionData, cb: (error: DynaliteError | null, result?: unknown) => void) => void;

const require = createRequire(import.meta.url);
const db = require('dynalite/db') as Db;
const checks: Record<Kind, Custom> = {
  ConditionCheck: (require('dynalite/validations/deleteItem') as { custom: Custom }).custom,
  Put: (require('dynalite/validations/putItem') as { custom: Custom }).custom,
  Update: (require('dynalite/validations/updateItem') as { custom: Custom }).custom,
  Delete: (require('dynalite/validations/deleteItem') as { custom: Custom }).custom,
};
const updateItem = require('dynalite/actions/updateItem') as UpdateItem;

const TABLE_NAME = { type: 'String', notNull: true, regex: '[a-zA-Z0-9_.-]+', lengthGreaterThanOrEqual: 3, lengthLessThanOrEqual: 255 };
const ATTRIBUTES = { type: 'Map<AttributeValue>', notNull: true, children: 'AttrStruct<ValueStruct>' };
const EXPRESSION_MEMBERS = {
  TableName: TABLE_NAME,
  ConditionExpression: { type: 'String' },
  ExpressionAttributeNames: { type: 'Map<java.lang.String>', children: 'String' },
  ExpressionAttributeValues: { type: 'Map<AttributeValue>', children: 'AttrStruct<ValueStruct>' },
  ReturnValuesOnConditionCheckFailure: { type: 'String', enum: ['ALL_OLD', 'NONE'] },
};

/** The request's members in dynalite's validation framework (validations/index.js), checked in this order. */
export const TRANSACT_WRITE_TYPES = {
  ClientRequestToken: { type: 'String', lengthGreaterThanOrEqual: 1, lengthLessThanOrEqual: 36 },
  ReturnConsumedCapacity: { type: 'String', enum: ['INDEXES', 'TOTAL', 'NONE'] },
  ReturnItemCollectionMetrics: { type: 'String', enum: ['SIZE', 'NONE'] },
  TransactItems: {
    type: 'List',
    notNull: true,
    lengthGreaterThanOrEqual: 1,
    lengthLessThanOrEqual: MAX_ACTIONS,
    children: {
      type: 'ValueStruct<TransactWriteItem>',
      children: {
        ConditionCheck: { type: 'FieldStruct<ConditionCheck>', children: { ...EXPRESSION_MEMBERS, Key: ATTRIBUTES, ConditionExpression: { type: 'String', notNull: true } } },
        Put: { type: 'FieldStruct<Put>', children: { ...EXPRESSION_MEMBERS, Item: ATTRIBUTES } },
        Update: { type: 'FieldStruct<Update>', children: { ...EXPRESSION_MEMBERS, Key: ATTRIBUTES, UpdateExpression: { type: 'String', notNull: true } } },
        Delete: { type: 'FieldStruct<Delete>', children: { ...EXPRESSION_MEMBERS, Key: ATTRIBUTES } },
      },
    },
  },
};

/** The checks after the members' (dynalite's `custom` step): each action in order, by its operation's own check. */
export function checkActions(data: TransactWriteData, store: Store): string | undefined {
  for (const member of data.TransactItems) {
    const kinds = KINDS.filter((kind) => member[kind] !== undefined);
    if (kinds.length !== 1) return ONE_ACTION_EACH;
    const kind = kinds[0]!;
    const problem = checks[kind](member[kind]!, store);
    if (problem) return problem;
  }
  return undefined;
}

interface Action {
  kind: Kind;
  data: ActionData;
  table: Table;
  /** dynalite's key of the row; undefined when the key does not match the schema (`invalid`). */
  key?: string;
  invalid?: string;
}

/** A key problem that cancels the transaction (ValidationError) rather than refusing the request. */
const CANCELLING = /^(The provided key element does not match the schema|One or more parameter values were invalid: (Missing the key|Type mismatch for))/;

/** The actions with their tables and keys, or the ValidationException (ResourceNotFoundException) that refuses the request. */
export async function prepare(store: Store, data: TransactWriteData): Promise<Action[]> {
  const tables = new Map<string, Table>();
  const actions: Action[] = [];
  for (const member of data.TransactItems) {
    const kind = KINDS.find((k) => member[k] !== undefined)!;
    const action = member[kind]!;
    let table = tables.get(action.TableName);
    if (!table) {
      table = await new Promise<Table>((resolve, reject) => store.getTable(action.TableName, true, (error, found) => (error ? reject(error) : resolve(found!))));
      tables.set(action.TableName, table);
    }
    const problem = kind === 'Put' ? db.validateItem(action.Item!, table) : db.validateKey(action.Key!, table);
    if (problem && !CANCELLING.test(problem.message)) throw problem;
    const updates = kind === 'Update' ? db.validateUpdates(undefined, action['_updates'], table) : undefined;
    if (updates) throw updates;
    actions.push({ kind, data: action, table, ...(problem ? { invalid: problem.message } : { key: db.createKey(kind === 'Put' ? action.Item! : action.Key!, table) }) });
  }
  const seen = new Set<string>();
  let bytes = 0;
  for (const action of actions) {
    if (action.key !== undefined) {
      const id = `${action.table.TableName}\u0000${action.key}`;
      if (seen.has(id)) throw db.validationError(MULTIPLE_OPERATIONS);
      seen.add(id);
    }
    bytes += db.itemSize(action.kind === 'Put' ? action.data.Item! : action.data.Key!);
  }
  if (bytes > MAX_TRANSACTION_BYTES) throw db.validationError(TRANSACTION_TOO_LARGE);
  return actions;
}

export interface ConsumedCapacity {
  TableName: string;
  CapacityUnits: number;
  WriteCapacityUnits?: number;
  ReadCapacityUnits?: number;
  Table?: { CapacityUnits: number; WriteCapacityUnits?: number; ReadCapacityUnits?: number };
}

export interface Committed {
  writes: CommittedWrite[];
  /** What the request consumed, when it asked (ReturnConsumedCapacity TOTAL or INDEXES). */
  consumed: ConsumedCapacity[] | undefined;
  /** What a request sent again with the same token consumes (reading the rows). */
  replayConsumed: ConsumedCapacity[] | undefined;
}

/**
 * Runs the transaction: locks, reads, evaluates, then stores every write or none. `onCommitted` is
 * called once the writes are stored, before the locks are let go. Rejects with the
 * TransactionCanceledException when an action's condition (or ValidationError) cancels it.
 */
export async function runTransaction(store: Store, data: TransactWriteData, actions: Action[], onCommitted: (writes: CommittedWrite[]) => void): Promise<Committed> {
  const locked = actions
    .filter((action) => action.key !== undefined)
    .sort((a, b) => compare(a.table.TableName, b.table.TableName) || compare(a.key!, b.key!));
  const releases: Release[] = [];
  try {
    for (const action of locked) {
      releases.push(await new Promise<Release>((resolve) => store.getItemDb(action.table.TableName).lock(action.key!, resolve)));
    }
    const existing = await Promise.all(actions.map((action) => (action.key === undefined ? undefined : read(store, action))));
    const reasons: CancellationReason[] = [];
    const after: Array<Row | undefined> = [];
    for (const [i, action] of actions.entries()) {
      const outcome = await evaluate(store, action, existing[i]);
      reasons.push(outcome.reason);
      after.push(outcome.row);
    }
    if (reasons.some((reason) => reason.Code !== 'None')) {
      throw Object.assign(new Error(cancellationBody(reasons)['Message'] as string), { statusCode: 400, body: cancellationBody(reasons) });
    }
    const writes: CommittedWrite[] = [];
    const ops: BatchOp[] = [];
    for (const [i, action] of actions.entries()) {
      if (action.kind === 'ConditionCheck') continue;
      const { table } = action;
      const oldImage = existing[i];
      const newImage = after[i];
      ops.push(...batchOps(table, action.key!, oldImage, newImage));
      writes.push({ table: table.TableName, keyNames: table.KeySchema.map((element) => element.AttributeName), ...(oldImage ? { oldImage } : {}), ...(newImage ? { newImage } : {}) });
    }
    await new Promise<void>((resolve, reject) => store.db.batch(ops, (error) => (error ? reject(error) : resolve())));
    onCommitted(writes);
    return { writes, consumed: capacity(data, actions, existing, after, false), replayConsumed: capacity(data, actions, existing, after, true) };
  } finally {
    for (const release of releases) release()();
  }
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function read(store: Store, action: Action): Promise<Row | undefined> {
  return new Promise((resolve, reject) =>
    store.getItemDb(action.table.TableName).get(action.key!, (error, row) => {
      if (error && error.name !== 'NotFoundError') return reject(error);
      resolve(error ? undefined : (row ?? undefined));
    }),
  );
}

/** One action's reason, and the row it leaves (its new image; the one it found for a ConditionCheck). */
async function evaluate(store: Store, action: Action, existing: Row | undefined): Promise<{ reason: CancellationReason; row: Row | undefined }> {
  if (action.invalid !== undefined) return { reason: { Code: 'ValidationError', Message: action.invalid }, row: undefined };
  const { data } = action;
  const failed = (): { reason: CancellationReason; row: undefined } => ({
    reason: {
      Code: 'ConditionalCheckFailed',
      Message: CONDITION_FAILED_MESSAGE,
      ...(existing && data.ReturnValuesOnConditionCheckFailure === 'ALL_OLD' ? { Item: existing } : {}),
    },
    row: undefined,
  });
  if (action.kind !== 'Update') {
    if (db.checkConditional(data, existing)) return failed();
    const row = action.kind === 'Put' ? data.Item : action.kind === 'ConditionCheck' ? existing : undefined;
    return { reason: { Code: 'None' }, row };
  }
  const outcome = await stagedUpdate(store, action, existing);
  if ('row' in outcome) return { reason: { Code: 'None' }, row: outcome.row };
  if (String(outcome.error.body['__type']).endsWith('#ConditionalCheckFailedException')) return failed();
  if (String(outcome.error.body['__type']).endsWith('#ValidationException')) return { reason: { Code: 'ValidationError', Message: outcome.error.message }, row: undefined };
  throw outcome.error;
}

/**
 * dynalite's own UpdateItem (its condition, UpdateExpression and size check), run on a store that
 * answers the table and the row already read and holds the write back instead of storing it. The
 * row's lock is already held, so the store's lock is taken at once.
 */
function stagedUpdate(store: Store, action: Action, existing: Row | undefined): Promise<{ row: Row } | { error: DynaliteError }> {
  let written: Row | undefined;
  const noIndexWrite = { put: (_key: string, _row: Row, cb: () => void) => cb(), del: (_key: string, cb: () => void) => cb() };
  const staging = {
    options: store.options,
    getTable: (_name: string, cb: (error: null, table: Table) => void) => cb(null, action.table),
    getItemDb: () => ({
      lock: (_key: string, exec: (release: (done: unknown) => unknown) => void) => exec((done) => done),
      get: (_key: string, cb: (error: null, row: Row | undefined) => void) => cb(null, existing),
      put: (_key: string, row: Row, cb: (error: null) => void) => {
        written = row;
        cb(null);
      },
    }),
    // Index rows are written with the table's, in the commit's batch (batchOps).
    getIndexDb: () => noIndexWrite,
  };
  // UpdateItem builds a new row on the Key it is given: a copy, so the request's stays as it was.
  const data: ActionData = { ...action.data, Key: { ...action.data.Key }, ReturnValues: 'NONE' };
  return new Promise((resolve) => updateItem(staging, data, (error) => resolve(error ? { error } : { row: written! })));
}

/** The LevelDB writes of one row and its secondary index rows (dynalite's key prefixes: db/index.js getItemDb, getIndexDb). */
function batchOps(table: Table, key: string, oldImage: Row | undefined, newImage: Row | undefined): BatchOp[] {
  const ops: BatchOp[] = [newImage ? { type: 'put', key: `item-${table.TableName}~${key}`, value: newImage } : { type: 'del', key: `item-${table.TableName}~${key}` }];
  for (const [type, indexes] of [
    ['local', table.LocalSecondaryIndexes],
    ['global', table.GlobalSecondaryIndexes],
  ] as const) {
    if (!indexes?.length) continue;
    const { puts, deletes } = db.getIndexActions(indexes, oldImage, newImage, table);
    const prefix = (index: string): string => `index-${type}~${table.TableName}~${index}~`;
    for (const del of deletes) ops.push({ type: 'del', key: prefix(del.index) + del.key });
    for (const put of puts) ops.push({ type: 'put', key: prefix(put.index) + put.key, value: put.item });
  }
  return ops;
}

/**
 * ConsumedCapacity by table, as asked: a transactional write costs 2 write units per KB of the
 * larger of the row before and after (a ConditionCheck counted as a write of the row it checks); a
 * request sent again with the same token reads the rows instead, 2 read units per 4 KB.
 */
function capacity(data: TransactWriteData, actions: Action[], before: Array<Row | undefined>, after: Array<Row | undefined>, replay: boolean): ConsumedCapacity[] | undefined {
  if (data.ReturnConsumedCapacity !== 'TOTAL' && data.ReturnConsumedCapacity !== 'INDEXES') return undefined;
  const units = new Map<string, number>();
  for (const [i, action] of actions.entries()) {
    const cost = replay
      ? 2 * db.capacityUnits(after[i] ?? before[i], true, true)
      : 2 * Math.max(db.capacityUnits(before[i], false), db.capacityUnits(after[i], false));
    units.set(action.table.TableName, (units.get(action.table.TableName) ?? 0) + cost);
  }
  const kind = replay ? 'ReadCapacityUnits' : 'WriteCapacityUnits';
  return [...units].map(([TableName, CapacityUnits]) => ({
    TableName,
    CapacityUnits,
    [kind]: CapacityUnits,
    ...(data.ReturnConsumedCapacity === 'INDEXES' ? { Table: { CapacityUnits, [kind]: CapacityUnits } } : {}),
  }));
}
