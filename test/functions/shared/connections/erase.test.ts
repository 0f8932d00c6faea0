/**
 * A connection's erase (functions/shared/connections/erase.ts `runErase`) over DynamoDB Local and s3rver
 * with the real AwsItemsEraser: the safety wait, the two sweeps and their progress in the
 * connection's row, the rule of the keys a row names (its own, not another connection's, deleted
 * before the row), a run cut short and run again, a connection put again while its erase waits
 * (the erase does nothing) or runs (the put is refused, the erase runs to its end), the safety
 * wait's length; and how the client API asks for it (ConnectionOperations.erase, through the erase
 * queue's SqsEraseScheduler on a mocked SQS).
 */
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { DynamoDbConnectionStore } from '../../../../functions/shared/adapters/dynamodb-connection-store.js';
import { MAX_DELAY_SECONDS, SqsEraseScheduler } from '../../../../functions/shared/adapters/sqs-erase-scheduler.js';
import {
  ERASE_MARGIN_SECONDS,
  eraseSettleSeconds,
  runErase,
  type EraseRequest,
  type EraseRun,
  type EraseStep,
  type ItemsEraser,
} from '../../../../functions/shared/connections/erase.js';
import { ConnectionOperations } from '../../../../functions/shared/connections/operations.js';
import { NO_TOKENS } from '../../../../functions/shared/connections/sealing.js';
import { iso, NOW, PAGE_QUARTER, SEEDED, SETTLE_SECONDS, TestClock, useEraseWorld } from './erase-harness.js';

const world = useEraseWorld();
const AFTER = NOW + SETTLE_SECONDS * 1000;
const never = (): boolean => false;

/** The eraser's store (no token opened or sealed), told just after its next view or before its delete. */
class WatchedStore extends DynamoDbConnectionStore {
  afterNextView: (() => Promise<void>) | undefined;
  beforeDelete: (() => Promise<void>) | undefined;

  override async view(connection: string, options?: { consistent?: boolean }) {
    const listing = await super.view(connection, options);
    const hook = this.afterNextView;
    this.afterNextView = undefined;
    await hook?.();
    return listing;
  }

  override async delete(connection: string, erase?: { startedAt: string }) {
    await this.beforeDelete?.();
    return super.delete(connection, erase);
  }
}

/** `deleteKeys`: the keys asked for, and every row of the items table when they were (the page's rows not deleted yet). */
type Call = { op: 'deleteRows' } | { op: 'deleteKeys'; keys: string[]; rows: string[] } | { op: 'deleteObjects' } | { op: 'deleteChanges' };

type RowsStep = Parameters<ItemsEraser['deleteRows']>[1];

/** The real ItemsEraser, its calls recorded, the connection's `erase` read after each progress write, and hooks after each call. */
class WatchedEraser implements ItemsEraser {
  readonly calls: Call[] = [];
  /** acme's `erase`, read after each onProgress write. */
  readonly progress: unknown[] = [];
  afterRows: ((call: number) => Promise<void>) | undefined;
  afterObjects: ((call: number) => Promise<void>) | undefined;
  private rowCalls = 0;
  private objectCalls = 0;

  constructor(private readonly inner: ItemsEraser) {}

  async deleteRows(connection: string, step: RowsStep) {
    this.calls.push({ op: 'deleteRows' });
    const result = await this.inner.deleteRows(connection, this.recorded(connection, step));
    await this.afterRows?.(++this.rowCalls);
    return result;
  }

  async deleteKeys(keys: readonly string[]) {
    this.calls.push({ op: 'deleteKeys', keys: [...keys], rows: await world.rows() });
    return this.inner.deleteKeys(keys);
  }

  async deleteObjects(connection: string, step: EraseStep) {
    this.calls.push({ op: 'deleteObjects' });
    const result = await this.inner.deleteObjects(connection, this.recorded(connection, step));
    await this.afterObjects?.(++this.objectCalls);
    return result;
  }

  async deleteChanges(connection: string, step: EraseStep) {
    this.calls.push({ op: 'deleteChanges' });
    return this.inner.deleteChanges(connection, step);
  }

  private recorded<S extends EraseStep>(connection: string, step: S): S {
    return {
      ...step,
      onProgress: async (deleted: number) => {
        await step.onProgress?.(deleted);
        this.progress.push(await world.eraseOf(connection));
      },
    };
  }
}

function eraserStore(): WatchedStore {
  return new WatchedStore(world.db, world.connectionsTable, { sealer: NO_TOKENS });
}

