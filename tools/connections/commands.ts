/**
 * The connections CLI's commands, over the ConnectionStore port (the connections table) and the
 * items table and bucket (items.ts): add, list, pause, resume, remove [--purge], import-items. Each
 * writes what it did on standard output, progress and questions on standard error, and throws a
 * CliFailure (exit 1) or UsageError (exit 2) with a sentence that says what is wrong. Nothing
 * printed ever holds a token: a record is printed field by field, tokens never among them.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { S3Client } from '@aws-sdk/client-s3';
import { clientIdProblem, refreshTokenProblem, type ConnectionRecord } from '../../functions/shared/connections/connection.js';
import type { ConnectionStore } from '../../functions/shared/connections/ports.js';
import type { Clock } from '../../functions/shared/ports.js';
import { DEFAULTS } from '../../functions/shared/config.js';
import { NUMBER_RULES, syncTimeoutSeconds } from '../../infra/context.js';
import { readAll, readHidden, readLine, type InputStream } from './input.js';
import { deleteConnectionObjects, deleteConnectionRows, importItems } from './items.js';
import { lastPassOf, type LastPass } from './last-pass.js';
import type { Cursor } from '../../functions/reconciler/ports.js';

/** Kept beyond the cache and one sync invocation: clocks, the invocation's own writes at its end. */
const PURGE_MARGIN_SECONDS = 30;

/**
 * A purge waits until this long after the removal: an item sync container that read the connection
 * just before it was removed may use it for ACCESS_TOKEN_CACHE_SECONDS (default 60) more, and an
 * invocation that began within that time writes until the sync's time-out (60 s at the default
 * syncBatchSize: infra/context.ts), plus a margin: 150 s. A deployment with a longer sync time-out
 * (syncBatchSize over 100) runs `remove` first and `remove --purge` once that long has passed
 * (docs/connections.md): the wait counts from the removal.
 */
export const PURGE_SETTLE_SECONDS = Math.max(
  90,
  DEFAULTS.tokenCacheSeconds + syncTimeoutSeconds(NUMBER_RULES.syncBatchSize.fallback) + PURGE_MARGIN_SECONDS,
);

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
  s3: () => S3Client;
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
  const result = await context.store().putCredentials({ connection, clientId, refreshToken, at: context.clock.now().toISOString() });
  if (result === 'created') {
    out(context, `connection "${connection}" added (client id "${clientId}"): active; its first access token is fetched at its first use or by the token refresher's next run`);
  } else {
    out(context, `connection "${connection}": credentials replaced (client id "${clientId}"); active, refresh health reset`);
  }
}

/** What `list --json` prints of a connection: everything but its tokens. */
export function publicView(record: ConnectionRecord, lastPass?: LastPass): Record<string, unknown> {
  return {
    connection: record.connection,
    clientId: record.clientId,
    status: record.status,
    health: {
      consecutiveFailures: record.health.consecutiveFailures,
      ...(record.health.lastSuccessAt !== undefined ? { lastSuccessAt: record.health.lastSuccessAt } : {}),
      ...(record.health.lastFailureAt !== undefined ? { lastFailureAt: record.health.lastFailureAt } : {}),
      ...(record.health.lastFailureReason !== undefined ? { lastFailureReason: record.health.lastFailureReason } : {}),
    },
    ...(record.refreshedAt !== undefined ? { refreshedAt: record.refreshedAt } : {}),
    ...(record.lastUsedAt !== undefined ? { lastUsedAt: record.lastUsedAt } : {}),
    ...(record.idsKnown !== undefined ? { idsKnown: record.idsKnown } : {}),
    ...(record.lastWriteAt !== undefined ? { lastWriteAt: record.lastWriteAt } : {}),
    ...(lastPass !== undefined ? { lastPass } : {}),
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
  };
}

