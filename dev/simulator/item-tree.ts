/**
 * A deterministic, realistic tree of provider items for tests, the local demo and the benchmark
 * (and, generateDeepTree below, a tree of a given depth for crawls that follow folders' lists):
 * one root folder, nested folders and files with the kind of fields a document store returns
 * (unicode names, nested objects, arrays that are sometimes empty, '' and null values), and the
 * revision number at the configured dot path (`revision`, `meta.rev`, ...).
 *
 * The same options always give the same tree (no clock, no Math.random).
 */
import type { SimulatorItem } from './provider-types.js';
import { mulberry32 } from './random.js';

export { mulberry32 };

export interface ItemTreeOptions {
  /** Total number of items, root included (at least 1). */
  count: number;
  seed: number;
  /** Dot path of the revision value; default 'revision'. */
  revisionField?: string;
}

const FOLDER_NAMES = [
  'Projects', 'Archive 2023', 'Équipe', '写真', 'Shared with me', 'Invoices', 'Q3 planning',
  'Drafts', 'Мои документы', 'Design assets', 'Λογιστική', 'tmp', 'Old stuff (do not delete)',
];

const FILES: ReadonlyArray<readonly [name: string, mimeType: string]> = [
  ['Résumé ✓.pdf', 'application/pdf'],
  ['日本語.txt', 'text/plain'],
  ['report-final-v2.docx', 'application/vnd.openxmlformats-officedocument.wordprocessingml.document'],
  ['budget 2024.xlsx', 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet'],
  ['naïve café menu.csv', 'text/csv'],
  ['IMG_0042.JPG', 'image/jpeg'],
  ['party 🎉.png', 'image/png'],
  ['Москва отчёт.pdf', 'application/pdf'],
  ['notes.md', 'text/markdown'],
  ['README', 'application/octet-stream'],
  ['data.json', 'application/json'],
  ['presentation (1).pptx', 'application/vnd.openxmlformats-officedocument.presentationml.presentation'],
  ['한국어 문서.hwp', 'application/x-hwp'],
  ['a & b <c>.html', 'text/html'],
  ['backup.tar.gz', 'application/gzip'],
  ['"quoted" name.txt', 'text/plain'],
];

const USERS = [
  { id: 'usr-001', name: 'Alice Martin' },
  { id: 'usr-002', name: 'Zoë Ångström' },
  { id: 'usr-003', name: '山田 太郎' },
  { id: 'usr-004', name: "Seán O'Brien" },
  { id: 'usr-005', name: 'Service Account' },
];

const TAGS = ['finance', 'draft', 'important', 'archive', 'personal', 'legal', 'übersetzt', '✓ reviewed'];

const DESCRIPTIONS = ['Quarterly numbers', 'Shared with the whole team', 'Scanned copy — see original', 'TODO: clean up'];

/** 2023-01-01T00:00:00Z; every date is an offset from it, so the tree never depends on the clock. */
const EPOCH_MS = Date.UTC(2023, 0, 1);
const TWO_YEARS_MS = 2 * 365 * 24 * 3600 * 1000;

/** Sets `value` at the dot path in `target`, creating the objects on the way. */
export function setAtPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const keys = path.split('.');
  if (keys.some((k) => k === '')) throw new Error(`invalid revision field path "${path}"`);
  let holder = target;
  for (const key of keys.slice(0, -1)) {
    const next = holder[key];
    if (typeof next !== 'object' || next === null || Array.isArray(next)) holder[key] = {};
    holder = holder[key] as Record<string, unknown>;
  }
  holder[keys[keys.length - 1]!] = value;
}

/** The seeded draws a tree is made of. */
interface Draw {
  rand(): number;
  int(min: number, max: number): number;
  pick<T>(list: readonly T[]): T;
}

function drawFrom(seed: number): Draw {
  const rand = mulberry32(seed);
  const int = (min: number, max: number): number => min + Math.floor(rand() * (max - min + 1));
  return { rand, int, pick: (list) => list[Math.floor(rand() * list.length)]! };
}

const isoAt = (ms: number): string => new Date(ms).toISOString();

