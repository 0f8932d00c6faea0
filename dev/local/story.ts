/**
 * The local run (`npm start`), as functions the CLI (dev/local/run.ts) and the tests call. Both
 * stories run on one skeleton (local-run.ts runStory): the local system as deployed (dev/system:
 * the deployment of cdk.json for this provider, on the HTTP emulator, dynalite and s3rver), its
 * functions with their logs in the log file, the two secrets, then the story's own steps.
 *
 * - runLocalStory: no configuration at all. A provider simulator with a seeded tree of files and
 *   folders (one of them too large for a DynamoDB row), DynamoDB (dynalite), S3 (s3rver) and
 *   SQS / Secrets Manager (local emulator) on 127.0.0.1, and the deployed handlers through a whole
 *   story: refresh the token, sync every id, change items at the provider (new revisions, one
 *   large item shrinking back into its row and one growing past the row limit, deletions, a new
 *   item), refresh again, sync again; then change the provider again (new revisions, a deletion, a
 *   deleted item restored) without sending any id, and let the reconciler's ticks send every id
 *   the table knows to the reconcile queue, which the sync drains as its second event source;
 *   then check that the table equals the provider, by the sync's own reading of an item (from the
 *   items bucket for a row that points there), and that the bucket holds exactly the objects rows
 *   point to.
 * - runAgainstProvider (against-provider.ts): the same local system against a real provider
 *   (PROVIDER_BASE_URL), for the ids given, so a user can try their credentials before deploying.
 *
 * The handlers' JSON logs and metrics go to a log file (their logger and metrics write there), not
 * the screen. Nothing printed holds a token: the run never reads the access token, and the
 * credentials are only handed to the secret.
 */
import { join } from 'node:path';
import { DynamoDbPaceStore } from '../../functions/shared/adapters/dynamodb-pace-store.js';
import { ENV } from '../../functions/shared/config.js';
import { scanTableIds } from '../../tools/enqueue/enqueue.js';
import { generateItemTree } from '../simulator/item-tree.js';
import { ProviderSimulator } from '../simulator/provider-simulator.js';
import { mulberry32 } from '../simulator/random.js';
import { runStory, writeSnapshot, refresh, type LocalRun, type ProviderSide } from './local-run.js';
import { printPass, formatPassTable, deadLetterReasons, readRows, syncPass, type PassCounts, type PassLimits, type PassSummary } from './passes.js';
import { RECONCILIATION, reconcilerLine, reconciliationPass, type ReconcilerRun } from './reconciliation.js';
import { display, type Writer } from './screen.js';
import { changeProvider, changeProviderQuietly, LARGE_FIELD, LARGE_TEXT, largeFileOf } from './story-changes.js';
import { checkBucket, compareWithProvider, readObjects } from './table-check.js';

export { runAgainstProvider, type ProviderRunOptions, type ProviderRunResult } from './against-provider.js';
export type { PassSummary } from './passes.js';
export { RECONCILIATION, type ReconcilerRun } from './reconciliation.js';
export type { Writer } from './screen.js';

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
  /** What the provider saw of each pass: requests, 429s, time. */
  providerLoad: ProviderLoad[];
  /** The reconciler's pass (step 5); absent when the story stopped before it. */
  reconciler?: ReconcilerRun;
}

export const DEFAULT_ITEM_COUNT = 300;
export const DEFAULT_SEED = 20_261_121;

interface StorySettings {
  itemCount: number;
  seed: number;
  revisionField: string;
  limits: PassLimits;
}

/** What the story found, filled in as it goes (a failed step leaves the rest as it was). */
interface StoryFindings {
  /** The reconciler's pass (step 5), once it ran. */
  reconciler?: ReconcilerRun;
  passes: PassSummary[];
  providerItems: number;
  tableRows: number;
  /** What the provider saw in each pass (the simulator's own record). */
  providerLoad: ProviderLoad[];
}

/** The provider's side of a pass: item requests, how many it refused with 429, how fast they came. */
export interface ProviderLoad {
  name: string;
  requests: number;
  rateLimited: number;
  seconds: number;
}

/**
 * The simulator's rate limit: a token bucket of this many requests a second (429 with Retry-After: 1
 * beyond it). The run is not told: the shared pace has to find it, as it would a real provider's.
 */
export const LOCAL_PROVIDER_LIMIT = 40;
/** The bucket's size: how many requests beyond the rate a quiet spell lets through at once. */
const LOCAL_PROVIDER_BURST = 10;

