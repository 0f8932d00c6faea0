/**
 * The local run (`npm start`), as functions the CLI (local/run.ts) and the tests call:
 *
 * - runLocalStory: no configuration at all. A provider simulator with a seeded tree of files and
 *   folders, DynamoDB (dynalite) and SQS / Secrets Manager (local emulator) on 127.0.0.1, and the
 *   deployed handlers through a whole story: refresh the token, sync every id, change items at the
 *   provider (new revisions, deletions, a new item), refresh again, sync again, then check that the
 *   table equals the provider.
 * - runAgainstProvider: the same local AWS side against a real provider (PROVIDER_BASE_URL), for
 *   the ids given, so a user can try their credentials before deploying.
 *
 * The handlers' JSON logs and metrics go to a log file, not the screen. Nothing printed holds a
 * token: the run never reads the access token, and the credentials are only handed to the secret.
 */
import { closeSync, mkdirSync, openSync, writeFileSync, writeSync } from 'node:fs';
import { join, relative } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { generateItemTree, mulberry32 } from '../simulator/item-tree.js';
import { ProviderSimulator, type SimulatorItem } from '../simulator/provider-simulator.js';
import { CreateSecretCommand, GetSecretValueCommand } from '@aws-sdk/client-secrets-manager';
import { enqueueIds, scanTableIds } from '../../tools/enqueue/enqueue.js';
import { createContext, drainQueue, type SyncHandlerFn } from '../fakes/lambda.js';
import { createProgress, formatDuration, type Progress } from '../../tools/enqueue/progress.js';
import { startLocalStack, type LocalStack, type RefresherHandlerFn } from './stack.js';
import { diffTables, readTable, type ItemRow } from '../fakes/items-table.js';
import type { SyncCounts } from '../../functions/item-sync/sync.js';

// ---- output -------------------------------------------------------------------------------------

export interface Writer {
  write(text: string): void;
  isTTY?: boolean;
  columns?: number;
}

interface Screen {
  line(text?: string): void;
  progress: Progress;
}

/**
 * Sends everything the process writes to stdout/stderr (the handlers' logs and metrics, SDK
 * warnings) to a log file while the run lasts; the run itself writes through the returned writer.
 */
function redirectProcessOutput(logFile: string | undefined): { terminal: Writer; restore(): void } {
  const stdout = process.stdout;
  const originalOut = stdout.write;
  const originalErr = process.stderr.write;
  const fd = logFile === undefined ? undefined : openSync(logFile, 'a');
  const sink = (chunk: unknown, ...rest: unknown[]): boolean => {
    if (fd !== undefined) writeSync(fd, typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : Buffer.from(chunk as Uint8Array));
    const callback = rest.find((arg) => typeof arg === 'function') as (() => void) | undefined;
    callback?.();
    return true;
  };
  process.stdout.write = sink as typeof process.stdout.write;
  process.stderr.write = sink as typeof process.stderr.write;
  return {
    terminal: {
      write: (text) => void originalOut.call(stdout, text),
      isTTY: stdout.isTTY === true,
      get columns() {
        return stdout.columns;
      },
    },
    restore() {
      process.stdout.write = originalOut;
      process.stderr.write = originalErr;
      if (fd !== undefined) closeSync(fd);
    },
  };
}

function screenFor(writer: Writer | undefined): Screen {
  if (!writer) return { line() {}, progress: createProgress({ write: () => true } as unknown as NodeJS.WritableStream, { silent: true }) };
  const stream = {
    write: (text: string) => {
      writer.write(text);
      return true;
    },
    isTTY: writer.isTTY,
    get columns() {
      return writer.columns;
    },
  } as unknown as NodeJS.WritableStream & { isTTY?: boolean };
  return { line: (text = '') => writer.write(`${text}\n`), progress: createProgress(stream) };
}

// ---- passes -------------------------------------------------------------------------------------

/** The sync's own counters but `fetched`, here derived from what landed in the table and the queues. */
export type PassCounts = Omit<SyncCounts, 'fetched'>;

