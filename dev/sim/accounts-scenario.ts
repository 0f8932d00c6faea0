/**
 * A reconciliation pass over many accounts in virtual time (system.ts with `accounts` and
 * `reconcile`: the real reconciler on its deployed schedule, the real item-sync handlers on both
 * queues, the real token refresher on its schedule, the real pace, provider client and DynamoDB
 * adapters on DynamoDB Local, the SQS model), against a provider with one account per connection.
 *
 * The items table starts as after a first sync of every account's items (rows written as the sync
 * writes them). The reconciler's schedule starts after `idleMinutes`; the run ends when every
 * (connection, id) was checked by the sweep since the pass started (and the reconcile queue is
 * empty), or `maxPassHours` after the first tick.
 *
 * Measured: the pass's length against freshnessHours, and each account's own (from the pass's
 * start to the check of its last id: the freshness every account gets); the AWS requests of the
 * pass and their cost per million ids (reconcile-cost.ts: the same counting as one account's pass);
 * the token refresher's runs, getToken calls and AWS cost per connection per day while the pass
 * keeps every connection in use; dead letters; 429s.
 */
import { passCost } from './reconcile-cost.js';
import { projectionsOf } from './reconcile-measures.js';
import { dayCost, snapshot, usageBetween } from './connections-cost.js';
import { check, percentile, round, timed, type Check, type ScenarioResult } from './scenario.js';
import { atLimit, startSystem, type SimSystem } from './system.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

export interface AccountsScale {
  connections: number;
  idsEach: number;
  /** The provider's limit L, requests a second, told to the system (providerRequestsPerSecond). */
  limit: number;
  freshnessHours: number;
  idleMinutes: number;
  /** The run lasts at least this long (virtual), so that the token refresher's runs are in it. */
  minRunMinutes: number;
  maxPassHours: number;
  providerLatencyMs: number;
  meterLogs: boolean;
  seed: number;
}

/** 10,000 connections × 100 ids (1,000,000 ids), L = 200/s told to the system, freshnessHours 24. */
export const ACCOUNTS_FULL: AccountsScale = {
  connections: 10_000,
  idsEach: 100,
  limit: 200,
  freshnessHours: 24,
  idleMinutes: 10,
  minRunMinutes: 0,
  maxPassHours: 6,
  providerLatencyMs: 50,
  meterLogs: true,
  seed: 11,
};

/**
 * What `npm test` runs: 200 connections × 10 ids at L = 50/s (a pass of about a minute), run for 20
 * virtual minutes so that the token refresher runs on its schedule a few times.
 */
export const ACCOUNTS_SHORT: AccountsScale = {
  ...ACCOUNTS_FULL,
  connections: 200,
  idsEach: 10,
  limit: 50,
  idleMinutes: 1,
  minRunMinutes: 20,
  maxPassHours: 1,
  meterLogs: false,
  seed: 5,
};

/** Per (connection, id): when the sweep first checked it in the pass. Indexes from the ids' shapes: `conn-0001`, `fil-0042`. */
interface AccountsWatch {
  firstTickAt: number;
  firstInPass: Float64Array;
  checked: number;
  passEndAt: number | undefined;
  rateLimited: number;
}

/** The index of (connection, id): the connection's number × idsEach + the item's number (the simulator's tree names them so). */
function keyIndex(connection: string, id: string, scale: AccountsScale): number | undefined {
  const c = Number(connection.slice(connection.lastIndexOf('-') + 1)) - 1;
  const i = Number(id.slice(id.lastIndexOf('-') + 1)) - 1;
  if (!Number.isInteger(c) || !Number.isInteger(i) || c < 0 || c >= scale.connections || i < 0 || i >= scale.idsEach) return undefined;
  return c * scale.idsEach + i;
}

