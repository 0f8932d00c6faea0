/**
 * Mending a connection's changes feed from the items table (functions/shared/changes/mend.ts) on
 * DynamoDB Local, with the adapters every caller gives it: the rows through DynamoDbItemRows, the
 * feed through DynamoDbChangesLog, the appends through the changes writer's own sequencer and
 * DynamoDbChangesWriter. The feed is then read as the client API reads it (readChanges). A row the
 * feed does not account for gets its change; a recent row, an old one, a row written again meanwhile
 * are left; a mend run again, or two at once, append each change once; a live record numbered
 * after a mend is numbered as usual. Time is a fixed clock.
 */
import { PutItemCommand, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalDynamo, type LocalDynamoDb } from '../../../../dev/fakes/local-dynamo.js';
import { ensureItemsTable } from '../../../../dev/fakes/items-table.js';
import { DynamoDbItemRows } from '../../../../functions/client-api/adapters/dynamodb-item-rows.js';
import { DynamoDbChangesLog } from '../../../../functions/shared/adapters/dynamodb-changes-log.js';
import { DynamoDbChangesWriter } from '../../../../functions/shared/adapters/dynamodb-changes-writer.js';
import { readChanges, type FeedChange } from '../../../../functions/shared/changes/feed.js';
import { MEND_SETTLED_AFTER_MS, MEND_SOURCE, mendFeed, type MendRows } from '../../../../functions/shared/changes/mend.js';
import { ChangeSequencer, type StreamedChange } from '../../../../functions/shared/changes/sequencer.js';
import type { ChangeKind } from '../../../../functions/shared/changes/transition.js';

const ITEMS = 'items-mend';
const CHANGES = 'changes-mend';
const DAY = 86_400_000;
const HOUR = 3_600_000;
const NOW = Date.parse('2026-12-10T00:00:00.000Z');

let dynamo: LocalDynamoDb;
let db: DynamoDBClient;
let log: DynamoDbChangesLog;
let rows: DynamoDbItemRows;
let connections = 0;
/** The retention each mend built its sequencer with. */
const retentions: number[] = [];

beforeAll(async () => {
  dynamo = await startLocalDynamo();
  db = dynamo.client();
  await ensureItemsTable(db, ITEMS);
  await dynamo.createChangesTable(CHANGES);
  log = new DynamoDbChangesLog(db, CHANGES);
  rows = new DynamoDbItemRows(db, ITEMS);
});

afterAll(async () => {
  db?.destroy();
  await dynamo?.close();
});

function connection(): string {
  connections += 1;
  return `mend-${connections}`;
}

function sequencer(retentionDays = 35, now = NOW): ChangeSequencer {
  return new ChangeSequencer({
    writer: new DynamoDbChangesWriter(db, { tableName: CHANGES, retentionDays }),
    now: () => now,
    sleep: async () => undefined,
    random: () => 0.5,
    staleAfterMs: 120_000,
  });
}

/** A row as the sync writes it. */
async function putRow(conn: string, id: string, revision: string, syncedAtMs: number, deleted = false): Promise<void> {
  const item: Record<string, AttributeValue> = {
    connection: { S: conn },
    id: { S: id },
    type: { S: 'file' },
    revision: { S: revision },
    item: { M: { id: { S: id }, revision: { S: revision } } },
    syncedAt: { S: new Date(syncedAtMs).toISOString() },
    ...(deleted ? { deleted: { BOOL: true } } : {}),
  };
  await db.send(new PutItemCommand({ TableName: ITEMS, Item: item }));
}

let src = 1_000n;
/** A change as the changes writer numbers it from a stream record. */
function streamed(conn: string, id: string, change: ChangeKind, revision: string, previousRevision: string | null, syncedAtMs: number): StreamedChange {
  src += 10n;
  return {
    connection: conn,
    id,
    change,
    type: 'file',
    revision,
    previousRevision,
    syncedAt: new Date(syncedAtMs).toISOString(),
    src: String(src).padStart(21, '0'),
    srcAt: Math.floor(syncedAtMs / 1000),
  };
}