async function erase(request: EraseRequest, options: { at?: number; stop?: () => boolean; store?: WatchedStore; items?: ItemsEraser } = {}): Promise<EraseRun> {
  return runErase({ store: options.store ?? eraserStore(), items: options.items ?? world.itemsEraser(), clock: new TestClock(options.at ?? AFTER) }, request, options.stop ?? never);
}

const waiting = (request: EraseRequest, settleSeconds = SETTLE_SECONDS) => ({
  state: 'waiting',
  startedAt: request.startedAt,
  notBefore: iso(Date.parse(request.startedAt) + settleSeconds * 1000),
  rowsDeleted: 0,
  objectsDeleted: 0,
});

describe('runErase: the safety wait', () => {
  it('before notBefore: waits the seconds left (rounded up), deletes nothing, the erase still waiting', async () => {
    await world.seed();
    const request = await world.removeForErase('acme', NOW);
    const items = new WatchedEraser(world.itemsEraser());

    expect(await erase(request, { at: NOW, items })).toEqual({ kind: 'wait', seconds: SETTLE_SECONDS });
    expect(await erase(request, { at: NOW + 10_000, items })).toEqual({ kind: 'wait', seconds: 140 });
    expect(await erase(request, { at: AFTER - 1_500, items })).toEqual({ kind: 'wait', seconds: 2 });
    expect(await erase(request, { at: AFTER - 1, items })).toEqual({ kind: 'wait', seconds: 1 });

    expect(items.calls).toEqual([]);
    expect(await world.rows()).toEqual(SEEDED.rows);
    expect(await world.objects()).toEqual(SEEDED.objects);
    expect(await world.eraseOf('acme')).toEqual(waiting(request));
    expect(await world.row('acme')).toMatchObject({ status: 'removed' });
  });

  it('the safety wait: a sync container\'s token cache, one sync invocation and a margin, 90 s at least', () => {
    expect(ERASE_MARGIN_SECONDS).toBe(30);
    expect(eraseSettleSeconds(60, 60)).toBe(150);
    expect(eraseSettleSeconds(60, 60)).toBe(SETTLE_SECONDS);
    expect(eraseSettleSeconds(300, 60)).toBe(390);
    expect(eraseSettleSeconds(60, 0)).toBe(90);
    expect(eraseSettleSeconds(10, 20)).toBe(90);
    expect(eraseSettleSeconds(0, 0)).toBe(90);
  });
});

