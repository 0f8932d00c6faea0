/**
 * The local run (`npm start`), as functions the CLI (dev/local/run.ts) and the tests call. Both
 * stories run on one skeleton (local-run.ts runStory): the local system as deployed (dev/system:
 * the deployment of cdk.json for this provider, on the HTTP emulator, DynamoDB Local and s3rver), its
 * functions with their logs in the log file, the connections added through the client API, as an
 * application's code adds them (local-run.ts putConnection), then the story's own steps. `npm run serve` keeps the simulator's local system
 * (simulatorSystem) running instead of playing a story (serve-command.ts).
 *
 * - runLocalStory: no configuration at all. A provider simulator with three accounts (accounts.ts:
 *   `default` with a seeded tree of files and folders, one of them too large for a DynamoDB row;
 *   `acme` and `globex` with trees of their own whose ids overlap), whose folders list their children
 *   (Box's `item_collection`), DynamoDB (AWS's DynamoDB Local), S3 (s3rver) and SQS (local emulator) on
 *   127.0.0.1, and the deployed handlers, discovery on with the simulator's shape (the context keys
 *   of LOCAL_DISCOVERY), through a whole story: add the three connections through the client API, refresh
 *   their tokens, send each account's root alone and let discovery bring every item (checked), change
 *   items at the provider (new revisions, one large item shrinking back into its row and one growing
 *   past the row limit, deletions, a new item; a new revision of an id two accounts hold, in one of
 *   them), refresh again, sync every id the table knows; then globex withdraws its authorization
 *   (revocation.ts): its messages wait while the others sync, until its credentials are put again
 *   through the client API; then the provider changes again without any id sent, a new file among the changes
 *   deep in default's tree, and the reconciler's ticks send every id the table knows to the
 *   reconcile queue, which the sync drains as its second event source (the new file's folder, its
 *   list changed, sends it there); last, each connection's rows are checked against its account's
 *   items as the provider serves them (from the items bucket for a row that points there), and the
 *   bucket against the rows.
 * - runAgainstProvider (against-provider.ts): the same local system against a real provider
 *   (PROVIDER_BASE_URL), its credentials added as the connection `default`, for the ids given, so a
 *   user can try their credentials before deploying.
 *
 * The handlers' JSON logs and metrics go to a log file (their logger and metrics write there), not
 * the screen. Nothing printed holds a token: the run never reads one but to hand a refresh token to
 * the CLI on its standard input.
 */
import { join } from 'node:path';
import { ENV } from '../../functions/shared/config.js';
import { DEFAULT_CONNECTION } from '../../functions/shared/connections/connection.js';
import { ProviderSimulator } from '../simulator/provider-simulator.js';
import { mulberry32 } from '../simulator/random.js';
import {
  accountItems,
  CONNECTIONS,
  depthOf,
  idsInCommon,
  LOCAL_CHILDREN_CAP,
  LOCAL_DISCOVERY,
  LOCAL_PROVIDER_BURST,
  LOCAL_PROVIDER_LIMIT,
  REVOKED,
  rootOf,
  smallAccountSize,
  startSimulator,
} from './accounts.js';
import { putConnection, runStory, refresh, type LocalRun, type RunPlan } from './local-run.js';
import { listConnections } from './operator.js';
import { eraseConnectionStep } from './erase-step.js';
import { feedStep, takeSnapshots } from './feed-step.js';
import { idsByConnection, printPass, readRows, sentSets, syncPass, type ConnectionIds, type PassLimits, type PassSummary } from './passes.js';
import { RECONCILIATION, reconcilerLine, reconciliationPass } from './reconciliation.js';
import { revokeAndRecover } from './revocation.js';
import { display, type Writer } from './screen.js';
import { addFileUnder, bumpFiles, changeProvider, changeProviderQuietly, largeFileOf } from './story-changes.js';
import { checkTable, compareConnection, expectInBucket, measured, type StoryFindings } from './story-check.js';
import { dueChanges, expectConnection, expectRefresh, foldersAmong, type Due } from './story-expect.js';