export async function runLocalStory(options: LocalStoryOptions = {}): Promise<StoryResult> {
  const itemCount = Math.max(10, Math.floor(options.itemCount ?? DEFAULT_ITEM_COUNT));
  const seed = options.seed ?? DEFAULT_SEED;
  const revisionField = options.revisionField ?? 'revision';
  const dataDir = options.dataDir ?? join(process.cwd(), '.local', 'demo');
  const settings: StorySettings = {
    itemCount,
    seed,
    revisionField,
    limits: { timeLimitMs: options.timeLimitMs ?? Math.max(120_000, itemCount * 20) },
  };
  const findings: StoryFindings = { passes: [], providerItems: 0, tableRows: 0, providerLoad: [] };
  let simulator: ProviderSimulator | undefined;

  const outcome = await runStory({
    dataDir,
    inMemory: options.inMemory,
    fresh: true,
    revisionField,
    // Longer than an invocation may wait for the pace (the sync's time-out), so no copy is delivered
    // twice, but shorter than the deployed visibility (6 × that), so a retried record comes back within the story.
    visibilityTimeoutSeconds: 60,
    // The story shows one 429 with Retry-After: 1; the deployed minute-long floor would stall it.
    tuning: { rateLimitMinDelaySeconds: 1 },
    output: options.output,
    quiet: options.quiet,
    provider: async () => {
      simulator = await startSimulator(settings);
      options.onSimulatorStarted?.(simulator);
      return simulatorSide(simulator);
    },
    header: (run) => printStoryHeader(run, simulator!, settings.seed),
    play: (run) => playStory(run, simulator!, settings, findings),
  });
  return { ok: outcome.problems.length === 0, ...outcome, dataDir, ...findings };
}

/** A simulated provider holding a generated tree of items, which rotates the refresh token at every refresh. */
async function startSimulator({ itemCount, seed, revisionField }: StorySettings): Promise<ProviderSimulator> {
  const items = generateItemTree({ count: itemCount, seed, revisionField });
  const large = items.find((item) => item.id === largeFileOf(items));
  if (large) large[LARGE_FIELD] = LARGE_TEXT;
  return ProviderSimulator.start({
    items,
    seed,
    revisionField,
    rotateRefreshToken: true,
    prefix: '/api/v2',
    rateLimit: { requestsPerSecond: LOCAL_PROVIDER_LIMIT, burst: LOCAL_PROVIDER_BURST, retryAfterSeconds: 1 },
  });
}

function simulatorSide(simulator: ProviderSimulator): ProviderSide {
  return {
    baseUrl: simulator.baseUrl,
    credentials: { clientId: simulator.clientId, refreshToken: simulator.refreshToken },
    close: () => simulator.close(),
  };
}

function printStoryHeader(run: LocalRun, simulator: ProviderSimulator, seed: number): void {
  const { screen, system } = run;
  const items = simulator.itemIds().map((id) => simulator.getItem(id)!);
  const folders = items.filter((i) => i.type === 'folder').length;
  const storage = system.storage.dynamodbStorage === 'disk' ? `data in ${display(join(run.dataDir, 'dynamodb'))}` : 'in memory';
  screen.line('content-sync, local run: the deployed handlers against a simulated provider and local AWS services');
  screen.line(`   provider simulator     ${simulator.baseUrl} (${items.length} items: ${folders} folders, ${items.length - folders} files; seed ${seed})`);
  screen.line(`                          rate limit ${LOCAL_PROVIDER_LIMIT} requests/s (429 beyond it): the run is not told, the pace finds it`);
  screen.line(`   DynamoDB (dynalite)    ${system.storage.dynamo.endpoint}, table ${system.names.itemsTable}, ${storage}`);
  screen.line(`   S3 (s3rver)            ${system.storage.s3?.endpoint}, items bucket ${system.names.itemsBucket} (items too large for a row)`);
  screen.line(`   SQS, Secrets Manager   ${system.aws.endpoint} (local emulator): the sync queue, the reconcile queue, their dead-letter queues`);
  screen.line(`   reconciler             ${ENV.freshnessHours}=${run.handlers.reconciler.environment[ENV.freshnessHours]} (each pass right after the last; the run ticks until its pass ends)`);
  screen.line(`   handler logs           ${display(run.logFile)} (JSON lines, as in CloudWatch)`);
  screen.line();
}