describe('runErase: the sweeps', () => {
  it("at notBefore: acme's rows, its objects, the keys its rows name and its row are gone; other's, items/acmeX/ and other's key named by acme are kept", async () => {
    await world.seed();
    const request = await world.removeForErase('acme', NOW);
    const items = new WatchedEraser(world.itemsEraser());
    const store = eraserStore();
    const beforeDelete: unknown[] = [];
    store.beforeDelete = async () => void beforeDelete.push(await world.eraseOf('acme'));

    expect(await erase(request, { at: AFTER, items, store })).toEqual({ kind: 'done', rowsDeleted: SEEDED.rowsDeleted, objectsDeleted: SEEDED.objectsDeleted });

    // Two sweeps; the first's page of rows has the keys they name that are acme's (not other's
    // items/other/y.json) deleted before those rows, every row still there when they are; then
    // items/acme/ is listed. The second sweep's page is empty: no key to delete.
    expect(items.calls).toEqual([
      { op: 'deleteRows' },
      { op: 'deleteKeys', keys: SEEDED.acmeOwnKeys, rows: SEEDED.rows },
      { op: 'deleteObjects' },
      { op: 'deleteChanges' },
      { op: 'deleteRows' },
      { op: 'deleteObjects' },
      { op: 'deleteChanges' },
    ]);
    // The progress, in the connection's row after each page: the rows page counts its 4 keys; the
    // objects page, items/acme/deep/z.json (the keys were gone already); the second sweep's rows
    // page is empty, its objects none.
    const running = (rowsDeleted: number, objectsDeleted: number) => ({ ...waiting(request), state: 'running', rowsDeleted, objectsDeleted });
    expect(items.progress).toEqual([running(5, 4), running(5, 5), running(5, 5)]);
    // `done` is written before the row is deleted.
    expect(beforeDelete).toEqual([{ ...running(5, 5), state: 'done' }]);

    expect(await world.rows()).toEqual(SEEDED.rowsAfter);
    expect(await world.objects()).toEqual(SEEDED.objectsAfter);
    // acme's changes log (its 3 changes and its head) is gone; other's is whole.
    expect(await world.changes()).toEqual(SEEDED.changesAfter);
    expect(await world.row('acme')).toBeUndefined();
    const other = await world.store().get('other', { consistent: true });
    expect(other).toMatchObject({ status: 'active', refreshToken: 'rt-other-secret-1', credentialsVersion: 1 });
    expect(other).not.toHaveProperty('erase');

    // Repeatable: run again (its message delivered twice), the row already gone.
    expect(await erase(request, { at: AFTER + 60_000 })).toEqual({ kind: 'done', rowsDeleted: 0, objectsDeleted: 0 });
    expect(await world.rows()).toEqual(SEEDED.rowsAfter);
    expect(await world.objects()).toEqual(SEEDED.objectsAfter);
  });

  it("another connection's key is kept only while that connection is in the table: once it is erased, acme's row naming it takes it", async () => {
    await world.seed();
    // other is erased first: its rows and objects go, and its row.
    const otherRequest = await world.removeForErase('other', NOW);
    expect(await erase(otherRequest)).toEqual({ kind: 'done', rowsDeleted: 3, objectsDeleted: 2 });
    expect(await world.row('other')).toBeUndefined();
    // items/other/y.json went with other; acme's row still names it, and it is written again (a late sync of acme).
    await world.putObject('items/other/y.json');
    const request = await world.removeForErase('acme', NOW);
    const items = new WatchedEraser(world.itemsEraser());
    expect(await erase(request, { items })).toEqual({ kind: 'done', rowsDeleted: 5, objectsDeleted: 6 });
    expect(items.calls[1]).toEqual({ op: 'deleteKeys', keys: [...SEEDED.acmeOwnKeys, 'items/other/y.json'], rows: ['acme/fil-1', 'acme/fil-2', 'acme/imported', 'acme/orphan', 'acme/to-other'] });
    expect(await world.rows()).toEqual([]);
    expect(await world.objects()).toEqual(['items/acmeX/fil-1.json', 'legacy/kept.json']);
  });

  it('cut short by stop() after a page: unfinished, its progress in the row (running); run again, it finishes; again after done: zeros', async () => {
    await world.put('acme', 'rt-acme-secret-1');
    await world.put('other', 'rt-other-secret-1');
    // Six rows of 300 KB: a 1 MB Query page holds four.
    for (let i = 0; i < 6; i++) await world.itemRow('acme', `big-${i}`, { key: `items/acme/big-${i}.json`, pad: PAGE_QUARTER });
    await world.itemRow('other', 'big-0', { key: 'items/other/big-0.json' });
    for (const key of ['items/acme/big-0.json', 'items/acme/big-5.json', 'items/other/big-0.json']) await world.putObject(key);
    const request = await world.removeForErase('acme', NOW);

    let stops = 0;
    const stop = (): boolean => (stops += 1) > 0;
    // The first page's four keys went before its rows (only big-0's is there: S3 deletes the others all the same, and they count).
    expect(await erase(request, { stop })).toEqual({ kind: 'unfinished', rowsDeleted: 4, objectsDeleted: 4 });
    expect(stops).toBe(1);
    expect(await world.eraseOf('acme')).toEqual({ ...waiting(request), state: 'running', rowsDeleted: 4, objectsDeleted: 4 });
    expect(await world.rows()).toEqual(['acme/big-4', 'acme/big-5', 'other/big-0']);
    expect(await world.objects()).toEqual(['items/acme/big-5.json', 'items/other/big-0.json']);

    // Run again from its message: it goes on from the counts in the row.
    const store = eraserStore();
    const beforeDelete: unknown[] = [];
    store.beforeDelete = async () => void beforeDelete.push(await world.eraseOf('acme'));
    // Its objects: the keys big-4 and big-5 name (big-4's is not there: S3 deletes it all the same); items/acme/ then lists none.
    expect(await erase(request, { at: AFTER + 5_000, store })).toEqual({ kind: 'done', rowsDeleted: 6, objectsDeleted: 6 });
    expect(beforeDelete).toEqual([{ ...waiting(request), state: 'done', rowsDeleted: 6, objectsDeleted: 6 }]);
    expect(await world.rows()).toEqual(['other/big-0']);
    expect(await world.objects()).toEqual(['items/other/big-0.json']);
    expect(await world.row('acme')).toBeUndefined();

    expect(await erase(request, { at: AFTER + 10_000 })).toEqual({ kind: 'done', rowsDeleted: 0, objectsDeleted: 0 });
    expect(await world.rows()).toEqual(['other/big-0']);
  });

  it('a key outside items/<connection>/ named by a row deleted in a run cut short: deleted with its page, before the row (the next run never sees that row)', async () => {
    await world.put('acme', 'rt-acme-secret-1');
    // `a-imported` sorts first: it is in the first page.
    await world.itemRow('acme', 'a-imported', { key: 'legacy/big.json', pad: PAGE_QUARTER });
    for (let i = 0; i < 5; i++) await world.itemRow('acme', `big-${i}`, { pad: PAGE_QUARTER });
    await world.putObject('legacy/big.json');
    const request = await world.removeForErase('acme', NOW);
    expect(await erase(request, { stop: () => true })).toEqual({ kind: 'unfinished', rowsDeleted: 4, objectsDeleted: 1 });
    expect(await world.rows()).toEqual(['acme/big-3', 'acme/big-4']);
    expect(await world.objects()).toEqual([]);
    expect(await erase(request)).toEqual({ kind: 'done', rowsDeleted: 6, objectsDeleted: 1 });
    expect(await world.rows()).toEqual([]);
    expect(await world.objects()).toEqual([]);
  });

  it('a page naming more than 1,000 keys, in a run cut short: all of them deleted before its rows (DeleteObjects of 1,000 and 1), none left for the next run to learn', async () => {
    await world.put('acme', 'rt-acme-secret-1');
    const ids = Array.from({ length: 1001 }, (_, i) => `r-${String(i).padStart(4, '0')}`);
    await world.itemRows('acme', ids, (id) => `legacy/${id}.json`);
    // Five rows of 300 KB after them (by id), naming no key: the Query needs a second page.
    for (let i = 0; i < 5; i++) await world.itemRow('acme', `z-${i}`, { pad: PAGE_QUARTER });
    await world.putObject('legacy/r-0000.json');
    await world.putObject('legacy/r-1000.json');
    await world.putObject('items/acme/z.json');
    const request = await world.removeForErase('acme', NOW);
    // The number of keys of each DeleteObjects the eraser sends.
    const s3Client = world.s3.client();
    const deleteObjects: number[] = [];
    s3Client.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === 'DeleteObjectsCommand') deleteObjects.push((args.input as { Delete: { Objects: unknown[] } }).Delete.Objects.length);
        return next(args);
      },
      { step: 'initialize' },
    );
    try {
      const items = new WatchedEraser(world.itemsEraser({ s3: s3Client }));
      const run = await erase(request, { stop: () => true, items });
      // The first page: the 1,001 small rows and some of the big ones.
      const left = await world.rows();
      expect(left.length).toBeGreaterThan(0);
      expect(left.every((row) => row.startsWith('acme/z-'))).toBe(true);
      expect(run).toEqual({ kind: 'unfinished', rowsDeleted: 1006 - left.length, objectsDeleted: 1001 });
      expect(items.calls).toEqual([
        { op: 'deleteRows' },
        { op: 'deleteKeys', keys: ids.map((id) => `legacy/${id}.json`), rows: [...ids.map((id) => `acme/${id}`), ...[0, 1, 2, 3, 4].map((i) => `acme/z-${i}`)] },
      ]);
      expect(deleteObjects).toEqual([1000, 1]);
      // legacy/r-1000.json, past the first 1,000, is gone with the rest; items/acme/ is for the next run.
      expect(await world.objects()).toEqual(['items/acme/z.json']);

      expect(await erase(request, { items: world.itemsEraser({ s3: s3Client }) })).toEqual({ kind: 'done', rowsDeleted: 1006, objectsDeleted: 1002 });
      expect(deleteObjects).toEqual([1000, 1, 1]);
      expect(await world.rows()).toEqual([]);
      expect(await world.objects()).toEqual([]);
    } finally {
      s3Client.destroy();
    }
  });

  it('a step of the first sweep that fails (the listing of items/acme/): the error is thrown, the progress so far kept, and the next run finishes', async () => {
    await world.seed();
    const request = await world.removeForErase('acme', NOW);
    const real = world.itemsEraser();
    const failing = world.itemsEraser({ itemsBucket: 'no-such-bucket' });
    const items: ItemsEraser = {
      deleteRows: (connection, step) => real.deleteRows(connection, step),
      deleteKeys: (keys) => real.deleteKeys(keys),
      deleteObjects: (connection, step) => failing.deleteObjects(connection, step),
      deleteChanges: (connection, step) => real.deleteChanges(connection, step),
    };
    await expect(erase(request, { items })).rejects.toThrow(/^S3 ListObjectsV2 on the items bucket no-such-bucket failed \(NoSuchBucket, HTTP 404\)$/);
    expect(await world.eraseOf('acme')).toEqual({ ...waiting(request), state: 'running', rowsDeleted: 5, objectsDeleted: 4 });
    expect(await world.rows()).toEqual(SEEDED.rowsAfter);
    // The keys acme's rows named went before those rows: items/acme/ holds the one no row named.
    expect(await world.objects()).toEqual(['items/acme/deep/z.json', ...SEEDED.objectsAfter]);
    expect(await erase(request)).toEqual({ kind: 'done', rowsDeleted: 5, objectsDeleted: 5 });
    expect(await world.rows()).toEqual(SEEDED.rowsAfter);
    expect(await world.row('acme')).toBeUndefined();
    // items/acme/ is listed again; items/gone/q.json and legacy/x.json, named only by the rows deleted before the failure, are gone.
    expect(await world.objects()).toEqual(SEEDED.objectsAfter);
  });

  it("a page whose keys cannot be deleted: the error is thrown before its rows are deleted (they still name the keys); the next run deletes both", async () => {
    await world.seed();
    const request = await world.removeForErase('acme', NOW);
    const failing = world.itemsEraser({ itemsBucket: 'no-such-bucket' });
    await expect(erase(request, { items: failing })).rejects.toThrow(/^S3 DeleteObjects on the items bucket no-such-bucket failed \(NoSuchBucket, HTTP 404\)$/);
    expect(await world.eraseOf('acme')).toEqual({ ...waiting(request), state: 'running', rowsDeleted: 0, objectsDeleted: 0 });
    expect(await world.rows()).toEqual(SEEDED.rows);
    expect(await world.objects()).toEqual(SEEDED.objects);
    expect(await erase(request)).toEqual({ kind: 'done', rowsDeleted: 5, objectsDeleted: 5 });
    expect(await world.rows()).toEqual(SEEDED.rowsAfter);
    expect(await world.objects()).toEqual(SEEDED.objectsAfter);
    expect(await world.row('acme')).toBeUndefined();
  });
});

