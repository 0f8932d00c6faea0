/**
 * The many-connections scenario's measures, from what the system left (connections-scenario.ts):
 * the items table against every account's items, the revoked connection's ids (synced before the
 * revocation, or waiting in the sync queue), the provider requests for the revoked account once it
 * was refused, the connections' statuses, and the token refresher's work per day (its runs, the
 * provider's getToken calls by who made them, the AWS requests per connection).
 */
import { isDeepStrictEqual } from 'node:util';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { estimateItemSize, fromAttributeValue } from '../../functions/item-sync/adapters/dynamodb-item-store.js';
import type { ConnectionStatus } from '../../functions/shared/connections/connection.js';
import { tableRequests, usageBetween, type Usage } from './connections-cost.js';
import type { SimSystem } from './system.js';

const DAY = 24 * 3_600_000;

/** The items table against the accounts' items. */
export interface RowsCheck {
  /** Ids of every connection but the revoked one. */
  expected: number;
  /** Of those, rows equal to the account's item (revision and content). */
  synced: number;
  /** Rows of any connection that are not the account's item (other content, an id the account lacks, a tombstone). */
  mismatched: number;
  /** The revoked connection's rows equal to its items (synced before the revocation). */
  revokedSynced: number;
  details: string[];
}

export async function rowsAgainstAccounts(system: SimSystem, revoked: string): Promise<RowsCheck> {
  const rows = await system.dynamo.scan(system.local.names.itemsTable);
  const check: RowsCheck = { expected: 0, synced: 0, mismatched: 0, revokedSynced: 0, details: [] };
  const note = (line: string): void => void (check.details.length < 10 && check.details.push(line));
  for (const connection of system.connectionIds) if (connection !== revoked) check.expected += system.provider.account(connection).itemCount;
  for (const row of rows) {
    const connection = row['connection']?.S ?? '';
    const id = row['id']?.S ?? '';
    const item = system.provider.hasAccount(connection) ? system.provider.account(connection).getItem(id) : undefined;
    const equal = item !== undefined && row['deleted']?.BOOL !== true && isDeepStrictEqual(fromAttributeValue(row['item'] ?? { NULL: true }), item);
    if (!equal) {
      check.mismatched += 1;
      note(`row ${connection}/${id} is not the account's item`);
    } else if (connection === revoked) check.revokedSynced += 1;
    else check.synced += 1;
  }
  return check;
}

/** The distinct ids of `connection` in the sync queue (visible, in flight or delayed), and the messages of any other connection. */
export function waitingIds(system: SimSystem, connection: string): { ids: Set<string>; others: number } {
  const ids = new Set<string>();
  let others = 0;
  for (const message of system.sqs.peek(system.queueUrl)) {
    const body = JSON.parse(message.body) as { connection?: string; id?: string };
    if (body.connection === connection && typeof body.id === 'string') ids.add(body.id);
    else others += 1;
  }
  return { ids, others };
}

/** The provider requests for the revoked account: when its refresh token was first refused, and what came after. */
export interface RevokedRequests {
  /** When getToken first answered it 401 (the connection became failing), epoch ms. */
  failingAt: number | undefined;
  /** Item requests answered 401 before that (in-flight fetches that met the revoked access token). */
  refusedItemsBefore: number;
  /** Item requests answered 401 in all: a container that met the 401 sends the refused token no more. */
  refusedItems: number;
  afterItems: number;
  afterTokens: number;
  /** Requests after failingAt, a minute on average until `end`. */
  perMinute: number;
}