export function generateItemTree(options: ItemTreeOptions): SimulatorItem[] {
  const count = Math.max(1, Math.floor(options.count));
  const revisionField = options.revisionField ?? 'revision';
  const draw = drawFrom(options.seed);
  const width = Math.max(4, String(count).length);
  const makeId = (prefix: 'fld' | 'fil', n: number): string => `${prefix}-${String(n).padStart(width, '0')}`;

  const root = rootFolder(makeId('fld', 1), draw);
  setAtPath(root, revisionField, draw.int(1, 20));
  const items: SimulatorItem[] = [root];
  const folders: SimulatorItem[] = [root];
  const childCount = new Map<string, number>();
  for (let n = 2; n <= count; n += 1) {
    // Prefer recent folders as parents so the tree gets some depth.
    const parent = draw.rand() < 0.6 ? folders[Math.max(0, folders.length - 1 - draw.int(0, 3))]! : draw.pick(folders);
    const isFolder = draw.rand() < 0.2;
    const common = commonFields(parent, draw);
    const item = isFolder ? folder(makeId('fld', n), n, parent, common, draw) : file(makeId('fil', n), n, common, draw);
    if (isFolder) folders.push(item);
    setAtPath(item, revisionField, draw.int(1, 500));
    childCount.set(parent.id, (childCount.get(parent.id) ?? 0) + 1);
    items.push(item);
  }
  for (const folder of folders) folder.childCount = childCount.get(folder.id) ?? 0;
  return items;
}

function rootFolder(id: string, draw: Draw): SimulatorItem {
  return {
    id,
    type: 'folder',
    name: 'Root',
    parentId: null,
    path: '/',
    createdAt: isoAt(EPOCH_MS),
    modifiedAt: isoAt(EPOCH_MS + draw.int(0, TWO_YEARS_MS)),
    createdBy: { ...USERS[0]! },
    tags: [],
    description: null,
    shared: false,
  };
}

/** The fields every item but the root has. */
function commonFields(parent: SimulatorItem, draw: Draw): Record<string, unknown> {
  const createdMs = EPOCH_MS + draw.int(0, TWO_YEARS_MS);
  const modifiedMs = createdMs + (draw.rand() < 0.3 ? 0 : draw.int(1, 90 * 24 * 3600 * 1000));
  const tags = draw.rand() < 0.4 ? [] : Array.from({ length: draw.int(1, 3) }, () => draw.pick(TAGS));
  const descriptionRoll = draw.rand();
  const description = descriptionRoll < 0.3 ? '' : descriptionRoll < 0.5 ? null : draw.pick(DESCRIPTIONS);
  return {
    parentId: parent.id,
    createdAt: isoAt(createdMs),
    modifiedAt: isoAt(modifiedMs),
    createdBy: { ...draw.pick(USERS) },
    tags: [...new Set(tags)],
    description,
  };
}

function folder(id: string, n: number, parent: SimulatorItem, common: Record<string, unknown>, draw: Draw): SimulatorItem {
  const parentPath = parent.path as string;
  const name = draw.rand() < 0.5 ? draw.pick(FOLDER_NAMES) : `${draw.pick(FOLDER_NAMES)} ${n}`;
  return {
    id,
    type: 'folder',
    name,
    ...common,
    path: `${parentPath === '/' ? '' : parentPath}/${name}`,
    shared: draw.rand() < 0.25,
  };
}

function file(id: string, n: number, common: Record<string, unknown>, draw: Draw): SimulatorItem {
  const [baseName, mimeType] = draw.pick(FILES);
  const name = draw.rand() < 0.5 ? baseName : baseName.replace(/(\.[^.]+)?$/, (ext) => ` (${n})${ext}`);
  const sizeRoll = draw.rand();
  const size = sizeRoll < 0.05 ? 0 : sizeRoll < 0.9 ? draw.int(100, 2_000_000) : draw.int(2_000_001, 4_000_000_000);
  const sha1 = Array.from({ length: 5 }, () => draw.int(0, 0xffffffff).toString(16).padStart(8, '0')).join('');
  return {
    id,
    type: 'file',
    name,
    ...common,
    size,
    mimeType,
    checksum: { algorithm: 'sha1', value: sha1 },
    version: { number: draw.int(1, 12), comment: draw.rand() < 0.5 ? '' : 'edited online' },
    locked: draw.rand() < 0.1,
  };
}

export interface DeepTreeOptions {
  /** Total number of items, root included (at least depth + 1). */
  count: number;
  /** How many levels below the root the deepest items are (at least 1). */
  depth: number;
  seed: number;
  /** Dot path of the revision value; default 'revision'. */
  revisionField?: string;
  /** A folder at depth - 1 also lists an ancestor of its own (`extraChildren`: the root's child on
   *  its path, or the root when it is that child): a cycle, for a crawl that follows lists. Depth 2
   *  at least. */
  cycle?: boolean;
}

/** Children a folder has on average where the levels leave the choice (the last levels' folders). */
const DEEP_TREE_FAN_OUT = 8;

