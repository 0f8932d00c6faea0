/**
 * The provider pace's scope (`paceScope`) in virtual time (system.ts: the real item-sync handlers,
 * pace, connections' access layer, token refresher, provider client and DynamoDB adapters on
 * DynamoDB Local, the SQS model), against a provider with one account per connection:
 *
 * - `scope-limits`: paceScope `connection`, accounts whose limits differ (scope 'account' in the
 *   provider model, each its own rate, unknown to the system). Users keep every account's pace busy
 *   (each account's ids outstanding in proportion to its limit). After a warm-up, each account's
 *   use of its own limit and its 429s; then one account's limit halves, and the others' throughput
 *   is compared with theirs before, in the minute of its 429s and after.
 * - `scope-outage`: a provider outage (every request 503) over many connections, once under each
 *   scope: provider requests a minute while it lasts (the breaker is the client id's in both), the
 *   control table's requests, and the drain after it.
 *
 * Every figure is virtual time; `checks` compares them with the goals.
 */
import type { PaceScope } from '../../functions/shared/config.js';
import { rowsAgainstAccounts } from './connections-measures.js';
import { check, round, timed, type Check, type ScenarioResult } from './scenario.js';
import { startSystem, type SimSystem } from './system.js';

const MINUTE = 60_000;
const RETRY_AFTER_SECONDS = 1;

export interface LimitsScale {
  accounts: number;
  /** The accounts' limits, requests a second: spread evenly from the first to the second. */
  limits: [number, number];
  /** Each account's ids (sent round and round). */
  idsEach: number;
  /** Seconds of each account's limit kept outstanding in the sync queue (at least 10 messages). */
  backlogSeconds: number;
  /** Sync invocations at once (the context key syncMaxConcurrency). */
  containers: number;
  /**
   * Records per invocation (the context key syncBatchSize): 10, as docs/provider-pace.md advises for
   * accounts with limits of their own (a batch's records wait for their own connection's pace).
   */
  batchSize: number;
  /** Minutes: warm-up (not measured), steady (measured), after the halving (measured from `settleSeconds` on). */
  phaseMinutes: [number, number, number];
  /** After the halving, the minute of the halved account's 429s (every account's "after" figures start after it). */
  settleSeconds: number;
  /**
   * The goals' bounds: each account's share of requests answered 429 (at most), how far the other
   * accounts' throughput may move after the halving against before (either way), and while the
   * halved account's 429s come (at least this share of before). A short run's windows hold a few
   * hundred requests: one 429 more is a percent, so its bounds are wider.
   */
  tolerance: { limitedShare: number; otherChange: number; otherDuringBurst: number };
  seed: number;
}

/** 20 accounts from 5 to 50 requests/s (550 together), 8 minutes: 2 of warm-up, 3 steady, 3 after the fastest account's limit halves. */
export const LIMITS_FULL: LimitsScale = {
  accounts: 20,
  limits: [5, 50],
  idsEach: 400,
  backlogSeconds: 4,
  containers: 50,
  batchSize: 10,
  phaseMinutes: [2, 3, 3],
  settleSeconds: 60,
  tolerance: { limitedShare: 0.02, otherChange: 0.03, otherDuringBurst: 0.95 },
  seed: 11,
};

/** What `npm test` runs: 3 accounts of 4, 6 and 8 requests/s, 2 minutes (60 s of warm-up: each finds its limit; 30 s steady, 30 s after the halving). */
export const LIMITS_SHORT: LimitsScale = {
  accounts: 3,
  limits: [4, 8],
  idsEach: 40,
  backlogSeconds: 4,
  containers: 3,
  batchSize: 10,
  phaseMinutes: [1, 0.5, 0.5],
  settleSeconds: 10,
  tolerance: { limitedShare: 0.05, otherChange: 0.1, otherDuringBurst: 0.85 },
  seed: 5,
};

/** Each account's limit: `accounts` rates spread evenly over [min, max], the k-th account's the k-th. */
export function accountLimits(scale: Pick<LimitsScale, 'accounts' | 'limits'>, connectionIds: readonly string[]): Map<string, number> {
  const [min, max] = scale.limits;
  const n = scale.accounts;
  return new Map(connectionIds.map((id, k) => [id, round(n === 1 ? max : min + ((max - min) * k) / (n - 1), 2)]));
}

interface Served {
  served: number;
  limited: number;
}

