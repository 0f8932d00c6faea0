/**
 * The items table (docs/configuration.md, "The items table") as the ItemStore port, over @aws-sdk/client-dynamodb.
 * Its key: partition key `connection` (S), sort key `id` (S); every row carries both.
 *
 * Marshalling (attribute-values.ts) is done here rather than with @aws-sdk/util-dynamodb (not a
 * dependency): JSON values only need NULL, BOOL, N, S, L and M. A number is stored as N with its
 * JSON text, so it reads back as the same number; empty strings are stored as they are (DynamoDB
 * accepts them outside keys).
 *
 * A row holds the item in `item`, or, for an item too large for a row, `itemObject` ({key, size,
 * sha256}) in its place (item-writer.ts decides, on this store's answer).
 *
 * Every write is one single-item write (PutItem, or UpdateItem for a tombstone and for removing a
 * folder's `childrenPending`): a change it makes reaches the changes feed through the table's stream
 * (functions/changes-writer), not from here. Removing `childrenPending` changes no revision, no
 * liveness and no `syncedAt`: it is no change there, nor a change event.
 *
 * Failures: a lost condition is the result 'conflict'; a row holding `item` over DynamoDB's size
 * limit (by the estimate, then nothing is sent, or as DynamoDB answers) is the result 'too-large';
 * a row or key DynamoDB can never take otherwise (a key over its size limit, a number out of range,
 * nesting too deep) is a PermanentError whose message is the dead-letter reason, quoting DynamoDB's
 * (awsFailure); anything else that survived the SDK's own retries (throttling, 5xx, network) is a
 * TransientError.
 */
