/**
 * The sequencer's ChangesLogWriter port (functions/shared/changes/sequencer.ts) on the changes
 * table (CHANGES_TABLE_NAME), beside DynamoDbChangesLog, which reads it:
 *
 * - head: one strongly consistent GetItem of `{connection, seq: 0}`;
 * - put: one PutItem of a change row, on condition that its number is free, or (when the writer
 *   may take a row over) holds the same writer's row, or one written before the stale bound (a row
 *   above the head left by a writer that is gone);
 * - move: one UpdateItem of the head, on condition that it is where the writer read it;
 * - numberedAmong: strongly consistent Query pages from the head down, the changes' identities and
 *   times only, until every change asked for is found or a change written before the bound (by its
 *   `writtenAt`; a change written before the sequencer, by its `syncedAt`).
 *
 * A change row holds what DynamoDbChangesLog reads (`change`, `id`, `type`, `revision`,
 * `previousRevision`, `syncedAt`, `expiresAt`: `syncedAt` + changesRetentionDays) and where it
 * came from: `src` (the stream record's SequenceNumber), `srcAt`, `writer`, `writtenAt` (epoch
 * ms). The head adds `lastSrc` and `writer` to `head` and `epoch`. Every write is a single-item
 * write: one write unit for a row under 1 KB, none of a transaction's second.
 */
import {
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  UpdateItemCommand,
  type AttributeValue,
  type DynamoDBClient,
  type QueryCommandOutput,
} from '@aws-sdk/client-dynamodb';
import { randomBytes } from 'node:crypto';
import { changeIdentity, type ChangesLogWriter, type SequencerHead, type StreamedChange } from '../changes/sequencer.js';
import { CHANGE_KINDS, type ChangeKind } from '../changes/transition.js';
import { PermanentError, readFailure } from '../errors.js';
import { HEAD_SEQ, headOf } from './dynamodb-changes-log.js';

const SECONDS_PER_DAY = 86_400;
/** Rows a Query page of sourcesSince reads. */
const SOURCES_PAGE = 100;

export interface ChangesWriterTable {
  tableName: string;
  retentionDays: number;
}

export class DynamoDbChangesWriter implements ChangesLogWriter {
  private readonly newEpoch: () => string;

  constructor(
    private readonly dynamodb: DynamoDBClient,
    private readonly table: ChangesWriterTable,
    options: { newEpoch?: () => string } = {},
  ) {
    this.newEpoch = options.newEpoch ?? (() => randomBytes(9).toString('base64url'));
  }

  async head(connection: string): Promise<SequencerHead | undefined> {
    let output;
    try {
      output = await this.dynamodb.send(new GetItemCommand({ TableName: this.table.tableName, Key: keyOf(connection, HEAD_SEQ), ConsistentRead: true }));
    } catch (error) {
      throw readFailure(`DynamoDB GetItem of a head on the changes table ${this.table.tableName}`, error);
    }
    let head;
    try {
      head = headOf(output.Item);
    } catch (error) {
      // A head no writer of this log wrote (by hand, a restore): no retry mends it.
      throw new PermanentError(`connection ${JSON.stringify(connection)}: ${(error as Error).message}`);
    }
    if (head === undefined) return undefined;
    const lastSrc = output.Item?.['lastSrc']?.S;
    return { ...head, lastSrc };
  }

  async put(seq: number, change: StreamedChange, writer: string, writtenAtMs: number, takeOver: { staleBeforeMs: number } | undefined): Promise<'written' | 'taken'> {
    const expiresAt = Math.floor(Date.parse(change.syncedAt) / 1000) + this.table.retentionDays * SECONDS_PER_DAY;
    const item: Record<string, AttributeValue> = {
      ...keyOf(change.connection, seq),
      change: { S: change.change },
      id: { S: change.id },
      ...(change.type !== undefined ? { type: { S: change.type } } : {}),
      revision: { S: change.revision },
      ...(change.previousRevision !== null ? { previousRevision: { S: change.previousRevision } } : {}),
      syncedAt: { S: change.syncedAt },
      expiresAt: { N: String(Number.isFinite(expiresAt) ? expiresAt : 0) },
      src: { S: change.src },
      srcAt: { N: String(change.srcAt) },
      writer: { S: writer },
      writtenAt: { N: String(writtenAtMs) },
    };
    try {
      await this.dynamodb.send(
        new PutItemCommand({
          TableName: this.table.tableName,
          Item: item,
          ...(takeOver
            ? {
                ConditionExpression: 'attribute_not_exists(#seq) OR #writer = :writer OR #writtenAt < :staleBefore',
                ExpressionAttributeNames: { '#seq': 'seq', '#writer': 'writer', '#writtenAt': 'writtenAt' },
                ExpressionAttributeValues: { ':writer': { S: writer }, ':staleBefore': { N: String(takeOver.staleBeforeMs) } },
              }
            : { ConditionExpression: 'attribute_not_exists(#seq)', ExpressionAttributeNames: { '#seq': 'seq' } }),
        }),
      );
      return 'written';
    } catch (error) {
      if ((error as { name?: string }).name === 'ConditionalCheckFailedException') return 'taken';
      throw readFailure(`DynamoDB PutItem of change ${seq} on the changes table ${this.table.tableName}`, error);
    }
  }

