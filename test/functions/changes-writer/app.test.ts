/**
 * The changes writer's handler (functions/changes-writer/app.ts) on DynamoDB Local: a batch of the
 * items table's stream records, as Lambda hands them, numbered into the changes table connection by
 * connection; a record that cannot be read numbered nothing, logged and counted, never handed back;
 * a connection whose erase runs, or that has no row, numbered nothing; a connection whose changes
 * could not all be numbered handed back from its first record (Lambda goes on from the lowest); a
 * write that changes nothing and a REMOVE number nothing; its metrics and its one log line.
 */
import { PutItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { Context } from 'aws-lambda';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext } from '../../../dev/fakes/lambda.js';
import { startLocalDynamo, type LocalDynamoDb } from '../../../dev/fakes/local-dynamo.js';
import type { StreamImage, StreamRecord } from '../../../functions/change-events/ports.js';
import { DynamoDbConnectionGate } from '../../../functions/changes-writer/adapters/dynamodb-erase-state.js';
import { createChangesWriterHandler } from '../../../functions/changes-writer/app.js';
import { CHANGES_WRITER_OPEN_KEPT_MS } from '../../../functions/changes-writer/limits.js';
import type { ConnectionGate } from '../../../functions/changes-writer/ports.js';
import { DynamoDbChangesLog } from '../../../functions/shared/adapters/dynamodb-changes-log.js';
import { DynamoDbChangesWriter } from '../../../functions/shared/adapters/dynamodb-changes-writer.js';
import type { ChangesLogWriter } from '../../../functions/shared/changes/sequencer.js';
import { TransientError } from '../../../functions/shared/errors.js';
import { CHANGES_WRITER_METRIC_NAMES, CHANGES_WRITER_SERVICE } from '../../../functions/shared/metric-names.js';
import { createLogger, createMetrics } from '../../../functions/shared/observability.js';

const CONNECTIONS = 'connections-writer';
const CHANGES = 'changes-writer';
const RETENTION_DAYS = 35;
const NOW = Date.parse('2026-12-01T10:00:00.000Z');

let dynamo: LocalDynamoDb;
let db: DynamoDBClient;

beforeAll(async () => {
  dynamo = await startLocalDynamo({ proxy: false });
  db = dynamo.client();
  await dynamo.createConnectionsTable(CONNECTIONS);
  await dynamo.createChangesTable(CHANGES);
  // Connections as the connections table holds them: acme and globex live, gone being erased.
  for (const connection of ['acme', 'globex']) await db.send(new PutItemCommand({ TableName: CONNECTIONS, Item: { connection: { S: connection }, status: { S: 'active' } } }));
  await db.send(
    new PutItemCommand({
      TableName: CONNECTIONS,
      Item: { connection: { S: 'gone' }, status: { S: 'removed' }, erase: { M: { state: { S: 'running' }, startedAt: { S: 'x' }, notBefore: { S: 'x' }, rowsDeleted: { N: '0' }, objectsDeleted: { N: '0' } } } },
    }),
  );
  await db.send(
    new PutItemCommand({
      TableName: CONNECTIONS,
      Item: { connection: { S: 'leaving' }, status: { S: 'removed' }, erase: { M: { state: { S: 'waiting' }, startedAt: { S: 'x' }, notBefore: { S: 'x' }, rowsDeleted: { N: '0' }, objectsDeleted: { N: '0' } } } },
    }),
  );
});

afterAll(async () => {
  db?.destroy();
  await dynamo?.close();
});

