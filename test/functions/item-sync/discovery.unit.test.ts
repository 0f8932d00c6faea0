/**
 * Discovery in the item sync handler (mocked clients, unit-harness.ts; docs/discovery.md): a folder
 * about to be written is written first, with `childrenPending`, then sends its unknown children to
 * the reconcile queue (the exact SendMessageBatch entries) and removes the marker; revisions
 * compared with childRevisionPath; an unchanged folder reads and sends nothing; a cycle ends, and
 * one closing while its folder's sends are in flight sends nothing back; two new folders listing
 * each other send each other at most once; ids of the batch are never sent; truncated and malformed
 * listings counted and logged; the children that left the list (row inline or in the items bucket,
 * sent before the row) and those of a deleted folder sent; the interrupted crawl (sends that fail,
 * an invocation that ends after the write, a write that fails) sends on redelivery.
 * The items table is a small model behind the mocked DynamoDB client (its condition expressions
 * honoured), so redeliveries and other containers see what the earlier runs wrote.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { BatchGetItemCommand, ConditionalCheckFailedException, PutItemCommand, UpdateItemCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import { GetObjectCommand } from '@aws-sdk/client-s3';
import { toAttributeValue } from '../../../functions/item-sync/adapters/attribute-values.js';
import { captureOutput } from '../../../dev/fakes/capture-output.js';
import { DLQ_URL, RECONCILE_URL, ScriptedProvider, lambdaContext, logLines, metricsIn, providerError, sqsEvent } from './helpers.js';
import { BUCKET, NOW, TABLE, TOKEN_1, TOKEN_2, build, ddb, harness, run, runRecords, s3, sqs, useHarness } from './unit-harness.js';

useHarness();

const DISCOVERY = { CHILDREN_PATH: 'children', RECONCILE_QUEUE_URL: RECONCILE_URL };
const WITH_REVISIONS = { ...DISCOVERY, CHILD_REVISION_PATH: 'rev' };
const BOX = {
  CHILDREN_PATH: 'item_collection.entries',
  CHILD_REVISION_PATH: 'etag',
  CHILDREN_TOTAL_PATH: 'item_collection.total_count',
  RECONCILE_QUEUE_URL: RECONCILE_URL,
};
const BACKGROUND = { lane: { type: 'String' as const, value: 'background' } };

function folder(id: string, revision: number, children: unknown, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { id, type: 'folder', revision, children, ...extra };
}
const entries = (...ids: string[]) => ids.map((id) => ({ id, type: 'file' }));

// ---- the items table behind the mocked client ------------------------------------------------

type Row = Record<string, AttributeValue>;
const table = new Map<string, Row>();
/** The table's and the queues' requests, in order: `BatchGetItem`, `PutItem <id>`, `UpdateItem <id>`, `Send <queue>`. */
let order: string[] = [];
/** What PutItem does before it stores the row (throw to fail it). */
let onPut: (row: Row, call: number) => void = () => undefined;
/** Whether the reconcile queue refuses every entry (for a reason that may pass). */
let reconcileRefuses = false;
/** What an eventually consistent read returns instead of the row, by `connection/id` (a copy it has not caught up with). */
const stale = new Map<string, Row>();

/** The `syncedAt` of the rows a test puts in the table itself. */
const SYNCED_BEFORE = '2026-01-01T00:00:00.000Z';
const keyOf = (key: Row) => `${key['connection']!.S}/${key['id']!.S}`;

interface Expression {
  ConditionExpression?: string;
  UpdateExpression?: string;
  ExpressionAttributeNames?: Record<string, string>;
  ExpressionAttributeValues?: Record<string, AttributeValue>;
}