/** The whole feed as the client API reads it. */
async function feed(conn: string): Promise<FeedChange[]> {
  const page = await readChanges(log, conn, undefined, 1000, Math.floor(NOW / 1000), async () => undefined);
  if (!page.ok) return [];
  return page.value.changes;
}

const shown = (change: FeedChange): string => `${change.change} ${change.id} ${change.previousRevision ?? '-'}→${change.revision} @${change.syncedAt.slice(5, 13)}`;

const ports = (over: Partial<{ rows: MendRows; now: number }> = {}) => ({
  rows: over.rows ?? rows,
  log,
  sequencer: (retentionDays: number) => {
    retentions.push(retentionDays);
    return sequencer(retentionDays, over.now ?? NOW);
  },
  now: () => over.now ?? NOW,
});

/**
 * A connection whose feed lost four changes: a is updated r1→r2, c deleted, d restored, e created
 * with no change at all; b is as its feed says; f is written 2 hours ago (its record may still
 * come), g 40 days ago (its change may have expired).
 */
async function lossyConnection(): Promise<string> {
  const conn = connection();
  const at = (days: number, hours = 0): number => NOW - days * DAY - hours * HOUR;
  await sequencer().append(conn, [
    streamed(conn, 'a', 'created', 'r1', null, at(3)),
    streamed(conn, 'b', 'created', 'r1', null, at(3, 1)),
    streamed(conn, 'c', 'created', 'r3', null, at(3, 2)),
    streamed(conn, 'd', 'created', 'r4', null, at(3, 3)),
    streamed(conn, 'd', 'deleted', 'r4', 'r4', at(2, 12)),
  ]);
  await putRow(conn, 'a', 'r2', at(2));
  await putRow(conn, 'b', 'r1', at(3, 1));
  await putRow(conn, 'c', 'r3', at(2, 1), true);
  await putRow(conn, 'd', 'r5', at(2, 2));
  await putRow(conn, 'e', 'r1', at(2, 3));
  await putRow(conn, 'f', 'r9', NOW - 2 * HOUR);
  await putRow(conn, 'g', 'r1', at(40));
  return conn;
}

