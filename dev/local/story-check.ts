/**
 * What the local story found, and its last step: what the provider saw of each pass, the rows that
 * point to the items bucket, and the table against the provider connection by connection (each
 * connection's rows against its own account's items; an id two accounts hold kept apart), the
 * bucket against the rows, the summary and the verdict.
 */
import { DynamoDbPaceStore } from '../../functions/shared/adapters/dynamodb-pace-store.js';
import { paceKeyOf } from '../../functions/shared/connections/connection.js';
import type { ProviderSimulator } from '../simulator/provider-simulator.js';
import { accountItems, CONNECTIONS } from './accounts.js';
import { writeSnapshot, type LocalRun } from './local-run.js';
import { listConnections, listedConnections } from './operator.js';
import { deadLetterReasons, formatPassTable, readRows, type PassSummary } from './passes.js';
import { reconcilerLine, type ReconcilerRun } from './reconciliation.js';
import type { RevocationRun } from './revocation.js';
import { display } from './screen.js';
import { checkBucket, compareWithProvider, readObjects, sharedIds, type AccountHoldings } from './table-check.js';

/** The provider's side of a pass: item requests (every account's), how many it refused with 429, how fast they came. */
export interface ProviderLoad {
  name: string;
  requests: number;
  rateLimited: number;
  seconds: number;
}

/** One connection at the end: its account's items at the provider, its rows, its tombstones. */
export interface ConnectionCheck {
  connection: string;
  providerItems: number;
  rows: number;
  deleted: number;
}

/** What the story found, filled in as it goes (a failed step leaves the rest as it was). */
export interface StoryFindings {
  passes: PassSummary[];
  /** Items at the provider at the end (every account's), and rows in the table (every connection's). */
  providerItems: number;
  tableRows: number;
  /** What the provider saw in each pass (the simulator's own record). */
  providerLoad: ProviderLoad[];
  /** Each connection at the end. */
  connections: ConnectionCheck[];
  /** Ids two or more accounts hold with different contents, and how many of them every connection's row keeps apart. */
  shared?: { shared: number; distinct: number };
  /** The reconciler's pass, once it ran. */
  reconciler?: ReconcilerRun;
  /** The revocation and the recovery, once they ran. */
  revocation?: RevocationRun;
  /**
   * The first sync, each account from its root alone: ids sent (1), rows created, how many of them
   * discovery found, and whether every item of the account was then mirrored.
   */
  discovery?: Array<{ connection: string; root: string; sent: number; mirrored: number; found: number; checked: boolean }>;
  /** The file added deep in default's tree while nobody sends ids: its folder, how deep, and whether the reconciler's pass found it. */
  newFile?: { id: string; folder: string; depth: number; found: boolean };
}

