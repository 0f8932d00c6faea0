/**
 * The token refresher at scale in virtual time: 10,000 connections, all in use, for 24 hours.
 *
 * A scenario of the refresher alone (no item ids are synced: startSystem's sync containers would
 * add nothing to it). The local system is built as the others are (dev/system: cdk.json's
 * configuration, the deployment infra/deployment.ts makes of it), and the real token refresher
 * handler runs on its deployed schedule (every 5 minutes at `tokenRefreshMinutes` 30), with its
 * deployed time-out counting down in virtual time, its real DynamoDB adapters (the connections
 * table and the token pace's row in the control table, on DynamoDB Local) and the real provider client,
 * against the provider model with one account per connection (one client id: one token pace). The
 * token endpoint has a limit the system is not told (refresher-provider.ts), below the token pace's
 * ceiling (TOKEN_REQUESTS_PER_SECOND, 10): the pace has to find it.
 *
 * Each connection is added as the operator's `add` does (no access token), and is in use from the
 * start to the end: its `lastUsedAt` written every `useEveryMinutes` (within the two refresh
 * intervals that make a connection in use), at its own minute, as the item sync writes it.
 *
 * Checked: every renewal of a token in use came before it was `tokenRefreshMinutes` + 5 minutes old
 * (the item sync's on-demand age: no connection starved), and no token is that old at the end;
 * every run ended within the function's time-out; no run left a refresh once the first tokens were
 * issued; no connection failing or with a failure in its health (a 429 and a wait for the pace are
 * no failure). Figures: getToken calls per connection per day, the token endpoint's busiest second
 * and minute and its 429s, the rate the pace settled at, refreshes per run, the refresher's AWS cost
 * per connection per day (refresher-cost.ts).
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { REFRESHER_SERVICE } from '../../functions/shared/metric-names.js';
import type { RefresherResult } from '../../functions/token-refresher/app.js';
import { inProcessAws } from '../system/aws.js';
import { localNames } from '../system/names.js';
import { countingObservability, quietObservability } from '../system/observability.js';
import { every } from '../system/schedules.js';
import { startStorage } from '../system/storage.js';
import { buildSystem, type LocalSystem } from '../system/system.js';
import { emptyMeter, trackedDynamo, type SimMeter } from './meters.js';
import { modelFetch } from './model-fetch.js';
import { refresherCost } from './refresher-cost.js';
import { TokenEndpoint } from './refresher-provider.js';
import { check, round, timed, type Check, type ScenarioResult } from './scenario.js';
import { runRefresher, type RefreshRun } from './system.js';
import { addConnections, startProvider } from './sim-provider.js';
import { VirtualClock } from './virtual-clock.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

export interface RefresherScale {
  connections: number;
  hours: number;
  /** The token endpoint's limit, getToken calls a second (not told to the system). */
  tokenLimit: number;
  /** The provider's latency, ms (getToken). */
  providerLatencyMs: number;
  /** Each connection's lastUsedAt is written this often (minutes): in use throughout. */
  useEveryMinutes: number;
  /** The real Powertools logger and metrics writing to byte counters (the log ingestion in the cost). */
  meterLogs: boolean;
  seed: number;
}

/** 10,000 connections in use for 24 hours; the token endpoint takes 8 getToken a second. */
export const REFRESHER_FULL: RefresherScale = {
  connections: 10_000,
  hours: 24,
  tokenLimit: 8,
  providerLatencyMs: 100,
  useEveryMinutes: 45,
  meterLogs: true,
  seed: 3,
};

/**
 * What `npm test` runs: 60 connections for an hour against a token endpoint of 2 a second: the
 * pace comes down from its ceiling, the first run issues every first token at once, and the runs
 * after it spread the renewals (a run's share: 10).
 */
export const REFRESHER_SHORT: RefresherScale = {
  ...REFRESHER_FULL,
  connections: 60,
  hours: 1,
  tokenLimit: 2,
  seed: 5,
};

/** The tables by their plain names, as the cost lines name them. */
const NAMES = { ...localNames('sim'), itemsTable: 'items', controlTable: 'control', connectionsTable: 'connections' };

/** One refresher invocation, as its schedule made it. */
type Run = RefreshRun;