export function accountsPass(scale: AccountsScale, progress: (line: string) => void = () => undefined): Promise<ScenarioResult> {
  const n = scale.connections * scale.idsEach;
  const name = `reconciliation pass over ${scale.connections.toLocaleString('en-US')} connections × ${scale.idsEach} ids, L = ${scale.limit}/s known, freshnessHours ${scale.freshnessHours}`;
  return timed(name, async () => {
    const realStart = Date.now();
    const watch: AccountsWatch = { firstTickAt: Number.POSITIVE_INFINITY, firstInPass: new Float64Array(n).fill(-1), checked: 0, passEndAt: undefined, rateLimited: 0 };
    const system = await startSystem({
      ids: 0,
      accounts: { count: scale.connections, idsEach: scale.idsEach },
      ...atLimit(scale),
      reconcile: { freshnessHours: scale.freshnessHours, firstTickAfterMs: scale.idleMinutes * MINUTE },
      observe: {
        providerAnswer(_source, _id, status) {
          if (status === 429) watch.rateLimited += 1;
        },
        itemLog(source, message, itemId, at, connection) {
          if (source !== 'reconcile' || message !== 'record done' || connection === undefined || at < watch.firstTickAt) return;
          const k = keyIndex(connection, itemId, scale);
          if (k === undefined || watch.firstInPass[k]! >= 0) return;
          watch.firstInPass[k] = at;
          watch.checked += 1;
          if (watch.checked === n) watch.passEndAt = at;
        },
      },
    });
    try {
      const preloadStart = Date.now();
      const rows = await system.preloadItems(system.connectionIds);
      progress(`preloaded ${rows} rows in ${((Date.now() - preloadStart) / 1000).toFixed(1)} s real`);
      const t0 = system.clock.ms();
      watch.firstTickAt = t0 + scale.idleMinutes * MINUTE;
      const startUsage = snapshot(system.meter);
      const tokensBefore = tokenRequests(system);
      const end = await run(system, scale, watch, t0, realStart, progress);
      const usage = usageBetween(startUsage, snapshot(system.meter));
      return { virtualMs: end - t0, ...(await measure(system, scale, watch, { t0, end, usage, tokens: tokenRequests(system) - tokensBefore, rows })) };
    } finally {
      await system.close();
    }
  });
}

function tokenRequests(system: SimSystem): number {
  return system.connectionIds.reduce((sum, id) => sum + system.provider.accountCounters(id).tokenRequests, 0);
}

async function run(system: SimSystem, scale: AccountsScale, watch: AccountsWatch, t0: number, realStart: number, progress: (line: string) => void): Promise<number> {
  const hardStop = watch.firstTickAt + scale.maxPassHours * HOUR;
  let stopped = false;
  const report = (): void => {
    if (stopped) return;
    const now = system.clock.ms();
    progress(
      `${((now - t0) / HOUR).toFixed(2)} h virtual, ${((Date.now() - realStart) / 1000).toFixed(0)} s real: ${watch.checked.toLocaleString('en-US')} checked in the pass, ` +
        `reconcile queue ${system.sqs.size(system.reconcileQueueUrl!)}, ${system.refreshRuns.length} refresher runs`,
    );
    system.clock.at(now + 10 * MINUTE, report);
  };
  system.clock.at(watch.firstTickAt, report);
  await system.pollUntil(() => {
    const now = system.clock.ms();
    const through =
      watch.passEndAt !== undefined && now >= watch.passEndAt + 30_000 && now >= t0 + scale.minRunMinutes * MINUTE && system.sqs.size(system.reconcileQueueUrl!) === 0;
    stopped = through || now >= hardStop;
    return stopped;
  });
  return system.clock.ms();
}

interface RunFacts {
  t0: number;
  end: number;
  usage: ReturnType<typeof usageBetween>;
  tokens: number;
  rows: number;
}