async function playStory(run: LocalRun, simulator: ProviderSimulator, settings: StorySettings, findings: StoryFindings): Promise<void> {
  const { screen, problems } = run;
  const rand = mulberry32(settings.seed ^ 0x5eed);

  // 1. The scheduled token refresh.
  screen.line('1. Refresh the access token (token refresher)');
  await refresh(run, 'refresh');

  // 2. The first sync: every id, one rate-limited answer on the way (429 with Retry-After: 1).
  const ids = simulator.itemIds();
  const limitedId = ids[1 + Math.floor(rand() * (ids.length - 1))]!;
  simulator.addFault({ endpoint: 'items', itemId: limitedId, times: 1, fault: { kind: 'status', status: 429, headers: { 'Retry-After': '1' } } });
  screen.line(`2. Sync every id (the provider answers 429 Too Many Requests, Retry-After: 1, once for ${limitedId})`);
  const first = await measured(simulator, findings, 'initial sync', () => recordPass(run, findings, 'initial sync', ids, settings.limits));
  expectCounts(problems, first, { created: ids.length, updated: 0, unchanged: 0, deleted: 0, deadLettered: 0 });
  const largeId = largeFileOf(ids.map((id) => simulator.getItem(id)!));
  await expectInBucket(run, largeId === undefined ? [] : [largeId], 'initial sync');

  // 3. Changes at the provider: new revisions, deletions, a new item; the next scheduled refresh.
  const change = changeProvider(simulator, ids, limitedId, rand, settings.revisionField);
  screen.line(
    `3. Change the provider: ${change.bumped.length} new revisions (${change.shrunk} shrinks back into a row, ${change.grown} grows past the 400 KB row limit), ${change.deletedIds.length} deletions (${change.deletedIds.join(', ')}), 1 new item (${change.newItem.id}); refresh the token again`,
  );
  await refresh(run, 'second refresh');

  // 4. Sync again: every id the table knows (what `npm run enqueue -- --resync-table` sends) and the new one.
  const known = await scanTableIds(run.clients.dynamodb, run.system.names.itemsTable);
  const secondIds = [...new Set([...known, change.newItem.id])];
  screen.line(`4. Sync again: the ${known.length} ids the table knows and the new one`);
  const second = await measured(simulator, findings, 'after changes', () => recordPass(run, findings, 'after changes', secondIds, settings.limits));
  expectCounts(problems, second, {
    created: 1,
    updated: change.bumped.length,
    deleted: change.deletedIds.length,
    unchanged: secondIds.length - 1 - change.bumped.length - change.deletedIds.length,
    deadLettered: 0,
  });

  await expectInBucket(run, [change.grown], 'after changes');

  // 5. The provider changes and nobody sends an id: the reconciler's pass finds the changes.
  const quiet = changeProviderQuietly(simulator, change, limitedId, rand);
  screen.line(
    `5. Change the provider again and send no id: ${quiet.bumped.length} new revisions (${quiet.bumped.join(', ')}), 1 deletion (${quiet.deletedId}), 1 deleted item restored (${quiet.restoredId}); the reconciler's ticks send every id the table knows to the reconcile queue, and the sync takes them from there`,
  );
  const rowsBefore = (await readRows(run)).size;
  const reconciled = await measured(simulator, findings, RECONCILIATION, () => reconciliationPass(run, RECONCILIATION, settings.limits));
  findings.passes.push(reconciled.pass);
  findings.reconciler = reconciled.reconciler;
  printPass(screen, reconciled.pass);
  screen.line(`   ${reconcilerLine(reconciled.reconciler)}`);
  expectCounts(problems, reconciled.pass, {
    created: 0,
    updated: quiet.bumped.length + 1,
    deleted: 1,
    unchanged: rowsBefore - quiet.bumped.length - 2,
    deadLettered: 0,
  });
  // Every id the table knows, tombstones included, once.
  if (reconciled.reconciler.idsSent !== rowsBefore) {
    problems.push(`${RECONCILIATION}: the reconciler sent ${reconciled.reconciler.idsSent} ids, the table holds ${rowsBefore} rows`);
  }
  if (reconciled.reconciler.restored !== 1) problems.push(`${RECONCILIATION}: expected 1 restored row, found ${reconciled.reconciler.restored}`);

  // 6. The table against the provider.
  const deletedIds = [...change.deletedIds.filter((id) => id !== quiet.restoredId), quiet.deletedId];
  await checkTable(run, simulator, deletedIds, settings.revisionField, findings);
}

/** Runs a pass and records what the provider saw of it. */
async function measured<T>(simulator: ProviderSimulator, findings: StoryFindings, name: string, pass: () => Promise<T>): Promise<T> {
  const from = simulator.requests.length;
  const started = Date.now();
  const result = await pass();
  const requests = simulator.requests.slice(from).filter((r) => r.endpoint === 'items');
  findings.providerLoad.push({
    name,
    requests: requests.length,
    rateLimited: requests.filter((r) => r.status === 429).length,
    seconds: (Date.now() - started) / 1000,
  });
  return result;
}

