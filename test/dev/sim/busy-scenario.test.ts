/**
 * A busy account's own users at short scale, in virtual time (dev/sim/busy-scenario.ts): one
 * account's users (an id every 200 ms, bursts of 20) beside that same account's backfill in the
 * background lane, and quiet accounts, at a provider limit the system is not told. The full-scale
 * figures come from `npm run sim -- busy` (docs/fairness.md).
 *
 * What holds here: every id done, nothing dead-lettered, and no id the users sent during the
 * backfill done in the background lane (a users' batch keeps what the pace serves within
 * USERS_HOLD_MS); the figures and checks the scenario reports. The latency ratios and the share
 * of L are the scenario's goals, reported with their checks, not held here.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { BUSY_MAX_429_SHARE, BUSY_SHARE_OF_LIMIT, BUSY_SHORT, BUSY_USERS_FACTOR, busyReport } from '../../../dev/sim/busy-scenario.js';
import { fairnessRun, type FairnessRun } from '../../../dev/sim/fairness-scenario.js';
import { quantiles } from '../../../dev/sim/quiet-accounts.js';

describe("busy, short scale: an account's users beside its own backfill at L = 200/s not told", () => {
  let run: FairnessRun;
  beforeAll(async () => {
    run = await fairnessRun(BUSY_SHORT, 'background');
  });

  it("syncs every id, dead-letters nothing, and never puts the users' ids behind their own account's backfill", () => {
    expect(run.backfill).toMatchObject({ ids: BUSY_SHORT.backfillIds, done: BUSY_SHORT.backfillIds });
    expect(run.quietLeft).toBe(0);
    expect(run.deadLettered).toBe(0);
    const busy = run.busy!;
    expect(busy.left).toBe(0);
    // Enough of the users' ids on each side: an id every 200 ms and the bursts.
    expect(busy.idle.length).toBeGreaterThanOrEqual(90);
    expect(busy.during.length).toBeGreaterThanOrEqual(40);
    expect(busy.duringInBackground).toBe(0);
  });

  it('reports both groups of users idle and during, the share of L and the 429s, and checks each goal', () => {
    const { figures, checks } = busyReport(BUSY_SHORT, run);
    const busy = run.busy!;
    const idle = quantiles(busy.idle);
    const during = quantiles(busy.during);
    expect(figures["busy account's users, idle"]).toBe(`${busy.idle.length} ids: p50 ${idle.p50} s, p99 ${idle.p99} s, max ${idle.max} s`);
    expect(figures["busy account's users, during its backfill"]).toBe(`${busy.during.length} ids: p50 ${during.p50} s, p99 ${during.p99} s, max ${during.max} s`);
    expect(figures["busy account's users' ids done in the background lane, of those sent idle and during the backfill"]).toBe(`${busy.idleInBackground}, 0`);
    expect(figures['backfill once the limit was found (the first 429)']).toMatch(/^(after [\d.]+ s; then [\d,]+ ids in [\d.]+ s: [\d.]+ ids\/s, [\d.]+% of L|no 429 during the backfill)$/);
    expect(figures.backfill).toMatch(/^600 of 600 in [\d.]+ s: [\d.]+ ids\/s, [\d.]+% of L$/);
    expect(figures['429s during the backfill']).toMatch(/^\d+ of [\d,]+ requests \([\d.]+%\)$/);
    expect(checks.map(({ what }) => what)).toEqual([
      `the busy account's users: p50 and p99 during its own backfill at most ${BUSY_USERS_FACTOR}× idle`,
      "the busy account's users: no id sent during the backfill put behind it (done in the background lane)",
      "the quiet accounts: p50 and p99 during the backfill at most 1.5× idle",
      `the backfill uses at least ${BUSY_SHARE_OF_LIMIT * 100}% of L once the pace found it (its first 429; the whole backfill without one)`,
      `at most ${BUSY_MAX_429_SHARE * 100}% of the requests during the backfill answered 429`,
      'every id done',
      'nothing dead-lettered',
    ]);
    // The share of L is judged at full scale only (printed as info with --short); the others at every scale.
    expect(checks.filter((c) => c.fullScaleOnly).map(({ what }) => what)).toEqual([checks[3]!.what]);
    const ok = Object.fromEntries(checks.map(({ what, ok }) => [what, ok]));
    expect(ok["the busy account's users: no id sent during the backfill put behind it (done in the background lane)"]).toBe(true);
    expect(ok['every id done']).toBe(true);
    expect(ok['nothing dead-lettered']).toBe(true);
    const users = checks[0]!;
    expect(users.ok).toBe(during.p50 <= BUSY_USERS_FACTOR * idle.p50 && during.p99 <= BUSY_USERS_FACTOR * idle.p99);
  });
});