/**
 * A tree of exactly `count` items whose deepest items are exactly `depth` levels below the root, the
 * same one for the same options, for crawls that discover items by following folders' lists. Each
 * level holds about `b` times the items of the one above (b found so the levels add up to `count`:
 * about 2.5 for 100,000 items 12 deep), so the frontier of a crawl grows level by level; a level has
 * one folder for every eight items of the next (at least one, at most all of it), each item goes to
 * one of the folders above, some folders getting many children and others none (parents drawn with a
 * skew), and a fifth of the deepest level are empty folders. Items come root first, level by level;
 * each one's `parentId` is its folder and its `path` the folder names down to it.
 */
export function generateDeepTree(options: DeepTreeOptions): SimulatorItem[] {
  const { count, depth } = options;
  if (!Number.isInteger(depth) || depth < 1) throw new RangeError(`depth must be an integer >= 1, got ${depth}`);
  if (!Number.isInteger(count) || count < depth + 1) throw new RangeError(`count must be an integer >= depth + 1 (${depth + 1}), got ${count}`);
  if (options.cycle && depth < 2) throw new RangeError('a cycle needs depth >= 2');
  const revisionField = options.revisionField ?? 'revision';
  const draw = drawFrom(options.seed);
  const width = Math.max(4, String(count).length);
  const makeId = (prefix: 'fld' | 'fil', n: number): string => `${prefix}-${String(n).padStart(width, '0')}`;
  const sizes = levelSizes(count, depth);

  const root = rootFolder(makeId('fld', 1), draw);
  setAtPath(root, revisionField, draw.int(1, 20));
  const items: SimulatorItem[] = [root];
  let folders: SimulatorItem[] = [root];
  for (let level = 1; level <= depth; level += 1) {
    const size = sizes[level]!;
    const folderCount = level < depth ? Math.min(size, Math.max(1, Math.ceil(sizes[level + 1]! / DEEP_TREE_FAN_OUT))) : Math.floor(size / 5);
    const isFolder = chosen(size, folderCount, draw);
    const next: SimulatorItem[] = [];
    for (let k = 0; k < size; k += 1) {
      // Skewed: the first folders of the level above get the most children, the last ones few or none.
      const parent = folders[Math.floor(folders.length * draw.rand() ** 1.5)]!;
      const n = items.length + 1;
      const common = commonFields(parent, draw);
      const item = isFolder[k] ? folder(makeId('fld', n), n, parent, common, draw) : file(makeId('fil', n), n, common, draw);
      setAtPath(item, revisionField, draw.int(1, 500));
      if (isFolder[k]) next.push(item);
      items.push(item);
    }
    folders = next;
  }
  if (options.cycle) addCycle(items, depth, sizes);
  return items;
}

/** Items at each level (index 0: the root): sizes growing by a factor b with sum `count`, each at least 1. */
function levelSizes(count: number, depth: number): number[] {
  const below = count - 1;
  const total = (b: number): number => {
    let sum = 0;
    for (let level = 1, power = b; level <= depth; level += 1, power *= b) sum += power;
    return sum;
  };
  let low = 1;
  let high = Math.max(2, below);
  for (let i = 0; i < 100; i += 1) {
    const mid = (low + high) / 2;
    if (total(mid) < below) low = mid;
    else high = mid;
  }
  // Rounded cumulatively, so every level keeps at least one item (each b^level >= 1) and the sum is exact.
  const sizes = [1];
  let cumulative = 0;
  let placed = 0;
  for (let level = 1; level <= depth; level += 1) {
    cumulative += low ** level;
    const upTo = level === depth ? below : Math.min(below - (depth - level), Math.round(cumulative));
    sizes.push(upTo - placed);
    placed = upTo;
  }
  return sizes;
}

/** `size` flags, `wanted` of them true, at seeded places. */
function chosen(size: number, wanted: number, draw: Draw): boolean[] {
  const flags = new Array<boolean>(size).fill(false);
  const order = Array.from({ length: size }, (_, k) => k);
  for (let k = 0; k < wanted; k += 1) {
    const j = k + Math.floor(draw.rand() * (size - k));
    [order[k], order[j]] = [order[j]!, order[k]!];
    flags[order[k]!] = true;
  }
  return flags;
}

/** The folder holding the first deepest item lists the root's child on its path (or the root). */
function addCycle(items: SimulatorItem[], depth: number, sizes: readonly number[]): void {
  const byId = new Map(items.map((item) => [item.id, item]));
  const firstDeepest = items[sizes.slice(0, depth).reduce((a, b) => a + b, 0)]!;
  const holder = byId.get(firstDeepest.parentId as string)!;
  let ancestor = byId.get(holder.parentId as string)!;
  while (typeof ancestor.parentId === 'string' && byId.get(ancestor.parentId)!.parentId !== null) ancestor = byId.get(ancestor.parentId)!;
  holder.extraChildren = [ancestor.id];
}
