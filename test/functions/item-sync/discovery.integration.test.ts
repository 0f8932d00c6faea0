/**
 * Discovery against the provider simulator, DynamoDB Local and s3rver (integration-harness.ts; SQS
 * mocked, so the exact messages to the reconcile queue are asserted): a large folder (its row in
 * the items bucket) sends its children, then, once changed, the children that left its list (its
 * previous copy read back from the bucket), then, once gone at the provider, the children of its
 * last list before its tombstone. A child is deleted only after the provider answers 404 for it.
 * Races on the real table: a cycle closing while its folder's sends are in flight sends nothing
 * back; two new folders listing each other in two containers send each other at most once. The
 * `childrenPending` marker's writes, read from the table's stream: its removal is no change in the
 * changes feed, no change event, and moves no connection's `lastWriteAt`.
 */
import { describe, expect, it } from 'vitest';
import { SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import { changeOf } from '../../../functions/change-events/change.js';
import { statsOf } from '../../../functions/change-events/stats.js';
import { captureOutput } from '../../../dev/fakes/capture-output.js';
import { itemObjectOf } from '../../../dev/fakes/s3.js';
import { RECONCILE_URL, lambdaContext, metricsIn, sqsEvent } from './helpers.js';
import { everything, expectNoTokenLeft, setup, sqs, useIntegrationHarness } from './integration-harness.js';

useIntegrationHarness();

const DISCOVERY = { CHILDREN_PATH: 'children', CHILD_REVISION_PATH: 'revision', RECONCILE_QUEUE_URL: RECONCILE_URL };

/** The ids sent to the reconcile queue so far, with their connection; every entry in the background lane. */
function sent(): string[] {
  const entries = sqs
    .commandCalls(SendMessageBatchCommand)
    .filter((call) => call.args[0].input.QueueUrl === RECONCILE_URL)
    .flatMap((call) => call.args[0].input.Entries ?? []);
  for (const entry of entries) {
    expect(entry.MessageAttributes).toEqual({ lane: { DataType: 'String', StringValue: 'background' } });
    expect(entry.MessageGroupId).toBe('default');
  }
  // Checked for tokens at the end (expectNoTokenLeft), with every run's output.
  everything.push(JSON.stringify(entries));
  return entries.map((entry) => (JSON.parse(entry.MessageBody!) as { connection: string; id: string }).id);
}

describe('discovery with the real adapters', () => {
  it('a large folder: its children, then those that left its list (read back from the bucket), then those of its last list before its tombstone', async () => {
    const padding = 'p'.repeat(600 * 1024);
    const file = (id: string) => ({ id, type: 'file' as const, revision: 1 });
    const folder = (revision: number, children: string[]) => ({
      id: 'F',
      type: 'folder' as const,
      revision,
      padding,
      children: children.map((id) => ({ id, type: 'file', revision: 1 })),
    });
    const env = await setup({ items: [folder(1, ['a', 'b', 'c']), file('a'), file('b'), file('c'), file('d')] });
    const handler = env.handler({}, DISCOVERY);

    const first = await env.run(['F'], { handler });
    expect(first.result).toEqual({ batchItemFailures: [] });
    expect(first.metrics).toMatchObject({ ItemsCreated: 1, ChildrenDiscovered: 3 });
    expect(sent()).toEqual(['a', 'b', 'c']);
    expect(itemObjectOf((await env.row('F'))!)).toBeDefined();
    // The reconcile queue delivers them: the children are created, and nothing more is sent.
    expect((await env.run(['a', 'b', 'c'], { handler })).metrics).toMatchObject({ ItemsCreated: 3, ChildrenDiscovered: 0 });
    sqs.resetHistory();

    // A new access token for each step (the checks at the end look for every one handed out).
    env.access.issue('default');
    env.sim.setItem(folder(2, ['a', 'd']));
    const changed = await env.run(['F'], { handler });
    expect(changed.metrics).toMatchObject({ ItemsUpdated: 1, ChildrenDiscovered: 3 });
    // b and c left the list: checked directly, nothing deleted until the provider says 404; d is new.
    expect(sent()).toEqual(['b', 'c', 'd']);
    expect((await env.row('b'))?.['deleted']).toBeUndefined();
    // The row read, the previous copy (BatchGetItem; b and c sent), the row written: one PutItem (an
    // object in the items bucket, as the folder is too large for a row), marked; then the children's
    // revisions (d sent), and the marker removed.
    expect(changed.operations).toEqual(['BatchGetItem', 'BatchGetItem', 'PutItem', 'BatchGetItem', 'UpdateItem']);
    expect((await env.row('F'))?.['childrenPending']).toBeUndefined();
    sqs.resetHistory();

    env.sim.deleteItem('b');
    expect((await env.run(['b', 'c', 'd'], { handler })).metrics).toMatchObject({ ItemsDeleted: 1, ItemsUnchanged: 1, ItemsCreated: 1, ChildrenDiscovered: 0 });
    expect((await env.row('b'))?.['deleted']).toBe(true);

    env.access.issue('default');
    env.sim.deleteItem('F');
    const gone = await env.run(['F'], { handler });
    expect(gone.metrics).toMatchObject({ ItemsDeleted: 1, ChildrenDiscovered: 2 });
    expect(sent()).toEqual(['a', 'd']);
    expect((await env.row('F'))?.['deleted']).toBe(true);
  });
});

const folder = (id: string, children: string[], revision = 1) => ({
  id,
  type: 'folder' as const,
  revision,
  children: children.map((child) => ({ id: child, type: 'folder', revision: 1 })),
});
/** Provider item requests per id so far. */
const fetchesOf = (env: Awaited<ReturnType<typeof setup>>) => {
  const counts: Record<string, number> = {};
  for (const request of env.sim.requests) if (request.endpoint === 'items' && request.itemId !== undefined) counts[request.itemId] = (counts[request.itemId] ?? 0) + 1;
  return counts;
};

describe('races on the real table, and the marker in the stream', () => {
  it('a cycle A → B → A: B synced by another container while A (written, marked) sends its children sends nothing back; the marker reaches neither the feed nor the events', async () => {
    const env = await setup({ items: [folder('A', ['B']), folder('B', ['A'])] });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let aSending!: () => void;
    const sending = new Promise<void>((resolve) => (aSending = resolve));
    let reconcileSends = 0;
    sqs.on(SendMessageBatchCommand).callsFake(async (input: { QueueUrl: string; Entries: Array<{ Id: string }> }) => {
      // A's send is accepted; its answer is held until B is done.
      if (input.QueueUrl === RECONCILE_URL && (reconcileSends += 1) === 1) {
        aSending();
        await held;
      }
      return { Successful: input.Entries.map((entry) => ({ Id: entry.Id, MessageId: `sent-${entry.Id}`, MD5OfMessageBody: 'x' })), Failed: [] };
    });
    const first = env.run(['A'], { handler: env.handler({}, DISCOVERY) });
    await sending;
    const rowOfA = await env.row('A');
    const second = await env.run(['B'], { handler: env.handler({}, DISCOVERY) });
    release();
    const one = await first;
    expect([one.result, second.result]).toEqual([{ batchItemFailures: [] }, { batchItemFailures: [] }]);
    expect(sent()).toEqual(['B']);
    expect(rowOfA).toMatchObject({ revision: '1', childrenPending: true });
    expect(second.metrics).toMatchObject({ ItemsCreated: 1, ChildrenDiscovered: 0 });
    expect(fetchesOf(env)).toEqual({ A: 1, B: 1 });
    // Each folder: its row (PutItem, marked) after its own revision's read, then its children's
    // revisions, then the marker removed (UpdateItem): A's sends in between.
    expect(second.operations).toEqual(['BatchGetItem', 'PutItem', 'BatchGetItem', 'UpdateItem']);
    expect(one.operations.slice(0, 3)).toEqual(['BatchGetItem', 'PutItem', 'BatchGetItem']);
    expect(one.operations).toContain('UpdateItem');
    for (const id of ['A', 'B']) expect((await env.row(id))?.['childrenPending']).toBeUndefined();

    // The stream: a created row each (the marked write carries the change, as any write), and the
    // marker's removal no change, as the changes writer reads it.
    const changes = await env.changes();
    expect(changes.filter((change) => change.change !== 'none')).toEqual([
      { connection: 'default', id: 'A', change: 'created', type: 'folder', revision: '1', previousRevision: null },
      { connection: 'default', id: 'B', change: 'created', type: 'folder', revision: '1', previousRevision: null },
    ]);
    expect(changes.filter((change) => change.change === 'none').map((change) => change.id).sort()).toEqual(['A', 'B']);
    const records = await env.records();
    const removals = records.filter((record) => record.eventName === 'MODIFY');
    expect(removals).toHaveLength(2);
    for (const record of removals) {
      expect(record.dynamodb.OldImage?.['childrenPending']).toEqual({ BOOL: true });
      expect(record.dynamodb.NewImage?.['childrenPending']).toBeUndefined();
      expect(record.dynamodb.NewImage?.['syncedAt']).toEqual(record.dynamodb.OldImage?.['syncedAt']);
      // No change event, and the connection's last write is the row's own write.
      expect(changeOf(record)).toBeUndefined();
    }
    expect(records.map((record) => [record.eventName, record.dynamodb.Keys?.['id']?.S, changeOf(record)?.detailType ?? null])).toEqual([
      ['INSERT', 'A', 'ItemCreated'],
      ['INSERT', 'B', 'ItemCreated'],
      ['MODIFY', 'B', null],
      ['MODIFY', 'A', null],
    ]);
    const inserted = records.filter((record) => record.eventName === 'INSERT').map((record) => record.dynamodb.NewImage!['syncedAt']!.S!);
    expect(statsOf(records)).toEqual([{ connection: 'default', created: 2, lastWriteAt: inserted.sort().at(-1) }]);
    expect(statsOf(removals)).toEqual([{ connection: 'default', created: 0, lastWriteAt: inserted.sort().at(-1) }]);
  });

  it("sends refused after the write: the row stays marked and the record is retried; the redelivery finds the folder unchanged, sends its children and removes the marker", async () => {
    const env = await setup({ items: [folder('F', ['a', 'b'])] });
    const handler = env.handler({}, DISCOVERY);
    sqs.on(SendMessageBatchCommand).callsFake((input: { QueueUrl: string; Entries: Array<{ Id: string }> }) =>
      input.QueueUrl === RECONCILE_URL
        ? { Successful: [], Failed: input.Entries.map((entry) => ({ Id: entry.Id, SenderFault: false, Code: 'InternalError', Message: 'try again' })) }
        : { Successful: input.Entries.map((entry) => ({ Id: entry.Id, MessageId: `m-${entry.Id}`, MD5OfMessageBody: 'x' })), Failed: [] },
    );
    const first = await env.run(['F'], { handler });
    expect(first.result.batchItemFailures).toHaveLength(1);
    expect(first.metrics).toMatchObject({ ItemsCreated: 1, RecordsRetried: 1, ChildrenDiscovered: 0 });
    expect(await env.row('F')).toMatchObject({ revision: '1', childrenPending: true });

    sqs.on(SendMessageBatchCommand).callsFake((input: { Entries: Array<{ Id: string }> }) => ({
      Successful: input.Entries.map((entry) => ({ Id: entry.Id, MessageId: `m-${entry.Id}`, MD5OfMessageBody: 'x' })),
      Failed: [],
    }));
    sqs.resetHistory();
    const second = await env.run(['F'], { handler });
    expect(second.result).toEqual({ batchItemFailures: [] });
    expect(second.metrics).toMatchObject({ ItemsUnchanged: 1, ChildrenDiscovered: 2 });
    expect(sent()).toEqual(['a', 'b']);
    // The batch's read, the children's, the marker removed: no PutItem.
    expect(second.operations).toEqual(['BatchGetItem', 'BatchGetItem', 'UpdateItem']);
    expect((await env.row('F'))?.['childrenPending']).toBeUndefined();
    expect((await env.changes()).map((change) => change.change)).toEqual(['created', 'none']);
  });

  it('two new folders listing each other, synced by two containers at once: at most one is sent back; each fetched once by its own delivery', async () => {
    const env = await setup({ items: [folder('A', ['B', 'c']), folder('B', ['A']), { id: 'c', type: 'file', revision: 1 }] });
    const [one, two] = [env.handler({}, DISCOVERY), env.handler({}, DISCOVERY)];
    const { result, output } = await captureOutput(() => Promise.all([one(sqsEvent(['A']), lambdaContext()), two(sqsEvent(['B']), lambdaContext())]));
    everything.push(output);
    expect(result).toEqual([{ batchItemFailures: [] }, { batchItemFailures: [] }]);
    expect(metricsIn(output)).toMatchObject({ ItemsCreated: 2 });
    const back = sent().filter((id) => id !== 'c');
    expect(back.length).toBeLessThanOrEqual(1);
    expect(fetchesOf(env)).toEqual({ A: 1, B: 1 });
    for (const id of ['A', 'B']) expect((await env.row(id))?.['childrenPending']).toBeUndefined();
  });
});

expectNoTokenLeft();
