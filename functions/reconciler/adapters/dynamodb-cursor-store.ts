/**
 * The reconcile cursor in the control table: one item, partition key `pk` = `reconcile-cursor`
 * (the provider paces have rows of their own, `provider-pace#<pace key>`). Attributes, readable in
 * the console:
 *
 * | attribute   | type | meaning |
 * |---|---|---|
 * | `pass`      | N | the pass number (1 for the first) |
 * | `startedAt` | S | ISO-8601 UTC start of the pass |
 * | `segments`  | M | per segment (`"0"`, `"1"`, …): `{"after": M, "done": BOOL, "version": N, "ids": N}`; `after` is the items table's key `{"connection": S, "id": S}` |
 * | `endedAt`   | S | ISO-8601 UTC end of the pass, once every segment is done |
 * | `previous`  | M | the pass before: `{"pass": N, "startedAt": S, "endedAt": S, "ids": N}` |
 *
 * Reads are strongly consistent. Every write is conditional: a new pass on the pass number read
 * (or on there being no row), a segment's advance on the pass and the segment's own version (so
 * advances of different segments never conflict), the end of a pass on it not having ended. A
 * failed condition is `conflict`; anything else is thrown.
 *
 * A cursor written before the items table was keyed by connection holds `after` as the id alone
 * (S): no key of today's table. Such a segment is read as not started (its ids are sent again in
 * this pass, which is harmless: a check of an unchanged item writes nothing).
 */
import {
  ConditionalCheckFailedException,
  GetItemCommand,
  PutItemCommand,
  UpdateItemCommand,
  type AttributeValue,
  type DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import { CONTROL_TABLE_KEY } from '../../shared/adapters/dynamodb-pace-store.js';
import type { Cursor, CursorStore, ItemKey, PassRecord, SegmentCursor, WriteResult } from '../ports.js';

/** The cursor row's key value in the control table. */
export const RECONCILE_CURSOR_KEY = 'reconcile-cursor';

export class DynamoDbCursorStore implements CursorStore {
  private readonly key = { [CONTROL_TABLE_KEY]: { S: RECONCILE_CURSOR_KEY } };

  constructor(
    private readonly client: DynamoDBClient,
    readonly tableName: string,
  ) {}

  async read(): Promise<Cursor | undefined> {
    const output = await this.client.send(new GetItemCommand({ TableName: this.tableName, Key: this.key, ConsistentRead: true }));
    return output.Item === undefined ? undefined : fromRow(output.Item);
  }

  async startPass(cursor: Cursor, expectedPass: number | undefined): Promise<WriteResult> {
    return this.conditional(
      new PutItemCommand({
        TableName: this.tableName,
        Item: { ...this.key, ...toRow(cursor) },
        ...(expectedPass === undefined
          ? { ConditionExpression: 'attribute_not_exists(#pk)', ExpressionAttributeNames: { '#pk': CONTROL_TABLE_KEY } }
          : {
              ConditionExpression: '#pass = :expected',
              ExpressionAttributeNames: { '#pass': 'pass' },
              ExpressionAttributeValues: { ':expected': { N: String(expectedPass) } },
            }),
      }),
    );
  }

  async advance(pass: number, segment: number, next: SegmentCursor, expectedVersion: number): Promise<WriteResult> {
    return this.conditional(
      new UpdateItemCommand({
        TableName: this.tableName,
        Key: this.key,
        UpdateExpression: 'SET #segments.#segment = :next',
        ConditionExpression: '#pass = :pass AND #segments.#segment.#version = :expected',
        ExpressionAttributeNames: { '#segments': 'segments', '#segment': String(segment), '#pass': 'pass', '#version': 'version' },
        ExpressionAttributeValues: {
          ':next': { M: segmentValue(next) },
          ':pass': { N: String(pass) },
          ':expected': { N: String(expectedVersion) },
        },
      }),
    );
  }

  async endPass(pass: number, endedAt: number): Promise<WriteResult> {
    return this.conditional(
      new UpdateItemCommand({
        TableName: this.tableName,
        Key: this.key,
        UpdateExpression: 'SET #endedAt = :endedAt',
        ConditionExpression: '#pass = :pass AND attribute_not_exists(#endedAt)',
        ExpressionAttributeNames: { '#pass': 'pass', '#endedAt': 'endedAt' },
        ExpressionAttributeValues: { ':pass': { N: String(pass) }, ':endedAt': { S: iso(endedAt) } },
      }),
    );
  }

  private async conditional(command: PutItemCommand | UpdateItemCommand): Promise<WriteResult> {
    try {
      await this.client.send(command as PutItemCommand);
      return 'written';
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException || (error as { name?: string })?.name === 'ConditionalCheckFailedException') {
        return 'conflict';
      }
      throw error;
    }
  }
}