/** The scenario. `progress` gets a line every virtual hour. */
export function refresherScenario(scale: RefresherScale, progress: (line: string) => void = () => undefined): Promise<ScenarioResult> {
  const n = scale.connections;
  const name = `token refresher: ${n.toLocaleString('en-US')} connections in use for ${scale.hours} h, token endpoint limit ${scale.tokenLimit}/s`;
  return timed(name, async () => {
    const realStart = Date.now();
    const clock = new VirtualClock();
    const t0 = clock.ms();
    const { provider, connectionIds } = startProvider(
      { ids: 0, accounts: { count: n, idsEach: 1 }, seed: scale.seed, providerLatencyMs: scale.providerLatencyMs, recordedRequests: 100 },
      clock,
    );
    const aws = inProcessAws({ sqsClock: clock.asFakeClock() });
    const storage = await startStorage(NAMES, { noBucket: true });
    const local = buildSystem({ names: NAMES, context: { freshnessHours: 0 }, aws, storage, now: () => clock.ms() });
    try {
      await addConnections(local.connections, provider, connectionIds, clock.now().toISOString());
      const tokenRefreshMinutes = local.config.tokenRefreshMinutes;
      const owners = new Map(connectionIds.map((id) => [provider.account(id).refreshToken, id] as const));
      const lateAfterMs = (tokenRefreshMinutes + 5) * MINUTE;
      const endpoint = new TokenEndpoint({ requestsPerSecond: scale.tokenLimit }, clock, owners, lateAfterMs, scale.providerLatencyMs);

      const meter = emptyMeter({ sync: 0, reconcile: 0, reconciler: 0, refresher: local.deployment.refresher.memoryMb, changeEvents: 0, changesWriter: 0 });
      const dynamodb: DynamoDBClient = trackedDynamo(storage.dynamo, {
        clock,
        counts: meter.dynamo.refresher,
        itemsTable: NAMES.itemsTable,
        itemCount: () => undefined,
      });
      const observability = scale.meterLogs ? countingObservability(REFRESHER_SERVICE, meter.logs.refresher) : quietObservability();
      const refresher = local.refresher({ dynamodb, fetch: endpoint.gate(modelFetch(provider, clock)), clock, sleep: clock.sleep, ...observability });

      const end = t0 + scale.hours * HOUR;
      const runs: Run[] = [];
      const schedule = every(clock.asFakeClock(), local.deployment.schedule.refresherEveryMinutes * MINUTE, () => void runRefresher(local, refresher, clock, meter, runs));
      const using = useConnections(local, clock, connectionIds, scale.useEveryMinutes, end);
      const hourly = (): void => {
        const now = clock.ms();
        const last = runs.at(-1)?.result;
        progress(
          `${Math.round((now - t0) / HOUR)} h virtual, ${Math.round((Date.now() - realStart) / 1000)} s real: ${runs.length} runs, ` +
            `${endpoint.stats.calls.toLocaleString('en-US')} getToken (${endpoint.stats.byStatus[429] ?? 0} answered 429)` +
            (last ? `, last run: ${last.refreshed} refreshed, ${last.early} early, ${last.left} left` : ''),
        );
        if (now + HOUR < end) clock.at(now + HOUR, hourly);
      };
      clock.at(t0 + HOUR, hourly);
      await using.first;
      await clock.run(end);
      schedule.stop();
      using.stop();
      // A run still under way at the end finishes (its refreshes are the day's).
      await clock.run(end + local.deployment.refresher.timeoutSeconds * 1000, () => runs.every((run) => run.result !== undefined || run.error !== undefined));

      const { figures, checks } = await measure(local, scale, { runs, endpoint, meter, connectionIds, t0, end, tokenRefreshMinutes });
      figures['real time'] = `${Math.round((Date.now() - realStart) / 1000)} s`;
      return { virtualMs: end - t0, figures, checks };
    } finally {
      await local.close();
    }
  });
}

/**
 * Every connection in use: its lastUsedAt written at the start, then every `everyMinutes`, each at
 * its own minute (as the item sync writes it: through the store, over an older value only). The
 * writes hold virtual time still while DynamoDB Local takes them; they are not the refresher's cost.
 */