export { runAgainstProvider, type ProviderRunOptions, type ProviderRunResult } from './against-provider.js';
export { CONNECTIONS, LOCAL_PROVIDER_LIMIT, REVOKED } from './accounts.js';
export type { ConnectionCounts, PassSummary } from './passes.js';
export { RECONCILIATION, type ReconcilerRun } from './reconciliation.js';
export type { RevocationRun } from './revocation.js';
export type { Writer } from './screen.js';
export type { ConnectionCheck, ProviderLoad } from './story-check.js';

export interface LocalStoryOptions {
  /** Items of the account `default` in the simulated provider; default 300 (acme and globex: a fifth each, 8 to 100). */
  itemCount?: number;
  seed?: number;
  /** Dot path of the revision inside an item; default 'revision'. */
  revisionField?: string;
  /** Where the run keeps its files (DynamoDB Local's data, logs, snapshot); default `.local/demo`. */
  dataDir?: string;
  /** Keeps DynamoDB Local in memory instead of `dataDir/dynamodb`. */
  inMemory?: boolean;
  /** Where the run prints; default the terminal. `quiet` prints nothing. */
  output?: Writer;
  quiet?: boolean;
  /** Per sync pass; default 120 s, or 20 ms an item when that is longer. */
  timeLimitMs?: number;
  /** Called once the simulator is up, before anything runs (tests add faults, collect tokens). */
  onSimulatorStarted?: (simulator: ProviderSimulator) => void;
  /**
   * The whole tour (`npm run tour`): after the first sync, changes at the provider synced again, a
   * revoked account recovered, the reconciler's pass, an erase. Default: the main job (`npm
   * start`): the connections added, the first sync, the table checked, the application's copy.
   */
  tour?: boolean;
}

export type StoryResult = StoryFindings & {
  ok: boolean;
  /** What went wrong, one sentence each (empty when ok). */
  problems: string[];
  dataDir: string;
  logFile: string;
  snapshotFile: string;
  dynamodbStorage: 'disk' | 'memory';
  /** The whole run, ms. */
  elapsedMs: number;
};

export const DEFAULT_ITEM_COUNT = 300;
export const DEFAULT_SEED = 20_261_121;

/**
 * How long a failing connection's messages wait between looks in the local run (CONNECTION_WAIT_SECONDS;
 * 300 deployed): the revoked connection's messages come back every 2 s instead of every 5 minutes.
 */
export const LOCAL_CONNECTION_WAIT_SECONDS = 2;
/**
 * ACCESS_TOKEN_CACHE_SECONDS locally (60 deployed): each batch reads its connections' rows, so the
 * sync sees at once what the token refresher and the CLI wrote (a container would otherwise keep
 * using what it read for up to a minute).
 */
export const LOCAL_TOKEN_CACHE_SECONDS = 0;
/**
 * tokenRefreshMinutes locally (30 deployed): the story's token refresher runs come seconds apart, not
 * half an hour, so each is a run at which every connection in use is due (its token is older than the
 * interval less 5 minutes), as the schedule's next run would find them.
 */
export const LOCAL_TOKEN_REFRESH_MINUTES = 1;

/**
 * The local system of the simulated provider, as the main job and the tour build it and `npm run
 * serve` keeps it running (the story's refresh interval apart): discovery on, with the simulator's
 * folders' shape (an account's first sync is its root alone); told the simulator's limit, as an
 * operator who knows theirs sets it, unless the pace is to find it (the tour); tuned to retry and
 * react in seconds.
 */
export function simulatorSystem(options: { told: boolean }): Pick<RunPlan, 'visibilityTimeoutSeconds' | 'context' | 'tuning'> {
  return {
    // Longer than an invocation may wait for the pace (the sync's time-out), so no copy is delivered
    // twice, but shorter than the deployed visibility (6 × that), so a retried record comes back within the story.
    visibilityTimeoutSeconds: 60,
    context: { ...LOCAL_DISCOVERY, ...(options.told ? { providerRequestsPerSecond: LOCAL_PROVIDER_LIMIT } : {}) },
    tuning: {
      // The story shows one 429 with Retry-After: 1; the deployed minute-long floor would stall it.
      rateLimitMinDelaySeconds: 1,
      connectionWaitSeconds: LOCAL_CONNECTION_WAIT_SECONDS,
      tokenCacheSeconds: LOCAL_TOKEN_CACHE_SECONDS,
    },
  };
}