export interface PassSummary extends PassCounts {
  name: string;
  /** Distinct ids sent to the queue. */
  ids: number;
  invocations: number;
  elapsedMs: number;
  /** False when the queue was not empty when the time limit came. */
  drained: boolean;
  /** Messages still in the queue at the end (0 when drained). */
  remaining: number;
}

interface PassContext {
  stack: LocalStack;
  sync: SyncHandlerFn;
  screen: Screen;
  timeLimitMs: number;
  concurrency: number;
  invocationErrors: string[];
}

async function deadLetterCount(stack: LocalStack): Promise<number> {
  return stack.emulator.sqs.counts(stack.deadLetterQueueUrl).total;
}

/** Enqueues the ids with the enqueue tool's functions, drains the queue through the sync handler, counts. */
async function syncPass(ctx: PassContext, name: string, ids: readonly string[]): Promise<PassSummary> {
  const { stack, screen } = ctx;
  const started = Date.now();
  const before = await readTable(stack.dynamodb, stack.tableName);
  const deadBefore = await deadLetterCount(stack);

  const sent = await enqueueIds(stack.sqs, stack.queueUrl, ids, {
    onProgress: (p) => screen.progress.update(`${name}: enqueuing ${p.sent}/${p.total}`),
  });
  if (sent.failed.length > 0) {
    throw new Error(`${name}: ${sent.failed.length} ids could not be enqueued (${sent.failed[0]!.code}: ${sent.failed[0]!.message})`);
  }
  const total = sent.sent.length;
  const drain = await drainQueue({
    sqs: stack.sqs,
    queueUrl: stack.queueUrl,
    queueArn: stack.queueArn,
    region: stack.region,
    handler: ctx.sync,
    concurrency: ctx.concurrency,
    timeLimitMs: ctx.timeLimitMs,
    onInvocationError: (error) => ctx.invocationErrors.push(`${(error as Error)?.name ?? 'Error'}: ${(error as Error)?.message ?? String(error)}`),
    onProgress: (p) => {
      const dead = stack.emulator.sqs.counts(stack.deadLetterQueueUrl).total - deadBefore;
      screen.progress.update(
        `${name}: ${p.done}/${total} synced · ${p.retried} retried · ${dead} dead-lettered · ${p.invocations} invocations · ${formatDuration(Date.now() - started)}`,
      );
    },
  });
  screen.progress.clear();

  const after = await readTable(stack.dynamodb, stack.tableName);
  const changes = diffTables(before, after);
  const deadLettered = (await deadLetterCount(stack)) - deadBefore;
  const changed = changes.created.length + changes.updated.length + changes.deleted.length;
  return {
    name,
    ids: total,
    created: changes.created.length,
    updated: changes.updated.length,
    deleted: changes.deleted.length,
    unchanged: Math.max(0, total - changed - deadLettered - drain.remaining),
    retried: drain.retried,
    deadLettered,
    invocations: drain.invocations,
    elapsedMs: Date.now() - started,
    drained: drain.drained,
    remaining: drain.remaining,
  };
}

const COLUMNS: Array<[keyof PassCounts | 'ids', string]> = [
  ['ids', 'ids'],
  ['created', 'created'],
  ['updated', 'updated'],
  ['unchanged', 'unchanged'],
  ['deleted', 'deleted'],
  ['retried', 'retried'],
  ['deadLettered', 'dead-lettered'],
];

export function formatPassTable(passes: readonly PassSummary[]): string[] {
  const nameWidth = Math.max(4, ...passes.map((p) => p.name.length));
  const header = ['pass'.padEnd(nameWidth), ...COLUMNS.map(([, title]) => title.padStart(Math.max(7, title.length))), '     time'].join('  ');
  const rows = passes.map((p) =>
    [
      p.name.padEnd(nameWidth),
      ...COLUMNS.map(([key, title]) => String(p[key]).padStart(Math.max(7, title.length))),
      formatDuration(p.elapsedMs).padStart(9),
    ].join('  '),
  );
  return [header, ...rows];
}

