/**
 * The local run against a real provider (PROVIDER_BASE_URL): the local system as deployed, the
 * user's credentials added as the connection `default` with the operator CLI (as after a deploy),
 * for the ids given, so a user can try their credentials before deploying. The table is kept
 * between runs; the connection's credentials are added again at every run.
 */
import { join } from 'node:path';
import { DEFAULT_CONNECTION } from '../../functions/shared/connections/connection.js';
import type { Credentials } from '../../functions/shared/ports.js';
import { rowKey, type ItemRow } from '../fakes/items-table.js';
import { itemObjectOf } from '../fakes/s3.js';
import { refresh, runStory, writeSnapshot, type LocalRun } from './local-run.js';
import { addConnection } from './operator.js';
import { deadLetterReasons, formatPassTable, printPass, readRows, syncPass, type PassSummary } from './passes.js';
import { display, type Screen, type Writer } from './screen.js';

export interface ProviderRunOptions {
  baseUrl: string;
  credentials: Credentials;
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

type StoredRow = { id: string; revision?: string; type?: string; deleted?: boolean };

export interface ProviderRunResult {
  ok: boolean;
  problems: string[];
  pass?: PassSummary;
  rows: StoredRow[];
  logFile: string;
  snapshotFile: string;
  dynamodbStorage: 'disk' | 'memory';
  rotated: boolean;
}

export async function runAgainstProvider(options: ProviderRunOptions): Promise<ProviderRunResult> {
  const found: { pass?: PassSummary; rows: StoredRow[]; rotated: boolean } = { rows: [], rotated: false };
  const outcome = await runStory({
    dataDir: options.dataDir ?? join(process.cwd(), '.local', 'provider'),
    inMemory: options.inMemory,
    fresh: false,
    revisionField: options.revisionField,
    // Longer than one invocation can take against a real provider, so a record is never delivered twice at once.
    visibilityTimeoutSeconds: 30,
    output: options.output,
    quiet: options.quiet,
    provider: async () => ({ baseUrl: options.baseUrl, close: async () => undefined }),
    header: (run) => printProviderHeader(run, options),
    play: (run) => playAgainstProvider(run, options, found),
  });
  return { ok: outcome.problems.length === 0, ...outcome, ...(found.pass ? { pass: found.pass } : {}), rows: found.rows, rotated: found.rotated };
}

function printProviderHeader(run: LocalRun, options: ProviderRunOptions): void {
  const { screen, system } = run;
  const storage = system.storage.dynamodbStorage === 'disk' ? `data kept in ${display(join(run.dataDir, 'dynamodb'))}` : 'in memory';
  screen.line(`content-sync, local run against ${options.baseUrl}`);
  screen.line(`   revision field         ${options.revisionField}`);
  screen.line(`   DynamoDB Local         items table ${system.names.itemsTable}, connections table ${system.names.connectionsTable}, ${storage}`);
  screen.line(`   S3 (s3rver)            items bucket ${system.names.itemsBucket}`);
  screen.line(`   handler logs           ${display(run.logFile)}`);
  screen.line();
}

async function playAgainstProvider(
  run: LocalRun,
  options: ProviderRunOptions,
  found: { pass?: PassSummary; rows: StoredRow[]; rotated: boolean },
): Promise<void> {
  const { screen, problems } = run;
  screen.line(`1. Add your credentials as the connection "${DEFAULT_CONNECTION}", as an operator does after a deploy`);
  await addConnection(run, DEFAULT_CONNECTION, options.credentials.clientId, options.credentials.refreshToken);
  screen.line('2. Refresh the access token (token refresher)');
  const report = await refresh(run);
  const record = await run.system.connections.get(DEFAULT_CONNECTION, { consistent: true });
  if (report.refreshed === 0 && report.refused === 0 && report.failed === 0 && record?.accessToken !== undefined) {
    screen.line('   its access token (from the last run) is not due yet: the credentials put again changed nothing');
  } else if (report.refreshed !== 1) {
    throw new Error(`the token refresher got no access token: ${record?.health.lastFailureReason ?? `${report.refused} refused, ${report.failed} failed`}`);
  }
  found.rotated = record !== undefined && record.refreshToken !== options.credentials.refreshToken;
  if (found.rotated) await handBackRotatedToken(run, options, record!.refreshToken);

  screen.line(`3. Sync ${new Set(options.ids).size} id${options.ids.length === 1 ? '' : 's'}`);
  const pass = await syncPass(run, 'sync', [{ connection: DEFAULT_CONNECTION, ids: options.ids }], { timeLimitMs: options.timeLimitMs ?? 600_000 });
  found.pass = pass;
  printPass(screen, pass);

  // The change-events function has read what the pass wrote (its counters in the connection's row).
  await run.changeEvents.readThrough();
  problems.push(...run.changeEvents.problems());
  const rows = await readRows(run);
  writeSnapshot(run.snapshotFile, rows);
  screen.line();
  for (const line of formatPassTable([pass], run.system.config.discovery !== undefined)) screen.line(line);
  screen.line();
  found.rows.push(...printStoredRows(screen, rows, options.ids));
  const dead = deadLetterReasons(run, 20);
  if (dead.length > 0) {
    screen.line('Dead-lettered (these can never succeed as sent):');
    for (const reason of dead) screen.line(`   ${reason}`);
    problems.push(`${pass.deadLettered} id(s) dead-lettered`);
  }
  for (const error of run.invocationErrors.slice(0, 5)) problems.push(`an invocation of the sync handler failed: ${error}`);
  if (!pass.drained) problems.push(`${pass.remaining} messages were still being retried at the time limit`);
  screen.line(`Table snapshot: ${display(run.snapshotFile)}   Handler logs: ${display(run.logFile)}`);
  if (problems.length > 0) {
    screen.line('FAILED:');
    for (const problem of problems) screen.line(`   - ${problem}`);
  }
}

/** The provider rotated the refresh token: the refresher stored the new one in the connections table; the caller keeps it too. */
async function handBackRotatedToken(run: LocalRun, options: ProviderRunOptions, refreshToken: string): Promise<void> {
  const note = await options.onRefreshTokenRotated?.(refreshToken);
  if (note) run.screen.line(`   ${note}`);
}

/** The stored row of each id given, printed; the rows found. */
function printStoredRows(screen: Screen, rows: ReadonlyMap<string, ItemRow>, ids: readonly string[]): StoredRow[] {
  const found: StoredRow[] = [];
  screen.line('Stored rows for these ids:');
  for (const id of new Set(ids)) {
    const row = rows.get(rowKey(DEFAULT_CONNECTION, id));
    if (!row) {
      screen.line(`   ${JSON.stringify(id)}: no row`);
      continue;
    }
    found.push({ id, ...(row.revision !== undefined ? { revision: row.revision } : {}), ...(row.type !== undefined ? { type: row.type } : {}), ...(row.deleted ? { deleted: true } : {}) });
    const pointer = itemObjectOf(row);
    const where = pointer ? `, in the items bucket (${pointer.size} bytes, ${pointer.key})` : '';
    screen.line(`   ${JSON.stringify(id)}: ${row.type ?? '?'}, revision ${row.revision ?? '?'}${where}${row.deleted ? ', deleted at the provider' : ''}, synced ${row.syncedAt ?? '?'}`);
  }
  return found;
}

