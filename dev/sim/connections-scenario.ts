/**
 * Many connections in virtual time (system.ts with `accounts`: the real item-sync handlers with
 * their connections' access layer, the real token refresher on its deployed schedule, the real
 * provider client and DynamoDB adapters on DynamoDB Local, the SQS model with the deployed redrive
 * policy), against a provider with one account per connection.
 *
 * Every account's ids are sent by users at the start (`{"connection","id"}`, shuffled: a batch
 * mixes connections). One account is revoked at the provider `revokeAfterSeconds` in. The system
 * then runs `days` simulated days: the sync, then idle connections the refresher keeps alive.
 *
 * Checked: every other connection's ids synced (rows equal to the accounts' items), nothing
 * dead-lettered, the revoked connection's ids synced before the revocation or waiting in the queue
 * with the connection `failing`, at most one request a minute on average for the revoked account
 * once it was refused, every other connection still active (no refresh token lost), and an idle
 * connection's monthly cost at 10,000 connections. Figures per day: getToken calls per connection
 * (by the refresher, on demand), the connections table's requests per connection by operation and
 * caller, the refresher's invocations and GB-seconds, priced (connections-cost.ts).
 */
import { mulberry32 } from '../simulator/random.js';
import { dayCost, idleMonthlyCost, snapshot, syncQueueCost, type Usage } from './connections-cost.js';
import { connectionsAtEnd, dayFigures, revokedRequests, rowsAgainstAccounts, waitingIds, type DayFigures } from './connections-measures.js';
import { check, round, timed, type Check, type ScenarioResult } from './scenario.js';
import { startSystem, type SimSystem } from './system.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** An idle connection's monthly cost must stay under this, at COST_AT connections. */
export const IDLE_COST_GOAL_USD = 0.05;
export const COST_AT = 10_000;

export interface ConnectionsScale {
  connections: number;
  /** Items each account holds (every one sent by users). */
  idsEach: number;
  /** The provider's limit L, requests a second, told to the system (providerRequestsPerSecond). */
  limit: number;
  /** When the account is revoked at the provider, after the start. */
  revokeAfterSeconds: number;
  /** Simulated days (the first with the sync, the others idle). */
  days: number;
  providerLatencyMs: number;
  /** The real Powertools logger and metrics writing to byte counters (the refresher's log ingestion in the cost). */
  meterLogs: boolean;
  seed: number;
}

/** 1,000 connections × 100 ids, L = 200/s, one revoked 2 minutes in, two days (the sync, then a day idle). */
export const CONNECTIONS_FULL: ConnectionsScale = {
  connections: 1_000,
  idsEach: 100,
  limit: 200,
  revokeAfterSeconds: 120,
  days: 2,
  providerLatencyMs: 50,
  meterLogs: true,
  seed: 11,
};

/** What `npm test` runs: 30 connections × 20 ids at L = 20/s, one revoked 10 s in; the same two days. */
export const CONNECTIONS_SHORT: ConnectionsScale = {
  ...CONNECTIONS_FULL,
  connections: 30,
  idsEach: 20,
  limit: 20,
  revokeAfterSeconds: 10,
  seed: 5,
};

/** The scenario. `progress` gets a line every virtual hour. */
export function connectionsScenario(scale: ConnectionsScale, progress: (line: string) => void = () => undefined): Promise<ScenarioResult> {
  const n = scale.connections;
  const name = `${n.toLocaleString('en-US')} connections × ${scale.idsEach} ids, L = ${scale.limit}/s, one revoked ${scale.revokeAfterSeconds} s in, ${scale.days} days`;
  return timed(name, async () => {
    const realStart = Date.now();
    const system = await startSystem({
      ids: 0,
      accounts: { count: n, idsEach: scale.idsEach },
      seed: scale.seed,
      rateLimit: { requestsPerSecond: scale.limit, retryAfterSeconds: 1 },
      knownLimit: scale.limit,
      providerLatencyMs: scale.providerLatencyMs,
      meterLogs: scale.meterLogs,
    });
    try {
      const t0 = system.clock.ms();
      const revoked = system.connectionIds[Math.floor(n / 3)]!;
      const sent = sendEveryId(system, scale.seed);
      system.clock.at(t0 + scale.revokeAfterSeconds * 1000, () => system.provider.revokeAccount(revoked));
      const { snapshots, deliveries, kms, syncedAt } = watchDays(system, scale, revoked, t0, realStart, progress);
      const end = t0 + scale.days * DAY;
      await system.pollUntil(() => system.clock.ms() >= end);

      const days = Array.from({ length: scale.days }, (_, day) => dayFigures(system, t0, day, snapshots, deliveries, kms));
      const { figures, checks } = await measure(system, scale, { revoked, sent, t0, end, days, syncedAt: syncedAt() });
      figures['real time'] = `${((Date.now() - realStart) / 1000).toFixed(0)} s`;
      return { virtualMs: end - t0, figures, checks };
    } finally {
      await system.close();
    }
  });
}