import {
  BatchGetItemCommand,
  ConditionalCheckFailedException,
  PutItemCommand,
  UpdateItemCommand,
  type AttributeValue,
  type DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import { backoffDelayMs, sleepMs } from '../../shared/backoff.js';
import { PermanentError, TransientError } from '../../shared/errors.js';
import { estimateItemSize, fromAttributeValue, toAttributeValue } from './attribute-values.js';
import { isSizeRefusal } from './size-refusal.js';
import type { ExpectedRow, ItemKey, ItemRow, ItemStore, PutResult, RowState, StoredItem, StoredRevision, StoredRevisions, WriteResult } from '../ports.js';

// The marshalling (attribute-values.ts), kept importable from here.
export { estimateItemSize, fromAttributeValue, MAX_NESTING, toAttributeValue } from './attribute-values.js';

/** DynamoDB's item size limit, 400 KB. */
export const MAX_ITEM_BYTES = 400 * 1024;
const BATCH_GET_LIMIT = 100;

export interface DynamoDbItemStoreOptions {
  /** Rounds of BatchGetItem for UnprocessedKeys before giving up; default 8. */
  unprocessedRounds?: number;
  /** Backoff between those rounds: base × 2^round, jittered, capped at 1 s; default 50 ms. */
  backoffBaseMs?: number;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
}

export class DynamoDbItemStore implements ItemStore {
  private readonly unprocessedRounds: number;
  private readonly backoffBaseMs: number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: () => number;

  constructor(
    private readonly client: DynamoDBClient,
    readonly tableName: string,
    options: DynamoDbItemStoreOptions = {},
  ) {
    this.unprocessedRounds = options.unprocessedRounds ?? 8;
    this.backoffBaseMs = options.backoffBaseMs ?? 50;
    this.sleep = options.sleep ?? sleepMs;
    this.random = options.random ?? Math.random;
  }

  async getRevisions(itemKeys: readonly ItemKey[], options: { consistent?: boolean } = {}): Promise<StoredRevisions> {
    const result: StoredRevisions = new Map();
    // One key per item (BatchGetItem refuses a key given twice); the keys may mix connections.
    const unique = [...new Map(itemKeys.map((key) => [JSON.stringify([key.connection, key.id]), key])).values()];
    for (let start = 0; start < unique.length; start += BATCH_GET_LIMIT) {
      let keys: Array<Record<string, AttributeValue>> = unique.slice(start, start + BATCH_GET_LIMIT).map(keyAttributes);
      for (let round = 0; keys.length > 0; round += 1) {
        if (round > 0) {
          if (round >= this.unprocessedRounds) {
            throw new TransientError(
              `DynamoDB left ${keys.length} keys unprocessed after ${round} BatchGetItem calls (throttled)`,
            );
          }
          // The step of round r is base × 2^r (attempt r + 1 of the helper), equal jitter.
          await this.sleep(backoffDelayMs(round + 1, { baseMs: this.backoffBaseMs, capMs: 1_000, jitter: 'equal' }, this.random));
        }
        let output;
        try {
          output = await this.client.send(
            new BatchGetItemCommand({
              RequestItems: {
                [this.tableName]: {
                  Keys: keys,
                  ProjectionExpression: '#connection, #id, #revision, #deleted, #itemObject, #syncedAt, #childrenPending',
                  ExpressionAttributeNames: {
                    '#connection': 'connection',
                    '#id': 'id',
                    '#revision': 'revision',
                    '#deleted': 'deleted',
                    '#itemObject': 'itemObject',
                    '#syncedAt': 'syncedAt',
                    '#childrenPending': 'childrenPending',
                  },
                  ...(options.consistent ? { ConsistentRead: true } : {}),
                },
              },
            }),
          );
        } catch (cause) {
          throw awsFailure('BatchGetItem', cause);
        }
        for (const row of output.Responses?.[this.tableName] ?? []) {
          const connection = row['connection']?.S;
          const id = row['id']?.S;
          if (connection === undefined || id === undefined) continue;
          // A row without a text revision (written by hand?) compares as different from any revision.
          let items = result.get(connection);
          if (!items) result.set(connection, (items = new Map()));
          items.set(id, storedRevisionOf(row));
        }
        keys = output.UnprocessedKeys?.[this.tableName]?.Keys ?? [];
      }
    }
    return result;
  }

  async put(row: ItemRow, expected: ExpectedRow): Promise<PutResult> {
    const item: Record<string, AttributeValue> = {
      connection: { S: row.connection },
      id: { S: row.id },
      type: { S: row.type },
      revision: { S: row.revision },
      ...(row.itemObject !== undefined ? { itemObject: objectAttribute(row.itemObject) } : { item: toAttributeValue(row.item) }),
      syncedAt: { S: row.syncedAt },
      ...(row.childrenPending ? { childrenPending: { BOOL: true } } : {}),
    };
    const size = estimateItemSize(item);
    if (size > MAX_ITEM_BYTES) {
      if (row.itemObject === undefined) return { result: 'too-large', bytes: size };
      throw tooLarge(size);
    }

    let condition: Pick<PutItemCommand['input'], 'ConditionExpression' | 'ExpressionAttributeNames' | 'ExpressionAttributeValues'>;
    if (!expected.exists) {
      condition = { ConditionExpression: 'attribute_not_exists(#id)', ExpressionAttributeNames: { '#id': 'id' } };
    } else if (expected.deleted) {
      condition = {
        ConditionExpression: '#revision = :expected AND #deleted = :true',
        ExpressionAttributeNames: { '#revision': 'revision', '#deleted': 'deleted' },
        ExpressionAttributeValues: { ':expected': { S: expected.revision }, ':true': { BOOL: true } },
      };
    } else {
      condition = {
        ConditionExpression: '#revision = :expected AND attribute_not_exists(#deleted)',
        ExpressionAttributeNames: { '#revision': 'revision', '#deleted': 'deleted' },
        ExpressionAttributeValues: { ':expected': { S: expected.revision } },
      };
    }
    try {
      const output = await this.client.send(
        new PutItemCommand({
          TableName: this.tableName,
          Item: item,
          ...condition,
          // The row it replaces: its object, if it had one, is deleted after this write.
          ...(expected.exists ? { ReturnValues: 'ALL_OLD' as const } : {}),
        }),
      );
      const replacedObjectKey = output.Attributes?.['itemObject']?.M?.['key']?.S;
      return { result: 'written', ...(replacedObjectKey !== undefined ? { replacedObjectKey } : {}) };
    } catch (cause) {
      if (isConditionFailure(cause)) return { result: 'conflict' };
      if (row.itemObject === undefined && isSizeRefusal(cause)) return { result: 'too-large', bytes: size };
      throw awsFailure('PutItem', cause, size);
    }
  }

  async markDeleted(key: ItemKey, expectedRevision: string, syncedAt: string): Promise<WriteResult> {
    const update = {
      TableName: this.tableName,
      Key: keyAttributes(key),
      // A folder's pending children are those of the list the tombstone keeps: sent before it (discovery.ts).
      UpdateExpression: 'SET #deleted = :true, #syncedAt = :syncedAt REMOVE #childrenPending',
      ConditionExpression: '#revision = :expected AND attribute_not_exists(#deleted)',
      ExpressionAttributeNames: { '#revision': 'revision', '#deleted': 'deleted', '#syncedAt': 'syncedAt', '#childrenPending': 'childrenPending' },
      ExpressionAttributeValues: {
        ':expected': { S: expectedRevision },
        ':true': { BOOL: true },
        ':syncedAt': { S: syncedAt },
      },
    };
    try {
      await this.client.send(new UpdateItemCommand(update));
      return 'written';
    } catch (cause) {
      if (isConditionFailure(cause)) return 'conflict';
      throw awsFailure('UpdateItem', cause);
    }
  }

  async clearChildrenPending(key: ItemKey, written: { revision: string; syncedAt: string }): Promise<WriteResult> {
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: keyAttributes(key),
          UpdateExpression: 'REMOVE #childrenPending',
          ConditionExpression: '#revision = :revision AND #syncedAt = :syncedAt AND attribute_exists(#childrenPending)',
          ExpressionAttributeNames: { '#revision': 'revision', '#syncedAt': 'syncedAt', '#childrenPending': 'childrenPending' },
          ExpressionAttributeValues: { ':revision': { S: written.revision }, ':syncedAt': { S: written.syncedAt } },
        }),
      );
      return 'written';
    } catch (cause) {
      if (isConditionFailure(cause)) return 'conflict';
      throw awsFailure('UpdateItem', cause);
    }
  }

  async rowState(key: ItemKey): Promise<RowState | undefined> {
    const row = await this.readRow(key, ['id', 'revision', 'deleted', 'itemObject', 'syncedAt']);
    return row === undefined ? undefined : storedRevisionOf(row);
  }

  /**
   * One row, strongly consistent, projected on `attributes`: a BatchGetItem of its key (the role's
   * read of the table is BatchGetItem; no GetItem is granted). Undefined when there is no row.
   */
  private async readRow(key: ItemKey, attributes: readonly string[]): Promise<Record<string, AttributeValue> | undefined> {
    let output;
    try {
      output = await this.client.send(
        new BatchGetItemCommand({
          RequestItems: {
            [this.tableName]: {
              Keys: [keyAttributes(key)],
              ProjectionExpression: attributes.map((name) => `#${name}`).join(', '),
              ExpressionAttributeNames: Object.fromEntries(attributes.map((name) => [`#${name}`, name])),
              ConsistentRead: true,
            },
          },
        }),
      );
    } catch (cause) {
      throw awsFailure('BatchGetItem', cause);
    }
    if ((output.UnprocessedKeys?.[this.tableName]?.Keys ?? []).length > 0) {
      throw new TransientError('DynamoDB left the row unprocessed (throttled)');
    }
    return output.Responses?.[this.tableName]?.[0];
  }

  /**
   * One row's stored copy: a strongly consistent BatchGetItem of its key (the role's read of the
   * table is BatchGetItem; no GetItem is granted), projected on what discovery needs.
   */
  async getItem(key: ItemKey): Promise<StoredItem | undefined> {
    const row = await this.readRow(key, ['type', 'revision', 'deleted', 'item', 'itemObject', 'childrenPending']);
    if (row === undefined) return undefined;
    const objectKey = row['itemObject']?.M?.['key']?.S;
    const item = row['item']?.M !== undefined ? (fromAttributeValue(row['item']) as Record<string, unknown>) : undefined;
    return {
      type: row['type']?.S,
      revision: row['revision']?.S ?? '',
      deleted: row['deleted']?.BOOL === true,
      ...(item !== undefined ? { item } : {}),
      ...(objectKey !== undefined ? { objectKey } : {}),
      ...(row['childrenPending']?.BOOL === true ? { childrenPending: true } : {}),
    };
  }
}