interface StorySettings {
  tour: boolean;
  itemCount: number;
  seed: number;
  revisionField: string;
  limits: PassLimits;
}

export async function runLocalStory(options: LocalStoryOptions = {}): Promise<StoryResult> {
  const started = Date.now();
  const itemCount = Math.max(10, Math.floor(options.itemCount ?? DEFAULT_ITEM_COUNT));
  const seed = options.seed ?? DEFAULT_SEED;
  const revisionField = options.revisionField ?? 'revision';
  const dataDir = options.dataDir ?? join(process.cwd(), '.local', 'demo');
  const settings: StorySettings = {
    tour: options.tour === true,
    itemCount,
    seed,
    revisionField,
    limits: { timeLimitMs: options.timeLimitMs ?? Math.max(120_000, itemCount * 20) },
  };
  const findings: StoryFindings = { passes: [], providerItems: 0, tableRows: 0, providerLoad: [], connections: [] };
  const system = simulatorSystem({ told: !settings.tour });
  let simulator: ProviderSimulator | undefined;

  const outcome = await runStory({
    dataDir,
    inMemory: options.inMemory,
    fresh: true,
    revisionField,
    ...system,
    context: { tokenRefreshMinutes: LOCAL_TOKEN_REFRESH_MINUTES, ...system.context },
    output: options.output,
    quiet: options.quiet,
    provider: async () => {
      simulator = await startSimulator(settings);
      options.onSimulatorStarted?.(simulator);
      return { baseUrl: simulator.baseUrl, close: () => simulator!.close() };
    },
    header: (run) => printStoryHeader(run, simulator!, settings.seed, settings.tour),
    play: (run) => playStory(run, simulator!, settings, findings),
  });
  return { ok: outcome.problems.length === 0, ...outcome, dataDir, ...findings, elapsedMs: Date.now() - started };
}

function printStoryHeader(run: LocalRun, simulator: ProviderSimulator, seed: number, tour: boolean): void {
  const { screen, system } = run;
  const items = accountItems(simulator, DEFAULT_CONNECTION);
  const folders = items.filter((i) => i.type === 'folder').length;
  const storage = system.storage.dynamodbStorage === 'disk' ? `data in ${display(join(run.dataDir, 'dynamodb'))}` : 'in memory';
  const sync = run.handlers.sync.environment;
  const common = idsInCommon(simulator, 'acme', REVOKED).length;
  screen.line('content-sync, local run: the deployed handlers against a simulated provider and local AWS services');
  screen.line(`   provider simulator     ${simulator.baseUrl}, client id "${simulator.clientId}", authorized by three accounts:`);
  screen.line(`                             ${DEFAULT_CONNECTION.padEnd(8)} ${String(items.length).padStart(5)} items (${folders} folders, ${items.length - folders} files; seed ${seed}), one too large for a row`);
  for (const [n, connection] of CONNECTIONS.filter((c) => c !== DEFAULT_CONNECTION).entries()) {
    const note = connection === REVOKED ? `; ${common} of its ids are acme's too, with other contents` : '';
    screen.line(`                             ${connection.padEnd(8)} ${String(simulator.account(connection).itemCount).padStart(5)} items (seed ${seed + 1 + n}${note})`);
  }
  screen.line(
    `                          rate limit ${LOCAL_PROVIDER_LIMIT} requests/s for them all (429 beyond it): ` +
      (tour ? 'the run is not told, the pace finds it' : 'told to the run (providerRequestsPerSecond), as an operator who knows it sets it; npm run tour lets the pace find it'),
  );
  screen.line(`                          folders list their children (item_collection, at most ${LOCAL_CHILDREN_CAP} entries, as Box's); a change to a child gives its folders new revisions, up to the root`);
  screen.line(`   DynamoDB Local         ${system.storage.dynamo.endpoint}, items table ${system.names.itemsTable} (one row per connection and id), connections table ${system.names.connectionsTable}, ${storage}`);
  screen.line(`   S3 (s3rver)            ${system.storage.s3?.endpoint}, items bucket ${system.names.itemsBucket} (items too large for a row, under items/<connection>/)`);
  screen.line(`   SQS                    ${system.aws.endpoint} (local emulator): the sync queue, the reconcile queue, their dead-letter queues`);
  const discovery = run.system.config.discovery;
  if (discovery) {
    const keys = [`childrenPath=${discovery.childrenPath}`, `childIdPath=${discovery.childIdPath}`];
    if (discovery.childRevisionPath !== undefined) keys.push(`childRevisionPath=${discovery.childRevisionPath}`);
    if (discovery.childrenTotalPath !== undefined) keys.push(`childrenTotalPath=${discovery.childrenTotalPath}`);
    screen.line(`   discovery              ${keys.join(', ')}:`);
    screen.line(`                          a folder written sends the children the table lacks, or holds at another revision, to the reconcile queue (background lane)`);
  }
  screen.line(`   reconciler             ${ENV.freshnessHours}=${run.handlers.reconciler.environment[ENV.freshnessHours]} (each pass right after the last; the run ticks until its pass ends)`);
  screen.line(
    `   tuned for this run     ${ENV.connectionWaitSeconds}=${sync[ENV.connectionWaitSeconds]} (deployed 300): a failing connection's messages look again every ${sync[ENV.connectionWaitSeconds]} s;`,
  );
  screen.line(`                          ${ENV.tokenCacheSeconds}=${sync[ENV.tokenCacheSeconds]} (deployed 60): each batch reads its connections' rows, so what the client API writes counts at once;`);
  screen.line(`                          tokenRefreshMinutes=${LOCAL_TOKEN_REFRESH_MINUTES} (deployed 30): the story's refresher runs, seconds apart, each find every connection in use due`);
  screen.line(`   handler logs           ${display(run.logFile)} (JSON lines, as in CloudWatch)`);
  screen.line();
}