/** Every account's ids, one message each, `{"connection","id"}`, in a seeded shuffle. Returns how many. */
function sendEveryId(system: SimSystem, seed: number): number {
  const messages: string[] = [];
  for (const connection of system.connectionIds) {
    for (const id of system.provider.account(connection).itemIds()) messages.push(JSON.stringify({ connection, id }));
  }
  const random = mulberry32(seed ^ 0xc0ec7);
  for (let i = messages.length - 1; i > 0; i -= 1) {
    const j = Math.floor(random() * (i + 1));
    [messages[i], messages[j]] = [messages[j]!, messages[i]!];
  }
  for (const body of messages) system.sqs.send(system.queueUrl, { body });
  return messages.length;
}

/**
 * The meter at the start of every day and at the end (and the sync queue's deliveries then), a
 * progress line every virtual hour, and when the sync queue first held the revoked connection's
 * messages only. The snapshots' timers are set first: at a day's boundary they run before the
 * refresher's run of that instant, which is the next day's.
 */
function watchDays(
  system: SimSystem,
  scale: ConnectionsScale,
  revoked: string,
  t0: number,
  realStart: number,
  progress: (line: string) => void,
): { snapshots: Usage[]; deliveries: number[]; kms: Array<Record<string, number>>; syncedAt: () => number | undefined } {
  const snapshots: Usage[] = [snapshot(system.meter)];
  const deliveries: number[] = [0];
  const kms: Array<Record<string, number>> = [{ ...system.local.aws.kms.calls }];
  for (let day = 1; day <= scale.days; day += 1) {
    system.clock.at(t0 + day * DAY, () => {
      snapshots.push(snapshot(system.meter));
      deliveries.push(system.sqs.queue(system.queueUrl).stats.receives);
      kms.push({ ...system.local.aws.kms.calls });
    });
  }
  let syncedAt: number | undefined;
  const look = (): void => {
    if (syncedAt === undefined && waitingIds(system, revoked).others === 0) syncedAt = system.clock.ms();
    if (syncedAt === undefined) system.clock.at(system.clock.ms() + 10_000, look);
  };
  system.clock.at(t0 + 10_000, look);
  const report = (): void => {
    const now = system.clock.ms();
    progress(
      `${((now - t0) / HOUR).toFixed(0)} h virtual, ${((Date.now() - realStart) / 1000).toFixed(0)} s real: sync queue ${system.sqs.size(system.queueUrl)}, ` +
        `${system.refreshRuns.length} refresher runs${syncedAt === undefined ? '' : `, synced after ${((syncedAt - t0) / MINUTE).toFixed(1)} min`}`,
    );
    if (now + HOUR < t0 + scale.days * DAY) system.clock.at(now + HOUR, report);
  };
  system.clock.at(t0 + HOUR, report);
  return { snapshots, deliveries, kms, syncedAt: () => syncedAt };
}

interface RunFacts {
  revoked: string;
  sent: number;
  t0: number;
  end: number;
  days: DayFigures[];
  syncedAt: number | undefined;
}

