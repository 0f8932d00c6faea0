/**
 * Folders that embed their children (the simulator's option `children`): the list's shape, cap and
 * total, each account's own children, the folder revisions the provider changes when a list changes,
 * the served body following its children, cycles made with `extraChildren`, and the deep tree made
 * for discovery. In process (the model), and once over HTTP on 127.0.0.1 as the system asks.
 */
import { describe, it, expect, afterEach } from 'vitest';
import { ProviderModel, DEFAULT_ACCOUNT, type ProviderModelOptions, type SimulatorItem } from '../../../dev/simulator/provider-model.js';
import { ProviderSimulator } from '../../../dev/simulator/provider-simulator.js';
import { generateDeepTree } from '../../../dev/simulator/item-tree.js';

const started: ProviderSimulator[] = [];

afterEach(async () => {
  await Promise.all(started.splice(0).map((sim) => sim.close()));
});

/** The items endpoint's answer for `id`, in process, with an access token of `account`. */
function serve(model: ProviderModel, id: string, account: string = DEFAULT_ACCOUNT): Record<string, unknown> {
  const authorization = `Bearer ${model.issueAccessToken(account)}`;
  const answer = model.respond(model.receive({ method: 'GET', rawUrl: `/api/v2/items/${encodeURIComponent(id)}`, authorization }));
  if (answer.kind !== 'response') throw new Error(`no response for ${id}`);
  expect(answer.status).toBe(200);
  return JSON.parse(answer.body.toString()) as Record<string, unknown>;
}

interface Collection {
  entries: Array<{ id: string; type: string; name?: string; etag: string | null }>;
  total_count: number;
  offset: number;
  limit: number;
}

function list(model: ProviderModel, id: string, account?: string): Collection {
  return serve(model, id, account).item_collection as Collection;
}

function revisions(model: ProviderModel, ...ids: string[]): Record<string, unknown> {
  return Object.fromEntries(ids.map((id) => [id, model.getItem(id)?.revision]));
}

/**
 *   root (10)
 *   ├── a (20)           folder
 *   │   ├── a1 (3)       file
 *   │   └── a2 (4)       folder
 *   │       └── a2x (1)  file
 *   └── b (30)           folder
 *       └── b1 (5)       file
 */
function smallTree(): SimulatorItem[] {
  return [
    { id: 'root', type: 'folder', name: 'Root', parentId: null, revision: 10 },
    { id: 'a', type: 'folder', name: 'A', parentId: 'root', revision: 20 },
    { id: 'b', type: 'folder', name: 'B', parentId: 'root', revision: 30 },
    { id: 'a1', type: 'file', name: 'one.txt', parentId: 'a', revision: 3 },
    { id: 'a2', type: 'folder', name: 'Two', parentId: 'a', revision: 4 },
    { id: 'a2x', type: 'file', name: 'x.pdf', parentId: 'a2', revision: 1 },
    { id: 'b1', type: 'file', name: 'b.txt', parentId: 'b', revision: 5 },
  ];
}

function model(options: ProviderModelOptions = {}): ProviderModel {
  return new ProviderModel({ items: smallTree(), children: {}, ...options });
}