/** Runs a pass and records what the provider saw of it. */
export async function measured<T>(simulator: ProviderSimulator, findings: StoryFindings, name: string, pass: () => Promise<T>): Promise<T> {
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

/** The rows that point to the items bucket must be exactly these default ids' (the story's large items). */
export async function expectInBucket(run: LocalRun, expected: readonly string[], pass: string): Promise<void> {
  const rows = await readRows(run);
  const inBucket = [...rows.values()].filter((row) => row.itemObject !== undefined).map((row) => `${row.connection}/${row.id}`);
  const wanted = expected.map((id) => `default/${id}`);
  if (JSON.stringify([...inBucket].sort()) !== JSON.stringify([...wanted].sort())) {
    run.problems.push(`${pass}: expected the rows of ${wanted.join(', ') || 'no item'} to point to the items bucket, found ${inBucket.join(', ') || 'none'}`);
  } else if (expected.length > 0) {
    run.screen.line(`   default's ${expected.join(', ')}: over DynamoDB's 400 KB row limit, stored whole in the items bucket (its row holds itemObject)`);
  }
}

/** One connection's rows against its account's items now, tombstones aside: the differences (empty when every item is mirrored). */
export async function compareConnection(run: LocalRun, simulator: ProviderSimulator, connection: string, revisionField: string): Promise<string[]> {
  const rows = new Map([...(await readRows(run))].filter(([, row]) => row.connection === connection && row.deleted !== true));
  const objects = await readObjects(run, rows);
  return compareWithProvider(rows, objects, [{ connection, items: accountItems(simulator, connection), deletedIds: [] }], revisionField);
}

/** The pace the run found (its control-table row: one pace for the client id every account shares), and what the provider saw of each pass. */
async function paceLines(run: LocalRun, simulator: ProviderSimulator, load: readonly ProviderLoad[], limit: { limit: number; burst: number }): Promise<string[]> {
  const paceKey = paceKeyOf(run.system.config.paceScope, { connection: 'default', clientId: simulator.clientId });
  const stored = await new DynamoDbPaceStore(run.clients.dynamodb, run.system.names.controlTable, paceKey).read();
  const state = stored?.state as { rate?: number; ceiling?: number } | undefined;
  const found = state?.ceiling ?? state?.rate;
  const lines = [
    `Provider pace (${paceKey}): ${state?.rate?.toFixed(1) ?? '?'} requests/s now; ${found === undefined ? 'no 429 met yet' : `last cut at ${found.toFixed(1)}/s, where a 429 came`} (the simulator's unpublished limit: ${limit.limit}/s, bursts of ${limit.burst} let through)`,
  ];
  for (const pass of load) {
    const rate = pass.requests / Math.max(pass.seconds, 0.001);
    lines.push(`   ${pass.name}: ${pass.requests} provider requests, ${rate.toFixed(1)}/s, ${pass.rateLimited} answered 429`);
  }
  return lines;
}

/** What the change-events function put on the bus, by detail-type, and what its event sources read. */
function changeEventsLine(run: LocalRun): string {
  const byType = new Map<string, number>();
  for (const { event } of run.changeEvents.entries) byType.set(event.detailType, (byType.get(event.detailType) ?? 0) + 1);
  const [items, connections] = run.changeEvents.sources;
  const read = `${items?.counts.records ?? 0} records of the items table's stream and ${connections?.counts.records ?? 0} of the connections table's, in ${(items?.counts.invocations ?? 0) + (connections?.counts.invocations ?? 0)} invocations`;
  return `change events: ${run.changeEvents.entries.length} put on the bus (${[...byType].map(([type, n]) => `${n} ${type}`).join(', ') || 'none'}) from ${read}; IDS KNOWN and LAST WRITE below are its counters`;
}

/** The revocation in two lines. */
function revocationLines(revocation: RevocationRun): string[] {
  const times = revocation.postponed.fewest === revocation.postponed.most ? `${revocation.postponed.most}` : `${revocation.postponed.fewest} to ${revocation.postponed.most}`;
  return [
    `${revocation.connection} revoked: ${revocation.waitingIds} ids waited (each postponed ${times} times, ${revocation.deadLettered} dead-lettered), listed ${revocation.listed.status} (${revocation.listed.reason ?? 'no reason'});`,
    `   provider requests for ${revocation.connection}: ${revocation.requestsUntilFailing} until it was failing, ${revocation.requestsWhileFailing} in the ${revocation.failingSeconds.toFixed(1)} s it was failing; ${revocation.recovered?.created ?? 0} created, ${revocation.recovered?.updated ?? 0} updated, ${revocation.recovered?.unchanged ?? 0} unchanged once re-added`,
  ];
}

/**
 * Each connection's counters, as the change-events function keeps them from the items table's
 * stream, against its rows: `idsKnown` counts the rows that appeared live (every row of the story
 * was created live once: a tombstone is a row the sync marked later), `lastWriteAt` is the latest
 * `syncedAt` a row was written with (each row's own is its latest). Read once both streams are
 * read through. The differences.
 */
export async function checkCounters(run: LocalRun, rows: Awaited<ReturnType<typeof readRows>>): Promise<string[]> {
  const differences: string[] = [];
  const listed = new Map((await listedConnections(run)).map((view) => [view.connection, view]));
  for (const connection of CONNECTIONS) {
    const own = [...rows.values()].filter((row) => row.connection === connection);
    const lastWrite = own.reduce<string | undefined>((latest, row) => (row.syncedAt !== undefined && (latest === undefined || row.syncedAt > latest) ? row.syncedAt : latest), undefined);
    const view = listed.get(connection);
    if (view?.idsKnown !== own.length) differences.push(`change events: ${connection}'s IDS KNOWN is ${view?.idsKnown ?? '-'}, its rows ${own.length}`);
    if (view?.lastWriteAt !== lastWrite) differences.push(`change events: ${connection}'s LAST WRITE is ${view?.lastWriteAt ?? '-'}, its latest row write ${lastWrite ?? 'none'}`);
  }
  return differences;
}

/**
 * The last step: each connection's rows against its account's items (`deletedIds`: the ids each
 * account deleted, whose rows are tombstones), the bucket against the rows, what went wrong on the
 * way, the summary, the connections as the CLI lists them (their counters checked against the
 * rows), the verdict. The change-events function's event sources are read through first: the
 * counters and the events count every write of the story.
 */
export async function checkTable(
  run: LocalRun,
  simulator: ProviderSimulator,
  deletedIds: ReadonlyMap<string, readonly string[]>,
  revisionField: string,
  findings: StoryFindings,
  limit: { limit: number; burst: number },
): Promise<void> {
  const { screen, problems } = run;
  await run.changeEvents.readThrough();
  const rows = await readRows(run);
  const accounts: AccountHoldings[] = CONNECTIONS.map((connection) => ({
    connection,
    items: accountItems(simulator, connection),
    deletedIds: deletedIds.get(connection) ?? [],
  }));
  const objects = await readObjects(run, rows);
  const differences = [...compareWithProvider(rows, objects, accounts, revisionField), ...(await checkBucket(run, rows))];
  problems.push(...differences.slice(0, 20));
  if (differences.length > 20) problems.push(`... and ${differences.length - 20} more differences`);
  findings.tableRows = rows.size;
  findings.providerItems = accounts.reduce((sum, account) => sum + account.items.length, 0);
  findings.connections = accounts.map(({ connection, items }) => {
    const own = [...rows.values()].filter((row) => row.connection === connection);
    return { connection, providerItems: items.length, rows: own.length, deleted: own.filter((row) => row.deleted === true).length };
  });
  findings.shared = sharedIds(rows, objects, accounts);
  if (findings.shared.shared === 0) problems.push('no item id is held by two accounts with different contents: isolation was not shown');
  else if (findings.shared.distinct !== findings.shared.shared) {
    problems.push(`${findings.shared.shared - findings.shared.distinct} ids held by two accounts do not have each connection's own item in its row`);
  }
  const inBucket = [...rows.values()].filter((row) => row.itemObject !== undefined).length;
  for (const pass of findings.passes) {
    if (!pass.drained && !pass.waitingExpected) problems.push(`${pass.name}: ${pass.remaining} messages were still in the queue at the time limit`);
  }
  for (const reason of deadLetterReasons(run)) problems.push(`dead-lettered ${reason}`);
  for (const error of run.invocationErrors.slice(0, 5)) problems.push(`an invocation of the sync handler failed: ${error}`);
  problems.push(...run.changeEvents.problems(), ...(await checkCounters(run, rows)));
  writeSnapshot(run.snapshotFile, rows);

  screen.line();
  for (const line of formatPassTable(findings.passes, run.system.config.discovery !== undefined)) screen.line(line);
  if (findings.reconciler) screen.line(reconcilerLine(findings.reconciler));
  if (findings.revocation) for (const line of revocationLines(findings.revocation)) screen.line(line);
  screen.line();
  for (const line of await paceLines(run, simulator, findings.providerLoad, limit)) screen.line(line);
  screen.line();
  screen.line('Connections at the end:');
  for (const c of findings.connections) {
    screen.line(`   ${c.connection.padEnd(8)} ${String(c.providerItems).padStart(5)} items at the provider, ${String(c.rows).padStart(5)} rows (${c.deleted} marked deleted)`);
  }
  screen.line(`   ${findings.shared.shared} item ids are held by two or more accounts with different contents: ${findings.shared.distinct} of them have each connection's own item in its row`);
  screen.line(`   ${changeEventsLine(run)}`);
  await listConnections(run);
  screen.line();
  const deleted = findings.connections.reduce((sum, c) => sum + c.deleted, 0);
  if (problems.length === 0) {
    screen.line(
      `OK: the table matches the provider, connection by connection: ${findings.providerItems} items with their revisions (${inBucket} read from the items bucket, which holds no other object), ${deleted} marked deleted, nothing dead-lettered.`,
    );
  } else {
    screen.line('FAILED: the run did not behave as expected:');
    for (const problem of problems) screen.line(`   - ${problem}`);
  }
  screen.line(`Table snapshot: ${display(run.snapshotFile)}   Handler logs: ${display(run.logFile)}`);
}