async function measure(system: SimSystem, scale: ConnectionsScale, facts: RunFacts): Promise<{ figures: Record<string, number | string>; checks: Check[] }> {
  const { revoked, t0, end, days } = facts;
  const n = scale.connections;
  const rows = await rowsAgainstAccounts(system, revoked);
  const waiting = waitingIds(system, revoked);
  const dead = system.sqs.size(system.dlqUrl);
  const requests = revokedRequests(system, revoked, end);
  const state = await connectionsAtEnd(system, revoked);
  const replays = system.connectionIds.reduce((sum, id) => sum + system.provider.accountCounters(id).replays, 0);
  const unauthorized = system.connectionIds.filter((id) => id !== revoked && !system.provider.account(id).authorized).length;
  const idle = days.at(-1)!;
  const idleAtN = idleMonthlyCost(idle.usage, system.local.names.connectionsTable, n, state.rowBytes, n, idle.kms);
  const idleAtGoal = idleMonthlyCost(idle.usage, system.local.names.connectionsTable, n, state.rowBytes, COST_AT, idle.kms);

  const minutes = (ms: number | undefined): string => (ms === undefined ? 'never' : `${((ms - t0) / MINUTE).toFixed(1)} min`);
  const figures: Record<string, number | string> = {
    connections: n,
    'ids sent by users': facts.sent,
    'provider limit': `${scale.limit}/s, known (providerRequestsPerSecond); pace scope as deployed`,
    'every other id synced after (virtual)': minutes(facts.syncedAt),
    'ids of the other connections synced (rows equal to the account\'s items)': `${rows.synced.toLocaleString('en-US')} of ${rows.expected.toLocaleString('en-US')}`,
    'rows that are not the account\'s item': rows.mismatched,
    'dead-lettered': dead,
    'revoked connection': `${revoked}, revoked ${scale.revokeAfterSeconds} s in`,
    '… its status at the end': `${state.revokedStatus} (${state.revokedReason})`,
    '… its ids synced before the revocation': rows.revokedSynced,
    '… its ids waiting in the sync queue': waiting.ids.size,
    '… failing after (virtual)': minutes(requests.failingAt),
    '… item requests answered 401 before (in flight with the revoked token)': requests.refusedItemsBefore,
    '… item requests answered 401 in all': `${requests.refusedItems} (${system.functions.sync.length} sync containers on the sync queue)`,
    '… provider requests after it became failing': `${requests.afterItems} items, ${requests.afterTokens} getToken (the refresher's hourly retry)`,
    '… provider requests a minute after it became failing (average)': round(requests.perMinute, 4),
    'connections at the end': Object.entries(state.byStatus).map(([status, count]) => `${count} ${status}`).join(', '),
    'connections table row (average)': `${Math.round(state.rowBytes)} bytes`,
  };
  for (const day of days) dayLines(figures, day, n, system.local.names.connectionsTable, waiting.ids.size);
  for (const [what, cost] of [
    [`idle connection a month at ${n.toLocaleString('en-US')} connections`, idleAtN],
    [`idle connection a month at ${COST_AT.toLocaleString('en-US')} connections`, idleAtGoal],
  ] as const) {
    figures[`${what} (USD)`] = cost.total.toFixed(6);
  }
  for (const line of idleAtGoal.lines) figures[`… at ${COST_AT.toLocaleString('en-US')}: ${line.what}`] = `$${line.usd.toFixed(7)}`;

  const checks: Check[] = [
    check('every other connection\'s ids synced, rows equal to the accounts\' items', `${rows.synced} of ${rows.expected}, ${rows.mismatched} not`, rows.synced === rows.expected && rows.mismatched === 0),
    check('nothing dead-lettered', dead, dead === 0),
    check(
      'the revoked connection\'s ids: synced before the revocation or waiting in the queue',
      `${rows.revokedSynced} + ${waiting.ids.size} of ${scale.idsEach}; ${waiting.others} other messages left`,
      rows.revokedSynced + waiting.ids.size === scale.idsEach && waiting.ids.size > 0 && waiting.others === 0,
    ),
    check('the revoked connection is failing', state.revokedStatus, state.revokedStatus === 'failing'),
    check(
      'at most one item request answered 401 per sync container (a container sends a refused token no more)',
      `${requests.refusedItems} for ${system.functions.sync.length} containers`,
      requests.refusedItems <= system.functions.sync.length,
    ),
    check('at most 1 request a minute for the revoked account once failing (average)', round(requests.perMinute, 4), requests.failingAt !== undefined && requests.perMinute <= 1),
    check('every other connection active; no refresh token lost or replayed', `${state.byStatus.active} active, ${unauthorized} other accounts revoked, ${replays} replays`, state.byStatus.active === n - 1 && unauthorized === 0 && replays === 0),
    check(`an idle connection costs at most $${IDLE_COST_GOAL_USD} a month at ${COST_AT.toLocaleString('en-US')} connections`, `$${idleAtGoal.total.toFixed(5)}`, idleAtGoal.total <= IDLE_COST_GOAL_USD),
  ];
  return { figures, checks };
}