describe('folders embedding their children', () => {
  it('are off by default: every item is served as stored, extraChildren included', () => {
    const m = new ProviderModel({ items: [...smallTree(), { id: 'c', type: 'folder', parentId: 'a2', extraChildren: ['a'], revision: 1 }] });
    expect(serve(m, 'a')).toEqual({ id: 'a', type: 'folder', name: 'A', parentId: 'root', revision: 20 });
    expect(serve(m, 'c')).toEqual({ id: 'c', type: 'folder', parentId: 'a2', extraChildren: ['a'], revision: 1 });
    // No folder revision changes either.
    m.setItem({ id: 'a3', type: 'file', parentId: 'a', revision: 1 });
    m.deleteItem('a1');
    m.bumpRevision('a2x');
    expect(revisions(m, 'root', 'a', 'a2')).toEqual({ root: 10, a: 20, a2: 4 });
  });

  it("embed item_collection: the folder's children by id, with their type, name and revision as etag text", () => {
    const m = new ProviderModel({
      revisionField: 'meta.rev',
      children: {},
      items: [
        { id: 'f', type: 'folder', name: 'F', parentId: null, meta: { rev: 2 } },
        { id: 'z', type: 'file', name: 'Zoë ✓.pdf', parentId: 'f', meta: { rev: 7 } },
        { id: 'B', type: 'folder', name: 'Upper', parentId: 'f', meta: { rev: 'v-0009' } },
        { id: 'm', type: 'file', name: 'm', parentId: 'f', meta: { rev: 1e21 } },
        { id: 'k', type: 'file', parentId: 'f', meta: { rev: 2.5 } },
        { id: 'no-rev', type: 'file', name: 'n', parentId: 'f' },
        { id: 'elsewhere', type: 'file', name: 'e', parentId: 'B', meta: { rev: 1 } },
      ],
    });
    expect(serve(m, 'f')).toEqual({
      id: 'f',
      type: 'folder',
      name: 'F',
      parentId: null,
      meta: { rev: 2 },
      item_collection: {
        entries: [
          { id: 'B', type: 'folder', name: 'Upper', etag: 'v-0009' },
          { id: 'k', type: 'file', etag: '2.5' },
          { id: 'm', type: 'file', name: 'm', etag: '1e+21' },
          { id: 'no-rev', type: 'file', name: 'n', etag: null },
          { id: 'z', type: 'file', name: 'Zoë ✓.pdf', etag: '7' },
        ],
        total_count: 5,
        offset: 0,
        limit: 1000,
      },
    });
    expect(list(m, 'B')).toEqual({ entries: [{ id: 'elsewhere', type: 'file', name: 'e', etag: '1' }], total_count: 1, offset: 0, limit: 1000 });
    // A file has no list; an empty folder an empty one.
    expect(serve(m, 'z')).toEqual({ id: 'z', type: 'file', name: 'Zoë ✓.pdf', parentId: 'f', meta: { rev: 7 } });
    m.setItem({ id: 'empty', type: 'folder', parentId: null, meta: { rev: 1 } });
    expect(list(m, 'empty')).toEqual({ entries: [], total_count: 0, offset: 0, limit: 1000 });
    // servedItem is the endpoint's answer; getItem the item as stored.
    expect(m.servedItem('f')).toEqual(serve(m, 'f'));
    expect(m.getItem('f')).not.toHaveProperty('item_collection');
    expect(m.servedItem('missing')).toBeUndefined();
  });

  it('list at most `cap` entries, the first ids, with the full total_count', () => {
    const items: SimulatorItem[] = [{ id: 'f', type: 'folder', parentId: null, revision: 1 }];
    for (const id of ['e', 'c', 'a', 'd', 'b']) items.push({ id, type: 'file', name: id.toUpperCase(), parentId: 'f', revision: 1 });
    const m = new ProviderModel({ items, children: { cap: 2 } });
    expect(list(m, 'f')).toEqual({
      entries: [{ id: 'a', type: 'file', name: 'A', etag: '1' }, { id: 'b', type: 'file', name: 'B', etag: '1' }],
      total_count: 5,
      offset: 0,
      limit: 2,
    });
    for (const cap of [0, -1, 1.5, Number.NaN]) {
      expect(() => new ProviderModel({ children: { cap } })).toThrow(new RangeError(`children.cap must be a positive integer, got ${cap}`));
    }
  });

  it("list each account's own children: the same folder id holds other items in another account", async () => {
    const m = new ProviderModel({
      children: {},
      items: [{ id: 'f', type: 'folder', parentId: null, revision: 1 }, { id: 'd1', type: 'file', name: 'd', parentId: 'f', revision: 1 }],
      accounts: [
        { id: 'acme', items: [{ id: 'f', type: 'folder', parentId: null, revision: 1 }, { id: 'x', type: 'file', name: 'x', parentId: 'f', revision: 4 }] },
        { id: 'globex', items: [{ id: 'f', type: 'folder', parentId: null, revision: 1 }] },
      ],
    });
    expect(list(m, 'f').entries.map((e) => e.id)).toEqual(['d1']);
    expect(list(m, 'f', 'acme').entries).toEqual([{ id: 'x', type: 'file', name: 'x', etag: '4' }]);
    expect(list(m, 'f', 'globex')).toEqual({ entries: [], total_count: 0, offset: 0, limit: 1000 });
    // A change in one account changes that account's folder only.
    m.account('globex').setItem({ id: 'g', type: 'file', parentId: 'f', revision: 1 });
    expect(list(m, 'f', 'globex').entries.map((e) => e.id)).toEqual(['g']);
    expect([m.account('globex').getItem('f')!.revision, m.account('acme').getItem('f')!.revision, m.getItem('f')!.revision]).toEqual([2, 1, 1]);
    expect(list(m, 'f', 'acme').entries.map((e) => e.id)).toEqual(['x']);
  });

  it('are served over HTTP as in process', async () => {
    const sim = await ProviderSimulator.start({ items: smallTree(), children: { cap: 1 } });
    started.push(sim);
    const res = await fetch(`${sim.baseUrl}/items/a`, { headers: { authorization: `Bearer ${sim.issueAccessToken()}` } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      id: 'a',
      type: 'folder',
      name: 'A',
      parentId: 'root',
      revision: 20,
      item_collection: { entries: [{ id: 'a1', type: 'file', name: 'one.txt', etag: '3' }], total_count: 2, offset: 0, limit: 1 },
    });
  });
});

