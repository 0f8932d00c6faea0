/**
 * The local run (`npm start`), as functions the CLI (dev/local/run.ts) and the tests call. Both
 * stories run on one skeleton (local-run.ts runStory): the local system as deployed (dev/system:
 * the deployment of cdk.json for this provider, on the HTTP emulator, dynalite and s3rver), its
 * functions with their logs in the log file, the connections added with the operator CLI
 * (operator.ts), then the story's own steps.
 *
 * - runLocalStory: no configuration at all. A provider simulator with three accounts (accounts.ts:
 *   `default` with a seeded tree of files and folders, one of them too large for a DynamoDB row;
 *   `acme` and `globex` with trees of their own whose ids overlap), DynamoDB (dynalite), S3
 *   (s3rver) and SQS (local emulator) on 127.0.0.1, and the deployed handlers through a whole
 *   story: add the three connections with the CLI, refresh their tokens, sync every id of every
 *   connection, change items at the provider (new revisions, one large item shrinking back into its
 *   row and one growing past the row limit, deletions, a new item; a new revision of an id two
 *   accounts hold, in one of them), refresh again, sync again; then globex withdraws its
 *   authorization (revocation.ts): its messages wait while the others sync, until its credentials
 *   are replaced with the CLI; then the provider changes again without any id sent, and the
 *   reconciler's ticks send every id the table knows to the reconcile queue, which the sync drains
 *   as its second event source; last, each connection's rows are checked against its account's
 *   items (from the items bucket for a row that points there), and the bucket against the rows.
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
import { accountItems, CONNECTIONS, idsInCommon, LOCAL_PROVIDER_BURST, LOCAL_PROVIDER_LIMIT, REVOKED, smallAccountSize, startSimulator } from './accounts.js';
import { runStory, refresh, type LocalRun } from './local-run.js';
import { addConnection, listConnections } from './operator.js';
import { idsByConnection, printPass, readRows, syncPass, type ConnectionCounts, type ConnectionIds, type PassLimits, type PassSummary } from './passes.js';
import { RECONCILIATION, reconcilerLine, reconciliationPass } from './reconciliation.js';
import { revokeAndRecover } from './revocation.js';
import { display, type Writer } from './screen.js';
import { bumpFiles, changeProvider, changeProviderQuietly, largeFileOf } from './story-changes.js';
import { checkTable, expectInBucket, measured, type StoryFindings } from './story-check.js';

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

interface StorySettings {
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
    itemCount,
    seed,
    revisionField,
    limits: { timeLimitMs: options.timeLimitMs ?? Math.max(120_000, itemCount * 20) },
  };
  const findings: StoryFindings = { passes: [], providerItems: 0, tableRows: 0, providerLoad: [], connections: [] };
  let simulator: ProviderSimulator | undefined;

  const outcome = await runStory({
    dataDir,
    inMemory: options.inMemory,
    fresh: true,
    revisionField,
    // Longer than an invocation may wait for the pace (the sync's time-out), so no copy is delivered
    // twice, but shorter than the deployed visibility (6 × that), so a retried record comes back within the story.
    visibilityTimeoutSeconds: 60,
    context: { tokenRefreshMinutes: LOCAL_TOKEN_REFRESH_MINUTES },
    tuning: {
      // The story shows one 429 with Retry-After: 1; the deployed minute-long floor would stall it.
      rateLimitMinDelaySeconds: 1,
      connectionWaitSeconds: LOCAL_CONNECTION_WAIT_SECONDS,
      tokenCacheSeconds: LOCAL_TOKEN_CACHE_SECONDS,
    },
    output: options.output,
    quiet: options.quiet,
    provider: async () => {
      simulator = await startSimulator(settings);
      options.onSimulatorStarted?.(simulator);
      return { baseUrl: simulator.baseUrl, close: () => simulator!.close() };
    },
    header: (run) => printStoryHeader(run, simulator!, settings.seed),
    play: (run) => playStory(run, simulator!, settings, findings),
  });
  return { ok: outcome.problems.length === 0, ...outcome, dataDir, ...findings, elapsedMs: Date.now() - started };
}

function printStoryHeader(run: LocalRun, simulator: ProviderSimulator, seed: number): void {
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
  screen.line(`                          rate limit ${LOCAL_PROVIDER_LIMIT} requests/s for them all (429 beyond it): the run is not told, the pace finds it`);
  screen.line(`   DynamoDB (dynalite)    ${system.storage.dynamo.endpoint}, items table ${system.names.itemsTable} (one row per connection and id), connections table ${system.names.connectionsTable}, ${storage}`);
  screen.line(`   S3 (s3rver)            ${system.storage.s3?.endpoint}, items bucket ${system.names.itemsBucket} (items too large for a row, under items/<connection>/)`);
  screen.line(`   SQS                    ${system.aws.endpoint} (local emulator): the sync queue, the reconcile queue, their dead-letter queues`);
  screen.line(`   reconciler             ${ENV.freshnessHours}=${run.handlers.reconciler.environment[ENV.freshnessHours]} (each pass right after the last; the run ticks until its pass ends)`);
  screen.line(
    `   tuned for this run     ${ENV.connectionWaitSeconds}=${sync[ENV.connectionWaitSeconds]} (deployed 300): a failing connection's messages look again every ${sync[ENV.connectionWaitSeconds]} s;`,
  );
  screen.line(`                          ${ENV.tokenCacheSeconds}=${sync[ENV.tokenCacheSeconds]} (deployed 60): each batch reads its connections' rows, so what the CLI writes counts at once;`);
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

  // 1. The operator adds a connection per account.
  screen.line('1. Add the three connections, as an operator does (the refresh token on standard input, never an argument)');
  for (const connection of CONNECTIONS) {
    const account = simulator.account(connection);
    await addConnection(run, connection, account.clientId, account.refreshToken);
  }
  await listConnections(run);
  screen.line('   (IDS KNOWN and LAST WRITE are kept by the change-events function, from the table\'s stream, which the local run has not)');

  // 2. The scheduled token refresh.
  screen.line('2. Refresh the access tokens (token refresher)');
  expectRefresh(problems, 'first refresh', await refresh(run), CONNECTIONS.length, 0);

  // 3. The first sync: every id of every connection, one rate-limited answer on the way (429 with Retry-After: 1).
  // The 429 comes late in default's ids, once the pace has grown: a cut at its starting rate would
  // hold it far below the provider's limit for the rest of a short run.
  const ids = simulator.itemIds();
  const lastThird = Math.floor((ids.length * 2) / 3);
  const limitedId = ids[lastThird + Math.floor(rand() * (ids.length - lastThird))]!;
  simulator.addFault({ endpoint: 'items', account: DEFAULT_CONNECTION, itemId: limitedId, times: 1, fault: { kind: 'status', status: 429, headers: { 'Retry-After': '1' } } });
  screen.line(`3. Sync every id of every connection, sent as {"connection","id"} (the provider answers 429 Too Many Requests, Retry-After: 1, once for default's ${limitedId})`);
  const first = await passOf('initial sync', CONNECTIONS.map((connection) => ({ connection, ids: simulator.account(connection).itemIds() })));
  expectConnection(problems, first, DEFAULT_CONNECTION, { created: ids.length, updated: 0, unchanged: 0, deleted: 0, deadLettered: 0 });
  for (const connection of ['acme', REVOKED]) expectConnection(problems, first, connection, { created: small, updated: 0, unchanged: 0, deadLettered: 0 });
  const largeId = largeFileOf(ids.map((id) => simulator.getItem(id)!));
  await expectInBucket(run, largeId === undefined ? [] : [largeId], 'initial sync');

  // 4. Changes at the provider: new revisions, deletions, a new item; one id two accounts hold, changed in one; the next scheduled refresh.
  const change = changeProvider(simulator, ids, limitedId, rand, settings.revisionField);
  const shared = idsInCommon(simulator, 'acme', REVOKED).find((id) => simulator.account('acme').getItem(id)?.type === 'file');
  if (shared) simulator.account('acme').bumpRevision(shared);
  screen.line(
    `4. Change the provider: default: ${change.bumped.length} new revisions (${change.shrunk} shrinks back into a row, ${change.grown} grows past the 400 KB row limit), ${change.deletedIds.length} deletions (${change.deletedIds.join(', ')}), 1 new item (${change.newItem.id})` +
      `${shared ? `; acme: a new revision of ${shared}, an id ${REVOKED} holds too (only acme's row may change)` : ''}; refresh the tokens again`,
  );
  expectRefresh(problems, 'second refresh', await refresh(run), CONNECTIONS.length, 0);

  // 5. Sync again: every id the table knows per connection (what `npm run enqueue -- --connection <id> --resync-table` sends) and the new one.
  const known = idsByConnection(await readRows(run));
  known.get(DEFAULT_CONNECTION)?.push(change.newItem.id);
  screen.line(`5. Sync again: the ids the table knows, per connection, and default's new one`);
  const second = await passOf('after changes', [...known].map(([connection, connectionIds]) => ({ connection, ids: connectionIds })));
  const secondDefault = known.get(DEFAULT_CONNECTION)?.length ?? 0;
  expectConnection(problems, second, DEFAULT_CONNECTION, {
    created: 1,
    updated: change.bumped.length,
    deleted: change.deletedIds.length,
    unchanged: secondDefault - 1 - change.bumped.length - change.deletedIds.length,
    deadLettered: 0,
  });
  expectConnection(problems, second, 'acme', { updated: shared ? 1 : 0, unchanged: small - (shared ? 1 : 0), deadLettered: 0 });
  expectConnection(problems, second, REVOKED, { created: 0, updated: 0, unchanged: small, deadLettered: 0 });
  await expectInBucket(run, [change.grown], 'after changes');

  // 6-8. globex withdraws its authorization: its messages wait while the others sync; the operator replaces its credentials.
  const rowsNow = idsByConnection(await readRows(run));
  const singled = new Set([limitedId, change.shrunk, change.grown, change.newItem.id]);
  const meanwhile = new Map<string, string[]>();
  const revocation = await revokeAndRecover(
    run,
    simulator,
    {
      // The revoked connection's ids first: they wait while the others' sync.
      sends: [REVOKED, ...CONNECTIONS.filter((c) => c !== REVOKED)].map((connection) => ({ connection, ids: rowsNow.get(connection) ?? [] })),
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
  for (const connection of CONNECTIONS.filter((c) => c !== REVOKED)) {
    const rows = rowsNow.get(connection)?.length ?? 0;
    const bumped = meanwhile.get(connection)?.length ?? 0;
    expectConnection(problems, failingPass, connection, { updated: bumped, unchanged: rows - bumped, deadLettered: 0, waiting: 0 });
  }
  expectConnection(problems, failingPass, REVOKED, { created: 0, updated: 0, deadLettered: 0, waiting: small });
  const revokedBumps = meanwhile.get(REVOKED)?.length ?? 0;
  expectConnection(problems, findings.passes.at(-1)!, REVOKED, { updated: revokedBumps, unchanged: small - revokedBumps, deadLettered: 0, waiting: 0 });

  // 9. The provider changes and nobody sends an id: the reconciler's pass finds the changes, every connection's.
  const quiet = changeProviderQuietly(simulator, change, limitedId, rand);
  const quietOthers = new Map(CONNECTIONS.filter((c) => c !== DEFAULT_CONNECTION).map((c) => [c, bumpFiles(simulator.account(c), 1, rand)]));
  screen.line(
    `9. Change the provider again and send no id: default: ${quiet.bumped.length} new revisions (${quiet.bumped.join(', ')}), 1 deletion (${quiet.deletedId}), 1 deleted item restored (${quiet.restoredId}); ` +
      `${[...quietOthers].map(([c, bumped]) => `${c}: a new revision of ${bumped.join(', ')}`).join('; ')}. ` +
      `The reconciler's ticks send every id the table knows, every connection's, to the reconcile queue, and the sync takes them from there`,
  );
  const rowsBefore = idsByConnection(await readRows(run));
  const totalRows = [...rowsBefore.values()].reduce((sum, list) => sum + list.length, 0);
  const reconciled = await measured(simulator, findings, RECONCILIATION, () => reconciliationPass(run, RECONCILIATION, settings.limits));
  record(reconciled.pass);
  findings.reconciler = reconciled.reconciler;
  printPass(screen, reconciled.pass);
  screen.line(`   ${reconcilerLine(reconciled.reconciler)}`);
  const defaultRows = rowsBefore.get(DEFAULT_CONNECTION)?.length ?? 0;
  expectConnection(problems, reconciled.pass, DEFAULT_CONNECTION, {
    created: 0,
    updated: quiet.bumped.length + 1,
    deleted: 1,
    unchanged: defaultRows - quiet.bumped.length - 2,
    deadLettered: 0,
  });
  for (const [connection, bumped] of quietOthers) {
    expectConnection(problems, reconciled.pass, connection, { updated: bumped.length, unchanged: (rowsBefore.get(connection)?.length ?? 0) - bumped.length, deadLettered: 0 });
  }
  // Every id the table knows, tombstones included, once.
  if (reconciled.reconciler.idsSent !== totalRows) {
    problems.push(`${RECONCILIATION}: the reconciler sent ${reconciled.reconciler.idsSent} ids, the table holds ${totalRows} rows`);
  }
  if (reconciled.reconciler.restored !== 1) problems.push(`${RECONCILIATION}: expected 1 restored row, found ${reconciled.reconciler.restored}`);

  // The table against the provider, connection by connection.
  const deletedIds = [...change.deletedIds.filter((id) => id !== quiet.restoredId), quiet.deletedId];
  await checkTable(run, simulator, new Map([[DEFAULT_CONNECTION, deletedIds]]), settings.revisionField, findings, {
    limit: LOCAL_PROVIDER_LIMIT,
    burst: LOCAL_PROVIDER_BURST,
  });
}

function expectRefresh(problems: string[], label: string, report: { refreshed: number; refused: number; failed: number }, refreshed: number, refused: number): void {
  if (report.refreshed !== refreshed || report.refused !== refused || report.failed !== 0) {
    problems.push(`${label}: the token refresher refreshed ${report.refreshed}, refused ${report.refused}, failed ${report.failed}; expected ${refreshed}, ${refused}, 0`);
  }
}

/** One connection's counts in a pass must be these. */
function expectConnection(problems: string[], pass: PassSummary, connection: string, expected: Partial<ConnectionCounts>): void {
  const counts = pass.byConnection[connection];
  if (!counts) {
    problems.push(`${pass.name}: nothing counted for ${connection}`);
    return;
  }
  for (const [key, value] of Object.entries(expected) as Array<[keyof ConnectionCounts, number]>) {
    if (counts[key] !== value) problems.push(`${pass.name}: expected ${value} ${key === 'deadLettered' ? 'dead-lettered' : key} for ${connection}, counted ${counts[key]}`);
  }
}