async function measure(system: SimSystem, scale: AccountsScale, watch: AccountsWatch, facts: RunFacts): Promise<{ figures: Record<string, number | string>; checks: Check[] }> {
  const n = scale.connections * scale.idsEach;
  const passStart = system.ticks.find((t) => t.report?.startedPass)?.report?.passStartedAt ?? watch.firstTickAt;
  const passMs = (watch.passEndAt ?? facts.end) - passStart;
  // Each account's own pass: from the pass's start to the check of its last id.
  const accountMs = new Float64Array(scale.connections);
  let accountsThrough = 0;
  for (let c = 0; c < scale.connections; c += 1) {
    let last = 0;
    let all = true;
    for (let i = 0; i < scale.idsEach; i += 1) {
      const at = watch.firstInPass[c * scale.idsEach + i]!;
      if (at < 0) all = false;
      else last = Math.max(last, at);
    }
    if (all) accountsThrough += 1;
    accountMs[c] = all ? last - passStart : Number.POSITIVE_INFINITY;
  }
  const dead = system.sqs.size(system.dlqUrl) + system.sqs.size(system.reconcileDlqUrl!);
  const cost = passCost(system.meter, passMs / 1000, { logsMetered: scale.meterLogs, tracing: system.local.deployment.sync.tracing, itemsTable: system.local.names.itemsTable });
  const perMillion = cost.total * (1_000_000 / n);
  const days = (facts.end - facts.t0) / DAY;
  const refresher = dayCost(facts.usage, system.local.names.connectionsTable);
  const runs = system.refreshRuns.filter((r) => r.startedAt >= facts.t0);
  const longestRunS = runs.reduce((max, r) => Math.max(max, (r.endedAt - r.startedAt) / 1000), 0);
  const left = runs.reduce((sum, r) => sum + (r.result?.left ?? 0), 0);
  const timeoutS = system.local.deployment.refresher.timeoutSeconds;
  const w = projectionsOf(system, 1).at(-1)?.seconds;
  const hours = (ms: number): string => `${(ms / HOUR).toFixed(2)} h`;

  const figures: Record<string, number | string> = {
    'ids (connections × ids each)': `${n.toLocaleString('en-US')} (${scale.connections.toLocaleString('en-US')} × ${scale.idsEach})`,
    'rows preloaded': facts.rows,
    'provider limit': `${scale.limit}/s, known (providerRequestsPerSecond); paceScope as deployed`,
    'ids checked by the sweep in the pass': `${watch.checked.toLocaleString('en-US')} of ${n.toLocaleString('en-US')}`,
    'pass length (every id checked, virtual)': hours(passMs),
    'projected pass length W (last published)': w === undefined ? '-' : hours(w * 1000),
    "accounts' own pass (pass start to the check of its last id): p50 / p99 / max": `${hours(percentile(accountMs, 0.5))} / ${hours(percentile(accountMs, 0.99))} / ${hours(percentile(accountMs, 1))}`,
    'accounts checked through': `${accountsThrough} of ${scale.connections}`,
    'sweep rate (ids a second over the pass)': round(watch.checked / (passMs / 1000), 1),
    'provider 429s': watch.rateLimited,
    'dead-lettered': dead,
    'AWS cost of the pass (USD)': cost.total.toFixed(4),
    'AWS cost per million ids (USD)': perMillion.toFixed(3),
  };
  for (const line of cost.lines) figures[`… ${line.what}`] = `${line.units}: $${line.usd.toFixed(4)}`;
  const every = system.local.deployment.schedule.refresherEveryMinutes;
  figures['refresher runs (longest, time-out)'] = `${runs.length} (${longestRunS.toFixed(1)} s, ${timeoutS} s)`;
  figures['refresher runs its schedule makes in the run'] = `${Math.floor((facts.end - facts.t0) / (every * MINUTE))} (one every ${every} minutes)`;
  figures['refreshes left to a later run (a run\'s time ran short)'] = left;
  figures['run length (virtual)'] = hours(facts.end - facts.t0);
  figures['getToken calls a connection over the run'] = round(facts.tokens / scale.connections, 2);
  figures['refresher and connections table cost a connection over the run (USD)'] = (refresher.total / scale.connections).toFixed(7);
  figures['… a connection a day at this rate (USD)'] = (refresher.total / scale.connections / days).toFixed(7);

  const checks: Check[] = [
    check('every (connection, id) checked by the sweep in the pass', `${watch.checked} of ${n}`, watch.checked === n),
    check(`the pass within freshnessHours (${scale.freshnessHours} h)`, hours(passMs), watch.passEndAt !== undefined && passMs <= scale.freshnessHours * HOUR),
    check('every account checked through within freshnessHours', `${accountsThrough} of ${scale.connections}, slowest ${hours(percentile(accountMs, 1))}`, accountsThrough === scale.connections && percentile(accountMs, 1) <= scale.freshnessHours * HOUR),
    check('nothing dead-lettered', dead, dead === 0),
    check('every refresher run within its time-out', `${longestRunS.toFixed(1)} s of ${timeoutS} s`, longestRunS < timeoutS),
  ];
  return { figures, checks };
}