/**
 * One day's figures: per connection, and priced. On an idle day the item sync's requests are the
 * failing connection's waiting ids only (every CONNECTION_WAIT_SECONDS they come back and wait again).
 */
function dayLines(figures: Record<string, number | string>, day: DayFigures, n: number, table: string, waiting: number): void {
  const idle = day.day > 0;
  const label = `day ${day.day + 1}${idle ? ' (idle)' : ' (the sync)'}`;
  const per = (count: number, key = ''): string =>
    idle && key.includes('(sync on the sync queue)') ? "the failing connection's waiting ids" : `${round(count / n, 3)} a connection`;
  const lambda = day.usage.lambda.refresher;
  const gbSeconds = (lambda.durationMs / 1000) * (lambda.memoryMb / 1024);
  figures[`${label}: refresher runs`] = day.refresherRuns;
  figures[`${label}: refreshes left to a later run (a run's time ran short)`] = day.refreshesLeft;
  figures[`${label}: getToken calls`] = `${day.getToken.all} (${per(day.getToken.all)}): ${day.getToken.refresher} by the refresher (${per(day.getToken.refresher)}), ${day.getToken.onDemand} on demand by the item sync`;
  for (const [key, requests] of Object.entries(day.table)) figures[`${label}: DynamoDB ${key}`] = `${requests} (${per(requests, key)})`;
  const getItems = day.table[`GetItem ${table} (sync on the sync queue)`] ?? 0;
  figures[`${label}: sync queue deliveries`] = day.deliveries;
  if (day.deliveries > 0) figures[`${label}: item sync GetItem on the connections table per 1,000 records delivered`] = round((getItems * 1000) / day.deliveries, 1);
  const kmsAll = Object.values(day.kms).reduce((sum, count) => sum + count, 0);
  figures[`${label}: KMS requests (sealed tokens)`] =
    `${Object.entries(day.kms).map(([operation, count]) => `${count} ${operation}`).join(', ') || 'none'} (${round(kmsAll / n, 3)} a connection` +
    `${day.deliveries > 0 ? `; ${round((kmsAll * 1000) / day.deliveries, 1)} per 1,000 records delivered` : ''})`;
  figures[`${label}: Lambda token refresher`] = `${lambda.invocations} invocations, ${round(gbSeconds, 3)} GB-s (${round(gbSeconds / n, 6)} a connection)`;
  const sync = day.usage.lambda.sync;
  figures[`${label}: Lambda item sync (users' queue)`] = `${sync.invocations} invocations, ${round((sync.durationMs / 1000) * (sync.memoryMb / 1024), 1)} GB-s`;
  const cost = dayCost(day.usage, table);
  figures[`${label}: cost of the connections table and the refresher (USD)`] = `${cost.total.toFixed(5)} (${(cost.total / n).toFixed(7)} a connection)`;
  if (idle && waiting > 0) {
    const queue = syncQueueCost(day.usage, table);
    figures[`${label}: the failing connection's ${waiting} waiting ids`] =
      `${queue.lines.map((line) => `${line.requests} ${line.what}`).join(', ')}: $${queue.total.toFixed(4)} a day ($${(queue.total / waiting).toFixed(6)} a waiting id)`;
  }
}