async function playStory(run: LocalRun, simulator: ProviderSimulator, settings: StorySettings, findings: StoryFindings): Promise<void> {
  const { screen, problems } = run;
  const rand = mulberry32(settings.seed ^ 0x5eed);
  const small = smallAccountSize(settings.itemCount);
  const record = (pass: PassSummary): PassSummary => {
    findings.passes.push(pass);
    return pass;
  };
  const passOf = async (name: string, sends: readonly ConnectionIds[]): Promise<PassSummary> => {
    const pass = record(await measured(simulator, findings, name, () => syncPass(run, name, sends, settings.limits)));
    printPass(screen, pass);
    return pass;
  };

  // 1. The application's code puts a connection per account through the client API.
  screen.line("1. Add the three connections, as the client application's code does: one PUT each to the client API (on a loopback port)");
  for (const connection of CONNECTIONS) {
    const account = simulator.account(connection);
    await putConnection(run, connection, account.clientId, account.refreshToken);
  }
  await listConnections(run);
  screen.line("   (IDS KNOWN and LAST WRITE: the change-events function's counters, from the items table's stream; no item is synced yet)");
  screen.line('   The application takes a snapshot of each, to keep its own copy from the changes feed (step 10)');
  const mirrors = await takeSnapshots(run, CONNECTIONS);

  // 2. The scheduled token refresh.
  screen.line('2. Refresh the access tokens (token refresher)');
  expectRefresh(problems, 'first refresh', await refresh(run), CONNECTIONS.length, 0);

  // 3. The first sync: each account's root alone, its tree brought by discovery; one injected
  // rate-limited answer on the way (429 with Retry-After: 1), besides the 429s of the simulator's
  // rate limit while the pace finds it. The injected 429 comes late in default's ids, once the pace
  // has grown: a cut at its starting rate would hold it far below the provider's limit for the rest
  // of a short run.
  const ids = simulator.itemIds();
  const roots = new Map(CONNECTIONS.map((connection) => [connection, rootOf(simulator, connection)]));
  const lastThird = Math.floor((ids.length * 2) / 3);
  const limitedId = ids[lastThird + Math.floor(rand() * (ids.length - lastThird))]!;
  if (settings.tour) {
    simulator.addFault({ endpoint: 'items', account: DEFAULT_CONNECTION, itemId: limitedId, times: 1, fault: { kind: 'status', status: 429, headers: { 'Retry-After': '1' } } });
  }
  screen.line(
    `3. The first sync: each account's root alone, as \`npm run enqueue -- --connection default ${roots.get(DEFAULT_CONNECTION)}\` sends default's; ` +
      `each folder written sends its children on` +
      (settings.tour
        ? ` (the provider answers 429 Too Many Requests, Retry-After: 1, to default's ${limitedId} once, and to every request beyond its rate limit while the pace finds that limit)`
        : ''),
  );
  const first = await passOf('initial sync', [...roots].map(([connection, root]) => ({ connection, ids: [root] })));
  findings.discovery = [];
  for (const [connection, root] of roots) {
    const holds = simulator.account(connection).itemCount;
    expectConnection(problems, first, connection, { ids: 1, found: holds - 1, created: holds, updated: 0, unchanged: 0, deleted: 0, deadLettered: 0 });
    const counts = first.byConnection[connection];
    const differences = await compareConnection(run, simulator, connection, settings.revisionField);
    problems.push(...differences.slice(0, 10).map((d) => `initial sync, from ${connection}'s root: ${d}`));
    findings.discovery.push({ connection, root, sent: counts?.ids ?? 0, mirrored: counts?.created ?? 0, found: counts?.found ?? 0, checked: differences.length === 0 });
  }
  const [crawled, ...others] = findings.discovery;
  screen.line(
    `   ${crawled!.connection}: 1 id sent, the root ${crawled!.root}; ${crawled!.mirrored} items mirrored, ${crawled!.found} of them found by discovery ` +
      `(each folder written sent the children the table lacked to the reconcile queue, in the background lane)`,
  );
  for (const c of others) screen.line(`   ${c.connection}: 1 id sent, the root ${c.root}; ${c.mirrored} items mirrored, ${c.found} of them found by discovery`);
  if (findings.discovery.every((c) => c.checked)) {
    screen.line(`   checked: every item of each account has its row, with the provider's revision and contents (${findings.discovery.map((c) => `${c.connection} ${c.mirrored}`).join(', ')})`);
  }
  const largeId = largeFileOf(ids.map((id) => simulator.getItem(id)!));
  await expectInBucket(run, largeId === undefined ? [] : [largeId], 'initial sync');

  if (!settings.tour) {
    // The main job ends here: the table against the provider, then the application's copy.
    await checkTable(run, simulator, new Map(), settings.revisionField, findings, { limit: LOCAL_PROVIDER_LIMIT, burst: LOCAL_PROVIDER_BURST });
    await feedStep(run, mirrors, 4);
    screen.line('The whole tour (changes synced again, a revoked account recovered, the reconciler, an erase): npm run tour');
    return;
  }

  // 4. Changes at the provider: new revisions, deletions, a new item; one id two accounts hold, changed in one; the next scheduled refresh.
  const change = changeProvider(simulator, ids, limitedId, rand, settings.revisionField);
  const shared = idsInCommon(simulator, 'acme', REVOKED).find((id) => simulator.account('acme').getItem(id)?.type === 'file');
  if (shared) simulator.account('acme').bumpRevision(shared);
  const rowsAtChange = await readRows(run);
  const dueAtChange = new Map(CONNECTIONS.map((c) => [c, dueChanges(simulator, c, rowsAtChange, settings.revisionField)]));
  const followed = foldersAmong(simulator, DEFAULT_CONNECTION, dueAtChange.get(DEFAULT_CONNECTION)!.updated).filter((id) => !change.bumped.includes(id));
  screen.line(
    `4. Change the provider: default: ${change.bumped.length} new revisions (${change.shrunk} shrinks back into a row, ${change.grown} grows past the 400 KB row limit), ${change.deletedIds.length} deletions (${change.deletedIds.join(', ')}), 1 new item (${change.newItem.id})` +
      `${followed.length > 0 ? `; their folders' lists change with them: ${followed.length} more folders have a new revision, up to the root` : ''}` +
      `${shared ? `; acme: a new revision of ${shared}, an id ${REVOKED} holds too (only acme's rows may change)` : ''}; refresh the tokens again`,
  );
  expectRefresh(problems, 'second refresh', await refresh(run), CONNECTIONS.length, 0);

  // 5. Sync again: every id the table knows per connection (what `npm run enqueue -- --connection <id> --resync-table` sends) and the new one.
  const known = idsByConnection(rowsAtChange);
  known.get(DEFAULT_CONNECTION)?.push(change.newItem.id);
  screen.line(`5. Sync again: the ids the table knows, per connection, and default's new one`);
  const secondSends = [...known].map(([connection, connectionIds]) => ({ connection, ids: connectionIds }));
  const second = await passOf('after changes', secondSends);
  const secondSent = sentSets(secondSends);
  for (const connection of CONNECTIONS) expectDue(problems, second, connection, dueAtChange.get(connection)!, secondSent.get(connection));
  expectConnection(problems, second, DEFAULT_CONNECTION, { created: 1, deleted: change.deletedIds.length });
  await expectInBucket(run, [change.grown], 'after changes');

  // 6-8. globex withdraws its authorization: its messages wait while the others sync; its credentials are put again through the client API.
  const rowsNow = await readRows(run);
  const idsNow = idsByConnection(rowsNow);
  const singled = new Set([limitedId, change.shrunk, change.grown, change.newItem.id]);
  const meanwhile = new Map<string, string[]>();
  const revocation = await revokeAndRecover(
    run,
    simulator,
    {
      // The revoked connection's ids first: they wait while the others' sync.
      sends: [REVOKED, ...CONNECTIONS.filter((c) => c !== REVOKED)].map((connection) => ({ connection, ids: idsNow.get(connection) ?? [] })),
      changes: () => {
        for (const connection of CONNECTIONS) meanwhile.set(connection, bumpFiles(simulator.account(connection), 2, rand, singled));
        return [...meanwhile].map(([connection, bumped]) => `${connection}: new revisions of ${bumped.join(', ')}`).join('; ');
      },
      limits: settings.limits,
      onPass: (pass) => void record(pass),
    },
    6,
  );
  findings.revocation = revocation;
  const failingPass = findings.passes.at(-2)!;
  const sentNow = new Map([...idsNow].map(([connection, list]) => [connection, new Set(list)]));
  for (const connection of CONNECTIONS.filter((c) => c !== REVOKED)) {
    expectDue(problems, failingPass, connection, dueChanges(simulator, connection, rowsNow, settings.revisionField), sentNow.get(connection));
    expectConnection(problems, failingPass, connection, { waiting: 0 });
  }
  expectConnection(problems, failingPass, REVOKED, { created: 0, updated: 0, deadLettered: 0, waiting: small });
  expectDue(problems, findings.passes.at(-1)!, REVOKED, dueChanges(simulator, REVOKED, rowsNow, settings.revisionField), sentNow.get(REVOKED));

  // 9. The provider changes and nobody sends an id: the reconciler's pass finds the changes, every
  // connection's, and a new file deep in default's tree through its folder's new list.
  const quiet = changeProviderQuietly(simulator, change, limitedId, rand);
  const quietOthers = new Map(CONNECTIONS.filter((c) => c !== DEFAULT_CONNECTION).map((c) => [c, bumpFiles(simulator.account(c), 1, rand)]));
  const rowsBefore = await readRows(run);
  const deepFolder = deepestFolder(simulator);
  const added = addFileUnder(simulator, deepFolder.id, [...new Set([...ids, ...simulator.itemIds(), ...[...rowsBefore.values()].map((row) => row.id)])], settings.revisionField);
  screen.line(
    `9. Change the provider again and send no id: default: ${quiet.bumped.length} new revisions (${quiet.bumped.join(', ')}), 1 deletion (${quiet.deletedId}), 1 deleted item restored (${quiet.restoredId}), ` +
      `1 new file, ${added.id}, in ${deepFolder.depth === 0 ? `the root ${deepFolder.id}` : `${deepFolder.id}, ${deepFolder.depth} level${deepFolder.depth === 1 ? '' : 's'} below the root`}; ` +
      `${[...quietOthers].map(([c, bumped]) => `${c}: a new revision of ${bumped.join(', ')}`).join('; ')}. ` +
      `The reconciler's ticks send every id the table knows, every connection's, to the reconcile queue, and the sync takes them from there`,
  );
  const dueQuiet = new Map(CONNECTIONS.map((c) => [c, dueChanges(simulator, c, rowsBefore, settings.revisionField)]));
  const rowsByConnection = idsByConnection(rowsBefore);
  const totalRows = rowsBefore.size;
  const reconciled = await measured(simulator, findings, RECONCILIATION, () => reconciliationPass(run, RECONCILIATION, settings.limits));
  record(reconciled.pass);
  findings.reconciler = reconciled.reconciler;
  printPass(screen, reconciled.pass);
  screen.line(`   ${reconcilerLine(reconciled.reconciler)}`);
  for (const connection of CONNECTIONS) {
    expectDue(problems, reconciled.pass, connection, dueQuiet.get(connection)!, new Set(rowsByConnection.get(connection) ?? []));
  }
  expectConnection(problems, reconciled.pass, DEFAULT_CONNECTION, { created: 1, found: 1, deleted: 1 });
  // Every id the table knows, tombstones included, once.
  if (reconciled.reconciler.idsSent !== totalRows) {
    problems.push(`${RECONCILIATION}: the reconciler sent ${reconciled.reconciler.idsSent} ids, the table holds ${totalRows} rows`);
  }
  if (reconciled.reconciler.restored !== 1) problems.push(`${RECONCILIATION}: expected 1 restored row, found ${reconciled.reconciler.restored}`);
  // The new file: nobody sent its id (the reconciler sends the rows the table holds, and it had none); its folder's re-check found it.
  const rowsAfter = await readRows(run);
  const folderRow = rowsAfter.get(`${DEFAULT_CONNECTION}/${deepFolder.id}`);
  const fileRow = rowsAfter.get(`${DEFAULT_CONNECTION}/${added.id}`);
  const found = fileRow !== undefined && fileRow.deleted !== true && rowsBefore.get(`${DEFAULT_CONNECTION}/${added.id}`) === undefined;
  findings.newFile = { id: added.id, folder: deepFolder.id, depth: deepFolder.depth, found };
  if (found) {
    screen.line(
      `   default's ${added.id} found without anyone sending its id: the reconciler re-checked ${deepFolder.id}, whose list, and so whose revision (now ${folderRow?.revision ?? '?'}), had changed; it sent ${added.id} for checking`,
    );
  } else {
    problems.push(`${RECONCILIATION}: default's new file ${added.id} in ${deepFolder.id} was not found (${fileRow ? 'its row is a tombstone' : 'no row'})`);
  }

  // The table against the provider, connection by connection.
  const deletedIds = [...change.deletedIds.filter((id) => id !== quiet.restoredId), quiet.deletedId];
  await checkTable(run, simulator, new Map([[DEFAULT_CONNECTION, deletedIds]]), settings.revisionField, findings, {
    limit: LOCAL_PROVIDER_LIMIT,
    burst: LOCAL_PROVIDER_BURST,
  });

  // 10. The application's copy of each connection, from its snapshot and the changes feed.
  await feedStep(run, mirrors, 10);

  // 11. One account leaves: the application erases its data through the client API.
  await eraseConnectionStep(run, ERASED, 11);
}

/** The account that leaves at the end (its data erased). */
export const ERASED = 'acme';

/** The deepest folder of default's tree now (the first such by id), and how deep it is. */
function deepestFolder(simulator: ProviderSimulator): { id: string; depth: number } {
  let deepest = { id: rootOf(simulator, DEFAULT_CONNECTION), depth: 0 };
  for (const id of [...simulator.itemIds()].sort()) {
    if (simulator.getItem(id)?.type !== 'folder') continue;
    const depth = depthOf(simulator, DEFAULT_CONNECTION, id);
    if (depth > deepest.depth) deepest = { id, depth };
  }
  return deepest;
}

/**
 * A pass that checks every id of `sent` must make the changes `due` for the connection: those it
 * creates for ids nobody sent are discovery's finds; every other id sent is unchanged.
 */
function expectDue(problems: string[], pass: PassSummary, connection: string, due: Due, sent: ReadonlySet<string> | undefined): void {
  const ids = sent ?? new Set<string>();
  const found = due.created.filter((id) => !ids.has(id)).length;
  expectConnection(problems, pass, connection, {
    ids: ids.size,
    found,
    created: due.created.length,
    updated: due.updated.length,
    deleted: due.deleted.length,
    unchanged: ids.size + found - due.created.length - due.updated.length - due.deleted.length,
    deadLettered: 0,
  });
}
