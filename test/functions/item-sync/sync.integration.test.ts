/**
 * The item sync against the provider simulator and DynamoDB Local (integration-harness.ts): what rows it
 * stores and when, the dead letters, the failures that pass, a refused token that stops its
 * connection alone, two connections holding one item id, races between containers.
 */
import 'aws-sdk-client-mock-vitest/extend';
import { describe, expect, it } from 'vitest';
import { ChangeMessageVisibilityBatchCommand, SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import { generateItemTree } from '../../../dev/simulator/item-tree.js';
import { type SimulatorItem } from '../../../dev/simulator/provider-simulator.js';
import { QUEUE_URL } from './helpers.js';
import {
  ctx,
  deadLetters,
  expectNoTokenLeft,
  failed,
  getRow,
  heldAfterFirstFetch,
  requeued,
  setup,
  sqs,
  twoContainersAtOnce,
  useIntegrationHarness,
  writes,
} from './integration-harness.js';

useIntegrationHarness();

/** An item with every kind of JSON value the provider may send. */
const RICH: SimulatorItem = {
  id: 'rich-é-文件',
  type: 'file',
  revision: 12,
  name: 'Résumé ✓ 日本語 🎉.pdf',
  empty: '',
  nothing: null,
  flags: [true, false],
  size: 0,
  ratio: -0.125,
  large: 9007199254740991,
  tags: [],
  owner: { id: 'usr-002', name: 'Zoë Ångström', address: { city: 'Москва', zip: '' } },
  versions: [{ number: 1, comment: '' }, { number: 2, comment: null, nested: [[1, [2, [3]]]] }],
};

describe('item sync against the provider simulator and DynamoDB Local', () => {
  it('stores a new batch whole: every field, nested values, unicode, empty strings and null', async () => {
    const tree = generateItemTree({ count: 9, seed: 7 });
    const env = await setup({ items: [...tree, RICH] });
    const ids = [...tree.map((i) => i.id), RICH.id];

    const { result, metrics } = await env.run(ids.map((id) => JSON.stringify({ id })));

    expect(result).toEqual({ batchItemFailures: [] });
    expect(metrics).toMatchObject({ ItemsFetched: 10, ItemsCreated: 10, RecordsRetried: 0, RecordsDeadLettered: 0 });
    const rows = await env.rows();
    expect(rows).toHaveLength(10);
    for (const row of rows) {
      const source = env.sim.getItem(row['id'] as string)!;
      expect(row['item']).toEqual(source);
      expect(row['type']).toBe(source.type);
      expect(row['revision']).toBe(String(source['revision']));
      expect(row['syncedAt']).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(Object.keys(row).sort()).toEqual(['connection', 'id', 'item', 'revision', 'syncedAt', 'type']);
      expect(row['connection']).toBe('default');
    }
    // The revision attribute is text (S), the item's own revision stays a number (N).
    const raw = await getRow(ctx.dynamo.client(), env.table, RICH.id);
    expect(raw?.['revision']).toEqual({ S: '12' });
    expect((raw?.['item']?.M ?? {})['revision']).toEqual({ N: '12' });
    expect((raw?.['item']?.M ?? {})['empty']).toEqual({ S: '' });
    expect((raw?.['item']?.M ?? {})['nothing']).toEqual({ NULL: true });
  });

  it('writes nothing when the same batch comes again, and updates exactly the items whose revision changed', async () => {
    const tree = generateItemTree({ count: 8, seed: 3, revisionField: 'meta.rev' });
    const env = await setup({ items: tree, revisionField: 'meta.rev' });
    const bodies = tree.map((i) => i.id);
    await env.run(bodies);
    const first = await env.rows();

    const again = await env.run(bodies);
    expect(again.result.batchItemFailures).toEqual([]);
    expect(writes(again.operations)).toEqual([]);
    expect(again.metrics).toMatchObject({ ItemsFetched: 8, ItemsUnchanged: 8, ItemsCreated: 0, ItemsUpdated: 0 });
    expect(await env.rows()).toEqual(first);

    const changed = [tree[2]!.id, tree[5]!.id];
    for (const id of changed) env.sim.bumpRevision(id);
    const third = await env.run(bodies);
    expect(third.result.batchItemFailures).toEqual([]);
    // Each row with one PutItem (its change reaches the feed through the table's stream).
    expect(writes(third.operations)).toEqual(['PutItem', 'PutItem']);
    expect(third.metrics).toMatchObject({ ItemsUpdated: 2, ItemsUnchanged: 6 });
    // One change per write on the items stream, as the changes writer reads it: the 8 creations,
    // then the 2 updates from the revision stored before (none for the run that wrote nothing).
    const changes = await env.changes();
    expect(changes.map((change) => change.change)).toEqual([...Array<string>(8).fill('created'), 'updated', 'updated']);
    expect(changes.slice(0, 8).map((change) => change.id).sort()).toEqual([...bodies].sort());
    expect(changes.slice(8).map((change) => [change.id, change.revision, change.previousRevision]).sort()).toEqual(
      changed.map((id) => [id, String((env.sim.getItem(id)!['meta'] as { rev: number }).rev), first.find((row) => row['id'] === id)!['revision']]).sort(),
    );
    const after = await env.rows();
    for (const row of after) {
      const id = row['id'] as string;
      const before = first.find((r) => r['id'] === id)!;
      if (changed.includes(id)) {
        const expected = (env.sim.getItem(id)!['meta'] as { rev: number }).rev;
        expect(row['revision']).toBe(String(expected));
        expect(row['revision']).not.toBe(before['revision']);
        expect(row['item']).toEqual(env.sim.getItem(id));
      } else {
        expect(row).toEqual(before);
      }
    }
  });

  it('tells apart revisions beyond 2^53 and stores numbers exactly as the provider wrote them', async () => {
    const env = await setup();
    const answer = (revision: string) =>
      env.sim.addFault({
        endpoint: 'items',
        itemId: 'big',
        times: 1,
        fault: { kind: 'body', rawBody: `{"id":"big","type":"file","revision":${revision},"size":1.50,"ns":-0}` },
      });

    answer('12345678901234567891');
    await env.run(['big']);
    answer('12345678901234567892'); // the same double as ...891: JSON.parse would call it unchanged
    const second = await env.run(['big']);
    answer('12345678901234567892');
    const third = await env.run(['big']);

    expect(second.metrics).toMatchObject({ ItemsUpdated: 1, ItemsUnchanged: 0 });
    expect(writes(second.operations)).toEqual(['PutItem']);
    expect(third.metrics).toMatchObject({ ItemsUpdated: 0, ItemsUnchanged: 1 });
    expect(writes(third.operations)).toEqual([]);
    const row = (await env.row('big'))!;
    expect(row['revision']).toBe('12345678901234567892');
    expect(String((row['item'] as Record<string, unknown>)['revision'])).toBe('12345678901234567892');
  });

  it('dead-letters bad bodies and stores the rest of the batch', async () => {
    // The provider holds an item whose id is 600 characters but 1,200 bytes in UTF-8: never asked for.
    const long = 'é'.repeat(600);
    const env = await setup({
      items: [{ id: 'good-1', type: 'file', revision: 1 }, { id: 'good-2', type: 'folder', revision: 'r1' }, { id: long, type: 'file', revision: 1 }],
    });
    const bodies = ['{"id":"good-1"}', '{"id": 42}', '{oops', 'bad\u0007id', 'good-2', 'z'.repeat(1025), JSON.stringify({ id: long })];

    const { result, metrics } = await env.run(bodies);

    expect(result).toEqual({ batchItemFailures: [] });
    expect((await env.rows()).map((row) => row['id'])).toEqual(['good-1', 'good-2']);
    expect(deadLetters().map((letter) => [letter.sourceMessageId, letter.body])).toEqual([
      ['m2', '{"id": 42}'],
      ['m3', '{oops'],
      ['m4', 'bad\u0007id'],
      ['m6', 'z'.repeat(1025)],
      ['m7', JSON.stringify({ id: long })],
    ]);
    for (const letter of deadLetters()) expect(letter.error).toMatch(/^the (message body|item id)/);
    expect(deadLetters().find((letter) => letter.sourceMessageId === 'm7')?.error).toBe('the item id is 1200 bytes long in UTF-8; the limit is 1024 bytes');
    expect(metrics).toMatchObject({ RecordsDeadLettered: 5, ItemsCreated: 2 });
    expect(env.sim.requests.map((request) => request.itemId)).toEqual(['good-1', 'good-2']);
  });

  it('a 5xx outage for some items fails only their records', async () => {
    const env = await setup({ items: ['a', 'b', 'c', 'd'].map((id) => ({ id, type: 'file' as const, revision: 1 })) });
    env.sim.addFault({ endpoint: 'items', itemId: 'b', fault: { kind: 'status', status: 503 } });
    env.sim.addFault({ endpoint: 'items', itemId: 'd', fault: { kind: 'status', status: 500 } });

    const { result, metrics } = await env.run(['a', 'b', 'c', 'd', '{"id":"b"}']);

    expect(failed(result)).toEqual(['m2', 'm4', 'm5']);
    expect((await env.rows()).map((row) => row['id'])).toEqual(['a', 'c']);
    expect(deadLetters()).toEqual([]);
    // Three attempts each (SYNC_FETCH_ATTEMPTS default), one fetch for the two "b" records.
    expect(env.sim.requests.filter((r) => r.itemId === 'b')).toHaveLength(3);
    expect(env.sim.requests.filter((r) => r.itemId === 'd')).toHaveLength(3);
    expect(metrics).toMatchObject({ RecordsRetried: 3, ItemsCreated: 2 });
  });

  it('a short 5xx burst, a dropped connection and a 408 are absorbed within the invocation', async () => {
    const env = await setup({ items: ['a', 'b', 'c'].map((id) => ({ id, type: 'file' as const, revision: 1 })) });
    env.sim.addFault({ endpoint: 'items', itemId: 'a', times: 2, fault: { kind: 'status', status: 502 } });
    env.sim.addFault({ endpoint: 'items', itemId: 'b', times: 1, fault: { kind: 'drop' } });
    env.sim.addFault({ endpoint: 'items', itemId: 'c', times: 1, fault: { kind: 'status', status: 408 } });

    const { result } = await env.run(['a', 'b', 'c']);

    expect(result).toEqual({ batchItemFailures: [] });
    expect((await env.rows()).map((row) => row['id'])).toEqual(['a', 'b', 'c']);
    expect(env.sim.requests.filter((r) => r.itemId === 'a').map((r) => r.status)).toEqual([502, 502, 200]);
  });

  it('sends tricky ids as one percent-encoded segment under /items/ and nowhere else', async () => {
    const ids = ['../getToken', 'a/b?c#d', '..', '%2e%2e', 'ünï cödé'];
    const env = await setup({ items: ids.filter((id) => id !== '..').map((id) => ({ id, type: 'file' as const, revision: 1 })) });

    const { result } = await env.run(ids.map((id) => JSON.stringify({ id })));

    expect(result.batchItemFailures).toEqual([]);
    expect(env.sim.requests.map((r) => r.rawUrl).sort()).toEqual(
      [
        '/api/v2/items/..%2FgetToken',
        '/api/v2/items/a%2Fb%3Fc%23d',
        '/api/v2/items/%252e%252e',
        '/api/v2/items/%C3%BCn%C3%AF%20c%C3%B6d%C3%A9',
      ].sort(),
    );
    expect(env.sim.requests.every((r) => r.endpoint === 'items')).toBe(true);
    expect((await env.rows()).map((row) => row['id']).sort()).toEqual(['%2e%2e', '../getToken', 'a/b?c#d', 'ünï cödé'].sort());
    // ".." cannot be one path segment: dead, never sent.
    expect(deadLetters().map((letter) => letter.body)).toEqual(['{"id":".."}']);
  });

  it('a refused token stops its connection alone: its records wait (the breaker stays closed) until it holds a new token; another connection goes on', async () => {
    const env = await setup({ items: [{ id: 'a', type: 'file', revision: 1 }, { id: 'b', type: 'file', revision: 1 }] });
    const handler = env.handler(); // one container throughout
    await env.run(['a'], { handler });

    // The provider revokes every token; then the connection acme gets a new one, default does not.
    env.sim.revokeAccessTokens();
    const acmeToken = env.access.issue('acme');
    env.sim.bumpRevision('a');
    const stale = await env.run(['a', 'b', '{"connection":"acme","id":"a"}'], { handler });
    expect(failed(stale.result)).toEqual([]);
    expect(stale.metrics).toMatchObject({ RecordsPostponed: 2, ItemsCreated: 1, BreakerOpen: 0 });
    expect(requeued().map((entry) => [entry.MessageBody, entry.DelaySeconds]).sort()).toEqual([
      ['a', 300],
      ['b', 300],
    ]);
    expect(env.access.refusals.map((refusal) => refusal.connection)).toEqual(['default', 'default']);
    expect(env.access.refusals.some((refusal) => refusal.rejected === acmeToken)).toBe(false);
    expect(deadLetters()).toEqual([]);
    expect((await env.row('a', 'acme'))?.['revision']).toBe('2');

    // default holds a new token: its records go through at once (no breaker to wait out).
    env.access.issue('default');
    const requestsBefore = env.sim.requests.length;
    const recovered = await env.run(['a', 'b'], { handler });
    expect(failed(recovered.result)).toEqual([]);
    expect(recovered.metrics).toMatchObject({ ItemsUpdated: 1, ItemsCreated: 1, RecordsPostponed: 0, BreakerOpen: 0 });
    expect(env.sim.requests.slice(requestsBefore).map((r) => r.status)).toEqual([200, 200]);
    expect((await env.row('a'))?.['revision']).toBe('2');
    expect((await env.row('b'))?.['revision']).toBe('1');
  });

  it('two connections holding the same item id: two rows, each keyed by its connection', async () => {
    const env = await setup({ items: [{ id: 'shared', type: 'file', revision: 1, name: 'one' }] });
    env.access.issue('acme');
    await env.run(['shared']);
    env.sim.setItem({ id: 'shared', type: 'file', revision: 2, name: 'two' });
    const { result, metrics } = await env.run(['{"connection":"acme","id":"shared"}', 'shared']);

    expect(result).toEqual({ batchItemFailures: [] });
    expect(metrics).toMatchObject({ ItemsCreated: 1, ItemsUpdated: 1 });
    expect((await env.rows()).map((row) => [row['connection'], row['id'], row['revision']]).sort()).toEqual([
      ['acme', 'shared', '2'],
      ['default', 'shared', '2'],
    ]);
    expect(await env.row('shared', 'acme')).toMatchObject({ connection: 'acme', id: 'shared', item: { name: 'two' } });
  });

  it('dead-letters the records of an unknown connection with the reason, and fetches nothing for them', async () => {
    const env = await setup({ items: [{ id: 'x', type: 'file', revision: 1 }] });
    const { result } = await env.run(['{"connection":"ghost","id":"x"}', 'x']);

    expect(result).toEqual({ batchItemFailures: [] });
    expect(deadLetters()).toEqual([{ body: '{"connection":"ghost","id":"x"}', error: 'unknown connection "ghost"', sourceMessageId: 'm1' }]);
    expect(env.sim.requests).toHaveLength(1);
    expect((await env.rows()).map((row) => [row['connection'], row['id']])).toEqual([['default', 'x']]);
  });

  it('tombstones a stored item on 404, keeping its last copy; an unknown id writes nothing', async () => {
    const env = await setup({ items: [{ id: 'doomed', type: 'folder', revision: 4, name: 'Old' }] });
    await env.run(['doomed']);
    const before = await env.row('doomed');
    env.sim.deleteItem('doomed');

    const { result, metrics, operations } = await env.run(['doomed', 'never-existed']);

    expect(result).toEqual({ batchItemFailures: [] });
    expect(metrics).toMatchObject({ ItemsDeleted: 1 });
    expect(writes(operations)).toEqual(['UpdateItem']);
    const after = await env.row('doomed');
    expect(after).toMatchObject({ deleted: true, revision: '4', item: before?.['item'] });
    expect(after?.['syncedAt']).not.toBe(undefined);
    expect(await env.row('never-existed')).toBeUndefined();

    // Again: already a tombstone, nothing written. Then the item comes back.
    expect(writes((await env.run(['doomed'])).operations)).toEqual([]);
    env.sim.setItem({ id: 'doomed', type: 'folder', revision: 4, name: 'Restored' });
    await env.run(['doomed']);
    const restored = await env.row('doomed');
    expect(restored).not.toHaveProperty('deleted');
    expect(restored?.['item']).toMatchObject({ name: 'Restored' });
    // Each write is one change on the items stream, as the changes writer reads it, in order; the
    // runs that wrote nothing made none.
    const changes = await env.changes();
    expect(changes).toEqual([
      { connection: 'default', id: 'doomed', change: 'created', type: 'folder', revision: '4', previousRevision: null },
      { connection: 'default', id: 'doomed', change: 'deleted', type: 'folder', revision: '4', previousRevision: '4' },
      { connection: 'default', id: 'doomed', change: 'restored', type: 'folder', revision: '4', previousRevision: '4' },
    ]);
  });

  it('fetches an id once for duplicate records in a batch', async () => {
    const env = await setup({ items: [{ id: 'dup', type: 'file', revision: 1 }] });

    const { result } = await env.run(['dup', '{"id":"dup"}', '  dup  ']);

    expect(result.batchItemFailures).toEqual([]);
    expect(env.sim.requests).toHaveLength(1);
    expect(await env.rows()).toHaveLength(1);
  });

  it('dead-letters an id mismatch, a missing revision, an unknown type, an HTML 200 and a 400; stores a 600 KB item (in the items bucket)', async () => {
    const env = await setup();
    env.sim.setItem({ id: 'other', type: 'file', revision: 1 }, 'mismatch');
    env.sim.setItem({ id: 'norev', type: 'file' });
    env.sim.setItem({ id: 'weird', type: 'symlink' as 'file', revision: 1 });
    env.sim.setItem({ id: 'html', type: 'file', revision: 1 });
    env.sim.addFault({ itemId: 'html', fault: { kind: 'body', rawBody: '<html><body>Maintenance</body></html>', contentType: 'text/html' } });
    env.sim.addFault({ itemId: 'bad', fault: { kind: 'status', status: 400 } });
    env.sim.setItem({ id: 'huge', type: 'file', revision: 1, content: 'x'.repeat(600 * 1024) });
    env.sim.setItem({ id: 'fine', type: 'file', revision: 1 });

    const ids = ['mismatch', 'norev', 'weird', 'html', 'bad', 'huge', 'fine'];
    const { result, metrics } = await env.run(ids);

    expect(result).toEqual({ batchItemFailures: [] });
    expect((await env.rows()).map((row) => row['id'])).toEqual(['fine', 'huge']);
    expect((await env.row('huge'))?.['itemObject']).toBeDefined();
    const reasons = Object.fromEntries(deadLetters().map((letter) => [letter.body, letter.error]));
    expect(reasons).toEqual({
      mismatch: 'the provider answered with another item (id "other") than the one asked for',
      norev: 'the provider\'s item has no value at the revision field "revision"; expected a number or a non-empty string',
      weird: 'the provider\'s item has type "symlink"; expected "file" or "folder"',
      html: expect.stringMatching(/^the provider's answer is not an item \(getItem: the 200 body is not JSON; HTTP 200\)$/),
      bad: expect.stringMatching(/^the provider cannot serve this item as asked \(.*HTTP 400.*\)$/),
    });
    expect(metrics).toMatchObject({ RecordsDeadLettered: 5, ItemsCreated: 2, RecordsRetried: 0 });
    // Each was asked once: none of these is worth a retry.
    expect(env.sim.requests).toHaveLength(7);
  });

  it('ends a race between two handler instances on one id with the newest revision stored', async () => {
    const env = await setup({ items: [{ id: 'race', type: 'file', revision: 1, body: 'v1' }] });
    await env.run(['race']);

    // Container A fetches revision 2 but is slow to write it (held after the fetch)...
    env.sim.setItem({ id: 'race', type: 'file', revision: 2, body: 'v2' });
    const slow = heldAfterFirstFetch(env.sim.baseUrl, 1 << 20);
    const a = env.run(['race'], { handler: env.handler({ provider: slow.provider }) });
    await slow.fetchedOnce;

    // ...while container B fetches revision 3 and stores it.
    env.sim.setItem({ id: 'race', type: 'file', revision: 3, body: 'v3' });
    const b = await env.run(['race'], { handler: env.handler() });
    expect(b.metrics).toMatchObject({ ItemsUpdated: 1 });
    expect((await env.row('race'))?.['revision']).toBe('3');

    // A's write of revision 2 must lose: it reads the row again, fetches again, finds 3 stored.
    slow.release();
    const resultA = await a;
    expect(resultA.result).toEqual({ batchItemFailures: [] });
    expect(resultA.metrics).toMatchObject({ ItemsFetched: 2, ItemsUnchanged: 1, ItemsUpdated: 0 });
    const row = await env.row('race');
    expect(row).toMatchObject({ revision: '3', item: { body: 'v3', revision: 3 } });
  });

  it('two containers syncing the same new ids at once create each row once, without an error', async () => {
    const items = Array.from({ length: 6 }, (_, n) => ({ id: `p${n}`, type: 'file' as const, revision: 1 }));
    const env = await setup({ items });
    const ids = items.map((i) => i.id);
    const { result, total } = await twoContainersAtOnce(env, ids);

    expect(result).toEqual([{ batchItemFailures: [] }, { batchItemFailures: [] }]);
    expect(total['ItemsCreated']).toBe(6); // the loser of each race re-read, re-fetched and found it unchanged
    expect((total['ItemsCreated'] ?? 0) + (total['ItemsUnchanged'] ?? 0)).toBe(12);
    expect((await env.rows()).map((row) => row['id'])).toEqual(ids);
    // The losers' writes failed their condition: one change a row on the items stream, the feed's source.
    expect((await env.changes()).map((change) => [change.change, change.id]).sort()).toEqual(ids.map((id) => ['created', id]));
  });

  it('absorbs DynamoDB throttling (reads and writes)', async () => {
    const env = await setup({ items: ['t1', 't2', 't3'].map((id) => ({ id, type: 'file' as const, revision: 1 })) });
    ctx.dynamo.throttle({ operation: 'BatchGetItem', times: 1, error: 'ThrottlingException' });
    // A row's write is one PutItem.
    ctx.dynamo.throttle({ operation: 'PutItem', times: 2, error: 'ProvisionedThroughputExceededException' });
    const throttledBefore = ctx.dynamo.throttled;

    const { result, metrics } = await env.run(['t1', 't2', 't3']);

    expect(ctx.dynamo.throttled - throttledBefore).toBe(3);
    expect(result).toEqual({ batchItemFailures: [] });
    expect(metrics).toMatchObject({ ItemsCreated: 3, RecordsRetried: 0 });
    expect((await env.rows()).map((row) => row['id'])).toEqual(['t1', 't2', 't3']);
  });

  it('sends a rate-limited record again, delayed by its Retry-After, without a second request', async () => {
    const env = await setup({ items: [{ id: 'limited', type: 'file', revision: 1 }] });
    env.sim.addFault({ itemId: 'limited', fault: { kind: 'status', status: 429, headers: { 'Retry-After': '90' } } });

    const { result, metrics } = await env.run(['limited']);

    expect(failed(result)).toEqual([]);
    expect(sqs).toReceiveCommandWith(SendMessageBatchCommand, {
      QueueUrl: QUEUE_URL,
      Entries: [{ Id: 'm0', MessageBody: 'limited', DelaySeconds: 90, MessageGroupId: 'default', MessageAttributes: { postponements: { DataType: 'Number', StringValue: '1' } } }],
    });
    expect(sqs).not.toHaveReceivedCommand(ChangeMessageVisibilityBatchCommand);
    expect(metrics).toMatchObject({ RecordsPostponed: 1, ProviderRateLimited: 1 });
    expect(env.sim.requests).toHaveLength(1);
  });

  it('hands back a record whose request hangs past the time the invocation has', async () => {
    const env = await setup({ items: [{ id: 'stuck', type: 'file', revision: 1 }, { id: 'quick', type: 'file', revision: 1 }] });
    env.sim.addFault({ itemId: 'stuck', fault: { kind: 'hang' } });

    // 6.2 s left, 1.2 s kept back: 5 s of provider work, all of it the stuck request's wait. The
    // quick one needs a few milliseconds of it on an idle machine: a loaded one cannot make it miss.
    const { result } = await env.run(['stuck', 'quick'], { handler: env.handler({ safetyMarginMs: 1_200 }), remainingMs: 6_200 });

    expect(failed(result)).toEqual(['m1']);
    expect((await env.rows()).map((row) => row['id'])).toEqual(['quick']);
  });
});

expectNoTokenLeft();