/** Every account's counters now. */
function counters(system: SimSystem): Map<string, Served> {
  return new Map(
    system.connectionIds.map((id) => {
      const c = system.provider.accountCounters(id);
      return [id, { served: c.itemsServed, limited: c.rateLimited }];
    }),
  );
}

/** Per account over [from, to): served a second, and the share of its item requests answered 429. */
function between(from: Map<string, Served>, to: Map<string, Served>, seconds: number): Map<string, { perSecond: number; limitedShare: number }> {
  const out = new Map<string, { perSecond: number; limitedShare: number }>();
  for (const [id, end] of to) {
    const start = from.get(id)!;
    const served = end.served - start.served;
    const limited = end.limited - start.limited;
    out.set(id, { perSecond: served / seconds, limitedShare: served + limited === 0 ? 0 : limited / (served + limited) });
  }
  return out;
}

/**
 * Keeps each account's messages outstanding (sent and not yet done) at `targets`, interleaved so that
 * a batch mixes accounts: users sending each account's ids round and round.
 */
function keepAccountsFed(system: SimSystem, targets: Map<string, number>, done: Map<string, number>, until: () => boolean): void {
  const sent = new Map<string, number>();
  const next = new Map<string, number>();
  const ids = new Map(system.connectionIds.map((id) => [id, system.provider.account(id).itemIds()]));
  const tick = (): void => {
    if (until()) return;
    const deficit = new Map<string, number>();
    for (const [connection, target] of targets) {
      deficit.set(connection, target - ((sent.get(connection) ?? 0) - (done.get(connection) ?? 0)));
    }
    for (let more = true; more; ) {
      more = false;
      for (const [connection, left] of deficit) {
        if (left <= 0) continue;
        const list = ids.get(connection)!;
        const n = next.get(connection) ?? 0;
        system.sqs.send(system.queueUrl, { body: JSON.stringify({ connection, id: list[n % list.length] }) });
        next.set(connection, n + 1);
        sent.set(connection, (sent.get(connection) ?? 0) + 1);
        deficit.set(connection, left - 1);
        more = true;
      }
    }
    system.clock.at(system.clock.ms() + 500, tick);
  };
  tick();
}

/**
 * paceScope `connection`, accounts whose limits differ and are unknown to the system: each finds its
 * own; then the fastest account's limit halves and the others go on as before.
 */