let sequence = 1000;
/** A row's image as the items table's stream carries it. */
function image(connection: string, id: string, revision: string, extra: StreamImage = {}): StreamImage {
  return { connection: { S: connection }, id: { S: id }, type: { S: 'file' }, revision: { S: revision }, syncedAt: { S: new Date(NOW).toISOString() }, ...extra };
}
function record(eventName: 'INSERT' | 'MODIFY' | 'REMOVE', newImage: StreamImage | undefined, oldImage?: StreamImage): StreamRecord {
  sequence += 1;
  const keys = newImage ?? oldImage!;
  return {
    eventID: `e${sequence}`,
    eventName,
    dynamodb: {
      Keys: { connection: keys['connection']!, id: keys['id']! },
      ...(newImage ? { NewImage: newImage } : {}),
      ...(oldImage ? { OldImage: oldImage } : {}),
      ApproximateCreationDateTime: Math.floor(NOW / 1000),
      SequenceNumber: String(sequence).padStart(21, '0'),
    },
  };
}

function setup(writer?: ChangesLogWriter) {
  const output = new PassThrough();
  let text = '';
  output.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
  const handler = createChangesWriterHandler({
    config: { changesTableName: CHANGES, changesRetentionDays: RETENTION_DAYS, connectionsTableName: CONNECTIONS, stage: undefined },
    dynamodb: db,
    ...(writer ? { writer } : {}),
    clock: { now: () => new Date(NOW) },
    sleep: async () => undefined,
    random: () => 0.5,
    logger: createLogger(CHANGES_WRITER_SERVICE, { output }),
    metrics: createMetrics(CHANGES_WRITER_SERVICE, { output }),
  });
  const context: Context = createContext('changes-writer', 'eu-west-1', 60_000, { remainingMs: () => 60_000, awsRequestId: 'req-1' });
  const lines = () => text.split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>);
  return { handler, context, lines };
}

async function feed(connection: string): Promise<string[]> {
  const log = new DynamoDbChangesLog(db, CHANGES);
  const head = await log.head(connection);
  if (!head) return [];
  return (await log.range(connection, 1, head.head, 1000)).map((change) => `${change.seq} ${change.change} ${change.id} ${change.previousRevision ?? '-'}→${change.revision}`);
}