describe('folder revisions when their lists change', () => {
  it('are kept as given for the initial items, and for the item set itself', () => {
    const m = model();
    expect(revisions(m, 'root', 'a', 'b', 'a2')).toEqual({ root: 10, a: 20, b: 30, a2: 4 });
    m.setItem({ id: 'a9', type: 'file', parentId: 'a', revision: 77 });
    expect(m.getItem('a9')!.revision).toBe(77);
  });

  it('change when an item is added under a folder, up to the root', () => {
    const m = model();
    m.setItem({ id: 'new', type: 'file', name: 'new', parentId: 'a2', revision: 1 });
    expect(revisions(m, 'root', 'a', 'a2', 'b', 'new')).toEqual({ root: 11, a: 21, a2: 5, b: 30, new: 1 });
    expect(list(m, 'a').entries.find((e) => e.id === 'a2')!.etag).toBe('5');
  });

  it('change when an item is deleted; deleting an id not held changes nothing', () => {
    const m = model();
    m.deleteItem('b1');
    expect(revisions(m, 'root', 'a', 'b')).toEqual({ root: 11, a: 20, b: 31 });
    expect(list(m, 'b')).toEqual({ entries: [], total_count: 0, offset: 0, limit: 1000 });
    m.deleteItem('b1');
    m.deleteItem('never');
    expect(revisions(m, 'root', 'a', 'b')).toEqual({ root: 11, a: 20, b: 31 });
  });

  it('change in both folders when an item moves, each ancestor once', () => {
    const m = model();
    m.setItem({ ...m.getItem('a1')!, parentId: 'b' });
    // a and b each lose or gain an entry; root sees both their etags change: one new revision.
    expect(revisions(m, 'root', 'a', 'b', 'a1')).toEqual({ root: 11, a: 21, b: 31, a1: 3 });
    expect(list(m, 'a').entries.map((e) => e.id)).toEqual(['a2']);
    expect(list(m, 'b').entries.map((e) => e.id)).toEqual(['a1', 'b1']);
  });

  it("change when a child's etag, type or name changes, not for its other fields", () => {
    const m = model();
    m.setItem({ ...m.getItem('a2x')!, description: 'edited', tags: ['x'] });
    expect(revisions(m, 'root', 'a', 'a2')).toEqual({ root: 10, a: 20, a2: 4 });
    m.setItem({ ...m.getItem('a2x')!, revision: 2 });
    expect(revisions(m, 'root', 'a', 'a2')).toEqual({ root: 11, a: 21, a2: 5 });
    m.bumpRevision('a2x');
    expect(revisions(m, 'root', 'a', 'a2', 'a2x')).toEqual({ root: 12, a: 22, a2: 6, a2x: 3 });
    m.setItem({ ...m.getItem('b1')!, name: 'renamed.txt' });
    expect(revisions(m, 'root', 'b')).toEqual({ root: 13, b: 31 });
    expect(list(m, 'b').entries).toEqual([{ id: 'b1', type: 'file', name: 'renamed.txt', etag: '5' }]);
  });

  it('follow the revision field: strings keep their width, a folder with an unbumpable revision keeps it', () => {
    const m = new ProviderModel({
      revisionField: 'meta.rev',
      children: {},
      items: [
        { id: 'top', type: 'folder', parentId: null, meta: { rev: 'r-09' } },
        { id: 'odd', type: 'folder', parentId: 'top', meta: { rev: true } },
        { id: 'leaf', type: 'file', name: 'leaf', parentId: 'odd', meta: { rev: 1 } },
      ],
    });
    const before = serve(m, 'odd');
    m.bumpRevision('leaf');
    // odd's list changed (served anew) but its revision cannot move: top's list is unchanged.
    expect((m.getItem('odd')!.meta as { rev: unknown }).rev).toBe(true);
    expect((m.getItem('top')!.meta as { rev: unknown }).rev).toBe('r-09');
    expect((before.item_collection as Collection).entries[0]!.etag).toBe('1');
    expect(list(m, 'odd').entries[0]!.etag).toBe('2');
    m.setItem({ id: 'other', type: 'file', parentId: 'top', meta: { rev: 1 } });
    expect((m.getItem('top')!.meta as { rev: unknown }).rev).toBe('r-10');
  });

  it('serve the changed list, not the body cached before the change', () => {
    const m = model();
    expect(list(m, 'a2').entries).toEqual([{ id: 'a2x', type: 'file', name: 'x.pdf', etag: '1' }]);
    expect(serve(m, 'a').revision).toBe(20);
    m.setItem({ ...m.getItem('a2x')!, revision: 9 });
    expect(list(m, 'a2').entries).toEqual([{ id: 'a2x', type: 'file', name: 'x.pdf', etag: '9' }]);
    const a = serve(m, 'a');
    expect(a.revision).toBe(21);
    expect((a.item_collection as Collection).entries).toEqual([
      { id: 'a1', type: 'file', name: 'one.txt', etag: '3' },
      { id: 'a2', type: 'folder', name: 'Two', etag: '5' },
    ]);
    m.deleteItem('a1');
    expect(list(m, 'a').entries.map((e) => e.id)).toEqual(['a2']);
  });
});