export function perAccountLimits(scale: LimitsScale, progress: (line: string) => void = () => undefined): Promise<ScenarioResult> {
  const [min, max] = scale.limits;
  return timed(`paceScope connection: ${scale.accounts} accounts, limits ${min} to ${max}/s (unknown), the fastest halves`, async () => {
    const limits = new Map<string, number>();
    const done = new Map<string, number>();
    const system = await startSystem({
      ids: 0,
      accounts: { count: scale.accounts, idsEach: scale.idsEach },
      seed: scale.seed,
      rateLimit: { requestsPerSecond: max, scope: 'account', accountRequestsPerSecond: (id) => limits.get(id), retryAfterSeconds: RETRY_AFTER_SECONDS },
      paceScope: 'connection',
      syncMaxConcurrency: scale.containers,
      syncBatchSize: scale.batchSize,
      providerLatencyMs: 50,
      recordedRequests: 1_000,
      observe: {
        itemLog(_source, message, _itemId, _at, connection) {
          if (connection !== undefined && (message === 'record done' || message === 'record dead-lettered')) done.set(connection, (done.get(connection) ?? 0) + 1);
        },
      },
    });
    try {
      for (const [id, limit] of accountLimits(scale, system.connectionIds)) limits.set(id, limit);
      const halved = [...limits.entries()].sort((a, b) => b[1] - a[1])[0]![0];
      const t0 = system.clock.ms();
      const [warm, steady, after] = scale.phaseMinutes.map((m) => m * MINUTE) as [number, number, number];
      const halveAt = t0 + warm + steady;
      const settleAt = halveAt + scale.settleSeconds * 1000;
      const end = halveAt + after;
      const targets = new Map([...limits].map(([id, limit]) => [id, Math.max(10, Math.ceil(limit * scale.backlogSeconds))]));
      keepAccountsFed(system, targets, done, () => system.clock.ms() >= end);
      const snaps = new Map<number, Map<string, Served>>();
      for (const at of [t0 + warm, halveAt, settleAt, end]) system.clock.at(at, () => snaps.set(at, counters(system)));
      system.clock.at(halveAt, () => {
        const before = limits.get(halved)!;
        limits.set(halved, before / 2);
        system.provider.setAccountRateLimit(halved, before / 2);
      });
      // The control table's requests over the steady phase.
      let controlSteady = 0;
      system.clock.at(t0 + warm, () => (controlSteady = -controlRequests(system)));
      system.clock.at(halveAt, () => (controlSteady += controlRequests(system)));
      const realStart = Date.now();
      const report = (): void => {
        const now = system.clock.ms();
        const served = [...counters(system).values()].reduce((sum, c) => sum + c.served, 0);
        progress(`${((now - t0) / MINUTE).toFixed(0)} min virtual, ${((Date.now() - realStart) / 1000).toFixed(0)} s real: ${served} served, sync queue ${system.sqs.size(system.queueUrl)}`);
        if (now + MINUTE < end) system.clock.at(now + MINUTE, report);
      };
      system.clock.at(t0 + MINUTE, report);
      await system.pollUntil(() => system.clock.ms() >= end);

      const steadyUse = between(snaps.get(t0 + warm)!, snaps.get(halveAt)!, steady / 1000);
      const burstUse = between(snaps.get(halveAt)!, snaps.get(settleAt)!, scale.settleSeconds);
      const afterUse = between(snaps.get(settleAt)!, snaps.get(end)!, (end - settleAt) / 1000);
      const original = (id: string): number => (id === halved ? limits.get(id)! * 2 : limits.get(id)!);
      const pct = (value: number): number => round(value * 100, 2);
      const figures: Record<string, number | string> = {
        accounts: `${scale.accounts}, limits ${[...limits.keys()].map((id) => original(id)).join(', ')} requests/s (unknown to the system; Retry-After ${RETRY_AFTER_SECONDS} s)`,
        containers: scale.containers,
        'measured after a warm-up of (min)': scale.phaseMinutes[0],
        'halved account': `${halved}: ${original(halved)} → ${limits.get(halved)}/s at ${scale.phaseMinutes[0] + scale.phaseMinutes[1]} min`,
      };
      let worstUse = Infinity;
      let worstLimited = 0;
      let worstOtherChange = 0;
      let worstOtherBurst = Infinity;
      const sumBefore = { others: 0 };
      const sumAfter = { others: 0 };
      for (const id of system.connectionIds) {
        const limit = original(id);
        const a = steadyUse.get(id)!;
        const b = afterUse.get(id)!;
        const burst = burstUse.get(id)!;
        const useA = a.perSecond / limit;
        const useB = b.perSecond / limits.get(id)!;
        worstUse = Math.min(worstUse, useA, useB);
        worstLimited = Math.max(worstLimited, a.limitedShare, b.limitedShare);
        let line = `limit ${limit}/s: steady ${round(a.perSecond, 2)}/s (${pct(useA)}% of its limit, ${pct(a.limitedShare)}% 429)`;
        if (id === halved) {
          line += `; halved to ${limits.get(id)}/s: its first ${scale.settleSeconds} s ${pct(burst.limitedShare)}% 429, then ${round(b.perSecond, 2)}/s (${pct(useB)}% of the new limit, ${pct(b.limitedShare)}% 429)`;
        } else {
          const change = b.perSecond / a.perSecond - 1;
          const inBurst = burst.perSecond / a.perSecond;
          worstOtherChange = Math.max(worstOtherChange, Math.abs(change));
          worstOtherBurst = Math.min(worstOtherBurst, inBurst);
          sumBefore.others += a.perSecond;
          sumAfter.others += b.perSecond;
          line += `; while the halved account's 429s came ${pct(inBurst)}% of that, after ${round(b.perSecond, 2)}/s (${change >= 0 ? '+' : ''}${pct(change)}%, ${pct(b.limitedShare)}% 429)`;
        }
        figures[id] = line;
      }
      const served = [...afterUse.values()].reduce((sum, v) => sum + v.perSecond, 0) + [...steadyUse.values()].reduce((sum, v) => sum + v.perSecond, 0);
      figures['the others together, steady → after'] = `${round(sumBefore.others, 1)}/s → ${round(sumAfter.others, 1)}/s`;
      figures['control table requests a provider request (steady)'] = round(controlSteady / Math.max(1, [...steadyUse.values()].reduce((sum, v) => sum + v.perSecond, 0) * (steady / 1000)), 3);
      figures['provider requests served a second (both phases, average)'] = round(served / 2, 1);
      const dead = system.sqs.size(system.dlqUrl);
      figures['dead-lettered'] = dead;
      const checks: Check[] = [
        check('every account: at least 85% of its own limit (steady, and after the halving)', `${pct(worstUse)}% at worst`, worstUse >= 0.85),
        check(
          `every account: at most ${pct(scale.tolerance.limitedShare)}% of its requests answered 429 (steady, and after the halving)`,
          `${pct(worstLimited)}% at worst`,
          worstLimited <= scale.tolerance.limitedShare,
        ),
        check(
          `no account's 429s slow another: the others' throughput after the halving within ${pct(scale.tolerance.otherChange)}% of before`,
          `${pct(worstOtherChange)}% at most`,
          worstOtherChange <= scale.tolerance.otherChange,
        ),
        check(
          `the others' throughput while the halved account's 429s came: at least ${pct(scale.tolerance.otherDuringBurst)}% of before`,
          `${pct(worstOtherBurst)}% at worst`,
          worstOtherBurst >= scale.tolerance.otherDuringBurst,
        ),
        check('nothing dead-lettered', dead, dead === 0),
      ];
      return { virtualMs: end - t0, figures, checks };
    } finally {
      await system.close();
    }
  });
}

