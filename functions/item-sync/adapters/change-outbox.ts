/**
 * The changes log's writer (docs/changes.md): an items-table row is written in one DynamoDB
 * TransactWriteItems with the change it makes and the connection's head, so the row and its change
 * commit together or not at all (nothing between them to lose, whatever happens to a stream or a
 * container afterwards). The transaction's three actions:
 *
 * 1. the row's own write (a Put or an Update, with its own condition: the row the sync compared);
 * 2. Put of the change `{connection, seq: n + 1, change, id, type, revision, previousRevision,
 *    syncedAt, expiresAt}`, on condition that no row has that number;
 * 3. Update of the head `{connection, seq: 0}`: `head` n → n + 1 on condition that it is n (or
 *    absent for n = 0), `epoch` set by the first change (a random value that names this log).
 *
 * Action 3's condition is what makes the log gap-free: change n + 1 can only commit once change n
 * has, so the numbers follow the commit order, whatever the containers' clocks say, and a reader
 * that reads the head first finds every change up to it (functions/shared/changes/feed.ts).
 *
 * The head n is known from this container's last write of the connection, or read (strongly
 * consistent GetItem) the first time. When another container moved it, action 3 fails and its
 * cancellation reason holds the head as it is (ReturnValuesOnConditionCheckFailure ALL_OLD): the
 * write is tried again with it, at once the first time, then after a short random wait that grows
 * with each further loss (containers racing for one connection's head take turns instead of
 * colliding again), HEAD_ATTEMPTS attempts in all. A container writes one connection's rows one at
 * a time (its own writes never race each other for the head). A failed condition on the row
 * (action 1) is the store's `conflict`, as without the log. TransactionConflict and throttling are
 * tried again with backoff, CHANGE_ATTEMPTS attempts; then a TransientError. The SDK gives every
 * request a ClientRequestToken, so a request it sends again after a lost answer is applied once.
 */
import {
  GetItemCommand,
  TransactWriteItemsCommand,
  type AttributeValue,
  type DynamoDBClient,
  type Put,
  type TransactWriteItem,
} from '@aws-sdk/client-dynamodb';
import { randomBytes } from 'node:crypto';
import { backoffDelayMs } from '../../shared/backoff.js';
import { BoundedMap } from '../../shared/bounded-map.js';
import type { ChangeKind } from '../../shared/changes/transition.js';
import { HEAD_SEQ, headOf } from '../../shared/adapters/dynamodb-changes-log.js';
import { awsErrorOf, PermanentError, TransientError } from '../../shared/errors.js';
import { ITEM_SIZE_REFUSAL, ROW_TOO_LARGE } from './size-refusal.js';
import type { ExpectedRow } from '../ports.js';

/** The changes table and how long a change stays in it (context `changesRetentionDays`). */
export interface ChangesTable {
  tableName: string;
  retentionDays: number;
}

/** A change, as the writer of its row describes it. */
export interface OutboxChange {
  connection: string;
  id: string;
  change: ChangeKind;
  /** The row's `type`; undefined when it has none (a tombstone of a row without one). */
  type: string | undefined;
  revision: string;
  previousRevision: string | null;
  syncedAt: string;
}

/** Attempts at one write that TransactionConflict or throttling cancelled. */
export const CHANGE_ATTEMPTS = 20;
/** Attempts at one write that lost the race for the head (another writer committed: progress). */
export const HEAD_ATTEMPTS = 200;
/** The longest random wait before another attempt at the head, ms. */
const HEAD_WAIT_CAP_MS = 250;
/** Connections whose head a container remembers. */
const HEADS_KEPT = 10_000;
const SECONDS_PER_DAY = 86_400;
/** Cancellation reasons that a later attempt may not meet. */
const RETRYABLE = new Set(['TransactionConflict', 'ThrottlingError', 'ProvisionedThroughputExceeded', 'RequestLimitExceeded']);

export interface ChangeOutboxOptions {
  sleep: (ms: number) => Promise<void>;
  random: () => number;
  /** The epoch of a new log; default 12 random base64url characters. */
  newEpoch?: () => string;
}