describe('runErase: a connection put again, another erase', () => {
  it('put again while its erase waits: stale (nothing deleted), its row active with its new credentials and no erase', async () => {
    await world.seed();
    const request = await world.removeForErase('acme', NOW);
    await world.put('acme', 'rt-acme-secret-2', NOW + 60_000);
    const items = new WatchedEraser(world.itemsEraser());

    expect(await erase(request, { items })).toEqual({ kind: 'stale', reason: 'connection "acme" is active again: this erase is not run', deleted: false });
    expect(items.calls).toEqual([]);
    expect(await world.rows()).toEqual(SEEDED.rows);
    expect(await world.objects()).toEqual(SEEDED.objects);
    // Put, removed, put again.
    expect(await world.store().get('acme', { consistent: true })).toMatchObject({ status: 'active', refreshToken: 'rt-acme-secret-2', credentialsVersion: 3 });
    expect(await world.row('acme')).not.toHaveProperty('erase');
  });

  it("put again between the sweeps: refused ('erasing'), nothing written; the erase runs to done, acme's rows, objects and row gone, other's kept; a put after it creates acme anew", async () => {
    await world.seed();
    const request = await world.removeForErase('acme', NOW);
    const items = new WatchedEraser(world.itemsEraser());
    const running = (rowsDeleted: number, objectsDeleted: number) => ({ ...waiting(request), state: 'running', rowsDeleted, objectsDeleted });
    const during: Array<{ put: string; row: Record<string, unknown> | undefined }> = [];
    items.afterObjects = async (call) => {
      if (call === 1) during.push({ put: await world.put('acme', 'rt-acme-secret-2', AFTER), row: await world.row('acme') });
    };

    expect(await erase(request, { items })).toEqual({ kind: 'done', rowsDeleted: SEEDED.rowsDeleted, objectsDeleted: SEEDED.objectsDeleted });
    // The put is refused: the row is still removed (no token, not updated), its erase running.
    expect(during).toEqual([{ put: 'erasing', row: expect.objectContaining({ status: 'removed', updatedAt: iso(NOW), erase: running(5, 5) }) }]);
    expect(during[0]?.row).not.toHaveProperty('refreshToken');
    // Both sweeps run, their progress written as without the put.
    expect(items.calls).toEqual([
      { op: 'deleteRows' },
      { op: 'deleteKeys', keys: SEEDED.acmeOwnKeys, rows: SEEDED.rows },
      { op: 'deleteObjects' },
      { op: 'deleteChanges' },
      { op: 'deleteRows' },
      { op: 'deleteObjects' },
      { op: 'deleteChanges' },
    ]);
    expect(items.progress).toEqual([running(5, 4), running(5, 5), running(5, 5)]);
    expect(await world.rows()).toEqual(SEEDED.rowsAfter);
    expect(await world.objects()).toEqual(SEEDED.objectsAfter);
    expect(await world.row('acme')).toBeUndefined();
    expect(await world.store().get('other', { consistent: true })).toMatchObject({ status: 'active', refreshToken: 'rt-other-secret-1', credentialsVersion: 1 });
    expect(await world.row('other')).not.toHaveProperty('erase');

    // Once the erase is over, a put creates the connection anew; the old erase, delivered again, leaves it be.
    expect(await world.put('acme', 'rt-acme-secret-2', AFTER + 60_000)).toBe('created');
    expect(await world.store().get('acme', { consistent: true })).toMatchObject({ status: 'active', refreshToken: 'rt-acme-secret-2', credentialsVersion: 1, createdAt: iso(AFTER + 60_000) });
    expect(await world.row('acme')).not.toHaveProperty('erase');
    expect(await erase(request, { at: AFTER + 120_000 })).toEqual({ kind: 'stale', reason: 'connection "acme" is active again: this erase is not run', deleted: false });
    expect(await world.store().get('acme', { consistent: true })).toMatchObject({ status: 'active', refreshToken: 'rt-acme-secret-2', credentialsVersion: 1 });
  });

  it("put again during its first sweep: refused ('erasing'); a late write of acme then is deleted by the second sweep; done, acme's row gone, other's kept; a put after it creates acme anew", async () => {
    await world.seed();
    const request = await world.removeForErase('acme', NOW);
    const items = new WatchedEraser(world.itemsEraser());
    const running = (rowsDeleted: number, objectsDeleted: number) => ({ ...waiting(request), state: 'running', rowsDeleted, objectsDeleted });
    const during: Array<{ put: string; row: Record<string, unknown> | undefined }> = [];
    items.afterRows = async (call) => {
      if (call === 1) during.push({ put: await world.put('acme', 'rt-acme-secret-2', AFTER), row: await world.row('acme') });
    };
    // After the first sweep's objects, a sync of acme still running (from before its removal) writes.
    items.afterObjects = async (call) => {
      if (call !== 1) return;
      await world.itemRow('acme', 'fresh', { key: 'items/acme/fresh.json' });
      await world.putObject('items/acme/fresh.json');
    };

    expect(await erase(request, { items })).toEqual({ kind: 'done', rowsDeleted: SEEDED.rowsDeleted + 1, objectsDeleted: SEEDED.objectsDeleted + 1 });
    expect(during).toEqual([{ put: 'erasing', row: expect.objectContaining({ status: 'removed', updatedAt: iso(NOW), erase: running(5, 4) }) }]);
    expect(during[0]?.row).not.toHaveProperty('refreshToken');
    // The second sweep's page holds the late row: the key it names goes before it.
    expect(items.calls).toEqual([
      { op: 'deleteRows' },
      { op: 'deleteKeys', keys: SEEDED.acmeOwnKeys, rows: SEEDED.rows },
      { op: 'deleteObjects' },
      { op: 'deleteChanges' },
      { op: 'deleteRows' },
      { op: 'deleteKeys', keys: ['items/acme/fresh.json'], rows: ['acme/fresh', ...SEEDED.rowsAfter] },
      { op: 'deleteObjects' },
      { op: 'deleteChanges' },
    ]);
    // The second sweep's rows page counts the late row and its key; its objects listing finds none left.
    expect(items.progress).toEqual([running(5, 4), running(5, 5), running(6, 6)]);
    expect(await world.rows()).toEqual(SEEDED.rowsAfter);
    expect(await world.objects()).toEqual(SEEDED.objectsAfter);
    expect(await world.row('acme')).toBeUndefined();
    expect(await world.store().get('other', { consistent: true })).toMatchObject({ status: 'active', refreshToken: 'rt-other-secret-1', credentialsVersion: 1 });
    expect(await world.row('other')).not.toHaveProperty('erase');

    expect(await world.put('acme', 'rt-acme-secret-2', AFTER + 60_000)).toBe('created');
    expect(await world.store().get('acme', { consistent: true })).toMatchObject({ status: 'active', refreshToken: 'rt-acme-secret-2', credentialsVersion: 1 });
    expect(await world.row('acme')).not.toHaveProperty('erase');
  });

  it('put again after it was read, before its first write: stale (nothing deleted)', async () => {
    await world.seed();
    const request = await world.removeForErase('acme', NOW);
    const store = eraserStore();
    store.afterNextView = async () => void (await world.put('acme', 'rt-acme-secret-2', AFTER));
    const items = new WatchedEraser(world.itemsEraser());

    expect(await erase(request, { store, items })).toEqual({ kind: 'stale', reason: 'connection "acme": its erase changed while it started', deleted: false });
    expect(items.calls).toEqual([]);
    expect(await world.rows()).toEqual(SEEDED.rows);
    expect(await world.objects()).toEqual(SEEDED.objects);
    expect(await world.store().get('acme', { consistent: true })).toMatchObject({ status: 'active', refreshToken: 'rt-acme-secret-2' });
  });

  it('a connection not removed, one removed without an erase, one holding another erase: stale, nothing deleted', async () => {
    await world.seed();
    const request = { connection: 'acme', startedAt: iso(NOW) };
    const items = new WatchedEraser(world.itemsEraser());
    expect(await erase(request, { items })).toEqual({ kind: 'stale', reason: 'connection "acme" is active again: this erase is not run', deleted: false });

    await world.store().setStatus('acme', 'paused', ['active'], iso(NOW));
    expect(await erase(request, { items })).toEqual({ kind: 'stale', reason: 'connection "acme" is paused again: this erase is not run', deleted: false });

    await world.store().setStatus('acme', 'removed', ['paused'], iso(NOW));
    const none = 'connection "acme" holds another erase or none: this erase is not run';
    expect(await erase(request, { items })).toEqual({ kind: 'stale', reason: none, deleted: false });

    await world.store().requestErase('acme', { startedAt: iso(NOW + 1000), notBefore: iso(AFTER) });
    expect(await erase(request, { items })).toEqual({ kind: 'stale', reason: none, deleted: false });

    expect(items.calls).toEqual([]);
    expect(await world.rows()).toEqual(SEEDED.rows);
    expect(await world.objects()).toEqual(SEEDED.objects);
    expect(await world.eraseOf('acme')).toEqual(waiting({ connection: 'acme', startedAt: iso(NOW + 1000) }, SETTLE_SECONDS - 1));
  });

  it('a connection the table does not hold: done, nothing deleted (already erased)', async () => {
    await world.seed();
    const items = new WatchedEraser(world.itemsEraser());
    expect(await erase({ connection: 'gone', startedAt: iso(NOW) }, { items })).toEqual({ kind: 'done', rowsDeleted: 0, objectsDeleted: 0 });
    expect(items.calls).toEqual([]);
    expect(await world.objects()).toEqual(SEEDED.objects);
  });
});