export async function listConnections(context: CommandContext, json: boolean): Promise<void> {
  const records: ConnectionRecord[] = [];
  for await (const record of context.store().list()) records.push(record);
  records.sort((a, b) => (a.connection < b.connection ? -1 : a.connection > b.connection ? 1 : 0));
  const cursor = records.length === 0 ? undefined : await readCursor(context);
  const lastPass = (record: ConnectionRecord): LastPass | undefined => lastPassOf(record.createdAt, cursor);
  if (json) {
    out(context, JSON.stringify(records.map((record) => publicView(record, lastPass(record))), null, 2));
    return;
  }
  if (records.length === 0) {
    err(context, 'no connections: add one with npm run connections -- add <id> --client-id <client id>');
    return;
  }
  const header = ['CONNECTION', 'STATUS', 'LAST SUCCESS', 'LAST FAILURE', 'FAILURES', 'IDS KNOWN', 'LAST WRITE', 'LAST PASS'];
  const rows = records.map((r) => [
    r.connection,
    r.status,
    r.health.lastSuccessAt ?? '-',
    r.health.lastFailureAt === undefined ? '-' : `${r.health.lastFailureAt} ${shorten(r.health.lastFailureReason ?? '', 70)}`.trim(),
    String(r.health.consecutiveFailures),
    r.idsKnown === undefined ? '-' : String(r.idsKnown),
    r.lastWriteAt ?? '-',
    lastPass(r)?.endedAt ?? '-',
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
  const result = await context.store().setStatus(connection, 'paused', ['active', 'failing'], context.clock.now().toISOString());
  if (result === 'written') return out(context, `connection "${connection}" paused: its messages wait (nothing is lost) until it is resumed`);
  const record = await known(context, connection, result);
  if (record.status === 'paused') return out(context, `connection "${connection}" is already paused`);
  throw new CliFailure(`connection "${connection}" was removed: it cannot be paused; add it again to use it`);
}

export async function resumeConnection(context: CommandContext, connection: string): Promise<void> {
  const result = await context.store().setStatus(connection, 'active', ['paused'], context.clock.now().toISOString());
  if (result === 'written') return out(context, `connection "${connection}" resumed: active`);
  const record = await known(context, connection, result);
  switch (record.status) {
    case 'active':
      return out(context, `connection "${connection}" is already active`);
    case 'failing':
      throw new CliFailure(
        `connection "${connection}" is failing, not paused: the provider refused its refresh token (${record.health.lastFailureReason ?? 'no reason recorded'}). ` +
          `resume does not apply; add it again with new credentials: printf '%s' "$REFRESH_TOKEN" | npm run connections -- add ${connection} --client-id ${record.clientId}`,
      );
    default:
      throw new CliFailure(`connection "${connection}" was removed: it cannot be resumed; add it again with a refresh token to use it`);
  }
}

/** The connection's row after a setStatus that did not write; a CliFailure when there is none. */
async function known(context: CommandContext, connection: string, result: 'missing' | 'conflict'): Promise<ConnectionRecord> {
  const record = result === 'missing' ? undefined : await context.store().get(connection, { consistent: true });
  if (!record) throw new CliFailure(`unknown connection "${connection}": npm run connections -- list shows the connections`);
  return record;
}

export interface PurgeTargets {
  itemsTable: string;
  itemsBucket: string;
  connectionsTable: string;
}

export async function removeConnection(context: CommandContext, connection: string, options: { purge?: PurgeTargets; yes: boolean }): Promise<void> {
  const store = context.store();
  const before = await store.get(connection, { consistent: true });
  if (!before) throw new CliFailure(`unknown connection "${connection}": npm run connections -- list shows the connections`);
  const { purge } = options;
  if (purge && !options.yes) {
    context.io.stderr.write(
      `This deletes every row of connection "${connection}" in the items table ${purge.itemsTable}, its objects under items/${connection}/ ` +
        `in the items bucket ${purge.itemsBucket}, and its row in ${purge.connectionsTable}. It cannot be undone.\n` +
        `Type the connection id to confirm: `,
    );
    const answer = (await readLine(context.io.stdin)).trim();
    if (answer !== connection) throw new CliFailure(`not confirmed (the answer was not "${connection}"): nothing was changed`);
  }
  let removedAt: number;
  if (before.status === 'removed') {
    removedAt = Date.parse(before.updatedAt) || 0;
    out(context, `connection "${connection}" was already removed`);
  } else {
    const now = context.clock.now();
    const result = await store.setStatus(connection, 'removed', ['active', 'paused', 'failing'], now.toISOString());
    if (result === 'missing') throw new CliFailure(`unknown connection "${connection}" (deleted meanwhile)`);
    removedAt = now.getTime();
    out(context, `connection "${connection}" removed: its messages are dead-lettered from now on; its tokens are deleted (add it again with a refresh token to use it)`);
  }
  if (!purge) return;

  const settleMs = removedAt + PURGE_SETTLE_SECONDS * 1000 - context.clock.now().getTime();
  if (settleMs > 0) {
    err(context, `waiting ${Math.ceil(settleMs / 1000)} s, until no item sync container still uses the connection...`);
    await context.sleep(settleMs);
  }
  const progress = (line: string): void => err(context, `${connection}: ${line}`);
  // Twice: a row or an object written while the first sweep ran (behind its Query or its listing) is caught by the second.
  let rowsDeleted = 0;
  let objectsDeleted = 0;
  for (const sweep of [1, 2]) {
    if (sweep === 2) err(context, `${connection}: sweeping again, for anything written during the first sweep`);
    const rows = await deleteConnectionRows({ dynamodb: context.dynamodb(), sleep: context.sleep, onProgress: progress }, purge.itemsTable, connection);
    rowsDeleted += rows.deleted;
    objectsDeleted += await deleteConnectionObjects({ s3: context.s3(), onProgress: progress }, purge.itemsBucket, connection, rows.objectKeys);
  }
  const deleted = `${rowsDeleted} rows deleted from ${purge.itemsTable}, ${objectsDeleted} objects from ${purge.itemsBucket}`;
  // Only while it is still removed: an `add` during the purge keeps its row and its new credentials.
  if ((await store.delete(connection)) === 'conflict') {
    out(context, `connection "${connection}": ${deleted}`);
    throw new CliFailure(
      `connection "${connection}" was re-added during the purge: its row is kept (with its new credentials). ` +
        `Rows and objects written for it since then may have been deleted too: send its items again (npm run enqueue with --connection ${connection}) to restore them`,
    );
  }
  out(context, `connection "${connection}" purged: ${deleted}, and its row from ${purge.connectionsTable}`);
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