/** Throws ConditionalCheckFailedException unless `row` meets the write's condition (the forms the store sends). */
function checkCondition(row: Row | undefined, input: Expression): void {
  if (input.ConditionExpression === undefined) return;
  const name = (ref: string) => input.ExpressionAttributeNames![ref]!;
  const holds = input.ConditionExpression.split(' AND ').every((term) => {
    const exists = /^attribute_(not_)?exists\((#\w+)\)$/.exec(term);
    if (exists) return (row?.[name(exists[2]!)] !== undefined) === (exists[1] === undefined);
    const equals = /^(#\w+) = (:\w+)$/.exec(term);
    if (!equals) throw new Error(`the table model cannot read the condition ${term}`);
    return row !== undefined && JSON.stringify(row[name(equals[1]!)]) === JSON.stringify(input.ExpressionAttributeValues![equals[2]!]);
  });
  if (!holds) throw new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: {} });
}

/** Applies `SET #a = :v, …` and `REMOVE #b, …` to the row. */
function applyUpdate(row: Row, input: Expression): void {
  const name = (ref: string) => input.ExpressionAttributeNames![ref.trim()]!;
  const [, set, remove] = /^(?:SET (.*?))?\s*(?:REMOVE (.*))?$/.exec(input.UpdateExpression!)!;
  for (const assignment of set?.split(',') ?? []) {
    const [ref, value] = assignment.split('=').map((part) => part.trim());
    row[name(ref!)] = input.ExpressionAttributeValues![value!]!;
  }
  for (const ref of remove?.split(',') ?? []) delete row[name(ref)];
}

function putRow(
  id: string,
  fields: { revision: string; type?: string; item?: Record<string, unknown>; deleted?: boolean; objectKey?: string; connection?: string; childrenPending?: boolean; syncedAt?: string },
): void {
  const connection = fields.connection ?? 'default';
  table.set(`${connection}/${id}`, {
    connection: { S: connection },
    id: { S: id },
    type: { S: fields.type ?? 'file' },
    revision: { S: fields.revision },
    ...(fields.item !== undefined ? { item: toAttributeValue(fields.item) } : {}),
    ...(fields.objectKey !== undefined ? { itemObject: { M: { key: { S: fields.objectKey }, size: { N: '10' }, sha256: { S: 'a'.repeat(64) } } } } : {}),
    ...(fields.deleted ? { deleted: { BOOL: true } } : {}),
    syncedAt: { S: fields.syncedAt ?? SYNCED_BEFORE },
    ...(fields.childrenPending ? { childrenPending: { BOOL: true } } : {}),
  });
}

beforeEach(() => {
  table.clear();
  stale.clear();
  order = [];
  onPut = () => undefined;
  reconcileRefuses = false;
  let puts = 0;
  ddb.on(BatchGetItemCommand).callsFake((input: { RequestItems: Record<string, { Keys: Row[]; ConsistentRead?: boolean }> }) => {
    order.push('BatchGetItem');
    const request = input.RequestItems[TABLE]!;
    const rowOf = (key: Row) => (request.ConsistentRead === true ? undefined : stale.get(keyOf(key))) ?? table.get(keyOf(key));
    const rows = request.Keys.map(rowOf).filter((row): row is Row => row !== undefined);
    return { Responses: { [TABLE]: structuredClone(rows) } };
  });
  ddb.on(PutItemCommand).callsFake((input: { Item: Row; ReturnValues?: string } & Expression) => {
    order.push(`PutItem ${input.Item['id']!.S}`);
    onPut(input.Item, ++puts);
    const before = table.get(keyOf(input.Item));
    checkCondition(before, input);
    table.set(keyOf(input.Item), structuredClone(input.Item));
    return before && input.ReturnValues === 'ALL_OLD' ? { Attributes: before } : {};
  });
  ddb.on(UpdateItemCommand).callsFake((input: { Key: Row } & Expression) => {
    order.push(`UpdateItem ${input.Key['id']!.S}`);
    const row = table.get(keyOf(input.Key));
    checkCondition(row, input);
    applyUpdate(row!, input);
    return {};
  });
  sqs.on(SendMessageBatchCommand).callsFake((input: { QueueUrl: string; Entries: Array<{ Id: string }> }) => {
    order.push(`Send ${input.QueueUrl === RECONCILE_URL ? 'reconcile' : input.QueueUrl}`);
    if (input.QueueUrl === RECONCILE_URL && reconcileRefuses) {
      return { Successful: [], Failed: input.Entries.map((entry) => ({ Id: entry.Id, SenderFault: false, Code: 'InternalError', Message: 'try again' })) };
    }
    return { Successful: input.Entries.map((entry) => ({ Id: entry.Id, MessageId: `sent-${entry.Id}`, MD5OfMessageBody: 'x' })), Failed: [] };
  });
});

/** The entries sent to the reconcile queue so far, flattened. */
function sentToReconcile(): Array<{ Id?: string; MessageBody?: string; MessageGroupId?: string; MessageAttributes?: unknown }> {
  return sqs
    .commandCalls(SendMessageBatchCommand)
    .filter((call) => call.args[0].input.QueueUrl === RECONCILE_URL)
    .flatMap((call) => call.args[0].input.Entries ?? []);
}
const sentIds = () => sentToReconcile().map((entry) => JSON.parse(entry.MessageBody!) as { connection: string; id: string });

/** The BatchGetItem key lists, each call's keys as `connection/id`, with whether it was consistent. */
function reads(): Array<{ keys: string[]; consistent: boolean; projection: string }> {
  return ddb.commandCalls(BatchGetItemCommand).map((call) => {
    const request = call.args[0].input.RequestItems![TABLE]!;
    return { keys: request.Keys!.map((key) => keyOf(key as Row)), consistent: request.ConsistentRead === true, projection: request.ProjectionExpression! };
  });
}

const STORED_ITEM_PROJECTION = '#type, #revision, #deleted, #item, #itemObject, #childrenPending';

/** The projection of the sync's reads of stored revisions (the batch's, and the children's). */
const REVISIONS_PROJECTION = '#connection, #id, #revision, #deleted, #itemObject, #syncedAt, #childrenPending';

describe('a folder about to be written is written first, then sends its children', () => {
  it('a new folder is written with childrenPending, sends every child the table does not hold (background-lane messages of its connection), then the marker is removed', async () => {
    harness.connections.add('acme');
    putRow('b', { connection: 'acme', revision: '1' });
    const provider = new ScriptedProvider().on('F', folder('F', 1, entries('a', 'b', 'c')));
    const { result, metrics, logs } = await run(build(provider, { env: DISCOVERY }), ['{"connection":"acme","id":"F"}']);

    expect(result).toEqual({ batchItemFailures: [] });
    expect(sentToReconcile()).toEqual([
      { Id: 'm0', MessageBody: '{"connection":"acme","id":"a"}', MessageGroupId: 'acme', MessageAttributes: { lane: { DataType: 'String', StringValue: 'background' } } },
      { Id: 'm1', MessageBody: '{"connection":"acme","id":"c"}', MessageGroupId: 'acme', MessageAttributes: { lane: { DataType: 'String', StringValue: 'background' } } },
    ]);
    // The folder's own revision, its row (marked), its children's revisions (strongly consistent:
    // a row written before this read is seen), the children sent, the marker removed.
    expect(order).toEqual(['BatchGetItem', 'PutItem F', 'BatchGetItem', 'Send reconcile', 'UpdateItem F']);
    expect(reads()[1]).toEqual({ keys: ['acme/a', 'acme/b', 'acme/c'], consistent: true, projection: REVISIONS_PROJECTION });
    expect(ddb.commandCalls(PutItemCommand)[0]!.args[0].input.Item).toMatchObject({ id: { S: 'F' }, childrenPending: { BOOL: true } });
    const syncedAt = NOW.toISOString();
    expect(ddb.commandCalls(UpdateItemCommand)[0]!.args[0].input).toEqual({
      TableName: TABLE,
      Key: { connection: { S: 'acme' }, id: { S: 'F' } },
      UpdateExpression: 'REMOVE #childrenPending',
      ConditionExpression: '#revision = :revision AND #syncedAt = :syncedAt AND attribute_exists(#childrenPending)',
      ExpressionAttributeNames: { '#revision': 'revision', '#syncedAt': 'syncedAt', '#childrenPending': 'childrenPending' },
      ExpressionAttributeValues: { ':revision': { S: '1' }, ':syncedAt': { S: syncedAt } },
    });
    expect(table.get('acme/F')).toMatchObject({ revision: { S: '1' }, syncedAt: { S: syncedAt } });
    expect(table.get('acme/F')!['childrenPending']).toBeUndefined();
    expect(metrics).toMatchObject({ ItemsCreated: 1, ChildrenDiscovered: 2, ChildrenSkipped: 0, ListingsTruncated: 0 });
    expect(logs.filter((line) => line['message'] === 'folder children sent for checking')).toEqual([
      expect.objectContaining({ level: 'INFO', connection: 'acme', itemId: 'F', sent: 2, listed: 2, left: 0 }),
    ]);
    // Only the folder is fetched: its children are checked when the reconcile queue delivers them.
    expect(provider.calls.map((call) => call.id)).toEqual(['F']);
  });

  it('a folder that holds no new child sends nothing, and is written (the marker removed once its children are read)', async () => {
    putRow('a', { revision: '1' });
    const provider = new ScriptedProvider().on('F', folder('F', 1, entries('a')));
    const { metrics } = await run(build(provider, { env: DISCOVERY }), ['F']);
    expect(sentToReconcile()).toEqual([]);
    expect(order).toEqual(['BatchGetItem', 'PutItem F', 'BatchGetItem', 'UpdateItem F']);
    expect(table.get('default/F')!['childrenPending']).toBeUndefined();
    expect(metrics).toMatchObject({ ItemsCreated: 1, ChildrenDiscovered: 0 });
  });

  it('with childRevisionPath: a child whose entry holds the stored revision is not sent; a changed, deleted, unknown one or one without a revision is', async () => {
    putRow('same', { revision: '7' });
    putRow('changed', { revision: '1' });
    putRow('gone', { revision: '3', deleted: true });
    putRow('norev', { revision: '1' });
    const children = [{ id: 'same', rev: 7 }, { id: 'changed', rev: 2 }, { id: 'gone', rev: 3 }, { id: 'new', rev: 1 }, { id: 'norev' }];
    const provider = new ScriptedProvider().on('F', folder('F', 1, children));
    const { metrics } = await run(build(provider, { env: WITH_REVISIONS }), ['F']);
    expect(sentIds().map((sent) => sent.id)).toEqual(['changed', 'gone', 'new', 'norev']);
    expect(metrics).toMatchObject({ ItemsCreated: 1, ChildrenDiscovered: 4 });
  });

  it('without childRevisionPath a live child is never sent (the reconciler keeps it fresh); a tombstoned one is', async () => {
    putRow('changed', { revision: '1' });
    putRow('gone', { revision: '3', deleted: true });
    const provider = new ScriptedProvider().on('F', folder('F', 1, [{ id: 'changed', rev: 2 }, { id: 'gone', rev: 3 }]));
    await run(build(provider, { env: DISCOVERY }), ['F']);
    expect(sentIds().map((sent) => sent.id)).toEqual(['gone']);
  });

  it('an unchanged folder (no marker) reads nothing more and sends nothing', async () => {
    putRow('F', { type: 'folder', revision: '1', item: folder('F', 1, entries('a', 'b')) });
    const provider = new ScriptedProvider().on('F', folder('F', 1, entries('a', 'b')));
    const { metrics } = await run(build(provider, { env: DISCOVERY }), ['F']);
    expect(order).toEqual(['BatchGetItem']);
    expect(sentToReconcile()).toEqual([]);
    expect(metrics).toMatchObject({ ItemsUnchanged: 1, ChildrenDiscovered: 0 });
  });

  it('a file never has children read, whatever it holds', async () => {
    const provider = new ScriptedProvider().on('f', { id: 'f', type: 'file', revision: 1, children: entries('a') });
    const { metrics } = await run(build(provider, { env: DISCOVERY }), ['f']);
    expect(order).toEqual(['BatchGetItem', 'PutItem f']);
    expect(metrics).toMatchObject({ ItemsCreated: 1, ChildrenDiscovered: 0 });
  });

  it('discovery off (no CHILDREN_PATH): a folder is written without a read or a send, and the counters are published as zeros', async () => {
    const provider = new ScriptedProvider().on('F', folder('F', 1, entries('a')));
    const { metrics } = await run(build(provider), ['F']);
    expect(order).toEqual(['BatchGetItem', 'PutItem F']);
    expect(metrics).toMatchObject({ ItemsCreated: 1, ChildrenDiscovered: 0, ChildrenSkipped: 0, ListingsTruncated: 0 });
  });

  it('Box-like folders: the children at item_collection.entries, their etag compared, the total at item_collection.total_count', async () => {
    putRow('10', { revision: '0' });
    const box = { id: '1', type: 'folder', etag: '3', item_collection: { total_count: 2, entries: [{ type: 'file', id: '10', etag: '0' }, { type: 'folder', id: '11', etag: '1' }] } };
    const provider = new ScriptedProvider().on('1', box);
    const { metrics } = await run(build(provider, { env: { ...BOX, REVISION_FIELD: 'etag' } }), ['1']);
    expect(sentIds()).toEqual([{ connection: 'default', id: '11' }]);
    expect(metrics).toMatchObject({ ItemsCreated: 1, ChildrenDiscovered: 1, ListingsTruncated: 0 });
  });
});

describe('the crawl ends', () => {
  /** Runs the users' batch, then every batch the reconcile queue receives, until nothing more is sent (at most `rounds`). */
  async function crawl(provider: ScriptedProvider, root: string, rounds = 10): Promise<number> {
    const handler = build(provider, { env: DISCOVERY });
    let seen = sentToReconcile().length;
    await run(handler, [root]);
    for (let round = 1; round <= rounds; round += 1) {
      const next = sentToReconcile().slice(seen);
      seen += next.length;
      if (next.length === 0) return round;
      const { result } = await runRecords(handler, next.map((entry) => ({ body: entry.MessageBody!, attributes: BACKGROUND })));
      expect(result).toEqual({ batchItemFailures: [] });
    }
    throw new Error(`the crawl did not end in ${rounds} rounds`);
  }

  it('a folder listed inside its descendant (A → B → C → A): each folder fetched once, then nothing is sent', async () => {
    const provider = new ScriptedProvider()
      .on('A', folder('A', 1, entries('B')))
      .on('B', folder('B', 1, [...entries('C'), { id: 'B' }]))
      .on('C', folder('C', 1, entries('A', 'B')));
    expect(await crawl(provider, 'A')).toBe(3);
    expect(provider.calls.map((call) => call.id)).toEqual(['A', 'B', 'C']);
    expect(sentIds().map((sent) => sent.id)).toEqual(['B', 'C']);
    expect([...table.keys()].sort()).toEqual(['default/A', 'default/B', 'default/C']);
  });

  it('the folder that changes sends only what the table does not hold: the crawl stops again', async () => {
    const provider = new ScriptedProvider().on('A', folder('A', 1, entries('B'))).on('B', folder('B', 1, entries('A')));
    await crawl(provider, 'A');
    provider.on('A', folder('A', 2, entries('B', 'D'))).on('D', { id: 'D', type: 'file', revision: 1 });
    const before = sentToReconcile().length;
    await crawl(provider, 'A');
    expect(sentIds().slice(before).map((sent) => sent.id)).toEqual(['D']);
    expect(provider.calls.map((call) => call.id)).toEqual(['A', 'B', 'A', 'D']);
  });
});

describe('truncated and malformed listings', () => {
  it('a list shorter than its total is used as far as it goes, counted and logged with the connection and folder id', async () => {
    const box = { id: '1', type: 'folder', etag: '1', item_collection: { total_count: 5000, entries: [{ id: '10' }, { id: '11' }] } };
    const provider = new ScriptedProvider().on('1', box);
    const { metrics, logs } = await run(build(provider, { env: { ...BOX, REVISION_FIELD: 'etag' } }), ['1']);
    expect(sentIds().map((sent) => sent.id)).toEqual(['10', '11']);
    expect(metrics).toMatchObject({ ItemsCreated: 1, ChildrenDiscovered: 2, ListingsTruncated: 1, ChildrenSkipped: 0 });
    expect(logs.filter((line) => String(line['message']).startsWith('folder listing'))).toEqual([
      expect.objectContaining({ level: 'WARN', message: 'folder listing truncated; only the children it lists are found', connection: 'default', itemId: '1', listed: 2, total: 5000 }),
    ]);
  });

  it('entries that are not objects, lack a string id, hold an invalid id, name the folder or repeat an id are skipped: counted, one log line; the rest are sent, once', async () => {
    const children = [
      'x',
      { name: 'no id' },
      { id: 5 },
      { id: '' },
      { id: 'bad\u0001id' },
      { id: 'F' },
      { id: 'a' },
      null,
      { id: 'a' },
      { id: 'b' },
      { id: 'é'.repeat(600) }, // 600 characters, 1,200 bytes in UTF-8
      { id: 'é'.repeat(512) }, // 1,024 bytes: at the limit
    ];
    const provider = new ScriptedProvider().on('F', folder('F', 1, children));
    const { result, metrics, logs } = await run(build(provider, { env: DISCOVERY }), ['F']);
    expect(result).toEqual({ batchItemFailures: [] });
    expect(sentIds().map((sent) => sent.id)).toEqual(['a', 'b', 'é'.repeat(512)]);
    expect(metrics).toMatchObject({ ItemsCreated: 1, ChildrenDiscovered: 3, ChildrenSkipped: 9 });
    const skipped = logs.filter((line) => line['message'] === 'folder listing entries skipped');
    expect(skipped).toEqual([expect.objectContaining({ level: 'WARN', connection: 'default', itemId: 'F', skipped: 9 })]);
    expect(skipped[0]!['entries']).toEqual([
      { index: 0, why: 'the entry is a string, not an object' },
      { index: 1, why: 'the entry has no string id at "id" (found nothing)' },
      { index: 2, why: 'the entry has no string id at "id" (found a number)' },
      { index: 3, why: "the entry's id is not a valid item id (the item id is empty)" },
      { index: 4, why: "the entry's id is not a valid item id (the item id contains a control character (U+0001) at position 3)" },
      { index: 5, why: 'the entry names the folder itself' },
      { index: 7, why: 'the entry is null, not an object' },
      { index: 8, why: 'the entry repeats the id of the entry at index 6' },
      { index: 10, why: "the entry's id is not a valid item id (the item id is 1200 bytes long in UTF-8; the limit is 1024 bytes)" },
    ]);
    expect(table.has('default/F')).toBe(true);
  });

  it('a value at childrenPath that is not an array reads no child: counted, logged, the folder still written', async () => {
    const provider = new ScriptedProvider().on('F', folder('F', 1, { a: { id: 'a' } }));
    const { result, metrics, logs } = await run(build(provider, { env: DISCOVERY }), ['F']);
    expect(result).toEqual({ batchItemFailures: [] });
    expect(sentToReconcile()).toEqual([]);
    expect(metrics).toMatchObject({ ItemsCreated: 1, ChildrenDiscovered: 0, ChildrenSkipped: 1 });
    expect(logs.filter((line) => String(line['message']).startsWith('folder listing'))).toEqual([
      expect.objectContaining({
        message: 'folder listing cannot be read; no child read from it',
        itemId: 'F',
        skipped: 1,
        entries: [{ why: 'the value at "children" is an object, not an array' }],
      }),
    ]);
  });

  it('no value at childrenPath (or null) is an empty list: nothing counted or logged', async () => {
    const provider = new ScriptedProvider().on('F', { id: 'F', type: 'folder', revision: 1 }).on('G', folder('G', 1, null));
    const { metrics, logs } = await run(build(provider, { env: DISCOVERY }), ['F', 'G']);
    expect(metrics).toMatchObject({ ItemsCreated: 2, ChildrenDiscovered: 0, ChildrenSkipped: 0 });
    expect(logs.filter((line) => String(line['message']).startsWith('folder'))).toEqual([]);
  });
});

describe('children that left the list, and a deleted folder\'s children', () => {
  it('a changed folder whose row holds its item: the children no longer listed are sent for a direct check, with the new ones', async () => {
    putRow('F', { type: 'folder', revision: '1', item: folder('F', 1, entries('a', 'b', 'c')) });
    for (const id of ['a', 'b', 'c']) putRow(id, { revision: '1' });
    const provider = new ScriptedProvider().on('F', folder('F', 2, entries('a', 'd')));
    const { metrics, logs } = await run(build(provider, { env: DISCOVERY }), ['F']);
    expect(sentIds().map((sent) => sent.id)).toEqual(['b', 'c', 'd']);
    expect(metrics).toMatchObject({ ItemsUpdated: 1, ChildrenDiscovered: 3 });
    // The folder's revision, its previous copy (strongly consistent), the children that left it sent
    // before its row (they cannot be told once it is replaced), its row (marked), its children's
    // revisions, the new one sent, the marker removed.
    expect(order).toEqual(['BatchGetItem', 'BatchGetItem', 'Send reconcile', 'PutItem F', 'BatchGetItem', 'Send reconcile', 'UpdateItem F']);
    expect(reads()[1]).toEqual({ keys: ['default/F'], consistent: true, projection: STORED_ITEM_PROJECTION });
    expect(logs.filter((line) => line['message'] === 'folder children sent for checking')).toEqual([
      expect.objectContaining({ itemId: 'F', sent: 2, listed: 0, left: 2 }),
      expect.objectContaining({ itemId: 'F', sent: 1, listed: 1, left: 0 }),
    ]);
  });

  it('a changed large folder: its previous copy is read from the items bucket', async () => {
    const key = `items/default/${'0'.repeat(64)}/1/${'1'.repeat(64)}-fedcba9876543210.json`;
    putRow('F', { type: 'folder', revision: '1', objectKey: key });
    putRow('a', { revision: '1' });
    putRow('b', { revision: '1' });
    const previous = Buffer.from(JSON.stringify(folder('F', 1, entries('a', 'b'))), 'utf8');
    s3.on(GetObjectCommand).resolves({ Body: { transformToByteArray: async () => new Uint8Array(previous) } } as never);
    const provider = new ScriptedProvider().on('F', folder('F', 2, entries('a')));
    const { metrics } = await run(build(provider, { env: DISCOVERY }), ['F']);
    expect(s3.commandCalls(GetObjectCommand).map((call) => call.args[0].input)).toEqual([{ Bucket: BUCKET, Key: key }]);
    expect(sentIds().map((sent) => sent.id)).toEqual(['b']);
    expect(metrics).toMatchObject({ ItemsUpdated: 1, ChildrenDiscovered: 1 });
  });

  it('a previous copy gone from the bucket: logged, nothing sent for it, the folder still written', async () => {
    putRow('F', { type: 'folder', revision: '1', objectKey: 'items/default/gone.json' });
    s3.on(GetObjectCommand).rejects(Object.assign(new Error('The specified key does not exist.'), { name: 'NoSuchKey', $metadata: {} }));
    const provider = new ScriptedProvider().on('F', folder('F', 2, []));
    const { result, logs } = await run(build(provider, { env: DISCOVERY }), ['F']);
    expect(result).toEqual({ batchItemFailures: [] });
    expect(sentToReconcile()).toEqual([]);
    expect(logs.find((line) => String(line['message']).startsWith("the folder's previous copy could not be read"))).toMatchObject({
      level: 'WARN',
      itemId: 'F',
      objectKey: 'items/default/gone.json',
      reason: 'no such object',
    });
    expect(order).toEqual(['BatchGetItem', 'BatchGetItem', 'PutItem F']);
  });

  it('a folder live again after a tombstone: its children are compared with the table, no previous copy is read', async () => {
    putRow('F', { type: 'folder', revision: '1', item: folder('F', 1, entries('a', 'b')), deleted: true });
    const provider = new ScriptedProvider().on('F', folder('F', 1, entries('a')));
    const { metrics } = await run(build(provider, { env: DISCOVERY }), ['F']);
    expect(sentIds().map((sent) => sent.id)).toEqual(['a']);
    expect(reads().map((read) => read.keys)).toEqual([['default/F'], ['default/a']]);
    expect(order).toEqual(['BatchGetItem', 'PutItem F', 'BatchGetItem', 'Send reconcile', 'UpdateItem F']);
    expect(metrics).toMatchObject({ ItemsUpdated: 1, ChildrenDiscovered: 1 });
  });

  it('a folder the provider answers 404 for: the children of its last list are sent before its tombstone', async () => {
    putRow('F', { type: 'folder', revision: '1', item: folder('F', 1, entries('a', 'b')) });
    const provider = new ScriptedProvider().on('F', providerError('not-found', 404));
    const { metrics } = await run(build(provider, { env: DISCOVERY }), ['F']);
    expect(sentIds().map((sent) => sent.id)).toEqual(['a', 'b']);
    expect(order).toEqual(['BatchGetItem', 'BatchGetItem', 'Send reconcile', 'UpdateItem F']);
    expect(reads()[1]).toEqual({ keys: ['default/F'], consistent: true, projection: STORED_ITEM_PROJECTION });
    expect(metrics).toMatchObject({ ItemsDeleted: 1, ChildrenDiscovered: 2 });
    expect(table.get('default/F')).toMatchObject({ deleted: { BOOL: true }, syncedAt: { S: NOW.toISOString() } });
    // Its children are not deleted here: each is deleted only after the provider answers 404 for it.
    expect(table.get('default/a')).toBeUndefined();
  });

  it('a file the provider answers 404 for: its row is read, nothing is sent', async () => {
    putRow('f', { revision: '1', item: { id: 'f', type: 'file', revision: 1, children: entries('a') } });
    const provider = new ScriptedProvider().on('f', providerError('not-found', 404));
    const { metrics } = await run(build(provider, { env: DISCOVERY }), ['f']);
    expect(sentToReconcile()).toEqual([]);
    expect(metrics).toMatchObject({ ItemsDeleted: 1, ChildrenDiscovered: 0 });
  });
});

describe('the interrupted crawl', () => {
  it('sends that fail after the write: the row stays marked and the record is retried; the redelivery finds it unchanged, sends the children and removes the marker', async () => {
    reconcileRefuses = true;
    const provider = new ScriptedProvider().on('F', folder('F', 1, entries('a', 'b')));
    const handler = build(provider, { env: DISCOVERY });
    const first = await run(handler, ['F']);
    expect(first.result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
    expect(table.get('default/F')).toMatchObject({ revision: { S: '1' }, childrenPending: { BOOL: true } });
    // The entries refused for a reason that may pass were sent again (3 calls), then given up; the marker stays.
    expect(order).toEqual(['BatchGetItem', 'PutItem F', 'BatchGetItem', 'Send reconcile', 'Send reconcile', 'Send reconcile']);
    expect(first.metrics).toMatchObject({ RecordsRetried: 1, ChildrenDiscovered: 0, ItemsCreated: 1 });
    expect(first.logs.find((line) => line['message'] === 'record will be retried')).toMatchObject({
      itemId: 'F',
      reason: "2 of the folder's 2 children could not be sent for checking (InternalError: try again); the folder's record is retried until they are",
    });

    reconcileRefuses = false;
    order = [];
    const second = await run(handler, ['F']);
    expect(second.result).toEqual({ batchItemFailures: [] });
    expect(sentToReconcile().slice(-2).map((entry) => entry.MessageBody)).toEqual(['{"connection":"default","id":"a"}', '{"connection":"default","id":"b"}']);
    expect(second.metrics).toMatchObject({ ItemsUnchanged: 1, ItemsCreated: 0, ChildrenDiscovered: 2 });
    expect(order).toEqual(['BatchGetItem', 'BatchGetItem', 'Send reconcile', 'UpdateItem F']);
    expect(second.logs.find((line) => line['message'] === 'folder written without its children sent; sending them now')).toMatchObject({ itemId: 'F', revision: '1', syncedAt: NOW.toISOString() });
    expect(table.get('default/F')!['childrenPending']).toBeUndefined();
    expect(provider.calls.map((call) => call.id)).toEqual(['F', 'F']);
  });

  it('an invocation that ended between the write and the sends: the next check of the unchanged folder sends what the table does not hold and removes the marker', async () => {
    // The row as that invocation left it: written, marked, nothing sent; since then b was synced.
    putRow('F', { type: 'folder', revision: '3', item: folder('F', 3, entries('a', 'b')), childrenPending: true });
    putRow('b', { revision: '1' });
    const provider = new ScriptedProvider().on('F', folder('F', 3, entries('a', 'b')));
    // The reconciler's check (background lane), as any check of the folder.
    const { result, metrics } = await runRecords(build(provider, { env: DISCOVERY }), [{ body: 'F', attributes: BACKGROUND }]);
    expect(result).toEqual({ batchItemFailures: [] });
    expect(sentIds().map((sent) => sent.id)).toEqual(['a']);
    expect(metrics).toMatchObject({ ItemsUnchanged: 1, ChildrenDiscovered: 1 });
    expect(ddb.commandCalls(PutItemCommand)).toEqual([]);
    expect(ddb.commandCalls(UpdateItemCommand)[0]!.args[0].input.ExpressionAttributeValues).toEqual({ ':revision': { S: '3' }, ':syncedAt': { S: SYNCED_BEFORE } });
    expect(table.get('default/F')!['childrenPending']).toBeUndefined();
  });

  it('the marker is removed only from the row version that was written: a newer write keeps its own', async () => {
    putRow('F', { type: 'folder', revision: '3', item: folder('F', 3, entries('a')), childrenPending: true });
    // Another container writes revision 4 (marked) while this one sends the children of revision 3.
    sqs.on(SendMessageBatchCommand).callsFake((input: { QueueUrl: string; Entries: Array<{ Id: string }> }) => {
      order.push('Send reconcile');
      putRow('F', { type: 'folder', revision: '4', item: folder('F', 4, entries('a')), childrenPending: true });
      return { Successful: input.Entries.map((entry) => ({ Id: entry.Id, MessageId: `sent-${entry.Id}`, MD5OfMessageBody: 'x' })), Failed: [] };
    });
    const provider = new ScriptedProvider().on('F', folder('F', 3, entries('a')));
    const { result, metrics } = await run(build(provider, { env: DISCOVERY }), ['F']);
    expect(result).toEqual({ batchItemFailures: [] });
    expect(metrics).toMatchObject({ ItemsUnchanged: 1, ChildrenDiscovered: 1 });
    expect(order).toEqual(['BatchGetItem', 'BatchGetItem', 'Send reconcile', 'UpdateItem F']);
    expect(table.get('default/F')).toMatchObject({ revision: { S: '4' }, childrenPending: { BOOL: true } });
  });

  it('the marker is removed only from the row version that was written (afterWrite): the same revision written again since, with another syncedAt, keeps its own', async () => {
    const LATER = '2026-12-31T00:00:00.000Z';
    // While this container sends F's children, another writes F's same revision again, marked
    // (live again after a tombstone, say): only its syncedAt tells the two versions apart.
    sqs.on(SendMessageBatchCommand).callsFake((input: { QueueUrl: string; Entries: Array<{ Id: string }> }) => {
      order.push('Send reconcile');
      putRow('F', { type: 'folder', revision: '1', item: folder('F', 1, entries('a')), childrenPending: true, syncedAt: LATER });
      return { Successful: input.Entries.map((entry) => ({ Id: entry.Id, MessageId: `sent-${entry.Id}`, MD5OfMessageBody: 'x' })), Failed: [] };
    });
    const provider = new ScriptedProvider().on('F', folder('F', 1, entries('a')));
    const { result, metrics, logs } = await run(build(provider, { env: DISCOVERY }), ['F']);
    expect(result).toEqual({ batchItemFailures: [] });
    expect(metrics).toMatchObject({ ItemsCreated: 1, ChildrenDiscovered: 1 });
    expect(order).toEqual(['BatchGetItem', 'PutItem F', 'BatchGetItem', 'Send reconcile', 'UpdateItem F']);
    expect(ddb.commandCalls(UpdateItemCommand)[0]!.args[0].input.ExpressionAttributeValues).toEqual({ ':revision': { S: '1' }, ':syncedAt': { S: NOW.toISOString() } });
    expect(table.get('default/F')).toMatchObject({ revision: { S: '1' }, syncedAt: { S: LATER }, childrenPending: { BOOL: true } });
    // A condition that failed is no error: nothing logged as a failed removal.
    expect(logs.filter((line) => String(line['message']).includes('marker could not be removed'))).toEqual([]);
  });

  it('a marked row replaced by a revision whose list cannot be read: the marked list\'s children the table does not hold are sent before the write', async () => {
    // The invocation that wrote revision 2 ended before its sends; the provider now serves revision 3.
    putRow('F', { type: 'folder', revision: '2', item: folder('F', 2, entries('a', 'b')), childrenPending: true });
    putRow('b', { revision: '1' });
    const provider = new ScriptedProvider().on('F', folder('F', 3, { a: { id: 'a' } }));
    const { result, metrics, logs } = await run(build(provider, { env: DISCOVERY }), ['F']);
    expect(result).toEqual({ batchItemFailures: [] });
    expect(sentIds().map((sent) => sent.id)).toEqual(['a']);
    // The previous copy (marked), its children's rows (strongly consistent), a sent, then the row: not marked (it names no child).
    expect(order).toEqual(['BatchGetItem', 'BatchGetItem', 'BatchGetItem', 'Send reconcile', 'PutItem F']);
    expect(reads()[2]).toEqual({ keys: ['default/a', 'default/b'], consistent: true, projection: REVISIONS_PROJECTION });
    expect(table.get('default/F')).toMatchObject({ revision: { S: '3' } });
    expect(table.get('default/F')!['childrenPending']).toBeUndefined();
    expect(metrics).toMatchObject({ ItemsUpdated: 1, ChildrenDiscovered: 1, ChildrenSkipped: 1 });
    expect(logs.filter((line) => line['message'] === 'folder children sent for checking')).toEqual([expect.objectContaining({ itemId: 'F', sent: 1, listed: 1, left: 0 })]);
  });

  it('an unmarked row replaced by a revision whose list cannot be read: nothing is sent (a list that cannot be read says nothing about who left it)', async () => {
    putRow('F', { type: 'folder', revision: '2', item: folder('F', 2, entries('a', 'b')) });
    const provider = new ScriptedProvider().on('F', folder('F', 3, 'not a list'));
    const { result, metrics } = await run(build(provider, { env: DISCOVERY }), ['F']);
    expect(result).toEqual({ batchItemFailures: [] });
    expect(sentToReconcile()).toEqual([]);
    expect(order).toEqual(['BatchGetItem', 'BatchGetItem', 'PutItem F']);
    expect(metrics).toMatchObject({ ItemsUpdated: 1, ChildrenDiscovered: 0 });
  });

  it('a marked large folder whose previous copy is gone from the bucket is replaced all the same (a retry cannot bring it back): logged, its new list sent', async () => {
    putRow('F', { type: 'folder', revision: '2', objectKey: 'items/default/gone.json', childrenPending: true });
    s3.on(GetObjectCommand).rejects(Object.assign(new Error('The specified key does not exist.'), { name: 'NoSuchKey', $metadata: {} }));
    const provider = new ScriptedProvider().on('F', folder('F', 3, entries('a')));
    const { result, metrics, logs } = await run(build(provider, { env: DISCOVERY }), ['F']);
    expect(result).toEqual({ batchItemFailures: [] });
    expect(table.get('default/F')).toMatchObject({ revision: { S: '3' } });
    expect(table.get('default/F')!['childrenPending']).toBeUndefined();
    expect(sentToReconcile().map((entry) => JSON.parse(entry.MessageBody!).id)).toEqual(['a']);
    expect(metrics).toMatchObject({ RecordsRetried: 0, ItemsUpdated: 1, ChildrenDiscovered: 1 });
    expect(logs.find((line) => String(line['message']).startsWith("the folder's previous copy could not be read"))).toMatchObject({
      level: 'WARN',
      itemId: 'F',
      objectKey: 'items/default/gone.json',
      reason: 'no such object',
    });
  });

  it('children that left the list are sent before the row: when they cannot be, the row is not written and the record is retried', async () => {
    putRow('F', { type: 'folder', revision: '1', item: folder('F', 1, entries('a', 'b')) });
    putRow('a', { revision: '1' });
    putRow('b', { revision: '1' });
    reconcileRefuses = true;
    const provider = new ScriptedProvider().on('F', folder('F', 2, entries('a')));
    const { result, metrics } = await run(build(provider, { env: DISCOVERY }), ['F']);
    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
    expect(table.get('default/F')).toMatchObject({ revision: { S: '1' } });
    expect(table.get('default/F')!['childrenPending']).toBeUndefined();
    expect(metrics).toMatchObject({ RecordsRetried: 1, ItemsUpdated: 0 });
    expect(ddb.commandCalls(PutItemCommand)).toEqual([]);
  });

  it('a write that fails: nothing was sent (the listed children go once the row is written); the redelivery writes and sends', async () => {
    onPut = (_row, call) => {
      if (call === 1) throw Object.assign(new Error('socket hang up'), { name: 'TimeoutError', $metadata: {} });
    };
    const provider = new ScriptedProvider().on('F', folder('F', 1, entries('a')));
    const handler = build(provider, { env: DISCOVERY });
    const first = await run(handler, ['F']);
    expect(first.result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
    expect(table.has('default/F')).toBe(false);
    expect(sentIds()).toEqual([]);

    const second = await run(handler, ['F']);
    expect(second.result).toEqual({ batchItemFailures: [] });
    expect(sentIds().map((sent) => sent.id)).toEqual(['a']);
    expect(table.get('default/F')?.['revision']).toEqual({ S: '1' });
    expect(table.get('default/F')!['childrenPending']).toBeUndefined();
  });

  it('a lost write race: the row is read again and the folder decided again; children already sent are not sent twice', async () => {
    // Another container writes revision 1 just before this one's write of revision 2 (its condition fails).
    onPut = (_row, call) => {
      if (call === 1) {
        putRow('F', { type: 'folder', revision: '1', item: folder('F', 1, entries('a')) });
        throw new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: {} });
      }
    };
    const provider = new ScriptedProvider().on('F', folder('F', 2, entries('a', 'b')));
    const { result, metrics } = await run(build(provider, { env: DISCOVERY }), ['F']);
    expect(result).toEqual({ batchItemFailures: [] });
    expect(provider.calls.map((call) => call.id)).toEqual(['F', 'F']);
    expect(sentIds().map((sent) => sent.id)).toEqual(['a', 'b']);
    expect(metrics).toMatchObject({ ItemsUpdated: 1, ChildrenDiscovered: 2 });
    expect(table.get('default/F')?.['revision']).toEqual({ S: '2' });
  });

  it('a write race lost to a write of the same revision, still marked: done as unchanged, not fetched again; its children are sent (the winner may be gone) and the marker removed', async () => {
    onPut = (_row, call) => {
      if (call === 1) {
        putRow('F', { type: 'folder', revision: '1', item: folder('F', 1, entries('a')), childrenPending: true });
        throw new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: {} });
      }
    };
    const provider = new ScriptedProvider().on('F', folder('F', 1, entries('a')));
    const { result, metrics } = await run(build(provider, { env: DISCOVERY }), ['F']);
    expect(result).toEqual({ batchItemFailures: [] });
    expect(provider.calls.map((call) => call.id)).toEqual(['F']);
    expect(metrics).toMatchObject({ ItemsFetched: 1, ItemsUnchanged: 1, ItemsCreated: 0, ChildrenDiscovered: 1 });
    // The batch's read, the PutItem that lost, the read back of the write, the row read again
    // (marked), the children's rows, a sent (a duplicate when the winner sends it too: one more
    // check), the winner's marker removed on its own version.
    expect(order).toEqual(['BatchGetItem', 'PutItem F', 'BatchGetItem', 'BatchGetItem', 'BatchGetItem', 'Send reconcile', 'UpdateItem F']);
    expect(ddb.commandCalls(UpdateItemCommand)[0]!.args[0].input.ExpressionAttributeValues).toEqual({ ':revision': { S: '1' }, ':syncedAt': { S: SYNCED_BEFORE } });
    expect(table.get('default/F')!['childrenPending']).toBeUndefined();
  });

  it('a redelivered folder whose batch read an older copy loses its race to the marked row its crashed writer left: its children are sent then, not at the next check', async () => {
    // The invocation that wrote revision 2 (marked) ended before its sends; the message comes back,
    // and the batch's eventually consistent read still returns revision 1.
    putRow('F', { type: 'folder', revision: '1', item: folder('F', 1, entries('a')) });
    stale.set('default/F', table.get('default/F')!);
    putRow('F', { type: 'folder', revision: '2', item: folder('F', 2, entries('a', 'b')), childrenPending: true });
    putRow('b', { revision: '1' });
    const provider = new ScriptedProvider().on('F', folder('F', 2, entries('a', 'b')));
    const { result, metrics, logs } = await run(build(provider, { env: DISCOVERY }), ['F']);
    expect(result).toEqual({ batchItemFailures: [] });
    expect(provider.calls.map((call) => call.id)).toEqual(['F']);
    expect(ddb.commandCalls(PutItemCommand)).toHaveLength(1);
    expect(sentIds().map((sent) => sent.id)).toEqual(['a']);
    expect(metrics).toMatchObject({ ItemsUnchanged: 1, ItemsUpdated: 0, ChildrenDiscovered: 1 });
    expect(logs.find((line) => line['message'] === 'folder written without its children sent; sending them now')).toMatchObject({ itemId: 'F', revision: '2', syncedAt: SYNCED_BEFORE });
    expect(table.get('default/F')).toMatchObject({ revision: { S: '2' } });
    expect(table.get('default/F')!['childrenPending']).toBeUndefined();
  });

  it('a folder fetched again after a lost race and found unchanged, its row still marked: its children are sent in that round too', async () => {
    // Revision 1 stored; while this container writes revision 2, another writes revision 3 (marked) and ends before its sends.
    putRow('F', { type: 'folder', revision: '1', item: folder('F', 1, []) });
    onPut = (_row, call) => {
      if (call === 1) {
        putRow('F', { type: 'folder', revision: '3', item: folder('F', 3, entries('a')), childrenPending: true });
        throw new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: {} });
      }
    };
    const provider = new ScriptedProvider().on('F', folder('F', 2, entries('a')), folder('F', 3, entries('a')));
    const { result, metrics } = await run(build(provider, { env: DISCOVERY }), ['F']);
    expect(result).toEqual({ batchItemFailures: [] });
    expect(provider.calls.map((call) => call.id)).toEqual(['F', 'F']);
    expect(sentIds().map((sent) => sent.id)).toEqual(['a']);
    expect(metrics).toMatchObject({ ItemsUnchanged: 1, ChildrenDiscovered: 1 });
    expect(table.get('default/F')).toMatchObject({ revision: { S: '3' } });
    expect(table.get('default/F')!['childrenPending']).toBeUndefined();
  });
});