/** What the sync's decision reads of a row (projected on as many of these attributes as it asked for). */
function storedRevisionOf(row: Record<string, AttributeValue>): StoredRevision {
  const objectKey = row['itemObject']?.M?.['key']?.S;
  const syncedAt = row['syncedAt']?.S;
  return {
    revision: row['revision']?.S ?? '',
    deleted: row['deleted']?.BOOL === true,
    ...(objectKey !== undefined ? { objectKey } : {}),
    ...(syncedAt !== undefined ? { syncedAt } : {}),
    ...(row['childrenPending']?.BOOL === true ? { childrenPending: true } : {}),
  };
}

/** A row's key: `connection` and `id`, both S (and nothing else the key object may carry). */
function keyAttributes(key: ItemKey): Record<string, AttributeValue> {
  return { connection: { S: key.connection }, id: { S: key.id } };
}

/** `itemObject` as the contract has it: `{"key": S, "size": N, "sha256": S}`. */
function objectAttribute(ref: { key: string; size: number; sha256: string }): AttributeValue {
  return { M: { key: { S: ref.key }, size: { N: String(ref.size) }, sha256: { S: ref.sha256 } } };
}

function tooLarge(size: number): PermanentError {
  return new PermanentError(`item too large to store (${size} bytes; DynamoDB's limit is 400 KB)`);
}

function isConditionFailure(error: unknown): boolean {
  return error instanceof ConditionalCheckFailedException || (error as { name?: string })?.name === 'ConditionalCheckFailedException';
}

/**
 * A DynamoDB failure as the core sees it. A ValidationException about the row or its key is
 * permanent: the item size refusal (isSizeRefusal) is "item too large to store", any other says
 * what DynamoDB said (a key over its size limit, a number out of range…); one about our expressions
 * is a bug, retried rather than dead-lettering every record.
 */
function awsFailure(operation: string, cause: unknown, size?: number): Error {
  const name = (cause as { name?: string })?.name ?? 'Error';
  const message = String((cause as { message?: string })?.message ?? cause).slice(0, 300);
  if (name === 'ValidationException' && !/expression|ExpressionAttribute/i.test(message)) {
    if (isSizeRefusal(cause)) {
      return new PermanentError(
        `item too large to store (${size ?? 'over 400 KB'}${size === undefined ? '' : ' bytes'}; DynamoDB's limit is 400 KB)`,
        { cause },
      );
    }
    return new PermanentError(`DynamoDB refused the item's ${operation} as invalid (ValidationException: ${message})`, { cause });
  }
  return new TransientError(`DynamoDB ${operation} failed (${name}: ${message})`, { cause });
}