/** The sync containers' requests to the control table (the pace rows) so far. */
export function controlRequests(system: SimSystem): number {
  const table = system.local.names.controlTable;
  return Object.entries(system.meter.dynamo.sync)
    .filter(([key]) => key.endsWith(` ${table}`))
    .reduce((sum, [, count]) => sum + count.requests, 0);
}

export interface OutageScale {
  connections: number;
  idsEach: number;
  outageMinutes: number;
  /** Sync invocations at once (syncMaxConcurrency); default the deployed one. */
  containers?: number;
  seed: number;
}

/** 200 connections × 5 ids, a 30-minute outage, the deployed syncMaxConcurrency. */
export const OUTAGE_FULL: OutageScale = { connections: 200, idsEach: 5, outageMinutes: 30, seed: 11 };
/** What `npm test` runs: 20 connections × 1 id, a 4-minute outage, 3 containers. */
export const OUTAGE_SHORT: OutageScale = { connections: 20, idsEach: 1, outageMinutes: 4, containers: 3, seed: 5 };

interface OutageRun {
  /** Item requests in each minute from the first failure to the end of the outage. */
  perMinute: number[];
  itemRequests: number;
  getToken: number;
  /** The sync's control-table requests a minute, from the third minute of the outage to its end. */
  controlPerMinute: number;
  virtualMs: number;
  drainedAfterSeconds: number | undefined;
  dead: number;
  rows: { expected: number; synced: number; mismatched: number };
}

