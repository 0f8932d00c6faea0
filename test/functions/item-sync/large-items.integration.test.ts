/**
 * The item sync's items too large for a row against DynamoDB Local and s3rver (integration-harness.ts):
 * the object in the items bucket, the row pointing to it, objects replaced and deleted, races and
 * lost answers leaving no orphan and no pointer to nothing.
 */
import { describe, expect, it, vi } from 'vitest';
import { itemObjectOf, readItemObject, S3_LOCAL_CREDENTIALS } from '../../../dev/fakes/s3.js';
import { type SimulatorItem } from '../../../dev/simulator/provider-simulator.js';
import { logLines } from './helpers.js';
import {
  ctx,
  deadLetters,
  expectNoTokenLeft,
  heldAfterFirstFetch,
  losingFirstAnswer,
  paddingFirstInlineRow,
  setup,
  twoContainersAtOnce,
  useIntegrationHarness,
  type Env,
} from './integration-harness.js';

useIntegrationHarness();

/** The object a row points to, read back from the bucket and checked against the pointer (size and SHA-256). */
async function objectOf(env: Env, row: Record<string, unknown> | undefined) {
  const pointer = row ? itemObjectOf(row) : undefined;
  if (!pointer) throw new Error(`the row ${JSON.stringify(row?.['id'])} has no itemObject`);
  return { pointer, read: await readItemObject(ctx.s3Client, env.bucket, pointer) };
}

/** Every row's object exists, and the bucket holds no other: no pointer to nothing, no orphan. */
async function expectObjectsAgreeWithRows(env: Env): Promise<string[]> {
  const keys = [...(await env.objects()).keys()].sort();
  const pointed = (await env.rows()).map((row) => itemObjectOf(row)?.key).filter((key): key is string => key !== undefined).sort();
  expect(keys).toEqual(pointed);
  return keys;
}

