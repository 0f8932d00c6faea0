/**
 * Discovery against the provider simulator, DynamoDB Local and s3rver (integration-harness.ts; SQS
 * mocked, so the exact messages to the reconcile queue are asserted): a large folder (its row in
 * the items bucket) sends its children, then, once changed, the children that left its list (its
 * previous copy read back from the bucket), then, once gone at the provider, the children of its
 * last list before its tombstone. A child is deleted only after the provider answers 404 for it.
 */
import { describe, expect, it } from 'vitest';
import { SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import { itemObjectOf } from '../../../dev/fakes/s3.js';
import { RECONCILE_URL } from './helpers.js';
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
    // d is new; b and c left the list: checked directly, nothing deleted until the provider says 404.
    expect(sent()).toEqual(['d', 'b', 'c']);
    expect((await env.row('b'))?.['deleted']).toBeUndefined();
    // The row read, the children's revisions, the previous copy (BatchGetItem), then the row written:
    // one PutItem (an object in the items bucket, as the folder is too large for a row).
    expect(changed.operations).toEqual(['BatchGetItem', 'BatchGetItem', 'BatchGetItem', 'PutItem']);
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

expectNoTokenLeft();