describe('extraChildren', () => {
  /** a2 also lists `a`, its own parent: a → a2 → a. */
  function cyclic(): ProviderModel {
    const items = smallTree().map((item) => (item.id === 'a2' ? { ...item, extraChildren: ['a', 'not-held'] } : item));
    return new ProviderModel({ items, children: {} });
  }

  it('add the ids the account holds to the list and its total, and are never served', () => {
    const m = cyclic();
    const a2 = serve(m, 'a2');
    expect(a2).not.toHaveProperty('extraChildren');
    expect(a2.item_collection).toEqual({
      entries: [{ id: 'a', type: 'folder', name: 'A', etag: '20' }, { id: 'a2x', type: 'file', name: 'x.pdf', etag: '1' }],
      total_count: 2,
      offset: 0,
      limit: 1000,
    });
    expect(m.getItem('a2')!.extraChildren).toEqual(['a', 'not-held']);
    // The id not held appears once set, and the folder listing it changes.
    m.setItem({ id: 'not-held', type: 'file', name: 'late', parentId: 'b', revision: 1 });
    expect(list(m, 'a2').entries.map((e) => e.id)).toEqual(['a', 'a2x', 'not-held']);
    expect(revisions(m, 'a2', 'b')).toEqual({ a2: 5, b: 31 });
  });

  it('change every folder of a cycle once per change, and end', () => {
    const m = cyclic();
    m.bumpRevision('a2x');
    // a2 (+1) → a (+1, a2's etag) → root (+1) and a2 (seen: not again).
    expect(revisions(m, 'root', 'a', 'a2', 'a2x')).toEqual({ root: 11, a: 21, a2: 5, a2x: 2 });
    m.bumpRevision('a');
    // a's etag changes in root's list and in a2's; a2's new etag changes a, the origin: not again.
    expect(revisions(m, 'root', 'a', 'a2')).toEqual({ root: 12, a: 22, a2: 6 });
    expect(list(m, 'a2').entries[0]).toEqual({ id: 'a', type: 'folder', name: 'A', etag: '22' });
  });

  it('must be an array of ids', () => {
    const m = model();
    expect(() => m.setItem({ id: 'x', type: 'folder', extraChildren: 'a' as unknown as string[] })).toThrow(
      new TypeError('extraChildren of item "x" must be an array of ids'),
    );
    expect(() => new ProviderModel({ children: {}, items: [{ id: 'y', type: 'folder', extraChildren: [1] as unknown as string[] }] })).toThrow(
      'extraChildren of item "y" must be an array of ids',
    );
  });
});