/** The cursor's attributes (every one but the key). */
export function toRow(cursor: Cursor): Record<string, AttributeValue> {
  const segments: Record<string, AttributeValue> = {};
  cursor.segments.forEach((segment, index) => (segments[String(index)] = { M: segmentValue(segment) }));
  return {
    pass: { N: String(cursor.pass) },
    startedAt: { S: iso(cursor.startedAt) },
    segments: { M: segments },
    ...(cursor.endedAt !== undefined ? { endedAt: { S: iso(cursor.endedAt) } } : {}),
    ...(cursor.previous !== undefined ? { previous: { M: passValue(cursor.previous) } } : {}),
  };
}

/** A stored row as a cursor; throws, naming the row and the attribute, when it is not one. */
export function fromRow(row: Record<string, AttributeValue>): Cursor {
  const segmentsMap = row['segments']?.M;
  if (segmentsMap === undefined) throw malformed('segments');
  const count = Object.keys(segmentsMap).length;
  const segments: SegmentCursor[] = [];
  for (let index = 0; index < count; index += 1) {
    const value = segmentsMap[String(index)]?.M;
    if (value === undefined) throw malformed(`segments.${index}`);
    const after = keyOf(value['after'], `segments.${index}.after`);
    segments.push({
      ...(after !== undefined ? { after } : {}),
      done: value['done']?.BOOL === true,
      version: whole(value['version'], `segments.${index}.version`),
      ids: whole(value['ids'], `segments.${index}.ids`),
    });
  }
  if (segments.length === 0) throw malformed('segments');
  const previous = row['previous']?.M;
  return {
    pass: whole(row['pass'], 'pass'),
    startedAt: time(row['startedAt'], 'startedAt'),
    segments,
    ...(row['endedAt'] !== undefined ? { endedAt: time(row['endedAt'], 'endedAt') } : {}),
    ...(previous !== undefined ? { previous: passRecord(previous) } : {}),
  };
}

function segmentValue(segment: SegmentCursor): Record<string, AttributeValue> {
  return {
    ...(segment.after !== undefined ? { after: { M: { connection: { S: segment.after.connection }, id: { S: segment.after.id } } } } : {}),
    done: { BOOL: segment.done },
    version: { N: String(segment.version) },
    ids: { N: String(segment.ids) },
  };
}

/**
 * A segment's `after`: the key `{"connection": S, "id": S}`; undefined when absent, and when it is
 * the id alone (S, a cursor of the items table before connections: the segment starts over).
 */
function keyOf(value: AttributeValue | undefined, name: string): ItemKey | undefined {
  if (value === undefined || value.S !== undefined) return undefined;
  const connection = value.M?.['connection']?.S;
  const id = value.M?.['id']?.S;
  if (connection === undefined || id === undefined) throw malformed(name);
  return { connection, id };
}

function passValue(record: PassRecord): Record<string, AttributeValue> {
  return {
    pass: { N: String(record.pass) },
    startedAt: { S: iso(record.startedAt) },
    endedAt: { S: iso(record.endedAt) },
    ids: { N: String(record.ids) },
  };
}

function passRecord(value: Record<string, AttributeValue>): PassRecord {
  return {
    pass: whole(value['pass'], 'previous.pass'),
    startedAt: time(value['startedAt'], 'previous.startedAt'),
    endedAt: time(value['endedAt'], 'previous.endedAt'),
    ids: whole(value['ids'], 'previous.ids'),
  };
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function whole(value: AttributeValue | undefined, name: string): number {
  const number = Number(value?.N);
  if (value?.N === undefined || !Number.isSafeInteger(number) || number < 0) throw malformed(name);
  return number;
}

function time(value: AttributeValue | undefined, name: string): number {
  const ms = value?.S === undefined ? Number.NaN : Date.parse(value.S);
  if (Number.isNaN(ms)) throw malformed(name);
  return ms;
}

function malformed(attribute: string): Error {
  return new Error(
    `the control table's ${RECONCILE_CURSOR_KEY} row is not a reconcile cursor (attribute ${attribute}); delete the row to start a new pass`,
  );
}