function printPass(screen: Screen, pass: PassSummary): void {
  const parts = [
    `${pass.created} created`,
    `${pass.updated} updated`,
    `${pass.unchanged} unchanged`,
    `${pass.deleted} deleted`,
    `${pass.retried} retried`,
    `${pass.deadLettered} dead-lettered`,
  ];
  screen.line(`   ${pass.ids} ids: ${parts.join(', ')}; ${pass.invocations} invocations, ${formatDuration(pass.elapsedMs)}`);
  if (!pass.drained) screen.line(`   ! the queue still held ${pass.remaining} messages when the time limit came`);
}

/** Dead-lettered messages with the reason the sync gave (the `error` attribute), for the screen. */
function deadLetterReasons(stack: LocalStack, limit = 10): string[] {
  return stack.emulator.sqs
    .peek(stack.deadLetterQueueUrl)
    .slice(0, limit)
    .map((m) => {
      const reason = m.messageAttributes.error?.StringValue ?? `received ${m.receiveCount} times without success (moved by the redrive policy)`;
      return `${m.body.length > 200 ? `${m.body.slice(0, 200)}…` : m.body}: ${reason}`;
    });
}

export function revisionText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return JSON.stringify(value);
  return undefined;
}

function getPath(value: unknown, path: string): unknown {
  let current = value;
  for (const key of path.split('.')) {
    if (typeof current !== 'object' || current === null || Array.isArray(current)) return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}

/** Differences between the table and what the provider holds (empty when they agree). */
export function compareWithProvider(
  rows: ReadonlyMap<string, ItemRow>,
  providerItems: readonly SimulatorItem[],
  deletedIds: readonly string[],
  revisionField: string,
): string[] {
  const problems: string[] = [];
  const expected = new Set<string>();
  for (const item of providerItems) {
    expected.add(item.id);
    const row = rows.get(item.id);
    const revision = revisionText(getPath(item, revisionField));
    if (!row) problems.push(`${item.id}: not in the table`);
    else if (row.deleted) problems.push(`${item.id}: marked deleted, but the provider has it`);
    else if (row.revision !== revision) problems.push(`${item.id}: revision ${row.revision ?? '(none)'} in the table, ${revision} at the provider`);
    else if (row.type !== item.type) problems.push(`${item.id}: type ${String(row.type)} in the table, ${item.type} at the provider`);
    else if (!isDeepStrictEqual(row.item, item)) problems.push(`${item.id}: the stored item differs from the provider's`);
  }
  for (const id of deletedIds) {
    expected.add(id);
    const row = rows.get(id);
    if (!row) problems.push(`${id}: deleted at the provider, but its row is gone`);
    else if (row.deleted !== true) problems.push(`${id}: deleted at the provider, not marked deleted in the table`);
  }
  for (const id of rows.keys()) if (!expected.has(id)) problems.push(`${id}: in the table, unknown to the provider`);
  return problems;
}

function writeSnapshot(file: string, rows: ReadonlyMap<string, ItemRow>): void {
  const sorted = [...rows.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  writeFileSync(file, `${JSON.stringify(sorted, null, 2)}\n`);
}

function display(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel && !rel.startsWith('..') ? rel : path;
}

async function createSecret(stack: LocalStack, name: string, value?: object): Promise<void> {
  await stack.secrets.send(new CreateSecretCommand({ Name: name, ...(value ? { SecretString: JSON.stringify(value) } : {}) }));
}

async function refresh(refresher: RefresherHandlerFn, screen: Screen, stack: LocalStack, label: string): Promise<{ rotated: boolean }> {
  const result = await refresher({}, createContext('content-sync-token-refresher-local', stack.region, 30_000));
  if (result.status !== 'refreshed') throw new Error(`${label}: the token refresher skipped: ${result.reason}`);
  screen.line(
    `   access token refreshed at ${result.refreshedAt}${result.rotated ? '; the provider rotated the refresh token and the new one was stored' : ''}`,
  );
  return { rotated: result.rotated };
}

// ---- the story ----------------------------------------------------------------------------------

export interface LocalStoryOptions {
  /** Items in the simulated provider; default 300. */
  itemCount?: number;
  seed?: number;
  /** Dot path of the revision inside an item; default 'revision'. */
  revisionField?: string;
  /** Where the run keeps its files (dynalite data, logs, snapshot); default `.local/demo`. */
  dataDir?: string;
  /** Keeps dynalite in memory instead of `dataDir/dynamodb`. */
  inMemory?: boolean;
  /** Where the run prints; default the terminal. `quiet` prints nothing. */
  output?: Writer;
  quiet?: boolean;
  /** Per sync pass; default 120 s, or 20 ms an item when that is longer. */
  timeLimitMs?: number;
  /** Called once the simulator is up, before anything runs (tests add faults, collect tokens). */
  onSimulatorStarted?: (simulator: ProviderSimulator) => void;
}

export interface StoryResult {
  ok: boolean;
  /** What went wrong, one sentence each (empty when ok). */
  problems: string[];
  passes: PassSummary[];
  dataDir: string;
  logFile: string;
  snapshotFile: string;
  dynamodbStorage: 'disk' | 'memory';
  /** Items at the provider at the end, and rows in the table. */
  providerItems: number;
  tableRows: number;
}

export const DEFAULT_ITEM_COUNT = 300;
export const DEFAULT_SEED = 20_261_121;

export async function runLocalStory(options: LocalStoryOptions = {}): Promise<StoryResult> {
  const itemCount = Math.max(10, Math.floor(options.itemCount ?? DEFAULT_ITEM_COUNT));
  const seed = options.seed ?? DEFAULT_SEED;
  const revisionField = options.revisionField ?? 'revision';
  const dataDir = options.dataDir ?? join(process.cwd(), '.local', 'demo');
  mkdirSync(dataDir, { recursive: true });
  const logFile = join(dataDir, 'handlers.log');
  const snapshotFile = join(dataDir, 'items.json');
  writeFileSync(logFile, '');

  const redirect = redirectProcessOutput(logFile);
  const screen = screenFor(options.quiet ? undefined : (options.output ?? redirect.terminal));
  const problems: string[] = [];
  const passes: PassSummary[] = [];
  let simulator: ProviderSimulator | undefined;
  let stack: LocalStack | undefined;
  let storage: 'disk' | 'memory' = 'memory';
  let providerItems = 0;
  let tableRows = 0;

  try {
    const items = generateItemTree({ count: itemCount, seed, revisionField });
    simulator = await ProviderSimulator.start({ items, seed, revisionField, rotateRefreshToken: true, prefix: '/api/v2' });
    options.onSimulatorStarted?.(simulator);
    stack = await startLocalStack({
      ...(options.inMemory ? {} : { dynamodbPath: join(dataDir, 'dynamodb') }),
      fresh: true,
      providerBaseUrl: simulator.baseUrl,
      revisionField,
      visibilityTimeoutSeconds: 3,
      // The story shows one 429 with Retry-After: 1; the deployed minute-long floor would stall it.
      extraEnv: { SYNC_RATE_LIMIT_MIN_DELAY_SECONDS: '1' },
    });
    storage = stack.dynamodbStorage;
    const folders = items.filter((i) => i.type === 'folder').length;

    screen.line('content-sync, local run: the deployed handlers against a simulated provider and local AWS services');
    screen.line(`   provider simulator     ${simulator.baseUrl} (${items.length} items: ${folders} folders, ${items.length - folders} files; seed ${seed})`);
    screen.line(
      `   DynamoDB (dynalite)    ${stack.dynamodbEndpoint}, table ${stack.tableName}, ${storage === 'disk' ? `data in ${display(join(dataDir, 'dynamodb'))}` : 'in memory'}`,
    );
    screen.line(`   SQS, Secrets Manager   ${stack.emulator.endpoint} (local emulator)`);
    screen.line(`   handler logs           ${display(logFile)} (JSON lines, as in CloudWatch)`);
    screen.line();

    await createSecret(stack, stack.credentialsSecretId, { clientId: simulator.clientId, refreshToken: simulator.refreshToken });
    await createSecret(stack, stack.accessTokenSecretId);
    const { refresher, sync } = await stack.importHandlers();
    const ctx: PassContext = { stack, sync, screen, timeLimitMs: options.timeLimitMs ?? Math.max(120_000, itemCount * 20), concurrency: 5, invocationErrors: [] };

    // 1. The scheduled token refresh.
    screen.line('1. Refresh the access token (token refresher)');
    await refresh(refresher, screen, stack, 'refresh');

    // 2. The first sync: every id, one rate-limited answer on the way (429 with Retry-After: 1).
    const rand = mulberry32(seed ^ 0x5eed);
    const ids = simulator.itemIds();
    const limitedId = ids[1 + Math.floor(rand() * (ids.length - 1))]!;
    simulator.addFault({
      endpoint: 'items',
      itemId: limitedId,
      times: 1,
      fault: { kind: 'status', status: 429, headers: { 'Retry-After': '1' } },
    });
    screen.line(`2. Sync every id (the provider answers 429 Too Many Requests, Retry-After: 1, once for ${limitedId})`);
    const first = await syncPass(ctx, 'initial sync', ids);
    passes.push(first);
    printPass(screen, first);
    expectCounts(problems, first, { created: ids.length, updated: 0, unchanged: 0, deleted: 0, deadLettered: 0 });

    // 3. Changes at the provider: new revisions, deletions, a new item; the next scheduled refresh.
    const files = ids.filter((id) => simulator!.getItem(id)?.type === 'file' && id !== limitedId);
    const shuffled = shuffle(files, rand);
    const deletedIds = shuffled.slice(0, 2);
    const bumpCount = Math.max(3, Math.round(ids.length * 0.05));
    const folderToBump = ids.find((id) => simulator!.getItem(id)?.type === 'folder' && id !== ids[0]) ?? ids[0]!;
    const bumped = [folderToBump, ...shuffled.slice(2, 2 + bumpCount - 1)];
    for (const id of bumped) simulator.bumpRevision(id);
    for (const id of deletedIds) simulator.deleteItem(id);
    const newItem = newFileLike(simulator.getItem(shuffled[2 + bumpCount] ?? shuffled[0]!)!, ids, revisionField);
    simulator.setItem(newItem);
    screen.line(
      `3. Change the provider: ${bumped.length} new revisions, ${deletedIds.length} deletions (${deletedIds.join(', ')}), 1 new item (${newItem.id}); refresh the token again`,
    );
    await refresh(refresher, screen, stack, 'second refresh');

    // 4. Sync again: every id the table knows (what `npm run enqueue -- --resync-table` sends) and the new one.
    const known = await scanTableIds(stack.dynamodb, stack.tableName);
    const secondIds = [...new Set([...known, newItem.id])];
    screen.line(`4. Sync again: the ${known.length} ids the table knows and the new one`);
    const second = await syncPass(ctx, 'after changes', secondIds);
    passes.push(second);
    printPass(screen, second);
    expectCounts(problems, second, {
      created: 1,
      updated: bumped.length,
      deleted: deletedIds.length,
      unchanged: secondIds.length - 1 - bumped.length - deletedIds.length,
      deadLettered: 0,
    });

    // 5. The table against the provider.
    const rows = await readTable(stack.dynamodb, stack.tableName);
    tableRows = rows.size;
    const current = simulator.itemIds().map((id) => simulator!.getItem(id)!);
    providerItems = current.length;
    const differences = compareWithProvider(rows, current, deletedIds, revisionField);
    problems.push(...differences.slice(0, 20));
    if (differences.length > 20) problems.push(`... and ${differences.length - 20} more differences`);
    for (const pass of passes) if (!pass.drained) problems.push(`${pass.name}: ${pass.remaining} messages were still in the queue at the time limit`);
    const dead = deadLetterReasons(stack);
    for (const reason of dead) problems.push(`dead-lettered ${reason}`);
    for (const error of ctx.invocationErrors.slice(0, 5)) problems.push(`an invocation of the sync handler failed: ${error}`);
    writeSnapshot(snapshotFile, rows);

    screen.line();
    for (const line of formatPassTable(passes)) screen.line(line);
    screen.line();
    if (problems.length === 0) {
      screen.line(
        `OK: the table matches the provider: ${current.length} items with their revisions, ${deletedIds.length} marked deleted, nothing dead-lettered.`,
      );
    } else {
      screen.line('FAILED: the run did not behave as expected:');
      for (const problem of problems) screen.line(`   - ${problem}`);
    }
    screen.line(`Table snapshot: ${display(snapshotFile)}   Handler logs: ${display(logFile)}`);
  } catch (error) {
    screen.progress.clear();
    const e = error as Error;
    problems.push(`${e?.name ?? 'Error'}: ${e?.message ?? String(error)}`);
    screen.line(`FAILED: ${problems[problems.length - 1]}`);
    screen.line(`Handler logs: ${display(logFile)}`);
  } finally {
    await stack?.close().catch(() => undefined);
    await simulator?.close().catch(() => undefined);
    redirect.restore();
  }

  return {
    ok: problems.length === 0,
    problems,
    passes,
    dataDir,
    logFile,
    snapshotFile,
    dynamodbStorage: storage,
    providerItems,
    tableRows,
  };
}

function expectCounts(problems: string[], pass: PassSummary, expected: Omit<PassCounts, 'retried'>): void {
  for (const [key, value] of Object.entries(expected) as Array<[keyof PassCounts, number]>) {
    if (pass[key] !== value) problems.push(`${pass.name}: expected ${value} ${key === 'deadLettered' ? 'dead-lettered' : key}, counted ${pass[key]}`);
  }
}

function shuffle<T>(list: readonly T[], rand: () => number): T[] {
  const out = [...list];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** A new file at the provider, shaped like an existing one, with an id no item has. */
function newFileLike(template: SimulatorItem, existing: readonly string[], revisionField: string): SimulatorItem {
  const taken = new Set(existing);
  let n = existing.length + 1;
  let id = `fil-${String(n).padStart(4, '0')}`;
  while (taken.has(id)) id = `fil-${String(++n).padStart(4, '0')}`;
  const item: SimulatorItem = { ...structuredClone(template), id, name: `added after the first sync (${n}).txt`, mimeType: 'text/plain' };
  let holder: Record<string, unknown> = item;
  const keys = revisionField.split('.');
  for (const key of keys.slice(0, -1)) {
    if (typeof holder[key] !== 'object' || holder[key] === null) holder[key] = {};
    holder = holder[key] as Record<string, unknown>;
  }
  holder[keys[keys.length - 1]!] = 1;
  return item;
}

// ---- against a real provider --------------------------------------------------------------------

export interface ProviderRunOptions {
  baseUrl: string;
  credentials: { clientId: string; refreshToken: string };
  ids: readonly string[];
  revisionField: string;
  /** Default `.local/provider`. The table is kept between runs. */
  dataDir?: string;
  inMemory?: boolean;
  output?: Writer;
  quiet?: boolean;
  timeLimitMs?: number;
  /**
   * Called with the new refresh token when the provider rotates it: the caller stores it (never
   * print it). A returned sentence is printed.
   */
  onRefreshTokenRotated?: (refreshToken: string) => string | void | Promise<string | void>;
}

export interface ProviderRunResult {
  ok: boolean;
  problems: string[];
  pass?: PassSummary;
  rows: Array<{ id: string; revision?: string; type?: string; deleted?: boolean }>;
  logFile: string;
  snapshotFile: string;
  dynamodbStorage: 'disk' | 'memory';
  rotated: boolean;
}

export async function runAgainstProvider(options: ProviderRunOptions): Promise<ProviderRunResult> {
  const dataDir = options.dataDir ?? join(process.cwd(), '.local', 'provider');
  mkdirSync(dataDir, { recursive: true });
  const logFile = join(dataDir, 'handlers.log');
  const snapshotFile = join(dataDir, 'items.json');
  writeFileSync(logFile, '');
  const redirect = redirectProcessOutput(logFile);
  const screen = screenFor(options.quiet ? undefined : (options.output ?? redirect.terminal));
  const problems: string[] = [];
  let stack: LocalStack | undefined;
  let pass: PassSummary | undefined;
  let rotated = false;
  let storage: 'disk' | 'memory' = 'memory';
  const rowsOut: ProviderRunResult['rows'] = [];

  try {
    stack = await startLocalStack({
      ...(options.inMemory ? {} : { dynamodbPath: join(dataDir, 'dynamodb') }),
      fresh: false,
      providerBaseUrl: options.baseUrl,
      revisionField: options.revisionField,
      // Longer than one invocation can take against a real provider, so a record is never delivered twice at once.
      visibilityTimeoutSeconds: 30,
    });
    storage = stack.dynamodbStorage;
    screen.line(`content-sync, local run against ${options.baseUrl}`);
    screen.line(`   revision field         ${options.revisionField}`);
    screen.line(`   DynamoDB (dynalite)    table ${stack.tableName}, ${storage === 'disk' ? `data kept in ${display(join(dataDir, 'dynamodb'))}` : 'in memory'}`);
    screen.line(`   handler logs           ${display(logFile)}`);
    screen.line();

    await createSecret(stack, stack.credentialsSecretId, options.credentials);
    await createSecret(stack, stack.accessTokenSecretId);
    const { refresher, sync } = await stack.importHandlers();

    screen.line('1. Refresh the access token (token refresher)');
    ({ rotated } = await refresh(refresher, screen, stack, 'refresh'));
    if (rotated) {
      const stored = await stack.secrets.send(new GetSecretValueCommand({ SecretId: stack.credentialsSecretId }));
      const value = JSON.parse(stored.SecretString ?? '{}') as { refreshToken?: string };
      const note = value.refreshToken ? await options.onRefreshTokenRotated?.(value.refreshToken) : undefined;
      if (note) screen.line(`   ${note}`);
    }

    screen.line(`2. Sync ${new Set(options.ids).size} id${options.ids.length === 1 ? '' : 's'}`);
    const ctx: PassContext = { stack, sync, screen, timeLimitMs: options.timeLimitMs ?? 600_000, concurrency: 5, invocationErrors: [] };
    pass = await syncPass(ctx, 'sync', options.ids);
    printPass(screen, pass);

    const rows = await readTable(stack.dynamodb, stack.tableName);
    writeSnapshot(snapshotFile, rows);
    screen.line();
    for (const line of formatPassTable([pass])) screen.line(line);
    screen.line();
    screen.line('Stored rows for these ids:');
    for (const id of new Set(options.ids)) {
      const row = rows.get(id);
      if (!row) {
        screen.line(`   ${JSON.stringify(id)}: no row`);
        continue;
      }
      rowsOut.push({ id, ...(row.revision !== undefined ? { revision: row.revision } : {}), ...(row.type !== undefined ? { type: row.type } : {}), ...(row.deleted ? { deleted: true } : {}) });
      screen.line(`   ${JSON.stringify(id)}: ${row.type ?? '?'}, revision ${row.revision ?? '?'}${row.deleted ? ', deleted at the provider' : ''}, synced ${row.syncedAt ?? '?'}`);
    }
    const dead = deadLetterReasons(stack, 20);
    if (dead.length > 0) {
      screen.line('Dead-lettered (these can never succeed as sent):');
      for (const reason of dead) screen.line(`   ${reason}`);
      problems.push(`${pass.deadLettered} id(s) dead-lettered`);
    }
    for (const error of ctx.invocationErrors.slice(0, 5)) problems.push(`an invocation of the sync handler failed: ${error}`);
    if (!pass.drained) problems.push(`${pass.remaining} messages were still being retried at the time limit`);
    screen.line(`Table snapshot: ${display(snapshotFile)}   Handler logs: ${display(logFile)}`);
    if (problems.length > 0) {
      screen.line('FAILED:');
      for (const problem of problems) screen.line(`   - ${problem}`);
    }
  } catch (error) {
    screen.progress.clear();
    const e = error as Error;
    problems.push(`${e?.name ?? 'Error'}: ${e?.message ?? String(error)}`);
    screen.line(`FAILED: ${problems[problems.length - 1]}`);
    screen.line(`Handler logs: ${display(logFile)}`);
  } finally {
    await stack?.close().catch(() => undefined);
    redirect.restore();
  }
  return {
    ok: problems.length === 0,
    problems,
    ...(pass ? { pass } : {}),
    rows: rowsOut,
    logFile,
    snapshotFile,
    dynamodbStorage: storage,
    rotated,
  };
}