export class ChangeOutbox {
  private readonly heads = new BoundedMap<string, number>(HEADS_KEPT);
  private readonly queues = new Map<string, Promise<unknown>>();
  private readonly newEpoch: () => string;

  constructor(
    private readonly dynamodb: DynamoDBClient,
    private readonly table: ChangesTable,
    private readonly options: ChangeOutboxOptions,
  ) {
    this.newEpoch = options.newEpoch ?? (() => randomBytes(9).toString('base64url'));
  }

  /**
   * Commits the row's Put with `change`, its condition (`expected`'s) also naming the row's object
   * key: the one compared, or none. With it, the object the write replaces is the compared one's,
   * known without the old row, which a transaction does not return.
   */
  commitPut(put: Put, expected: ExpectedRow, change: OutboxChange): Promise<'written' | 'conflict'> {
    const withObject: { expression: string; names: Record<string, string>; values?: Record<string, AttributeValue> } =
      expected.exists && expected.objectKey !== undefined
        ? { expression: '#itemObject.#objectKey = :objectKey', names: { '#objectKey': 'key' }, values: { ':objectKey': { S: expected.objectKey } } }
        : { expression: 'attribute_not_exists(#itemObject)', names: {} };
    const values = put.ExpressionAttributeValues || withObject.values ? { ExpressionAttributeValues: { ...put.ExpressionAttributeValues, ...withObject.values } } : {};
    return this.commit(
      {
        Put: {
          ...put,
          ConditionExpression: `${put.ConditionExpression} AND ${withObject.expression}`,
          ExpressionAttributeNames: { ...put.ExpressionAttributeNames, '#itemObject': 'itemObject', ...withObject.names },
          ...values,
        },
      },
      change,
    );
  }

  /**
   * Commits `rowWrite` (an action on the items table, with its condition) with `change`. 'conflict'
   * when the row's condition failed (nothing written). A PermanentError when DynamoDB cancelled it
   * as invalid (a ValidationError reason: it can never succeed); a TransientError after the
   * attempts above; what DynamoDB answered otherwise (the store names it).
   */
  commit(rowWrite: TransactWriteItem, change: OutboxChange): Promise<'written' | 'conflict'> {
    const { connection } = change;
    const previous = this.queues.get(connection) ?? Promise.resolve();
    const run = previous.then(
      () => this.attempt(rowWrite, change),
      () => this.attempt(rowWrite, change),
    );
    const settled = run.then(
      () => undefined,
      () => undefined,
    );
    this.queues.set(connection, settled);
    void settled.then(() => {
      if (this.queues.get(connection) === settled) this.queues.delete(connection);
    });
    return run;
  }

