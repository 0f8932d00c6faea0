/**
 * The changes log's sequencer (functions/shared/changes/sequencer.ts) with its DynamoDB adapter
 * (functions/shared/adapters/dynamodb-changes-writer.ts) on DynamoDB Local, read back through the
 * feed's own reader (DynamoDbChangesLog). Each hazard of a stream-fed writer is played against the
 * real table: a batch delivered again (whole, or after its first chunk), two shards' writers on one
 * connection at once, a chunk half written when its writer died (taken over by the same batch at
 * once, by another writer once stale), a lost answer (the SDK sends a put or the head's move
 * again). Time is a virtual clock: a wait advances it.
 */
import { PutItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalDynamo, type LocalDynamoDb } from '../../../../dev/fakes/local-dynamo.js';
import { DynamoDbChangesLog } from '../../../../functions/shared/adapters/dynamodb-changes-log.js';
import { DynamoDbChangesWriter } from '../../../../functions/shared/adapters/dynamodb-changes-writer.js';
import {
  ChangeSequencer,
  compareSequenceNumbers,
  SequencerDeadlineError,
  type ChangesLogWriter,
  type StreamedChange,
} from '../../../../functions/shared/changes/sequencer.js';

const TABLE = 'changes-sequencer';
const RETENTION_DAYS = 35;
const T0 = Date.parse('2026-12-01T10:00:00.000Z');
const STALE_AFTER_MS = 120_000;

let dynamo: LocalDynamoDb;
let db: DynamoDBClient;
let log: DynamoDbChangesLog;
let connections = 0;

beforeAll(async () => {
  dynamo = await startLocalDynamo();
  db = dynamo.client();
  await dynamo.createChangesTable(TABLE);
  log = new DynamoDbChangesLog(db, TABLE);
});

afterAll(async () => {
  db?.destroy();
  await dynamo?.close();
});

/** A connection of its own for each test. */
function connection(): string {
  connections += 1;
  return `conn-${connections}`;
}

/** A virtual clock: `sleep` advances it. */
function clock(start = T0): { now: () => number; sleep: (ms: number) => Promise<void>; slept: number[] } {
  let at = start;
  const slept: number[] = [];
  return {
    get now() {
      return () => at;
    },
    set now(read: () => number) {
      at = read();
    },
    slept,
    sleep: async (ms) => {
      slept.push(ms);
      at += ms;
      await new Promise((resolve) => setImmediate(resolve));
    },
  };
}

function writer(): DynamoDbChangesWriter {
  return new DynamoDbChangesWriter(db, { tableName: TABLE, retentionDays: RETENTION_DAYS });
}

function sequencer(port: ChangesLogWriter, time = clock(), chunkSize?: number): ChangeSequencer {
  return new ChangeSequencer({ writer: port, now: time.now, sleep: time.sleep, random: () => 0.5, staleAfterMs: STALE_AFTER_MS, ...(chunkSize ? { chunkSize } : {}) });
}

/** Stream changes of `conn`: ids `<prefix>-<i>`, SequenceNumbers from `firstSrc` up by `step`. */
function changes(conn: string, count: number, prefix: string, firstSrc: bigint, step = 10n): StreamedChange[] {
  return Array.from({ length: count }, (_, i) => ({
    connection: conn,
    id: `${prefix}-${i}`,
    change: 'created' as const,
    type: 'file',
    revision: `r${i}`,
    previousRevision: null,
    syncedAt: new Date(T0 + i).toISOString(),
    src: String(firstSrc + BigInt(i) * step).padStart(21, '0'),
    srcAt: Math.floor(T0 / 1000),
  }));
}

/** The log as a reader sees it: every change up to the head, with its number. */
async function feed(conn: string): Promise<Array<{ seq: number; id: string }>> {
  const head = await log.head(conn);
  if (!head) return [];
  const rows = [];
  for (let from = 1; from <= head.head; from += 100) rows.push(...(await log.range(conn, from, head.head, 100)));
  return rows.map((row) => ({ seq: row.seq, id: row.id }));
}