/** The pace the run found (the control table's row), and what the provider saw of each pass. */
async function paceLines(run: LocalRun, load: readonly ProviderLoad[]): Promise<string[]> {
  const stored = await new DynamoDbPaceStore(run.clients.dynamodb, run.system.names.controlTable).read();
  const state = stored?.state as { rate?: number; ceiling?: number } | undefined;
  const found = state?.ceiling ?? state?.rate;
  const lines = [
    `Provider pace: ${state?.rate?.toFixed(1) ?? '?'} requests/s now; ${found === undefined ? 'no 429 met yet' : `last cut at ${found.toFixed(1)}/s, where a 429 came`} (the simulator's unpublished limit: ${LOCAL_PROVIDER_LIMIT}/s, bursts of ${LOCAL_PROVIDER_BURST} let through)`,
  ];
  for (const pass of load) {
    const rate = pass.requests / Math.max(pass.seconds, 0.001);
    lines.push(`   ${pass.name}: ${pass.requests} provider requests, ${rate.toFixed(1)}/s, ${pass.rateLimited} answered 429`);
  }
  return lines;
}

async function recordPass(run: LocalRun, findings: StoryFindings, name: string, ids: readonly string[], limits: PassLimits): Promise<PassSummary> {
  const pass = await syncPass(run, name, ids, limits);
  findings.passes.push(pass);
  printPass(run.screen, pass);
  return pass;
}

function expectCounts(problems: string[], pass: PassSummary, expected: Omit<PassCounts, 'retried'>): void {
  for (const [key, value] of Object.entries(expected) as Array<[keyof PassCounts, number]>) {
    if (pass[key] !== value) problems.push(`${pass.name}: expected ${value} ${key === 'deadLettered' ? 'dead-lettered' : key}, counted ${pass[key]}`);
  }
}

/** The rows that point to the items bucket must be exactly these ids' (the story's large items). */
async function expectInBucket(run: LocalRun, expected: readonly string[], pass: string): Promise<void> {
  const rows = await readRows(run);
  const inBucket = [...rows.values()].filter((row) => row.itemObject !== undefined).map((row) => row.id);
  if (JSON.stringify([...inBucket].sort()) !== JSON.stringify([...expected].sort())) {
    run.problems.push(`${pass}: expected the rows of ${expected.join(', ') || 'no item'} to point to the items bucket, found ${inBucket.join(', ') || 'none'}`);
  } else if (expected.length > 0) {
    run.screen.line(`   ${expected.join(', ')}: over DynamoDB's 400 KB row limit, stored whole in the items bucket (its row holds itemObject)`);
  }
}

/** The last step: the table against the provider, what went wrong on the way, the verdict. */
async function checkTable(
  run: LocalRun,
  simulator: ProviderSimulator,
  deletedIds: readonly string[],
  revisionField: string,
  findings: StoryFindings,
): Promise<void> {
  const { screen, problems } = run;
  const rows = await readRows(run);
  findings.tableRows = rows.size;
  const current = simulator.itemIds().map((id) => simulator.getItem(id)!);
  findings.providerItems = current.length;
  const objects = await readObjects(run, rows);
  const differences = [...compareWithProvider(rows, objects, current, deletedIds, revisionField), ...(await checkBucket(run, rows))];
  problems.push(...differences.slice(0, 20));
  if (differences.length > 20) problems.push(`... and ${differences.length - 20} more differences`);
  const inBucket = [...rows.values()].filter((row) => row.itemObject !== undefined).length;
  for (const pass of findings.passes) if (!pass.drained) problems.push(`${pass.name}: ${pass.remaining} messages were still in the queue at the time limit`);
  for (const reason of deadLetterReasons(run)) problems.push(`dead-lettered ${reason}`);
  for (const error of run.invocationErrors.slice(0, 5)) problems.push(`an invocation of the sync handler failed: ${error}`);
  writeSnapshot(run.snapshotFile, rows);

  screen.line();
  for (const line of formatPassTable(findings.passes)) screen.line(line);
  if (findings.reconciler) screen.line(reconcilerLine(findings.reconciler));
  screen.line();
  for (const line of await paceLines(run, findings.providerLoad)) screen.line(line);
  screen.line();
  if (problems.length === 0) {
    screen.line(
      `OK: the table matches the provider: ${current.length} items with their revisions (${inBucket} read from the items bucket, which holds no other object), ${deletedIds.length} marked deleted, nothing dead-lettered.`,
    );
  } else {
    screen.line('FAILED: the run did not behave as expected:');
    for (const problem of problems) screen.line(`   - ${problem}`);
  }
  screen.line(`Table snapshot: ${display(run.snapshotFile)}   Handler logs: ${display(run.logFile)}`);
}

