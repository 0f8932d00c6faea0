/**
 * The connections CLI's commands: add, list, pause, resume, remove [--purge], mend-changes, seal,
 * import-items.
 * Each connection operation is the connections' core (functions/shared/connections/operations.ts,
 * which the client API calls too); a purge runs the erase (erase.ts) here, in the foreground. Each
 * writes what it did on standard output, progress and questions on standard error, and throws a
 * CliFailure (exit 1) or UsageError (exit 2) with a sentence that says what is wrong. Nothing
 * printed ever holds a token: a connection is printed as its view (view.ts), which holds none.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { Cursor } from '../../functions/reconciler/ports.js';
import { DEFAULTS } from '../../functions/shared/config.js';
import { clientIdProblem, refreshTokenProblem } from '../../functions/shared/connections/connection.js';
import { DynamoDbItemRows } from '../../functions/client-api/adapters/dynamodb-item-rows.js';
import { CHANGES_WRITER_STALE_AFTER_MS } from '../../functions/changes-writer/limits.js';
import { DynamoDbChangesLog } from '../../functions/shared/adapters/dynamodb-changes-log.js';
import { DynamoDbChangesWriter } from '../../functions/shared/adapters/dynamodb-changes-writer.js';
import { mendFeed, MEND_SETTLED_AFTER_MS } from '../../functions/shared/changes/mend.js';
import { ChangeSequencer } from '../../functions/shared/changes/sequencer.js';
import { eraseSettleSeconds, runErase, type ItemsEraser } from '../../functions/shared/connections/erase.js';
import { ConnectionOperations, type OperationsPorts, type Outcome } from '../../functions/shared/connections/operations.js';
import type { ConnectionStore } from '../../functions/shared/connections/ports.js';
import { connectionView, type ConnectionView } from '../../functions/shared/connections/view.js';
import type { Clock } from '../../functions/shared/ports.js';
import { NUMBER_RULES, syncTimeoutSeconds } from '../../infra/context.js';
import { readAll, readHidden, readLine, type InputStream } from './input.js';
import { importItems } from './items.js';

/**
 * A purge's safety wait (erase.ts `eraseSettleSeconds`) at the default syncBatchSize's sync
 * time-out: 150 s. A deployment with a longer sync time-out (syncBatchSize over 100) erases through
 * the client API, whose wait is the deployed one, or runs `remove` first and `remove --purge` once
 * that long has passed (docs/connections.md): the wait counts from the removal.
 */
export const PURGE_SETTLE_SECONDS = eraseSettleSeconds(syncTimeoutSeconds(NUMBER_RULES.syncBatchSize.fallback), DEFAULTS.tokenCacheSeconds);

export interface CliIo {
  stdin: InputStream;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
}

/** A mistake in how the CLI was called: exit 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** The command could not do what was asked: exit 1. */
export class CliFailure extends Error {
  override readonly name = 'CliFailure';
}

export interface CommandContext {
  io: CliIo;
  store: () => ConnectionStore;
  dynamodb: () => DynamoDBClient;
  /** The items table and bucket, and the changes table, of a purge. */
  items: (targets: PurgeTargets) => ItemsEraser;
  clock: Clock;
  sleep: (ms: number) => Promise<void>;
  /**
   * The reconciler's cursor (the control table's `reconcile-cursor` row), for each connection's
   * last pass; a string says why it cannot be read (the control table is not known).
   */
  reconcileCursor: (() => Promise<Cursor | undefined>) | string;
}

const out = (context: CommandContext, line: string): void => void context.io.stdout.write(`${line}\n`);
const err = (context: CommandContext, line: string): void => void context.io.stderr.write(`${line}\n`);

/** The core over this context's store, with the ports a command needs beyond it (views carry the last pass only with `cursor`). */
function operations(context: CommandContext, ports: Pick<OperationsPorts, 'cursor' | 'feed'> = {}): ConnectionOperations {
  return new ConnectionOperations(
    { store: context.store(), clock: context.clock, ...ports },
    { freshnessHours: DEFAULTS.freshnessHours, eraseSettleSeconds: PURGE_SETTLE_SECONDS },
  );
}

/** The value of a done outcome; a refusal as the CLI's failure (a bad input is a usage mistake). */
function settled<T>(outcome: Outcome<T>, connection: string): T {
  if (outcome.ok) return outcome.value;
  if (outcome.code === 'not-found') {
    // Not found because its erase was asked for: the core's sentence says so, and where to look.
    if (outcome.message.includes('is being erased')) throw new CliFailure(`${outcome.message.replace(/\(GET \/connections\/[^)]*\)/, '(npm run connections -- list shows how far)')}`);
    throw new CliFailure(`unknown connection "${connection}": npm run connections -- list shows the connections`);
  }
  if (outcome.code === 'bad-request') throw new UsageError(outcome.message);
  throw new CliFailure(outcome.message.replace(/put it again/g, 'add it again'));
}