function useConnections(
  local: LocalSystem,
  clock: VirtualClock,
  connectionIds: readonly string[],
  everyMinutes: number,
  end: number,
): { first: Promise<void>; stop(): void } {
  let running = true;
  const mark = async (ids: readonly string[]): Promise<void> => {
    const at = clock.now().toISOString();
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < ids.length) await local.connections.markUsed(ids[next++]!, at);
      }),
    );
  };
  const first = mark(connectionIds);
  const slots = Array.from({ length: everyMinutes }, (_, minute) => connectionIds.filter((_, k) => k % everyMinutes === minute));
  const tick = (minute: number): void => {
    const at = clock.ms() + MINUTE;
    if (!running || at >= end) return;
    clock.at(at, () => {
      if (!running) return;
      void clock.track(() => mark(slots[(minute + 1) % everyMinutes]!));
      tick(minute + 1);
    });
  };
  tick(0);
  return { first, stop: () => void (running = false) };
}

interface Facts {
  runs: Run[];
  endpoint: TokenEndpoint;
  meter: SimMeter;
  connectionIds: readonly string[];
  t0: number;
  end: number;
  tokenRefreshMinutes: number;
}

async function measure(local: LocalSystem, scale: RefresherScale, facts: Facts): Promise<{ figures: Record<string, number | string>; checks: Check[] }> {
  const { runs, endpoint, meter, connectionIds, t0, end, tokenRefreshMinutes } = facts;
  const n = scale.connections;
  const days = (end - t0) / (24 * HOUR);
  const timeoutMs = local.deployment.refresher.timeoutSeconds * 1000;
  const runMinutes = local.deployment.schedule.refresherEveryMinutes;
  const longest = Math.max(0, ...runs.map((run) => run.endedAt - run.startedAt));
  const failedRuns = runs.filter((run) => run.error !== undefined);
  const sum = (pick: (result: RefresherResult) => number, from = runs): number => from.reduce((total, run) => total + (run.result ? pick(run.result) : 0), 0);
  // Once every connection had its first token (the first interval), the runs renew tokens in use only.
  const firstIssued = runs.find((run) => run.result && run.result.left === 0 && run.startedAt >= t0)?.startedAt ?? end;
  const steady = runs.filter((run) => run.startedAt >= Math.max(firstIssued, t0 + tokenRefreshMinutes * MINUTE) + tokenRefreshMinutes * MINUTE);
  const perRun = steady.map((run) => run.result?.refreshed ?? 0);
  const leftLater = sum((result) => result.left, runs.filter((run) => run.startedAt > firstIssued));
  const atEnd = endpoint.agesAt(end, connectionIds);
  const state = await connectionsAtEnd(local);
  const stats = endpoint.stats;
  const share = Math.floor((n * runMinutes) / tokenRefreshMinutes);
  const pace = runs.at(-1)?.result ? await paceRate(local) : undefined;
  const cost = refresherCost(meter, NAMES.connectionsTable);
  const minutes = (ms: number): string => `${round(ms / MINUTE, 2)} min`;

  const figures: Record<string, number | string> = {
    connections: n,
    'tokenRefreshMinutes (cdk.json)': tokenRefreshMinutes,
    'refresher runs (every N minutes)': `${runs.length} (every ${runMinutes} min; time-out ${timeoutMs / 1000} s)`,
    'token endpoint limit (unknown to the system)': `${scale.tokenLimit}/s; the token pace's ceiling ${local.deployment.refresher.environment['TOKEN_REQUESTS_PER_SECOND'] ?? '10 (TOKEN_REQUESTS_PER_SECOND\'s default)'}`,
    'getToken latency': `${scale.providerLatencyMs} ms`,
    'first tokens all issued after': minutes(firstIssued - t0),
    'oldest token a renewal replaced': `${minutes(endpoint.renewals.maxAge)} (${endpoint.renewals.maxAgeConnection ?? 'none'})`,
    [`renewals of a token ${tokenRefreshMinutes + 5} min old or older`]: `${endpoint.renewals.late} of ${endpoint.renewals.renewals.toLocaleString('en-US')}`,
    'oldest token at the end': minutes(atEnd.oldest),
    'connections without a token at the end': atEnd.without,
    'longest run': `${round(longest / 1000, 1)} s`,
    'runs that failed': failedRuns.length,
    'refreshes left to a later run: before / after the first tokens were all issued': `${sum((result) => result.left) - leftLater} / ${leftLater}`,
    'refreshes per run once spread (from an interval after the first tokens were all issued)':
      perRun.length === 0
        ? 'none'
        : `${Math.min(...perRun)} to ${Math.max(...perRun)}, ${round(perRun.reduce((a, b) => a + b, 0) / perRun.length, 1)} on average, from ${minutes(steady[0]!.startedAt - t0)} (a run's share: ${share})`,
    'renewed early (spreading)': sum((result) => result.early),
    'getToken calls': `${stats.calls.toLocaleString('en-US')}: ${Object.entries(stats.byStatus).map(([status, count]) => `${count.toLocaleString('en-US')} × ${status}`).join(', ')}`,
    'getToken calls per connection per day (answered 200)': `${round(stats.calls / n / days, 2)} (${round((stats.byStatus[200] ?? 0) / n / days, 2)})`,
    'token endpoint: busiest second': `${stats.peakPerSecond} calls (${minutes(stats.peakAt - t0)} in)`,
    'token endpoint: busiest minute': `${stats.peakPerMinute} calls (${round(stats.peakPerMinute / 60, 2)}/s)`,
    "token pace's rate at the end": pace === undefined ? 'unknown' : `${round(pace, 2)}/s`,
    'connections at the end': Object.entries(state.byStatus).map(([status, count]) => `${count} ${status}`).join(', '),
    'connections with a failure in their health': state.withFailures,
  };
  for (const line of cost.lines) figures[`cost: ${line.what}`] = `${line.units}: $${line.usd.toFixed(4)} ($${((line.usd / n / days) * 1e6).toFixed(2)} per million connection-days)`;
  figures['cost per connection per day (USD)'] = (cost.total / n / days).toFixed(8);
  figures['cost per connection per month (USD, 730 h)'] = ((cost.total / n / days) * (730 / 24)).toFixed(6);

  const checks: Check[] = [
    check(
      `every renewal of a token in use before it is tokenRefreshMinutes + 5 min (${tokenRefreshMinutes + 5} min) old`,
      `oldest ${minutes(endpoint.renewals.maxAge)}, ${endpoint.renewals.late} late`,
      endpoint.renewals.late === 0 && endpoint.renewals.renewals > 0,
    ),
    check(`no token ${tokenRefreshMinutes + 5} min old at the end, none missing (no connection starved)`, `oldest ${minutes(atEnd.oldest)}, ${atEnd.without} without`, atEnd.late === 0 && atEnd.without === 0),
    check('every run within the function\'s time-out, none failed', `longest ${round(longest / 1000, 1)} s of ${timeoutMs / 1000} s; ${failedRuns.length} failed`, longest <= timeoutMs && failedRuns.length === 0),
    check('no refresh left to a later run once the first tokens were all issued', leftLater, leftLater === 0 && firstIssued < end),
    check(
      'every connection active, none with a failure in its health (429s and pace waits are no failure)',
      `${state.byStatus.active} active, ${state.withFailures} with failures`,
      state.byStatus.active === n && state.withFailures === 0,
    ),
  ];
  return { figures, checks };
}

/** Connections by status and how many have a failure in their health. */
async function connectionsAtEnd(local: LocalSystem): Promise<{ byStatus: Record<string, number>; withFailures: number }> {
  const byStatus: Record<string, number> = { active: 0, paused: 0, failing: 0, removed: 0 };
  let withFailures = 0;
  for await (const record of local.connections.list()) {
    byStatus[record.status] = (byStatus[record.status] ?? 0) + 1;
    if (record.health.consecutiveFailures > 0 || record.health.lastFailureAt !== undefined) withFailures += 1;
  }
  return { byStatus, withFailures };
}

/** The token pace's rate in its control-table row (the one client id's), requests a second. */
async function paceRate(local: LocalSystem): Promise<number | undefined> {
  const rows = await local.storage.dynamo.scan(NAMES.controlTable);
  const row = rows.find((r) => r['pk']?.S?.startsWith('provider-pace#token#'));
  const state = row?.['state']?.S;
  if (state === undefined) return undefined;
  const rate = (JSON.parse(state) as { rate?: unknown }).rate;
  return typeof rate === 'number' ? rate : undefined;
}