describe('the changes writer', () => {
  it("numbers each connection's changes in stream order; a write that changes nothing, a REMOVE, an erased connection's and one without a row number nothing", async () => {
    const { handler, context, lines } = setup();
    const records = [
      record('INSERT', image('acme', 'a', '1')),
      record('INSERT', image('globex', 'g', '1')),
      record('MODIFY', image('acme', 'a', '2'), image('acme', 'a', '1')),
      // The same revision again: no change.
      record('MODIFY', image('acme', 'a', '2'), image('acme', 'a', '2')),
      // A folder's childrenPending removed once its children are sent (docs/discovery.md): no change.
      record('MODIFY', image('acme', 'a', '2'), image('acme', 'a', '2', { childrenPending: { BOOL: true } })),
      record('MODIFY', image('acme', 'a', '2', { deleted: { BOOL: true } }), image('acme', 'a', '2')),
      record('REMOVE', undefined, image('acme', 'b', '1')),
      record('INSERT', image('gone', 'x', '1')),
      record('INSERT', image('nobody', 'y', '1')),
      record('INSERT', image('leaving', 'z', '1')),
    ];
    expect(await handler({ Records: records } as never, context)).toEqual({ batchItemFailures: [] });

    expect(await feed('acme')).toEqual(['1 created a -→1', '2 updated a 1→2', '3 deleted a 2→2']);
    expect(await feed('globex')).toEqual(['1 created g -→1']);
    expect(await feed('gone')).toEqual([]);
    expect(await feed('nobody')).toEqual([]);
    // An erase that waits: the rows are still there, and the connection may yet be put again.
    expect(await feed('leaving')).toEqual(['1 created z -→1']);
    const done = lines().find((line) => line['message'] === 'batch done');
    expect(done).toMatchObject({ records: 10, connections: 5, numbered: 5, already: 0, erased: 2, unreadable: 0, retried: 0 });
    const metrics = lines().find((line) => line['_aws'] !== undefined)!;
    expect(Object.fromEntries(Object.values(CHANGES_WRITER_METRIC_NAMES).map((name) => [name, metrics[name]]))).toEqual({
      ChangesNumbered: 5,
      ChangesAlreadyNumbered: 0,
      ChangesOfErasedSkipped: 2,
      ChangesUnreadable: 0,
      ChangeRecordsRetried: 0,
    });

    // The same batch again (its answer lost): nothing numbered twice.
    const again = setup();
    expect(await again.handler({ Records: records } as never, again.context)).toEqual({ batchItemFailures: [] });
    expect(again.lines().find((line) => line['message'] === 'batch done')).toMatchObject({ numbered: 0, already: 5 });
    expect(await feed('acme')).toHaveLength(3);
  });

  it('a row without a type (written by hand) is numbered with type null, as the feed answers it', async () => {
    const { handler, context } = setup();
    const { type: _type, ...untyped } = image('globex', 'untyped', '1');
    expect(await handler({ Records: [record('INSERT', untyped)] } as never, context)).toEqual({ batchItemFailures: [] });
    const log = new DynamoDbChangesLog(db, CHANGES);
    const head = (await log.head('globex'))!;
    expect((await log.range('globex', head.head, head.head, 1))[0]).toMatchObject({ id: 'untyped', change: 'created', type: null });
  });

  it('a record that cannot be read as a change numbers nothing and is not handed back: an error names its key and sequence number, never its data', async () => {
    const { handler, context, lines } = setup();
    const bad = record('MODIFY', image('acme', 'secretless', '9', { item: { M: { body: { S: 'the-item-data-9f3' } } } }));
    const good = record('INSERT', image('acme', 'after', '1'));
    expect(await handler({ Records: [bad, good] } as never, context)).toEqual({ batchItemFailures: [] });
    expect((await feed('acme')).at(-1)).toMatch(/created after -→1$/);
    const error = lines().find((line) => line['message'] === 'stream record not numbered: it cannot be read as a change');
    expect(error).toMatchObject({ level: 'ERROR', connection: 'acme', id: 'secretless', sequenceNumber: bad.dynamodb!.SequenceNumber });
    expect(String(error?.['reason'])).toMatch(/without an old image/);
    expect(JSON.stringify(lines())).not.toContain('the-item-data-9f3');
    expect(lines().find((line) => line['message'] === 'batch done')).toMatchObject({ unreadable: 1, numbered: 1, retried: 0 });
  });

  it("a connection whose changes cannot all be numbered hands the batch back from its first record; the others' are numbered and found numbered on the retry", async () => {
    const real = new DynamoDbChangesWriter(db, { tableName: CHANGES, retentionDays: RETENTION_DAYS });
    let failing = true;
    const flaky: ChangesLogWriter = {
      head: (connection) => real.head(connection),
      put: async (seq, change, writer, writtenAt, takeOver) => {
        if (failing && change.connection === 'globex') throw new TransientError('DynamoDB PutItem failed (InternalServerError)');
        return real.put(seq, change, writer, writtenAt, takeOver);
      },
      move: (...args) => real.move(...args),
      numberedAmong: (...args) => real.numberedAmong(...args),
    };
    const { handler, context, lines } = setup(flaky);
    const records = [record('INSERT', image('acme', 'r1', '1')), record('INSERT', image('globex', 'r2', '1')), record('INSERT', image('acme', 'r3', '1'))];
    expect(await handler({ Records: records } as never, context)).toEqual({ batchItemFailures: [{ itemIdentifier: records[1]!.dynamodb!.SequenceNumber }] });
    expect(lines().find((line) => line['message'] === 'changes not numbered yet: handed back to the event source')).toMatchObject({ level: 'WARN', connection: 'globex', records: 1 });
    expect(lines().find((line) => line['message'] === 'batch done')).toMatchObject({ numbered: 2, retried: 2 });

    // Lambda delivers again from the record reported.
    failing = false;
    const retry = setup(flaky);
    expect(await retry.handler({ Records: records.slice(1) } as never, retry.context)).toEqual({ batchItemFailures: [] });
    expect(retry.lines().find((line) => line['message'] === 'batch done')).toMatchObject({ numbered: 1, already: 1 });
    expect((await feed('acme')).filter((line) => / r[13] /.test(line))).toHaveLength(2);
    expect((await feed('globex')).filter((line) => / r2 /.test(line))).toHaveLength(1);
  });

  it('an unreadable record in the part of a batch handed back is logged and counted when it comes again, not twice', async () => {
    const real = new DynamoDbChangesWriter(db, { tableName: CHANGES, retentionDays: RETENTION_DAYS });
    const flaky: ChangesLogWriter = {
      head: (connection) => real.head(connection),
      put: async (seq, change, writer, writtenAt, takeOver) => {
        if (change.connection === 'globex') throw new TransientError('DynamoDB PutItem failed (InternalServerError)');
        return real.put(seq, change, writer, writtenAt, takeOver);
      },
      move: (...args) => real.move(...args),
      numberedAmong: (...args) => real.numberedAmong(...args),
    };
    const { handler, context, lines } = setup(flaky);
    const before = record('MODIFY', image('acme', 'bad-before', '1'));
    const after = record('MODIFY', image('acme', 'bad-after', '1'));
    const failing = record('INSERT', image('globex', 'fails', '1'));
    const records = [before, record('INSERT', image('acme', 'fine', '1')), failing, after];
    expect(await handler({ Records: records } as never, context)).toEqual({ batchItemFailures: [{ itemIdentifier: failing.dynamodb!.SequenceNumber }] });
    const errors = lines().filter((line) => line['message'] === 'stream record not numbered: it cannot be read as a change');
    expect(errors.map((line) => line['id'])).toEqual(['bad-before']);
    expect(lines().find((line) => line['message'] === 'batch done')).toMatchObject({ unreadable: 1, retried: 2 });
  });

  it("an erase that starts while a batch is numbered: the gate is read again before a log is started, and no log is started", async () => {
    await db.send(new PutItemCommand({ TableName: CONNECTIONS, Item: { connection: { S: 'racing' }, status: { S: 'active' } } }));
    const real = new DynamoDbChangesWriter(db, { tableName: CHANGES, retentionDays: RETENTION_DAYS });
    // The gate passes; then, before the writer looks for the head, the erase starts (and has deleted the log).
    const racing: ChangesLogWriter = {
      head: async (connection) => {
        await db.send(
          new PutItemCommand({
            TableName: CONNECTIONS,
            Item: { connection: { S: 'racing' }, status: { S: 'removed' }, erase: { M: { state: { S: 'running' }, startedAt: { S: 'x' }, notBefore: { S: 'x' }, rowsDeleted: { N: '0' }, objectsDeleted: { N: '0' } } } },
          }),
        );
        return real.head(connection);
      },
      put: (...args) => real.put(...args),
      move: (...args) => real.move(...args),
      numberedAmong: (...args) => real.numberedAmong(...args),
    };
    const { handler, context, lines } = setup(racing);
    expect(await handler({ Records: [record('INSERT', image('racing', 'r', '1'))] } as never, context)).toEqual({ batchItemFailures: [] });
    expect(await feed('racing')).toEqual([]);
    expect(await dynamo.scan(CHANGES).then((rows) => rows.filter((row) => row['connection']?.S === 'racing'))).toEqual([]);
    expect(lines().find((line) => line['message'] === 'batch done')).toMatchObject({ numbered: 0, erased: 1 });
  });

  it('reads a connection found open once every CHANGES_WRITER_OPEN_KEPT_MS, not once a batch; a log is started only on a read of its own', async () => {
    await db.send(new PutItemCommand({ TableName: CONNECTIONS, Item: { connection: { S: 'kept' }, status: { S: 'active' } } }));
    const real = new DynamoDbConnectionGate(db, CONNECTIONS);
    const reads: string[] = [];
    const connections: ConnectionGate = { open: async (connection) => (reads.push(connection), real.open(connection)) };
    let now = NOW;
    const handler = createChangesWriterHandler({
      config: { changesTableName: CHANGES, changesRetentionDays: RETENTION_DAYS, connectionsTableName: CONNECTIONS, stage: undefined },
      dynamodb: db,
      connections,
      clock: { now: () => new Date(now) },
      sleep: async () => undefined,
      random: () => 0.5,
      logger: createLogger(CHANGES_WRITER_SERVICE, { output: new PassThrough() }),
      metrics: createMetrics(CHANGES_WRITER_SERVICE, { output: new PassThrough() }),
    });
    const context: Context = createContext('changes-writer', 'eu-west-1', 60_000, { remainingMs: () => 60_000, awsRequestId: 'req-kept' });
    // The first batch: the batch's read, then the log's start reads again.
    await handler({ Records: [record('INSERT', image('kept', 'k1', '1'))] } as never, context);
    expect(reads).toEqual(['kept', 'kept']);
    // Within the kept time: no read; the log is there.
    now += CHANGES_WRITER_OPEN_KEPT_MS - 1;
    await handler({ Records: [record('INSERT', image('kept', 'k2', '1'))] } as never, context);
    expect(reads).toHaveLength(2);
    // Past it: read again.
    now += 1;
    await handler({ Records: [record('INSERT', image('kept', 'k3', '1'))] } as never, context);
    expect(reads).toHaveLength(3);
    expect(await feed('kept')).toEqual(['1 created k1 -→1', '2 created k2 -→1', '3 created k3 -→1']);
    // Its erase runs: within the kept time a batch is still numbered, as one under way when it starts would be; the next read stops it.
    await db.send(
      new PutItemCommand({
        TableName: CONNECTIONS,
        Item: { connection: { S: 'kept' }, status: { S: 'removed' }, erase: { M: { state: { S: 'running' }, startedAt: { S: 'x' }, notBefore: { S: 'x' }, rowsDeleted: { N: '0' }, objectsDeleted: { N: '0' } } } },
      }),
    );
    now += 1;
    await handler({ Records: [record('INSERT', image('kept', 'k4', '1'))] } as never, context);
    expect(reads).toHaveLength(3);
    expect(await feed('kept')).toHaveLength(4);
    now += CHANGES_WRITER_OPEN_KEPT_MS;
    await handler({ Records: [record('INSERT', image('kept', 'k5', '1'))] } as never, context);
    expect(reads).toHaveLength(4);
    expect(await feed('kept')).toHaveLength(4);
  });

  it('a head no writer wrote (malformed): that connection numbers nothing and is counted, never handed back; the others go on', async () => {
    await db.send(new PutItemCommand({ TableName: CONNECTIONS, Item: { connection: { S: 'broken' }, status: { S: 'active' } } }));
    await db.send(new PutItemCommand({ TableName: CHANGES, Item: { connection: { S: 'broken' }, seq: { N: '0' }, head: { S: 'seven' } } }));
    const { handler, context, lines } = setup();
    const records = [record('INSERT', image('broken', 'b', '1')), record('INSERT', image('globex', 'after-broken', '1'))];
    expect(await handler({ Records: records } as never, context)).toEqual({ batchItemFailures: [] });
    expect((await feed('globex')).at(-1)).toMatch(/created after-broken -→1$/);
    expect(lines().find((line) => line['message'] === 'changes not numbered: the changes table refused them for good')).toMatchObject({ level: 'ERROR', connection: 'broken', records: 1 });
    expect(lines().find((line) => line['message'] === 'batch done')).toMatchObject({ unreadable: 1, retried: 0 });
  });
});