/** Runs batches in several containers at once, under one capture (captures nest, never interleave). */
async function together(...batches: Array<{ handler: ReturnType<typeof build>; bodies: string[]; background?: boolean }>) {
  const { result, error, output } = await captureOutput(() =>
    Promise.all(
      batches.map(({ handler, bodies, background }) => {
        const event = sqsEvent(bodies);
        if (background) for (const record of event.Records) record.messageAttributes = { lane: { dataType: 'String', stringValue: 'background', stringListValues: [], binaryListValues: [] } };
        return handler(event, lambdaContext());
      }),
    ),
  );
  if (error) throw error;
  return { results: result!, metrics: metricsIn(output), logs: logLines(output) };
}

describe('races: a folder is not sent back while its row is written or its sends are in flight', () => {
  it('a cycle A → B → A: B, synced in another container while the sends of A (written) are in flight, does not send A back; each fetched once', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let sendsOfA!: () => void;
    const aSending = new Promise<void>((resolve) => (sendsOfA = resolve));
    sqs.on(SendMessageBatchCommand).callsFake(async (input: { QueueUrl: string; Entries: Array<{ Id: string }> }) => {
      order.push('Send reconcile');
      // The first send (A's children) is accepted, and its answer held until B is done.
      if (order.filter((step) => step === 'Send reconcile').length === 1) {
        sendsOfA();
        await held;
      }
      return { Successful: input.Entries.map((entry) => ({ Id: entry.Id, MessageId: `sent-${entry.Id}`, MD5OfMessageBody: 'x' })), Failed: [] };
    });
    const provider = new ScriptedProvider().on('A', folder('A', 1, entries('B'))).on('B', folder('B', 1, entries('A')));
    const first = run(build(provider, { env: DISCOVERY }), ['A']);
    await aSending;
    const rowOfA = structuredClone(table.get('default/A'));
    const second = await runRecords(build(provider, { env: DISCOVERY }), [{ body: 'B', attributes: BACKGROUND }]);
    release();
    expect((await first).result).toEqual({ batchItemFailures: [] });
    expect(second.result).toEqual({ batchItemFailures: [] });
    expect(sentIds().map((sent) => sent.id)).toEqual(['B']);
    // A's row was there (marked) while its children were being sent.
    expect(rowOfA).toMatchObject({ childrenPending: { BOOL: true } });
    expect(second.metrics).toMatchObject({ ItemsCreated: 1, ChildrenDiscovered: 0 });
    expect(provider.calls.map((call) => call.id)).toEqual(['A', 'B']);
    expect(table.get('default/A')!['childrenPending']).toBeUndefined();
    expect(table.get('default/B')!['childrenPending']).toBeUndefined();
  });

  it('two new folders listing each other in one batch: neither is sent (both are synced here), each fetched once', async () => {
    const provider = new ScriptedProvider().on('A', folder('A', 1, entries('B', 'c'))).on('B', folder('B', 1, entries('A')));
    const { result, metrics } = await run(build(provider, { env: DISCOVERY }), ['A', 'B']);
    expect(result).toEqual({ batchItemFailures: [] });
    expect(sentIds().map((sent) => sent.id)).toEqual(['c']);
    expect(metrics).toMatchObject({ ItemsCreated: 2, ChildrenDiscovered: 1 });
    expect(provider.calls.map((call) => call.id).sort()).toEqual(['A', 'B']);
  });

  it('two new folders listing each other in two containers at once (both fetched before either is written): at most one is sent back, and its delivery fetches it once and sends nothing', async () => {
    // Both answers wait until both are asked for: each container writes a folder the other has fetched.
    let asked = 0;
    let bothAsked!: () => void;
    const both = new Promise<void>((resolve) => (bothAsked = resolve));
    const answer = (body: Record<string, unknown>) => async () => {
      if ((asked += 1) === 2) bothAsked();
      await both;
      return body;
    };
    const provider = new ScriptedProvider().on('A', answer(folder('A', 1, entries('B'))), folder('A', 1, entries('B'))).on('B', answer(folder('B', 1, entries('A'))), folder('B', 1, entries('A')));
    const { results, metrics } = await together(
      { handler: build(provider, { env: DISCOVERY }), bodies: ['A'], background: true },
      { handler: build(provider, { env: DISCOVERY }), bodies: ['B'], background: true },
    );
    expect(results).toEqual([{ batchItemFailures: [] }, { batchItemFailures: [] }]);
    expect(metrics).toMatchObject({ ItemsCreated: 2 });
    const back = sentIds().map((sent) => sent.id);
    expect(back.length).toBeLessThanOrEqual(1);
    expect(provider.calls.map((call) => call.id).sort()).toEqual(['A', 'B']);
    // What was sent back is delivered: fetched once, unchanged, nothing sent.
    const before = sentToReconcile().length;
    for (const id of back) {
      const again = await runRecords(build(provider, { env: DISCOVERY }), [{ body: id, attributes: BACKGROUND }]);
      expect(again.metrics).toMatchObject({ ItemsFetched: 1, ItemsUnchanged: 1, ChildrenDiscovered: 0 });
    }
    expect(sentToReconcile().length).toBe(before);
    expect(table.get('default/A')!['childrenPending']).toBeUndefined();
    expect(table.get('default/B')!['childrenPending']).toBeUndefined();
  });

  it('an id whose sync is in flight in the batch is not sent by a folder of the same batch (it has no row yet); ids of other connections are', async () => {
    harness.connections.add('acme');
    // a's answer waits until F has read its children's rows, sent them and removed its marker.
    const afterF = async () => {
      while (!order.includes('UpdateItem F')) await new Promise((resolve) => setImmediate(resolve));
      return { id: 'a', type: 'file', revision: 1 };
    };
    const provider = new ScriptedProvider().on('F', folder('F', 1, entries('a', 'b'))).on('a', afterF);
    const { result, metrics } = await run(build(provider, { env: DISCOVERY }), ['F', 'a', '{"connection":"acme","id":"b"}']);
    expect(result).toEqual({ batchItemFailures: [] });
    expect(order.indexOf('PutItem a')).toBeGreaterThan(order.indexOf('UpdateItem F'));
    expect(sentIds()).toEqual([{ connection: 'default', id: 'b' }]);
    expect(metrics).toMatchObject({ ItemsCreated: 2, ChildrenDiscovered: 1 });
  });

  it('an id whose sync has ended in the batch with no row (404, then created at the provider) is sent by a folder of the batch that lists it afterwards', async () => {
    // One fetch at a time: C's sync ends (absent) before F is fetched; then C exists and F lists it.
    const provider = new ScriptedProvider().on('C', providerError('not-found', 404), { id: 'C', type: 'file', revision: 1 }).on('F', folder('F', 2, entries('C')));
    putRow('F', { type: 'folder', revision: '1', item: folder('F', 1, []) });
    const { result, metrics } = await run(build(provider, { env: { ...DISCOVERY, SYNC_FETCH_CONCURRENCY: '1' } }), ['C', 'F']);
    expect(result).toEqual({ batchItemFailures: [] });
    expect(provider.calls.map((call) => call.id)).toEqual(['C', 'F']);
    expect(table.has('default/C')).toBe(false);
    // The strongly consistent read finds no row for C, and C is no longer in flight: it is sent.
    expect(sentIds().map((sent) => sent.id)).toEqual(['C']);
    expect(metrics).toMatchObject({ ItemsUpdated: 1, ChildrenDiscovered: 1 });
    expect(table.get('default/F')!['childrenPending']).toBeUndefined();
  });
});

