/**
 * A deterministic, realistic tree of provider items for tests, the local demo and the benchmark:
 * one root folder, nested folders and files with the kind of fields a document store returns
 * (unicode names, nested objects, arrays that are sometimes empty, '' and null values), and the
 * revision number at the configured dot path (`revision`, `meta.rev`, ...).
 *
 * The same options always give the same tree (no clock, no Math.random).
 */
import type { SimulatorItem } from './provider-model.js';

/** The mulberry32 PRNG: a fast 32-bit seeded generator returning floats in [0, 1). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

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

export function generateItemTree(options: ItemTreeOptions): SimulatorItem[] {
  const { seed } = options;
  const count = Math.max(1, Math.floor(options.count));
  const revisionField = options.revisionField ?? 'revision';
  const rand = mulberry32(seed);
  const int = (min: number, max: number): number => min + Math.floor(rand() * (max - min + 1));
  const pick = <T>(list: readonly T[]): T => list[Math.floor(rand() * list.length)]!;
  const width = Math.max(4, String(count).length);
  const makeId = (prefix: 'fld' | 'fil', n: number): string => `${prefix}-${String(n).padStart(width, '0')}`;
  const isoAt = (ms: number): string => new Date(ms).toISOString();

  const items: SimulatorItem[] = [];
  const folders: SimulatorItem[] = [];
  const childCount = new Map<string, number>();

  const root: SimulatorItem = {
    id: makeId('fld', 1),
    type: 'folder',
    name: 'Root',
    parentId: null,
    path: '/',
    createdAt: isoAt(EPOCH_MS),
    modifiedAt: isoAt(EPOCH_MS + int(0, TWO_YEARS_MS)),
    createdBy: { ...USERS[0]! },
    tags: [],
    description: null,
    shared: false,
  };
  setAtPath(root, revisionField, int(1, 20));
  items.push(root);
  folders.push(root);

  for (let n = 2; n <= count; n += 1) {
    // Prefer recent folders as parents so the tree gets some depth.
    const parent = rand() < 0.6 ? folders[Math.max(0, folders.length - 1 - int(0, 3))]! : pick(folders);
    const parentPath = parent.path as string;
    const isFolder = rand() < 0.2;
    const createdMs = EPOCH_MS + int(0, TWO_YEARS_MS);
    const modifiedMs = createdMs + (rand() < 0.3 ? 0 : int(1, 90 * 24 * 3600 * 1000));
    const tags = rand() < 0.4 ? [] : Array.from({ length: int(1, 3) }, () => pick(TAGS));
    const descriptionRoll = rand();
    const description = descriptionRoll < 0.3 ? '' : descriptionRoll < 0.5 ? null : pick(DESCRIPTIONS);
    const common = {
      parentId: parent.id,
      createdAt: isoAt(createdMs),
      modifiedAt: isoAt(modifiedMs),
      createdBy: { ...pick(USERS) },
      tags: [...new Set(tags)],
      description,
    };
    let item: SimulatorItem;
    if (isFolder) {
      const name = rand() < 0.5 ? pick(FOLDER_NAMES) : `${pick(FOLDER_NAMES)} ${n}`;
      item = {
        id: makeId('fld', n),
        type: 'folder',
        name,
        ...common,
        path: `${parentPath === '/' ? '' : parentPath}/${name}`,
        shared: rand() < 0.25,
      };
      folders.push(item);
    } else {
      const [baseName, mimeType] = pick(FILES);
      const name = rand() < 0.5 ? baseName : baseName.replace(/(\.[^.]+)?$/, (ext) => ` (${n})${ext}`);
      const sizeRoll = rand();
      const size = sizeRoll < 0.05 ? 0 : sizeRoll < 0.9 ? int(100, 2_000_000) : int(2_000_001, 4_000_000_000);
      const sha1 = Array.from({ length: 5 }, () => int(0, 0xffffffff).toString(16).padStart(8, '0')).join('');
      item = {
        id: makeId('fil', n),
        type: 'file',
        name,
        ...common,
        size,
        mimeType,
        checksum: { algorithm: 'sha1', value: sha1 },
        version: { number: int(1, 12), comment: rand() < 0.5 ? '' : 'edited online' },
        locked: rand() < 0.1,
      };
    }
    setAtPath(item, revisionField, int(1, 500));
    childCount.set(parent.id, (childCount.get(parent.id) ?? 0) + 1);
    items.push(item);
  }

  for (const folder of folders) folder.childCount = childCount.get(folder.id) ?? 0;
  return items;
}