  private async attempt(rowWrite: TransactWriteItem, change: OutboxChange): Promise<'written' | 'conflict'> {
    const { connection } = change;
    let head = this.heads.get(connection) ?? (await this.readHead(connection));
    let waits = 0;
    let lost = 0;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.dynamodb.send(
          new TransactWriteItemsCommand({ TransactItems: [rowWrite, this.changeWrite(change, head + 1), this.headWrite(connection, head)] }),
        );
        this.heads.set(connection, head + 1);
        return 'written';
      } catch (error) {
        const reasons = (error as { CancellationReasons?: Array<{ Code?: string; Item?: Record<string, AttributeValue> }> }).CancellationReasons;
        if ((error as { name?: string }).name !== 'TransactionCanceledException' || !reasons) throw error;
        const [row, changeRow, headRow] = reasons;
        if (headRow?.Code === 'ConditionalCheckFailed') {
          // Another writer moved the head (or an erase deleted it): its answer says where it is.
          head = headOf(headRow.Item)?.head ?? 0;
          this.heads.set(connection, head);
        }
        if (row?.Code === 'ConditionalCheckFailed') return 'conflict';
        const codes = reasons.map((reason) => reason.Code ?? 'None');
        const giveUp = (): TransientError =>
          new TransientError(`DynamoDB TransactWriteItems of a row and its change was cancelled ${attempt} times (last: ${codes.join(', ')})`);
        if (headRow?.Code === 'ConditionalCheckFailed') {
          lost += 1;
          if (lost >= HEAD_ATTEMPTS) throw giveUp();
          // At once the first time; then a random wait, longer with each loss (full jitter).
          if (lost > 1) await this.options.sleep(Math.floor(this.options.random() * Math.min(HEAD_WAIT_CAP_MS, 5 * 2 ** Math.min(lost - 1, 6))));
          continue;
        }
        const invalid = reasons.find((reason) => reason.Code === 'ValidationError') as { Message?: string } | undefined;
        if (invalid && invalid === row && ITEM_SIZE_REFUSAL.test(invalid.Message ?? '')) {
          // The row too large for DynamoDB after all: the store puts the item in the items bucket.
          throw Object.assign(new PermanentError(`DynamoDB refused the item's row for its size (ValidationError: ${String(invalid.Message).slice(0, 300)})`, { cause: error }), {
            name: ROW_TOO_LARGE,
          });
        }
        if (invalid && !/expression|ExpressionAttribute/i.test(invalid.Message ?? '')) {
          throw new PermanentError(`DynamoDB refused the item's TransactWriteItems as invalid (ValidationError: ${String(invalid.Message ?? '').slice(0, 300)})`, { cause: error });
        }
        const numberTaken = changeRow?.Code === 'ConditionalCheckFailed';
        if (!numberTaken && !codes.some((code) => RETRYABLE.has(code))) throw error;
        waits += 1;
        if (waits >= CHANGE_ATTEMPTS) throw giveUp();
        if (numberTaken) {
          // A change numbered above the head this container knew: read the head again.
          head = await this.readHead(connection);
          continue;
        }
        await this.options.sleep(backoffDelayMs(waits, { baseMs: 20, capMs: 1_000, jitter: 'equal' }, this.options.random));
      }
    }
  }

  private async readHead(connection: string): Promise<number> {
    let output;
    try {
      output = await this.dynamodb.send(
        new GetItemCommand({ TableName: this.table.tableName, Key: headKey(connection), ConsistentRead: true }),
      );
    } catch (error) {
      throw new TransientError(`DynamoDB GetItem of a head on the changes table ${this.table.tableName} failed (${awsErrorOf(error).summary})`);
    }
    const head = headOf(output.Item)?.head ?? 0;
    this.heads.set(connection, head);
    return head;
  }

  private changeWrite(change: OutboxChange, seq: number): TransactWriteItem {
    const expiresAt = Math.floor(Date.parse(change.syncedAt) / 1000) + this.table.retentionDays * SECONDS_PER_DAY;
    const item: Record<string, AttributeValue> = {
      connection: { S: change.connection },
      seq: { N: String(seq) },
      change: { S: change.change },
      id: { S: change.id },
      ...(change.type !== undefined ? { type: { S: change.type } } : {}),
      revision: { S: change.revision },
      ...(change.previousRevision !== null ? { previousRevision: { S: change.previousRevision } } : {}),
      syncedAt: { S: change.syncedAt },
      expiresAt: { N: String(expiresAt) },
    };
    return {
      Put: {
        TableName: this.table.tableName,
        Item: item,
        ConditionExpression: 'attribute_not_exists(#seq)',
        ExpressionAttributeNames: { '#seq': 'seq' },
      },
    };
  }

  private headWrite(connection: string, head: number): TransactWriteItem {
    return {
      Update: {
        TableName: this.table.tableName,
        Key: headKey(connection),
        UpdateExpression: 'SET #head = :next, #epoch = if_not_exists(#epoch, :epoch)',
        ConditionExpression: head === 0 ? 'attribute_not_exists(#head)' : '#head = :head',
        ExpressionAttributeNames: { '#head': 'head', '#epoch': 'epoch' },
        ExpressionAttributeValues: {
          ':next': { N: String(head + 1) },
          ':epoch': { S: this.newEpoch() },
          ...(head === 0 ? {} : { ':head': { N: String(head) } }),
        },
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
      },
    };
  }
}

function headKey(connection: string): Record<string, AttributeValue> {
  return { connection: { S: connection }, seq: { N: String(HEAD_SEQ) } };
}