describe('items too large for a row, against s3rver', () => {
  it('a 600 KB item is stored whole in the bucket and its row points to it; a newer large revision replaces the object; a small one goes back inline and the object is gone', async () => {
    const big = (revision: number, size: number): SimulatorItem => ({ id: 'big', type: 'file', revision, content: 'x'.repeat(size), meta: { n: 12345678901234567891n.toString() } });
    const env = await setup({ items: [big(1, 600 * 1024)] });

    const first = await env.run(['big']);
    expect(first.result).toEqual({ batchItemFailures: [] });
    expect(first.metrics).toMatchObject({ ItemsCreated: 1, RecordsDeadLettered: 0 });
    const row1 = await env.row('big');
    expect(row1).toMatchObject({ id: 'big', type: 'file', revision: '1', syncedAt: expect.any(String) });
    expect(row1).not.toHaveProperty('item');
    const { pointer: p1, read: r1 } = await objectOf(env, row1);
    expect(r1).toEqual({ kind: 'found', item: env.sim.getItem('big') });
    expect(p1.size).toBeGreaterThan(600 * 1024);
    expect(p1.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(await env.objects()).toEqual(new Map([[p1.key, p1.size]]));
    // The object first, then the row: one PutItem, nothing before it in the table but the read (the
    // estimate said "too large": the inline row was never sent).
    expect(first.operations).toEqual(['BatchGetItem', 'PutItem']);

    env.sim.setItem(big(2, 700 * 1024));
    expect((await env.run(['big'])).metrics).toMatchObject({ ItemsUpdated: 1 });
    const { pointer: p2, read: r2 } = await objectOf(env, await env.row('big'));
    expect(r2).toEqual({ kind: 'found', item: env.sim.getItem('big') });
    expect(p2.key).not.toBe(p1.key);
    expect(await env.objects()).toEqual(new Map([[p2.key, p2.size]]));

    env.sim.setItem({ id: 'big', type: 'file', revision: 3, content: 'small again' });
    expect((await env.run(['big'])).metrics).toMatchObject({ ItemsUpdated: 1 });
    const row3 = await env.row('big');
    expect(row3).toMatchObject({ revision: '3', item: { id: 'big', type: 'file', revision: 3, content: 'small again' } });
    expect(row3).not.toHaveProperty('itemObject');
    expect(await env.objects()).toEqual(new Map());
    // One change a write on the items stream (the feed's source), each with the revision it replaced.
    expect((await env.changes()).map((change) => [change.change, change.revision, change.previousRevision])).toEqual([
      ['created', '1', null],
      ['updated', '2', '1'],
      ['updated', '3', '2'],
    ]);
  });

  it('with AWS_ENDPOINT_URL_S3=http://localhost:PORT and no client given, a large item is stored (the bucket addressed path-style)', async () => {
    const env = await setup({ items: [{ id: 'far', type: 'file', revision: 1, content: 'f'.repeat(600 * 1024) }] });
    const endpoint = ctx.s3.endpoint.replace('//127.0.0.1:', '//localhost:');
    expect(endpoint).toMatch(/^http:\/\/localhost:\d+$/);
    // The adapter's own client: region and credentials from the environment, as in Lambda (s3rver knows one key).
    vi.stubEnv('AWS_ACCESS_KEY_ID', S3_LOCAL_CREDENTIALS.accessKeyId);
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', S3_LOCAL_CREDENTIALS.secretAccessKey);
    try {
      const handler = env.handler({ s3: undefined }, { AWS_ENDPOINT_URL_S3: endpoint });
      const { result, metrics, output } = await env.run(['far'], { handler });

      expect(result).toEqual({ batchItemFailures: [] });
      expect(metrics).toMatchObject({ ItemsCreated: 1, RecordsRetried: 0 });
      const { read } = await objectOf(env, await env.row('far'));
      expect(read).toEqual({ kind: 'found', item: env.sim.getItem('far') });
      expect(await expectObjectsAgreeWithRows(env)).toHaveLength(1);
      expect(output).not.toContain('ENOTFOUND');
      expect(output).not.toContain('item object left in the bucket');
    } finally {
      vi.unstubAllEnvs();
    }
  });

  it('a row DynamoDB refuses for its size although the estimate let it through goes to the bucket', async () => {
    const env = await setup({ items: [{ id: 'mid', type: 'file', revision: 1, content: 'y'.repeat(100 * 1024) }] });
    // The inline row passes the estimate (about 100 KB); on its way it is padded past 400 KB, and
    // DynamoDB Local refuses it for its size, as DynamoDB refuses a row the estimate let through.
    const padding = paddingFirstInlineRow(ctx.dynamo.client());
    const { result, operations, output } = await env.run(['mid'], { handler: env.handler({ dynamodb: padding.client }) });

    expect(result).toEqual({ batchItemFailures: [] });
    expect(padding.padded()).toBe(1);
    // The inline row (refused by DynamoDB: nothing written), then the row pointing to the object.
    expect(operations).toEqual(['BatchGetItem', 'PutItem', 'PutItem']);
    expect(deadLetters()).toEqual([]);
    expect(logLines(output).find((line) => line['message'] === 'item too large for a row; storing it in the items bucket')).toMatchObject({ itemId: 'mid' });
    const row = await env.row('mid');
    expect(row).not.toHaveProperty('item');
    expect(row).not.toHaveProperty('padding');
    const { pointer, read } = await objectOf(env, row);
    expect(read).toEqual({ kind: 'found', item: env.sim.getItem('mid') });
    expect([...(await env.objects()).keys()]).toEqual([pointer.key]);
    // The refused write made no change: one, the row pointing to the object.
    expect((await env.changes()).map((change) => [change.change, change.id, change.revision])).toEqual([['created', 'mid', '1']]);
  });

  it('two handler instances racing on a large item leave the newest revision, no orphan and no pointer to nothing', async () => {
    const large = (revision: number): SimulatorItem => ({ id: 'race', type: 'file', revision, body: `v${revision}`, content: 'z'.repeat(500 * 1024) });
    const env = await setup({ items: [large(1)] });
    await env.run(['race']);

    // Container A fetches revision 2 but is slow to write it (held after the fetch)...
    env.sim.setItem(large(2));
    const slow = heldAfterFirstFetch(env.sim.baseUrl, 1 << 22);
    const a = env.run(['race'], { handler: env.handler({ provider: slow.provider }) });
    await slow.fetchedOnce;

    // ...while container B fetches revision 3 and stores it (its object replaces revision 1's).
    env.sim.setItem(large(3));
    expect((await env.run(['race'], { handler: env.handler() })).metrics).toMatchObject({ ItemsUpdated: 1 });

    // A's object is written, its row write loses: A deletes its object, reads again, finds 3 stored.
    slow.release();
    const resultA = await a;
    expect(resultA.result).toEqual({ batchItemFailures: [] });
    expect(resultA.metrics).toMatchObject({ ItemsFetched: 2, ItemsUnchanged: 1, ItemsUpdated: 0 });
    expect(resultA.output).toContain('"message":"item object deleted"');
    const { read } = await objectOf(env, await env.row('race'));
    expect(read).toEqual({ kind: 'found', item: large(3) });
    expect(await expectObjectsAgreeWithRows(env)).toHaveLength(1);
  });

  it('two containers creating the same new large items at once: each row points to an object, and no other object is left', async () => {
    const items = Array.from({ length: 4 }, (_, n): SimulatorItem => ({ id: `L${n}`, type: 'file', revision: 1, content: `${n}`.repeat(450 * 1024) }));
    const env = await setup({ items });
    const ids = items.map((i) => i.id);
    const { result, output, total } = await twoContainersAtOnce(env, ids);

    expect(result).toEqual([{ batchItemFailures: [] }, { batchItemFailures: [] }]);
    expect(total['ItemsCreated']).toBe(4);
    expect((total['ItemsCreated'] ?? 0) + (total['ItemsUnchanged'] ?? 0)).toBe(8);
    for (const id of ids) expect((await objectOf(env, await env.row(id))).read).toEqual({ kind: 'found', item: env.sim.getItem(id) });
    expect(await expectObjectsAgreeWithRows(env)).toHaveLength(4);
    expect(output).not.toContain('item object left in the bucket');
    // Both read "no row", both wrote an object: each loser deleted its own.
    const count = (message: string) => output.split(`"message":"${message}"`).length - 1;
    expect(count('item object deleted')).toBeGreaterThan(0);
    expect(count('item too large for a row; storing it in the items bucket') - count('item object deleted')).toBe(4);
  });

  it('a write DynamoDB applied whose answer was lost (the SDK sends it again, which fails its condition on the write\'s own row): the row read back is its own, the replaced object is deleted, the record counts as the change', async () => {
    const env = await setup({ items: [{ id: 'lost', type: 'file', revision: 1, content: 'q'.repeat(600 * 1024) }] });
    expect((await env.run(['lost'])).metrics).toMatchObject({ ItemsCreated: 1 });
    const { pointer: replaced } = await objectOf(env, await env.row('lost'));

    // Going back inline: the PutItem is applied, its answer lost (and with it the old row it would
    // return). The SDK sends it again: the row is no longer the one its condition expects, so that
    // send fails (a conflict, nothing written). The row read back (strongly consistent) is this
    // write's own: it counts as written, and the replaced object, known from the row read before the
    // write, is deleted.
    env.sim.setItem({ id: 'lost', type: 'file', revision: 2, content: 'small again' });
    const put = await env.run(['lost'], { handler: env.handler({ dynamodb: losingFirstAnswer(ctx.dynamo.client(), 'PutItem') }) });
    expect(put.result).toEqual({ batchItemFailures: [] });
    expect(put.operations).toEqual(['BatchGetItem', 'PutItem', 'PutItem', 'BatchGetItem']);
    expect(put.metrics).toMatchObject({ ItemsFetched: 1, ItemsUpdated: 1, ItemsUnchanged: 0, RecordsRetried: 0 });
    expect(await env.row('lost')).toMatchObject({ revision: '2', item: { content: 'small again' } });
    expect(logLines(put.output).find((line) => line['message'] === 'row written after all (the answer to the write was lost)')).toMatchObject({
      itemId: 'lost',
      revision: '2',
    });
    expect(logLines(put.output).find((line) => line['message'] === 'item object deleted')).toMatchObject({
      connection: 'default',
      itemId: 'lost',
      objectKey: replaced.key,
      reason: 'the row pointing to it was replaced (the answer to that write was lost)',
    });
    expect(replaced.key).toMatch(/^items\/default\//);
    expect(await env.objects()).toEqual(new Map());

    // A tombstone whose answer is lost the same way: its second send fails its condition, the row
    // read back is the tombstone at this syncedAt: counted as deleted.
    env.sim.deleteItem('lost');
    const tombstone = await env.run(['lost'], { handler: env.handler({ dynamodb: losingFirstAnswer(ctx.dynamo.client(), 'UpdateItem') }) });
    expect(tombstone.result).toEqual({ batchItemFailures: [] });
    expect(tombstone.operations).toEqual(['BatchGetItem', 'UpdateItem', 'UpdateItem', 'BatchGetItem']);
    expect(tombstone.metrics).toMatchObject({ ItemsDeleted: 1, ItemsUnchanged: 0, RecordsRetried: 0 });
    expect(await env.row('lost')).toMatchObject({ revision: '2', deleted: true, item: { content: 'small again' } });
    // Each write applied once, however many times the SDK sent it: one change each on the items stream.
    expect((await env.changes()).map((change) => [change.change, change.revision, change.previousRevision])).toEqual([
      ['created', '1', null],
      ['updated', '2', '1'],
      ['deleted', '2', '2'],
    ]);
  });

  it('dead-letters an item larger than PROVIDER_MAX_RESPONSE_BYTES with a reason, storing nothing', async () => {
    const env = await setup({ items: [{ id: 'vast', type: 'file', revision: 1, content: 'v'.repeat(1536 * 1024) }, { id: 'ok', type: 'file', revision: 1 }] });
    const handler = env.handler({}, { PROVIDER_MAX_RESPONSE_BYTES: String(1024 * 1024) });

    const { result, metrics } = await env.run(['vast', 'ok'], { handler });

    expect(result).toEqual({ batchItemFailures: [] });
    expect(deadLetters()).toEqual([
      {
        body: 'vast',
        error: 'the provider cannot serve this item as asked (getItem: the response body exceeds 1048576 bytes; HTTP 200)',
        sourceMessageId: 'm1',
      },
    ]);
    expect(metrics).toMatchObject({ RecordsDeadLettered: 1, ItemsCreated: 1 });
    expect((await env.rows()).map((row) => row['id'])).toEqual(['ok']);
    expect(await env.objects()).toEqual(new Map());
  });
});

expectNoTokenLeft();