describe('mendFeed on DynamoDB Local', () => {
  it('appends the change each settled row lacks, oldest write first, and leaves a recent row and one beyond the retention', async () => {
    const conn = await lossyConnection();

    const result = await mendFeed(conn, ports(), { retentionDays: 35 });

    expect(result).toEqual({
      connection: conn,
      rows: 7,
      compared: 5,
      recent: 1,
      beyondRetention: 1,
      missing: { created: 1, updated: 1, deleted: 1, restored: 1 },
      appended: 4,
      already: 0,
      writtenSince: 0,
      refused: 0,
      head: 9,
    });
    expect((await feed(conn)).map(shown)).toEqual([
      'created a -→r1 @12-07T00',
      'created b -→r1 @12-06T23',
      'created c -→r3 @12-06T22',
      'created d -→r4 @12-06T21',
      'deleted d r4→r4 @12-07T12',
      'created e -→r1 @12-07T21',
      'restored d r4→r5 @12-07T22',
      'deleted c r3→r3 @12-07T23',
      'updated a r1→r2 @12-08T00',
    ]);
    const [mended] = await log.range(conn, 6, 6, 1);
    expect(mended?.expiresAt).toBe(Math.floor((NOW - 2 * DAY - 3 * HOUR) / 1000) + 35 * 86_400);
    const head = await new DynamoDbChangesWriter(db, { tableName: CHANGES, retentionDays: 35 }).head(conn);
    // The mend's changes never move the head's last record: a live record after them is new.
    expect(head?.lastSrc).not.toBe(MEND_SOURCE);
    expect(head?.lastSrc).toMatch(/^0+\d+$/);
  });

  it('run again, appends nothing more; two at once append each change once', async () => {
    const conn = await lossyConnection();
    await mendFeed(conn, ports(), { retentionDays: 35 });
    const again = await mendFeed(conn, ports(), { retentionDays: 35 });
    expect(again).toMatchObject({ compared: 5, appended: 0, already: 0, head: 9, missing: { created: 0, updated: 0, deleted: 0, restored: 0 } });

    const other = await lossyConnection();
    const both = await Promise.all([mendFeed(other, ports(), { retentionDays: 35 }), mendFeed(other, ports(), { retentionDays: 35 })]);
    expect(both.map((r) => r.appended + r.already)).toEqual([4, 4]);
    expect(both[0]!.appended + both[1]!.appended).toBe(4);
    expect((await feed(other)).map((change) => `${change.change} ${change.id}`)).toEqual([
      'created a',
      'created b',
      'created c',
      'created d',
      'deleted d',
      'created e',
      'restored d',
      'deleted c',
      'updated a',
    ]);
  });

  it('starts the log of a connection that has none, and a live record numbered after the mend is numbered as usual', async () => {
    const conn = connection();
    await putRow(conn, 'x', 'r1', NOW - 2 * DAY);
    await putRow(conn, 'y', 'r1', NOW - 3 * DAY, true);

    const result = await mendFeed(conn, ports(), { retentionDays: 35 });
    expect(result).toMatchObject({ appended: 2, missing: { created: 1, deleted: 1 }, head: 2 });

    const live = streamed(conn, 'x', 'updated', 'r2', 'r1', NOW + 1000);
    expect(await sequencer(35, NOW + 2000).append(conn, [live])).toEqual({ numbered: 1, already: 0, lost: 0, refused: 0 });
    expect((await feed(conn)).map(shown)).toEqual(['deleted y -→r1 @12-07T00', 'created x -→r1 @12-08T00', 'updated x r1→r2 @12-10T00']);
  });

  it('leaves a row written again between the comparison and the append to the changes writer', async () => {
    const conn = await lossyConnection();
    const rewritten: MendRows = {
      page: (c, after, limit) => rows.page(c, after, limit),
      get: async (c, id) => {
        if (id === 'a') await putRow(conn, 'a', 'r3', NOW - 1000);
        return rows.get(c, id);
      },
    };

    const result = await mendFeed(conn, ports({ rows: rewritten }), { retentionDays: 35 });

    expect(result).toMatchObject({ appended: 3, writtenSince: 1, missing: { created: 1, updated: 0, deleted: 1, restored: 1 } });
    expect((await feed(conn)).filter((change) => change.id === 'a').map(shown)).toEqual(['created a -→r1 @12-07T00']);
  });

  it('takes the retention from the feed\'s own changes over the one it is given, and writes its changes with it', async () => {
    const conn = connection();
    await sequencer(7).append(conn, [streamed(conn, 'kept', 'created', 'r1', null, NOW - 2 * DAY)]);
    await putRow(conn, 'kept', 'r1', NOW - 2 * DAY);
    await putRow(conn, 'old', 'r1', NOW - 10 * DAY);

    await putRow(conn, 'lost', 'r1', NOW - 3 * DAY);
    retentions.length = 0;

    const result = await mendFeed(conn, ports(), { retentionDays: 35 });

    expect(result).toMatchObject({ compared: 2, beyondRetention: 1, appended: 1, head: 2 });
    expect(retentions).toEqual([7]);
    const [mended] = await log.range(conn, 2, 2, 1);
    expect(mended).toMatchObject({ id: 'lost', expiresAt: Math.floor((NOW - 3 * DAY) / 1000) + 7 * 86_400 });
  });

  it('settles after the stream\'s 24 hours and an hour', () => {
    expect(MEND_SETTLED_AFTER_MS).toBe(25 * HOUR);
  });
});