  async move(connection: string, from: SequencerHead | undefined, to: number, lastSrc: string, writer: string): Promise<boolean> {
    try {
      await this.dynamodb.send(
        new UpdateItemCommand({
          TableName: this.table.tableName,
          Key: keyOf(connection, HEAD_SEQ),
          UpdateExpression: 'SET #head = :to, #lastSrc = :lastSrc, #writer = :writer, #epoch = if_not_exists(#epoch, :epoch)',
          ConditionExpression: from === undefined ? 'attribute_not_exists(#head)' : '#head = :from',
          ExpressionAttributeNames: { '#head': 'head', '#lastSrc': 'lastSrc', '#writer': 'writer', '#epoch': 'epoch' },
          ExpressionAttributeValues: {
            ':to': { N: String(to) },
            ':lastSrc': { S: lastSrc },
            ':writer': { S: writer },
            ':epoch': { S: this.newEpoch() },
            ...(from === undefined ? {} : { ':from': { N: String(from.head) } }),
          },
        }),
      );
      return true;
    } catch (error) {
      if ((error as { name?: string }).name === 'ConditionalCheckFailedException') return false;
      throw readFailure(`DynamoDB UpdateItem of a head on the changes table ${this.table.tableName}`, error);
    }
  }

  async numberedAmong(connection: string, head: number, sinceMs: number, wanted: ReadonlySet<string>): Promise<Set<string>> {
    const found = new Set<string>();
    let startKey: Record<string, AttributeValue> | undefined;
    for (;;) {
      let output: QueryCommandOutput;
      try {
        output = await this.dynamodb.send(
          new QueryCommand({
            TableName: this.table.tableName,
            KeyConditionExpression: '#connection = :connection AND #seq BETWEEN :first AND :head',
            ExpressionAttributeNames: {
              '#connection': 'connection',
              '#seq': 'seq',
              '#id': 'id',
              '#syncedAt': 'syncedAt',
              '#revision': 'revision',
              '#change': 'change',
              '#writtenAt': 'writtenAt',
            },
            ExpressionAttributeValues: { ':connection': { S: connection }, ':first': { N: '1' }, ':head': { N: String(head) } },
            ProjectionExpression: '#id, #syncedAt, #revision, #change, #writtenAt',
            ScanIndexForward: false,
            ConsistentRead: true,
            Limit: SOURCES_PAGE,
            ...(startKey ? { ExclusiveStartKey: startKey } : {}),
          }),
        );
      } catch (error) {
        throw readFailure(`DynamoDB Query of the last changes on the changes table ${this.table.tableName}`, error);
      }
      for (const row of output.Items ?? []) {
        const syncedAt = row['syncedAt']?.S ?? '';
        // A change written before the sequencer has no writtenAt: it was written with its row, at its syncedAt.
        const at = row['writtenAt']?.N !== undefined ? Number(row['writtenAt'].N) : Date.parse(syncedAt);
        if (!(at >= sinceMs)) return found;
        const change = row['change']?.S;
        if (!(CHANGE_KINDS as readonly string[]).includes(change ?? '')) continue;
        const identity = changeIdentity({ id: row['id']?.S ?? '', syncedAt, revision: row['revision']?.S ?? '', change: change as ChangeKind });
        if (wanted.has(identity)) found.add(identity);
        if (found.size === wanted.size) return found;
      }
      startKey = output.LastEvaluatedKey;
      if (startKey === undefined) return found;
    }
  }
}

function keyOf(connection: string, seq: number): Record<string, AttributeValue> {
  return { connection: { S: connection }, seq: { N: String(seq) } };
}