describe('ChangeSequencer on DynamoDB Local', () => {
  it('numbers one connection\'s changes 1..n in stream order, each row as the feed reads it, one head move per chunk', async () => {
    const conn = connection();
    const batch = changes(conn, 7, 'a', 1000n);
    const moves: number[] = [];
    const real = writer();
    const counting: ChangesLogWriter = {
      head: (c) => real.head(c),
      put: (...args) => real.put(...args),
      move: (c, from, to, lastSrc, token) => (moves.push(to), real.move(c, from, to, lastSrc, token)),
      numberedAmong: (...args) => real.numberedAmong(...args),
    };

    expect(await sequencer(counting, clock(), 3).append(conn, batch)).toEqual({ numbered: 7, already: 0, lost: 0, refused: 0 });

    expect(moves).toEqual([3, 6, 7]);
    expect(await feed(conn)).toEqual(batch.map((change, i) => ({ seq: i + 1, id: change.id })));
    const [first] = await log.range(conn, 1, 1, 1);
    expect(first).toEqual({
      seq: 1,
      change: 'created',
      id: 'a-0',
      type: 'file',
      revision: 'r0',
      previousRevision: null,
      syncedAt: batch[0]!.syncedAt,
      expiresAt: Math.floor(Date.parse(batch[0]!.syncedAt) / 1000) + RETENTION_DAYS * 86_400,
    });
    const head = await real.head(conn);
    expect(head).toMatchObject({ head: 7, lastSrc: batch[6]!.src });
    expect(head?.epoch).toMatch(/^[\w-]{12}$/);
  });

  it('keeps the head it moved: the next batch reads none; a kept head another writer moved is read again at once, without a wait', async () => {
    const conn = connection();
    const real = writer();
    let reads = 0;
    const counting: ChangesLogWriter = {
      head: (c) => ((reads += 1), real.head(c)),
      put: (...args) => real.put(...args),
      move: (...args) => real.move(...args),
      numberedAmong: (...args) => real.numberedAmong(...args),
    };
    const time = clock();
    const mine = sequencer(counting, time);
    await mine.append(conn, changes(conn, 2, 'k', 6000n));
    await mine.append(conn, changes(conn, 2, 'l', 6100n));
    expect(reads).toBe(1);
    // Another shard's writer moves the head meanwhile.
    await sequencer(writer()).append(conn, changes(conn, 1, 'other', 6200n));
    expect(await mine.append(conn, changes(conn, 1, 'm', 6300n))).toEqual({ numbered: 1, already: 0, lost: 0, refused: 0 });
    expect(reads).toBe(2);
    expect(time.slept).toEqual([]);
    expect((await feed(conn)).map((row) => row.id)).toEqual(['k-0', 'k-1', 'l-0', 'l-1', 'other-0', 'm-0']);
  });

  it('a batch delivered again, whole or after its first chunk: nothing numbered twice, the rest once', async () => {
    const conn = connection();
    const batch = changes(conn, 5, 'b', 2000n);
    expect(await sequencer(writer(), clock(), 2).append(conn, batch.slice(0, 2))).toMatchObject({ numbered: 2 });

    // The batch again, from its start (its first chunk was numbered before its writer failed).
    expect(await sequencer(writer(), clock(), 2).append(conn, batch)).toEqual({ numbered: 3, already: 2, lost: 0, refused: 0 });
    // And once more, whole.
    expect(await sequencer(writer(), clock(), 2).append(conn, batch)).toEqual({ numbered: 0, already: 5, lost: 0, refused: 0 });

    expect(await feed(conn)).toEqual(batch.map((change, i) => ({ seq: i + 1, id: change.id })));
  });

  it("two shards' writers on one connection at once: every change numbered once, 1..n without a hole, each shard's in its order", async () => {
    const conn = connection();
    // Interleaved SequenceNumbers: the two shards' records are not ordered with each other.
    const shardA = changes(conn, 40, 'a', 5000n, 2n);
    const shardB = changes(conn, 40, 'b', 5001n, 2n);
    const [a, b] = await Promise.all([sequencer(writer(), clock(), 5).append(conn, shardA), sequencer(writer(), clock(), 5).append(conn, shardB)]);

    expect(a.numbered + b.numbered).toBe(80);
    expect(a.already + b.already).toBe(0);
    const rows = await feed(conn);
    expect(rows.map((row) => row.seq)).toEqual(Array.from({ length: 80 }, (_, i) => i + 1));
    expect(rows.filter((row) => row.id.startsWith('a-')).map((row) => row.id)).toEqual(shardA.map((change) => change.id));
    expect(rows.filter((row) => row.id.startsWith('b-')).map((row) => row.id)).toEqual(shardB.map((change) => change.id));
    // The batch of either shard delivered again: nothing more.
    expect(await sequencer(writer(), clock(), 5).append(conn, shardA)).toEqual({ numbered: 0, already: 40, lost: 0, refused: 0 });
    expect(await feed(conn)).toHaveLength(80);
  });

  it('a record of another shard numbered below the last one: looked up, and numbered since the log does not hold it', async () => {
    const conn = connection();
    const later = changes(conn, 3, 'late', 9000n);
    const earlier = changes(conn, 2, 'early', 100n);
    await sequencer(writer(), clock()).append(conn, later);

    expect(await sequencer(writer(), clock()).append(conn, earlier)).toEqual({ numbered: 2, already: 0, lost: 0, refused: 0 });
    expect((await feed(conn)).map((row) => row.id)).toEqual(['late-0', 'late-1', 'late-2', 'early-0', 'early-1']);
  });

  it("a kept head behind another writer's commits: the committed rows are never taken over, however old; the head is read again", async () => {
    const conn = connection();
    const time = clock();
    const mine = sequencer(writer(), time);
    await mine.append(conn, changes(conn, 2, 'x', 7000n));
    // Another container numbers two changes after the head this one keeps.
    await sequencer(writer(), clock()).append(conn, changes(conn, 2, 'y', 7100n));
    // Long after (their rows older than the stale bound), this container numbers one more.
    time.now = ((at) => () => at)(T0 + 10 * STALE_AFTER_MS);
    expect(await mine.append(conn, changes(conn, 1, 'z', 7200n))).toEqual({ numbered: 1, already: 0, lost: 0, refused: 0 });
    expect((await feed(conn)).map((row) => row.id)).toEqual(['x-0', 'x-1', 'y-0', 'y-1', 'z-0']);
  });

  it('a log written before the sequencer (a head without lastSrc): every record looked up, those its changes hold not numbered again', async () => {
    const conn = connection();
    const batch = changes(conn, 3, 'legacy', 8000n);
    // The first two were numbered with their rows, as the transaction did: no src, no writtenAt.
    for (const [i, change] of batch.slice(0, 2).entries()) {
      await db.send(
        new PutItemCommand({
          TableName: TABLE,
          Item: {
            connection: { S: conn },
            seq: { N: String(i + 1) },
            change: { S: change.change },
            id: { S: change.id },
            type: { S: 'file' },
            revision: { S: change.revision },
            syncedAt: { S: change.syncedAt },
            expiresAt: { N: '9999999999' },
          },
        }),
      );
    }
    await db.send(new PutItemCommand({ TableName: TABLE, Item: { connection: { S: conn }, seq: { N: '0' }, head: { N: '2' }, epoch: { S: 'OLDEPOCH' } } }));

    expect(await sequencer(writer()).append(conn, batch)).toEqual({ numbered: 1, already: 2, lost: 0, refused: 0 });
    expect((await feed(conn)).map((row) => `${row.seq} ${row.id}`)).toEqual(['1 legacy-0', '2 legacy-1', '3 legacy-2']);
    expect((await log.head(conn))?.epoch).toBe('OLDEPOCH');
  });

  it('no log yet and `mayStart` says no (the connection is being erased): nothing written, the changes refused', async () => {
    const conn = connection();
    expect(await sequencer(writer()).append(conn, changes(conn, 2, 'e', 9000n), { mayStart: async () => false })).toEqual({ numbered: 0, already: 0, lost: 0, refused: 2 });
    expect(await log.head(conn)).toBeUndefined();
    expect(await dynamo.scan(TABLE).then((rows) => rows.filter((row) => row['connection']?.S === conn))).toEqual([]);
  });

  it('a deadline already passed: nothing numbered, SequencerDeadlineError', async () => {
    const conn = connection();
    await expect(sequencer(writer()).append(conn, changes(conn, 1, 'd', 9100n), { deadline: T0 - 1 })).rejects.toBeInstanceOf(SequencerDeadlineError);
    expect(await log.head(conn)).toBeUndefined();
  });

  describe('a chunk half written when its writer died (rows above the head, the head not moved)', () => {
    async function halfWritten(conn: string, batch: StreamedChange[]): Promise<void> {
      const port = writer();
      // The dead writer's token is its chunk's first record; it put 3 of its 4 rows.
      for (let i = 0; i < 3; i++) expect(await port.put(i + 1, batch[i]!, batch[0]!.src, T0, { staleBeforeMs: T0 - STALE_AFTER_MS })).toBe('written');
    }

    it('no reader sees its rows', async () => {
      const conn = connection();
      await halfWritten(conn, changes(conn, 4, 'h', 3000n));
      expect(await log.head(conn)).toBeUndefined();
      expect(await feed(conn)).toEqual([]);
    });

    it('the same batch delivered again takes its rows over at once', async () => {
      const conn = connection();
      const batch = changes(conn, 4, 'h', 3000n);
      await halfWritten(conn, batch);
      const time = clock(T0 + 1_000);

      expect(await sequencer(writer(), time).append(conn, batch)).toEqual({ numbered: 4, already: 0, lost: 0, refused: 0 });
      expect(time.slept).toEqual([]);
      expect(await feed(conn)).toEqual(batch.map((change, i) => ({ seq: i + 1, id: change.id })));
    });

    it("another shard's writer waits until they are stale, then numbers its own over them; the dead batch, delivered again, after", async () => {
      const conn = connection();
      const dead = changes(conn, 4, 'h', 3000n);
      await halfWritten(conn, dead);
      const other = changes(conn, 2, 'o', 3500n);
      const time = clock(T0 + 1_000);

      expect(await sequencer(writer(), time).append(conn, other)).toMatchObject({ numbered: 2, already: 0 });
      // It waited (never handed its records back) until the dead writer's rows were stale.
      expect(time.now()).toBeGreaterThanOrEqual(T0 + STALE_AFTER_MS);
      expect(time.slept.length).toBeGreaterThan(0);
      expect((await feed(conn)).map((row) => row.id)).toEqual(['o-0', 'o-1']);

      expect(await sequencer(writer(), clock(time.now())).append(conn, dead)).toEqual({ numbered: 4, already: 0, lost: 0, refused: 0 });
      expect((await feed(conn)).map((row) => row.id)).toEqual(['o-0', 'o-1', 'h-0', 'h-1', 'h-2', 'h-3']);
    });
  });

  describe('a lost answer', () => {
    it('the SDK sends a put again (its answer lost): the writer\'s own row, written again', async () => {
      const conn = connection();
      const real = writer();
      const replaying: ChangesLogWriter = {
        head: (c) => real.head(c),
        put: async (...args) => {
          await real.put(...args);
          return real.put(...args);
        },
        move: (...args) => real.move(...args),
        numberedAmong: (...args) => real.numberedAmong(...args),
      };
      const batch = changes(conn, 3, 'p', 4000n);

      expect(await sequencer(replaying).append(conn, batch)).toEqual({ numbered: 3, already: 0, lost: 0, refused: 0 });
      expect(await feed(conn)).toEqual(batch.map((change, i) => ({ seq: i + 1, id: change.id })));
    });

    it("the SDK sends the head's move again (its answer lost; the move was made): taken for lost, then found numbered", async () => {
      const conn = connection();
      const real = writer();
      const replaying: ChangesLogWriter = {
        head: (c) => real.head(c),
        put: (...args) => real.put(...args),
        move: async (...args) => {
          await real.move(...args);
          return real.move(...args);
        },
        numberedAmong: (...args) => real.numberedAmong(...args),
      };
      const batch = changes(conn, 3, 'm', 4100n);

      expect(await sequencer(replaying).append(conn, batch)).toEqual({ numbered: 0, already: 3, lost: 1, refused: 0 });
      expect(await feed(conn)).toEqual(batch.map((change, i) => ({ seq: i + 1, id: change.id })));
    });

    it('the SDK gave up after the head moved (the call failed): the batch delivered again numbers nothing twice', async () => {
      const conn = connection();
      const real = writer();
      const failing: ChangesLogWriter = {
        head: (c) => real.head(c),
        put: (...args) => real.put(...args),
        move: async (...args) => {
          await real.move(...args);
          throw new Error('socket hang up');
        },
        numberedAmong: (...args) => real.numberedAmong(...args),
      };
      const batch = changes(conn, 3, 'g', 4200n);

      await expect(sequencer(failing).append(conn, batch)).rejects.toThrow('socket hang up');
      expect(await sequencer(writer()).append(conn, batch)).toEqual({ numbered: 0, already: 3, lost: 0, refused: 0 });
      expect(await feed(conn)).toHaveLength(3);
    });
  });

  it('refuses a change of another connection', async () => {
    const conn = connection();
    await expect(sequencer(writer()).append(conn, changes('other', 1, 'x', 1n))).rejects.toThrow('a change of connection "other" given as one of');
  });
});

describe('compareSequenceNumbers', () => {
  it('compares decimal digits of any length as numbers', () => {
    expect(compareSequenceNumbers('900', '1000')).toBe(-1);
    expect(compareSequenceNumbers('0001000', '1000')).toBe(0);
    expect(compareSequenceNumbers('4421584500000000017450439091', '4421584500000000017450439090')).toBe(1);
    expect(compareSequenceNumbers('0', '00')).toBe(0);
  });
});