describe('secrets', () => {
  it('no token in a log line, a metric, an error or a message sent, whatever the crawl met', async () => {
    reconcileRefuses = true;
    const provider = new ScriptedProvider().on('F', folder('F', 1, ['x', ...entries('a')], { total: 9 }));
    const handler = build(provider, { env: { ...DISCOVERY, CHILDREN_TOTAL_PATH: 'total' } });
    const failed = await run(handler, ['F']);
    reconcileRefuses = false;
    const done = await run(handler, ['F']);
    expect(failed.metrics).toMatchObject({ RecordsRetried: 1, ItemsCreated: 1, ListingsTruncated: 1, ChildrenSkipped: 1 });
    expect(done.metrics).toMatchObject({ ItemsUnchanged: 1, ChildrenDiscovered: 1 });
    const text = [failed.output, done.output, JSON.stringify(sqs.calls().map((call) => call.args[0].input))].join('\n');
    expect(provider.calls.map((call) => call.token)).toEqual([TOKEN_1, TOKEN_1]);
    for (const token of [TOKEN_1, TOKEN_2]) expect(text).not.toContain(token);
    expect(sqs.commandCalls(SendMessageBatchCommand).every((call) => call.args[0].input.QueueUrl !== DLQ_URL)).toBe(true);
  });
});