export async function addConnection(context: CommandContext, connection: string, clientId: string): Promise<void> {
  const clientProblem = clientIdProblem(clientId);
  if (clientProblem !== undefined) throw new UsageError(`--client-id: ${clientProblem}`);
  const { stdin } = context.io;
  const raw =
    stdin.isTTY && typeof stdin.setRawMode === 'function'
      ? await readHidden(stdin as InputStream & { setRawMode: (mode: boolean) => unknown }, context.io.stderr, `Refresh token of connection "${connection}" (not shown): `)
      : await readAll(stdin);
  const refreshToken = raw.trim();
  if (refreshToken === '') throw new UsageError('no refresh token on standard input: pipe it in, e.g. printf \'%s\' "$REFRESH_TOKEN" | npm run connections -- add <id> --client-id <client id>');
  const tokenProblem = refreshTokenProblem(refreshToken);
  if (tokenProblem !== undefined) throw new UsageError(`${tokenProblem} (it is not shown)`);
  const { result } = settled(await operations(context).put(connection, { clientId, refreshToken }), connection);
  if (result === 'created') {
    out(context, `connection "${connection}" added (client id "${clientId}"): active; its first access token is fetched at its first use or by the token refresher's next run`);
  } else if (result === 'replaced') {
    out(context, `connection "${connection}": credentials replaced (client id "${clientId}"); active, refresh health reset`);
  } else {
    out(context, `connection "${connection}" already holds these credentials (client id "${clientId}") and is active: nothing changed`);
  }
}