export function revokedRequests(system: SimSystem, revoked: string, end: number): RevokedRequests {
  const requests = system.provider.requests.filter((r) => r.account === revoked);
  const failingAt = requests.find((r) => r.endpoint === 'token' && r.status === 401)?.respondedAt;
  const refusedItems = requests.filter((r) => r.endpoint === 'items' && r.status === 401).length;
  if (failingAt === undefined) return { failingAt, refusedItemsBefore: 0, refusedItems, afterItems: 0, afterTokens: 0, perMinute: 0 };
  const after = requests.filter((r) => (r.receivedAt ?? 0) > failingAt);
  const afterItems = after.filter((r) => r.endpoint === 'items').length;
  const afterTokens = after.filter((r) => r.endpoint === 'token').length;
  const refusedItemsBefore = requests.filter((r) => r.endpoint === 'items' && r.status === 401 && (r.receivedAt ?? 0) <= failingAt).length;
  return { failingAt, refusedItemsBefore, refusedItems, afterItems, afterTokens, perMinute: (afterItems + afterTokens) / Math.max(1, (end - failingAt) / 60_000) };
}

/** Connections by status in the table at the end, the revoked one's failure reason, and the table's average row size. */
export async function connectionsAtEnd(system: SimSystem, revoked: string): Promise<{ byStatus: Record<ConnectionStatus, number>; revokedStatus: string; revokedReason: string; rowBytes: number }> {
  const byStatus: Record<ConnectionStatus, number> = { active: 0, paused: 0, failing: 0, removed: 0 };
  let revokedStatus = 'missing';
  let revokedReason = '';
  for await (const record of system.connections.list()) {
    byStatus[record.status] += 1;
    if (record.connection === revoked) {
      revokedStatus = record.status;
      revokedReason = record.health.lastFailureReason ?? '';
    }
  }
  const rows: Array<Record<string, AttributeValue>> = await system.dynamo.scan(system.local.names.connectionsTable);
  const rowBytes = rows.reduce((sum, row) => sum + estimateItemSize(row), 0) / Math.max(1, rows.length);
  return { byStatus, revokedStatus, revokedReason, rowBytes };
}

/** One simulated day's work of the refresher and the connections table. */
export interface DayFigures {
  day: number;
  usage: Usage;
  refresherRuns: number;
  /** Refreshes due but not started because a run's time ran short (left to the next run), summed over the day's runs. */
  refreshesLeft: number;
  /** getToken calls the provider took that day: all, by the refresher's runs, on demand by the item sync. */
  getToken: { all: number; refresher: number; onDemand: number };
  /** Connections-table requests by operation and caller. */
  table: Record<string, number>;
  /** Records the sync queue delivered that day. */
  deliveries: number;
  /** KMS requests that day (the sealed tokens: GenerateDataKey to seal, Decrypt to open), by operation. */
  kms: Record<string, number>;
}

/**
 * The figures of day `day` (from 0): `snapshots[day]` and `snapshots[day + 1]` are the meter at its
 * start and end, `deliveries` the sync queue's deliveries at the same moments.
 */
export function dayFigures(
  system: SimSystem,
  t0: number,
  day: number,
  snapshots: readonly Usage[],
  deliveries: readonly number[],
  kms: ReadonlyArray<Record<string, number>>,
): DayFigures {
  const from = t0 + day * DAY;
  const to = from + DAY;
  const usage = usageBetween(snapshots[day]!, snapshots[day + 1]!);
  const runs = system.refreshRuns.filter((run) => run.startedAt >= from && run.startedAt < to);
  const refresher = runs.reduce((sum, run) => sum + (run.result ? run.result.refreshed + run.result.refused + run.result.failed : 0), 0);
  const all = system.provider.requests.filter((r) => r.endpoint === 'token' && (r.receivedAt ?? 0) >= from && (r.receivedAt ?? 0) < to).length;
  return {
    day,
    usage,
    refresherRuns: runs.length,
    refreshesLeft: runs.reduce((sum, run) => sum + (run.result?.left ?? 0), 0),
    getToken: { all, refresher, onDemand: all - refresher },
    table: tableRequests(usage, system.local.names.connectionsTable),
    deliveries: deliveries[day + 1]! - deliveries[day]!,
    kms: Object.fromEntries(Object.entries(kms[day + 1]!).map(([operation, count]) => [operation, count - (kms[day]![operation] ?? 0)])),
  };
}