/** Every id synced, then the outage; a minute in, 10% of every account's items change and users send every id again. */
async function outageRun(scale: OutageScale, scope: PaceScope): Promise<OutageRun> {
  const system = await startSystem({
    ids: 0,
    accounts: { count: scale.connections, idsEach: scale.idsEach },
    seed: scale.seed,
    paceScope: scope,
    ...(scale.containers !== undefined ? { syncMaxConcurrency: scale.containers } : {}),
    providerLatencyMs: 50,
    recordedRequests: 200_000,
  });
  try {
    const t0 = system.clock.ms();
    const sendAll = (): void => {
      for (const connection of system.connectionIds) {
        for (const id of system.provider.account(connection).itemIds()) system.sqs.send(system.queueUrl, { body: JSON.stringify({ connection, id }) });
      }
    };
    sendAll();
    const start = t0 + 2 * MINUTE;
    const stop = start + scale.outageMinutes * MINUTE;
    let clear: () => void = () => undefined;
    system.clock.at(start, () => (clear = system.provider.addFault({ endpoint: 'any', fault: { kind: 'status', status: 503 } })));
    system.clock.at(start + MINUTE, () => {
      for (const connection of system.connectionIds) {
        const account = system.provider.account(connection);
        account.itemIds().forEach((id, n) => n % 10 === 0 && account.bumpRevision(id));
      }
      sendAll();
    });
    system.clock.at(stop, () => clear());
    const control: number[] = [];
    for (let m = 0; m <= scale.outageMinutes; m += 1) system.clock.at(start + m * MINUTE, () => (control[m] = controlRequests(system)));
    let emptySince: number | undefined;
    await system.pollUntil(() => {
      const now = system.clock.ms();
      if (now < stop) return false;
      if (system.sqs.size(system.queueUrl) > 0) emptySince = undefined;
      else emptySince ??= now;
      return (emptySince !== undefined && now - emptySince > MINUTE) || now >= stop + 60 * MINUTE;
    });
    const during = system.provider.requests.filter((r) => (r.receivedAt ?? 0) >= start && (r.receivedAt ?? 0) < stop);
    const items = during.filter((r) => r.endpoint === 'items');
    const detectedAt = items.find((r) => r.status >= 500)?.receivedAt ?? start;
    const perMinute = Array.from({ length: Math.ceil((stop - detectedAt) / MINUTE) }, () => 0);
    for (const r of items) {
      const minute = Math.floor(((r.receivedAt ?? 0) - detectedAt) / MINUTE);
      if (minute >= 0 && minute < perMinute.length) perMinute[minute] = (perMinute[minute] ?? 0) + 1;
    }
    const rows = await rowsAgainstAccounts(system, '');
    const m = scale.outageMinutes;
    return {
      perMinute,
      itemRequests: items.length,
      getToken: during.length - items.length,
      controlPerMinute: m > 2 ? (control[m]! - control[2]!) / (m - 2) : 0,
      virtualMs: system.clock.ms() - t0,
      drainedAfterSeconds: emptySince === undefined ? undefined : Math.round((emptySince - stop) / 1000),
      dead: system.sqs.size(system.dlqUrl),
      rows: { expected: rows.expected, synced: rows.synced, mismatched: rows.mismatched },
    };
  } finally {
    await system.close();
  }
}

/** The same outage under `client` and under `connection`: provider requests a minute while it lasts. */
export function outageByScope(scale: OutageScale): Promise<ScenarioResult> {
  return timed(`provider outage for ${scale.outageMinutes} min, ${scale.connections} connections: paceScope client, then connection`, async () => {
    const runs = { client: await outageRun(scale, 'client'), connection: await outageRun(scale, 'connection') };
    const figures: Record<string, number | string> = {};
    const checks: Check[] = [];
    for (const [scope, run] of Object.entries(runs) as Array<[PaceScope, OutageRun]>) {
      const later = Math.max(0, ...run.perMinute.slice(1));
      const average = run.perMinute.length > 1 ? run.perMinute.slice(1).reduce((a, b) => a + b, 0) / (run.perMinute.length - 1) : 0;
      figures[`${scope}: item requests during the outage`] = run.itemRequests;
      figures[`${scope}: in the minute of detection`] = run.perMinute[0] ?? 0;
      figures[`${scope}: most in any later minute`] = later;
      figures[`${scope}: average a minute after detection`] = round(average, 2);
      figures[`${scope}: getToken calls during the outage (the refresher's; no pace)`] = run.getToken;
      figures[`${scope}: control table requests a minute (the sync, from the outage's third minute)`] = round(run.controlPerMinute, 1);
      figures[`${scope}: backlog drained after (s)`] = run.drainedAfterSeconds ?? 'not drained';
      figures[`${scope}: dead-lettered`] = run.dead;
      figures[`${scope}: rows equal to the accounts' items`] = `${run.rows.synced} of ${run.rows.expected}, ${run.rows.mismatched} not`;
      checks.push(
        check(`${scope}: at most 10 item requests a minute after the minute of detection`, later, later <= 10),
        check(`${scope}: nothing dead-lettered, every id synced after recovery`, `${run.dead} dead, ${run.rows.synced} of ${run.rows.expected}`, run.dead === 0 && run.rows.synced === run.rows.expected && run.rows.mismatched === 0),
      );
    }
    const clientLater = Math.max(0, ...runs.client.perMinute.slice(1));
    const connectionLater = Math.max(0, ...runs.connection.perMinute.slice(1));
    checks.push(
      check(
        'connection: requests a minute of the same order as client (at most twice, plus 3), not × connections',
        `${connectionLater} vs ${clientLater}`,
        connectionLater <= 2 * clientLater + 3,
      ),
    );
    return { virtualMs: runs.client.virtualMs + runs.connection.virtualMs, figures, checks };
  });
}