describe('ConnectionOperations.erase', () => {
  const QUEUE_URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/content-sync-erase';
  const sqsMock = mockClient(SQSClient);
  let clock: TestClock;

  beforeEach(() => {
    sqsMock.reset();
    sqsMock.on(SendMessageCommand).resolves({ MessageId: 'm-1' });
    clock = new TestClock(NOW);
  });

  const operations = (options: { settle?: number; erasures?: boolean } = {}) =>
    new ConnectionOperations(
      { store: world.store(), clock, ...(options.erasures === false ? {} : { erasures: new SqsEraseScheduler(new SQSClient({ region: 'eu-west-1' }), QUEUE_URL) }) },
      { freshnessHours: 0, eraseSettleSeconds: options.settle ?? SETTLE_SECONDS },
    );
  const sent = () => sqsMock.commandCalls(SendMessageCommand).map((call) => call.args[0].input);
  const message = (startedAt: string, delaySeconds: number) => ({ QueueUrl: QUEUE_URL, MessageBody: JSON.stringify({ connection: 'acme', startedAt }), DelaySeconds: delaySeconds });

  it('an active connection: removed, its erase waiting until the removal plus the safety wait, one message delayed that long; nothing deleted', async () => {
    await world.seed();
    const outcome = await operations().erase('acme');
    const startedAt = iso(NOW);
    expect(outcome).toEqual({
      ok: true,
      changed: true,
      value: {
        connection: 'acme',
        clientId: 'client-acme',
        status: 'removed',
        refresh: { consecutiveFailures: 0 },
        fresh: false,
        createdAt: iso(NOW - 3_600_000),
        updatedAt: startedAt,
        erase: { state: 'waiting', startedAt, rowsDeleted: 0, objectsDeleted: 0 },
      },
    });
    expect(await world.eraseOf('acme')).toEqual({ state: 'waiting', startedAt, notBefore: iso(AFTER), rowsDeleted: 0, objectsDeleted: 0 });
    // Removed: its tokens deleted.
    expect(await world.row('acme')).not.toHaveProperty('refreshToken');
    expect(sent()).toEqual([message(startedAt, SETTLE_SECONDS)]);
    expect(await world.rows()).toEqual(SEEDED.rows);
    expect(await world.objects()).toEqual(SEEDED.objects);
  });

  it('asked again: the same erase, one more message for the wait left (harmless), changed false', async () => {
    await world.put('acme', 'rt-acme-secret-1');
    const first = await operations().erase('acme');
    expect(first).toMatchObject({ ok: true, changed: true });
    clock.ms = NOW + 40_000;
    const again = await operations().erase('acme');
    expect(again).toMatchObject({ ok: true, changed: false, value: { status: 'removed', updatedAt: iso(NOW), erase: { state: 'waiting', startedAt: iso(NOW), rowsDeleted: 0, objectsDeleted: 0 } } });
    clock.ms = AFTER + 60_000;
    expect(await operations().erase('acme')).toMatchObject({ ok: true, changed: false });
    expect(await world.eraseOf('acme')).toEqual({ state: 'waiting', startedAt: iso(NOW), notBefore: iso(AFTER), rowsDeleted: 0, objectsDeleted: 0 });
    expect(sent()).toEqual([message(iso(NOW), SETTLE_SECONDS), message(iso(NOW), 110), message(iso(NOW), 0)]);
  });

  it('a connection removed earlier: the wait counts from its removal (what is left of it, or none)', async () => {
    await world.put('acme', 'rt-acme-secret-1');
    await world.store().setStatus('acme', 'removed', ['active'], iso(NOW - 100_000));
    expect(await operations().erase('acme')).toMatchObject({ ok: true, changed: true, value: { erase: { state: 'waiting', startedAt: iso(NOW) } } });
    expect(await world.eraseOf('acme')).toEqual({ state: 'waiting', startedAt: iso(NOW), notBefore: iso(NOW + 50_000), rowsDeleted: 0, objectsDeleted: 0 });

    await world.put('other', 'rt-other-secret-1');
    await world.store().setStatus('other', 'removed', ['active'], iso(NOW - 3_600_000));
    expect(await operations().erase('other')).toMatchObject({ ok: true, changed: true });
    expect(await world.eraseOf('other')).toMatchObject({ notBefore: iso(NOW - 3_600_000 + SETTLE_SECONDS * 1000) });
    expect(sent()).toEqual([message(iso(NOW), 50), { ...message(iso(NOW), 0), MessageBody: JSON.stringify({ connection: 'other', startedAt: iso(NOW) }) }]);
  });

  it(`a wait longer than SQS's ${MAX_DELAY_SECONDS} s: the message is delayed ${MAX_DELAY_SECONDS} s (the eraser sends it back for the rest)`, async () => {
    await world.put('acme', 'rt-acme-secret-1');
    expect(await operations({ settle: 1200 }).erase('acme')).toMatchObject({ ok: true, changed: true });
    expect(await world.eraseOf('acme')).toMatchObject({ notBefore: iso(NOW + 1_200_000) });
    expect(sent()).toEqual([message(iso(NOW), MAX_DELAY_SECONDS)]);
  });

  it('SQS fails: the erase is written and the error thrown; asked again, the message is sent', async () => {
    await world.put('acme', 'rt-acme-secret-1');
    sqsMock.on(SendMessageCommand).rejectsOnce(Object.assign(new Error('throttled'), { name: 'ThrottlingException' })).resolves({ MessageId: 'm-2' });
    // The scheduler's error names the SQS failure (not its message) and is transient.
    await expect(operations().erase('acme')).rejects.toThrow(
      expect.objectContaining({ name: 'TransientError', message: 'SQS SendMessage to the erase queue failed (ThrottlingException): ask for the erase again' }),
    );
    expect(await world.eraseOf('acme')).toMatchObject({ state: 'waiting', startedAt: iso(NOW) });
    clock.ms = NOW + 1_000;
    expect(await operations().erase('acme')).toMatchObject({ ok: true, changed: false });
    expect(sent()).toEqual([message(iso(NOW), SETTLE_SECONDS), message(iso(NOW), SETTLE_SECONDS - 1)]);
  });

  it('without a scheduler (the CLI runs the erase itself): the erase is written, no message', async () => {
    await world.put('acme', 'rt-acme-secret-1');
    expect(await operations({ erasures: false }).erase('acme')).toMatchObject({ ok: true, changed: true, value: { erase: { state: 'waiting' } } });
    expect(sent()).toEqual([]);
  });

  it('an unknown connection: not-found; a bad id: bad-request; nothing written, no message', async () => {
    await world.put('acme', 'rt-acme-secret-1');
    expect(await operations().erase('nobody')).toEqual({ ok: false, code: 'not-found', message: 'connection "nobody" is not known' });
    expect(await operations().erase('a/b')).toEqual({ ok: false, code: 'bad-request', message: 'the connection id may hold only the characters A-Z a-z 0-9 . _ -' });
    expect(await operations().erase('')).toEqual({ ok: false, code: 'bad-request', message: 'the connection id is empty' });
    expect(await world.row('nobody')).toBeUndefined();
    expect(await world.row('acme')).toMatchObject({ status: 'active' });
    expect(sent()).toEqual([]);
  });
});