export async function listConnections(context: CommandContext, json: boolean): Promise<void> {
  const listings = [];
  for await (const listing of context.store().list()) listings.push(listing);
  listings.sort((a, b) => (a.connection < b.connection ? -1 : a.connection > b.connection ? 1 : 0));
  const cursor = listings.length === 0 ? undefined : await readCursor(context);
  const now = context.clock.now().getTime();
  const views = listings.map((listing) => connectionView(listing, { cursor, freshnessHours: DEFAULTS.freshnessHours, now }));
  if (json) {
    out(context, JSON.stringify(views, null, 2));
    return;
  }
  if (views.length === 0) {
    err(context, 'no connections: add one with npm run connections -- add <id> --client-id <client id>');
    return;
  }
  const header = ['CONNECTION', 'STATUS', 'LAST SUCCESS', 'LAST FAILURE', 'FAILURES', 'IDS KNOWN', 'LAST WRITE', 'LAST PASS'];
  const rows = views.map((v: ConnectionView) => [
    v.connection,
    v.erase ? `${v.status} (erase ${v.erase.state})` : v.status,
    v.refresh.lastSuccessAt ?? '-',
    v.refresh.lastFailureAt === undefined ? '-' : `${v.refresh.lastFailureAt} ${shorten(v.refresh.lastFailureReason ?? '', 70)}`.trim(),
    String(v.refresh.consecutiveFailures),
    v.idsKnown === undefined ? '-' : String(v.idsKnown),
    v.lastWriteAt ?? '-',
    v.lastPassAt ?? '-',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  for (const row of [header, ...rows]) out(context, row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  '));
}

/**
 * The reconciler's cursor, or undefined (with a line on standard error) when it cannot be read:
 * the last passes are then not shown, and the rest of the list is.
 */
async function readCursor(context: CommandContext): Promise<Cursor | undefined> {
  const { reconcileCursor } = context;
  if (typeof reconcileCursor === 'string') {
    err(context, `last reconciliation passes not shown: ${reconcileCursor}`);
    return undefined;
  }
  try {
    return await reconcileCursor();
  } catch (error) {
    const e = error as Error;
    err(context, `last reconciliation passes not shown: reading the control table failed: ${e.name}: ${e.message}`);
    return undefined;
  }
}

function shorten(text: string, length: number): string {
  return text.length <= length ? text : `${text.slice(0, length - 1)}…`;
}

export async function pauseConnection(context: CommandContext, connection: string): Promise<void> {
  const outcome = await operations(context).pause(connection);
  settled(outcome, connection);
  out(context, outcome.ok && !outcome.changed ? `connection "${connection}" is already paused` : `connection "${connection}" paused: its messages wait (nothing is lost) until it is resumed`);
}

export async function resumeConnection(context: CommandContext, connection: string): Promise<void> {
  const outcome = await operations(context).resume(connection);
  if (!outcome.ok && outcome.code === 'conflict' && outcome.message.includes('is failing')) {
    const view = settled(await operations(context).get(connection), connection);
    throw new CliFailure(
      `${outcome.message.replace(/: put it again with new credentials$/, '')}; add it again with new credentials: ` +
        `printf '%s' "$REFRESH_TOKEN" | npm run connections -- add ${connection} --client-id ${view.clientId}`,
    );
  }
  settled(outcome, connection);
  out(context, outcome.ok && !outcome.changed ? `connection "${connection}" is already active` : `connection "${connection}" resumed: active`);
}

export interface PurgeTargets {
  itemsTable: string;
  itemsBucket: string;
  changesTable: string;
  connectionsTable: string;
}

export async function removeConnection(context: CommandContext, connection: string, options: { purge?: PurgeTargets; yes: boolean }): Promise<void> {
  const store = context.store();
  const before = await store.view(connection, { consistent: true });
  if (!before) throw new CliFailure(`unknown connection "${connection}": npm run connections -- list shows the connections`);
  const { purge } = options;
  if (purge && !options.yes) {
    context.io.stderr.write(
      `This deletes every row of connection "${connection}" in the items table ${purge.itemsTable}, its objects under items/${connection}/ ` +
        `in the items bucket ${purge.itemsBucket}, its changes in ${purge.changesTable}, and its row in ${purge.connectionsTable}. It cannot be undone.\n` +
        `Type the connection id to confirm: `,
    );
    const answer = (await readLine(context.io.stdin)).trim();
    if (answer !== connection) throw new CliFailure(`not confirmed (the answer was not "${connection}"): nothing was changed`);
  }
  const core = operations(context);
  const removed = await core.remove(connection);
  settled(removed, connection);
  out(
    context,
    removed.ok && !removed.changed
      ? `connection "${connection}" was already removed`
      : `connection "${connection}" removed: its messages are dead-lettered from now on; its tokens are deleted (add it again with a refresh token to use it)`,
  );
  if (!purge) return;

  const erase = settled(await core.erase(connection), connection).erase;
  if (!erase) throw new CliFailure(`connection "${connection}": its erase was not recorded`);
  const request = { connection, startedAt: erase.startedAt };
  const progress = (what: string) => (deleted: number): void => err(context, `${connection}: deleted ${deleted} ${what}`);
  const items = context.items(purge);
  const counting: ItemsEraser = {
    deleteRows: (c, step) => items.deleteRows(c, { ...step, onProgress: async (n) => (progress('rows')(n), step.onProgress?.(n)) }),
    deleteKeys: async (keys) => {
      const deleted = await items.deleteKeys(keys);
      err(context, `${connection}: deleted ${deleted} objects its rows name`);
      return deleted;
    },
    deleteObjects: (c, step) => items.deleteObjects(c, { ...step, onProgress: async (n) => (progress('objects')(n), step.onProgress?.(n)) }),
    deleteChanges: (c, step) => items.deleteChanges(c, { ...step, onProgress: async (n) => (progress('changes')(n), step.onProgress?.(n)) }),
  };
  // The time this command has waited counts as passed (a clock that stands still in a test, too).
  let waitedMs = 0;
  const clock = { now: () => new Date(context.clock.now().getTime() + waitedMs) };
  for (;;) {
    const run = await runErase({ store, items: counting, clock }, request, () => false);
    if (run.kind === 'wait') {
      err(context, `waiting ${run.seconds} s, until no item sync container still uses the connection...`);
      await context.sleep(run.seconds * 1000);
      waitedMs += run.seconds * 1000;
      continue;
    }
    if (run.kind === 'stale') {
      throw new CliFailure(
        run.deleted
          ? `${run.reason}. Rows and objects written for it since then may have been deleted too: send its items again (npm run enqueue with --connection ${connection}) to restore them`
          : `${run.reason}; nothing was deleted`,
      );
    }
    if (run.kind === 'done') {
      out(context, `connection "${connection}" purged: ${run.rowsDeleted} rows deleted from ${purge.itemsTable}, ${run.objectsDeleted} objects from ${purge.itemsBucket}, its changes from ${purge.changesTable}, and its row from ${purge.connectionsTable}`);
      return;
    }
  }
}

export interface MendTargets {
  itemsTable: string;
  changesTable: string;
  /** `changesRetentionDays`, when the feed keeps no change that says it. */
  retentionDays: number;
}

/**
 * Appends to a paused (or failing) connection's feed the changes it lacks: the core's mendChanges
 * over the items table and the changes table, numbered by the changes writer's sequencer.
 */
export async function mendChanges(context: CommandContext, connection: string, targets: MendTargets): Promise<void> {
  const dynamodb = context.dynamodb();
  const now = (): number => context.clock.now().getTime();
  const sequencer = (retentionDays: number): ChangeSequencer =>
    new ChangeSequencer({
      writer: new DynamoDbChangesWriter(dynamodb, { tableName: targets.changesTable, retentionDays }),
      now,
      sleep: context.sleep,
      random: Math.random,
      staleAfterMs: CHANGES_WRITER_STALE_AFTER_MS,
    });
  const rows = new DynamoDbItemRows(dynamodb, targets.itemsTable);
  const log = new DynamoDbChangesLog(dynamodb, targets.changesTable);
  const store = context.store();
  const core = operations(context, { feed: { mend: (c) => mendFeed(c, { rows, log, sequencer, now, mayStart: async () => !(await store.view(c, { consistent: true }))?.erase }, targets) } });
  err(context, `${connection}: comparing its rows in ${targets.itemsTable} with its feed in ${targets.changesTable}...`);
  const result = settled(await core.mendChanges(connection), connection);
  const kinds = Object.entries(result.missing).filter(([, count]) => count > 0).map(([kind, count]) => `${count} ${kind}`);
  out(
    context,
    `connection "${connection}": ${result.rows} rows read, ${result.compared} compared with their last change; ` +
      `${result.appended} changes appended${kinds.length > 0 ? ` (${kinds.join(', ')})` : ''}, head ${result.head}` +
      (result.already > 0 ? `; ${result.already} found appended already` : '') +
      (result.writtenSince > 0 ? `; ${result.writtenSince} rows written meanwhile, left to the changes writer` : '') +
      (result.refused > 0 ? `; ${result.refused} not appended: its erase was asked for` : '') +
      `. Not compared: ${result.recent} rows written in the last ${MEND_SETTLED_AFTER_MS / 3_600_000} hours (their records may still come), ` +
      `${result.beyondRetention} written before the feed's retention (their changes may have expired). If you paused it for this: npm run connections -- resume ${connection}`,
  );
}

/** Seals every token still stored in clear (rows written before tokens were sealed): docs/connections.md, "Sealed tokens". */
export async function sealConnections(context: CommandContext): Promise<void> {
  const store = context.store();
  let rows = 0;
  let sealed = 0;
  for await (const listing of store.list()) {
    rows += 1;
    sealed += await store.sealClearTokens(listing.connection);
  }
  out(context, `${sealed} tokens sealed in ${rows} connections' rows; every token in the table is sealed now`);
}

export async function importOldItems(context: CommandContext, fromTable: string, itemsTable: string): Promise<void> {
  const report = await importItems({ dynamodb: context.dynamodb(), sleep: context.sleep, onProgress: (line) => err(context, line) }, fromTable, itemsTable);
  const { refused, failed } = report;
  out(
    context,
    `imported ${fromTable} into ${itemsTable} as connection "default": ${report.read} rows read, ${report.copied} copied, ` +
      `${report.kept} kept (already written by this deployment), ${report.skipped} skipped (no string id), ` +
      `${refused.length} refused (not an item id), ${failed.length} failed`,
  );
  for (const row of refused.slice(0, LISTED_ROWS)) err(context, `refused: ${shownId(row.id)}: ${row.reason}`);
  for (const row of failed.slice(0, LISTED_ROWS)) err(context, `not copied: ${shownId(row.id)}: ${row.reason}`);
  const problems = [
    ...(failed.length > 0 ? [`${failed.length} rows were not copied; running the import again copies them (rows already copied are kept)`] : []),
    ...(refused.length > 0
      ? [
          `${refused.length} rows were refused because their ids break the item id rule ` +
            `(listed above with the reason${refused.length > LISTED_ROWS ? `, the first ${LISTED_ROWS}` : ''}): ` +
            'the items table cannot hold them, and running the import again does not copy them',
        ]
      : []),
  ];
  if (problems.length > 0) throw new CliFailure(problems.join('. '));
}

/** Rows of each kind an import lists by id (standard error); the counts cover the rest. */
const LISTED_ROWS = 10;

/**
 * An item id as a report prints it: JSON-quoted (control characters escaped); past 40 characters,
 * its first 40 and its length in bytes. A row's other values are never printed.
 */
function shownId(id: string): string {
  const characters = Array.from(id);
  if (characters.length <= 40) return JSON.stringify(id);
  return `${JSON.stringify(characters.slice(0, 40).join(''))}… (${Buffer.byteLength(id, 'utf8')} bytes)`;
}