/** Each item's level below the root (0: the root), checking that every parent comes first and is a folder. */
function levels(items: readonly SimulatorItem[]): Map<string, number> {
  const level = new Map<string, number>();
  const type = new Map<string, string>();
  const notUnderAFolder: string[] = [];
  for (const item of items) {
    if (item.parentId === null) level.set(item.id, 0);
    else {
      if (type.get(item.parentId as string) !== 'folder') notUnderAFolder.push(item.id);
      level.set(item.id, level.get(item.parentId as string)! + 1);
    }
    type.set(item.id, item.type);
  }
  expect(notUnderAFolder).toEqual([]);
  return level;
}

describe('generateDeepTree', () => {
  it('makes exactly count items, the deepest exactly depth below one root, every level wider than the one above', () => {
    const items = generateDeepTree({ count: 100_000, depth: 12, seed: 7 });
    expect(items).toHaveLength(100_000);
    expect(new Set(items.map((i) => i.id)).size).toBe(100_000);
    expect(items.filter((i) => i.parentId === null).map((i) => i.id)).toEqual([items[0]!.id]);
    const perLevel = new Array<number>(13).fill(0);
    for (const level of levels(items).values()) perLevel[level]! += 1;
    expect(perLevel).toHaveLength(13);
    expect(perLevel[0]).toBe(1);
    for (let level = 1; level <= 12; level += 1) expect(perLevel[level]).toBeGreaterThan(perLevel[level - 1]!);
    // Not a chain: many folders to go into at every level below the first ones.
    const folders = items.filter((i) => i.type === 'folder').length;
    expect(folders).toBeGreaterThan(10_000);
    expect(items.some((i) => 'extraChildren' in i)).toBe(false);
    // Served with its children, the root lists the first level.
    const m = new ProviderModel({ items, children: {} });
    expect(list(m, items[0]!.id).total_count).toBe(perLevel[1]);
  });

  it('is the same tree for the same options, another for another seed, and sets the revision field', () => {
    const one = generateDeepTree({ count: 2_000, depth: 6, seed: 3, revisionField: 'meta.rev' });
    expect(generateDeepTree({ count: 2_000, depth: 6, seed: 3, revisionField: 'meta.rev' })).toEqual(one);
    expect(generateDeepTree({ count: 2_000, depth: 6, seed: 4, revisionField: 'meta.rev' })).not.toEqual(one);
    expect(one.every((i) => typeof (i.meta as { rev?: unknown } | undefined)?.rev === 'number')).toBe(true);
    expect(Math.max(...levels(one).values())).toBe(6);
  });

  it('makes a chain when count is depth + 1, and refuses what cannot be', () => {
    const chain = generateDeepTree({ count: 5, depth: 4, seed: 1 });
    expect([...levels(chain).values()]).toEqual([0, 1, 2, 3, 4]);
    expect(() => generateDeepTree({ count: 4, depth: 4, seed: 1 })).toThrow(new RangeError('count must be an integer >= depth + 1 (5), got 4'));
    expect(() => generateDeepTree({ count: 10, depth: 0, seed: 1 })).toThrow(new RangeError('depth must be an integer >= 1, got 0'));
    expect(() => generateDeepTree({ count: 10, depth: 1, seed: 1, cycle: true })).toThrow(new RangeError('a cycle needs depth >= 2'));
  });

  it('with cycle, has one folder at depth - 1 list an ancestor of its own', () => {
    const items = generateDeepTree({ count: 3_000, depth: 8, seed: 5, cycle: true });
    const level = levels(items);
    const holders = items.filter((i) => i.extraChildren !== undefined);
    expect(holders).toHaveLength(1);
    const holder = holders[0]!;
    expect(holder.type).toBe('folder');
    expect(level.get(holder.id)).toBe(7);
    const byId = new Map(items.map((i) => [i.id, i]));
    const ancestors: string[] = [];
    for (let at = holder; at.parentId !== null; at = byId.get(at.parentId as string)!) ancestors.push(at.parentId as string);
    expect(holder.extraChildren).toEqual([ancestors.at(-2)]);
    expect(level.get(holder.extraChildren![0]!)).toBe(1);
    // The rest of the tree is the one without the cycle.
    const plain = generateDeepTree({ count: 3_000, depth: 8, seed: 5 });
    expect(items.map(({ extraChildren: _extra, ...rest }) => rest)).toEqual(plain);
    // Served, the folder lists its ancestor.
    const m = new ProviderModel({ items, children: {} });
    const entries = list(m, holder.id).entries.map((e) => e.id);
    expect(entries).toContain(holder.extraChildren![0]);
  });
});
