/**
 * A reconciliation pass in virtual time, short (dev/sim/reconcile-scenario.ts RECONCILE_SHORT: 2,400
 * ids, L = 50/s): the real reconciler on its one-minute schedule, the sync's two event sources, the
 * real pace, provider client and DynamoDB adapters on DynamoDB Local. `npm run sim reconcile` runs it at
 * full scale, where the cost goal is judged.
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_PACE_SETTINGS, leaseSize } from '../../../functions/shared/provider/pace/pace-state.js';
import { ENV } from '../../../functions/shared/config.js';
import { NUMBER_RULES } from '../../../infra/context.js';
import { SYNC_PACE_LEASE_SECONDS } from '../../../functions/item-sync/app.js';
import { RECONCILE_SCHEDULE_MINUTES, RECONCILER_MEMORY_MB, RECONCILER_TIMEOUT_SECONDS, syncEventSourceDeployment } from '../../../infra/deployment.js';
import { systemConfig } from '../../../dev/system/config.js';
import { RECONCILE_FULL, RECONCILE_SHORT, reconcilePass, reconcileSystemOptions } from '../../../dev/sim/reconcile-scenario.js';
import { judged } from '../../../dev/sim/scenario.js';
import { startSystem } from '../../../dev/sim/system.js';

const COST_CHECK = 'cost of a pass per million unchanged ids ≤ $1';

/** The request count a `cost: …` figure starts with. */
function requests(figure: number | string | undefined): number {
  const match = /^([\d,]+) requests/.exec(String(figure));
  if (!match) throw new Error(`not a cost figure: ${String(figure)}`);
  return Number(match[1]!.replace(/,/g, ''));
}

describe('a reconciliation pass in virtual time (short)', () => {
  it('checks every id once, brings the changed rows back in line, projects its length, leaves users their time, and counts its requests', async () => {
    const result = await reconcilePass(RECONCILE_SHORT);
    // The cost per million ids is judged at full scale (at L = 50/s the pace's draws are smaller).
    const failed = result.checks.filter((check) => !check.ok && check.what !== COST_CHECK).map((check) => `${check.what}: ${check.value}`);
    expect(failed).toEqual([]);
    expect(result.checks.map((check) => check.what)).toContain(COST_CHECK);
    expect(result.checks).toHaveLength(7);
    // `npm run sim -- reconcile --short` reports the cost goal without failing on it; only that goal.
    expect(result.checks.filter((check) => !judged(check, true)).map((check) => check.what)).toEqual([COST_CHECK]);
    expect(result.checks.every((check) => judged(check, false))).toBe(true);

    const f = result.figures;
    expect(f['ids sent by the reconciler']).toBe(RECONCILE_SHORT.ids);
    expect(f['ids sent twice by the reconciler']).toBe(0);
    expect(f['failed ticks']).toBe(0);
    expect(f['dead-lettered']).toBe(0);
    // The changes came during the pass: some before their id's check (in line now), some after.
    expect(f['… before their check in the pass']).toBeGreaterThan(0);
    expect(f['rows not matching the provider at the end']).toBe(f['… after their check (left for the next pass)']);

    // Every request of the sweep is counted: the reconciler's ids sent 10 a SendMessageBatch; sync
    // invocations of up to the deployed batch size on the reconcile queue, each deleting its records
    // 10 a DeleteMessageBatch and reading its rows with a BatchGetItem (one more for an id whose
    // conditional write lost a race).
    const syncMemorySize = NUMBER_RULES.syncMemorySize.fallback;
    const syncBatchSize = NUMBER_RULES.syncBatchSize.fallback;
    const invocations = requests(f[`cost: Lambda sync on the reconcile queue (${syncMemorySize} MB, Arm)`]);
    expect(invocations).toBeGreaterThanOrEqual(RECONCILE_SHORT.ids / syncBatchSize);
    expect(requests(f['cost: SQS SendMessageBatch (reconciler)'])).toBeGreaterThanOrEqual(RECONCILE_SHORT.ids / 10);
    expect(requests(f['cost: SQS DeleteMessageBatch (event source on the reconcile queue)'])).toBeGreaterThanOrEqual(RECONCILE_SHORT.ids / 10);
    expect(requests(f['cost: DynamoDB BatchGetItem items (sync on the reconcile queue)'])).toBeGreaterThanOrEqual(invocations);
    expect(requests(f['cost: DynamoDB Scan items (reconciler)'])).toBeGreaterThan(0);
    expect(Number(f['cost of the pass (USD)'])).toBeGreaterThan(0);

    // The sweep draws the pace a whole lease at a time (12 requests at L = 50/s): one written draw
    // per lease, one more per batch at most (its last lease no larger than what it still wants), and
    // the draws its containers lose to each other on top, well under one per id (drawing the token
    // or two that happened to be there cost more than two writes per id).
    const draws = String(f['cost: DynamoDB PutItem control (sync on the reconcile queue)']);
    const refused = Number(/\(([\d,]+) refused by their condition\)/.exec(draws)?.[1]?.replace(/,/g, '') ?? '0');
    const lease = leaseSize(RECONCILE_SHORT.limit, { ...DEFAULT_PACE_SETTINGS, leaseSeconds: SYNC_PACE_LEASE_SECONDS });
    expect(requests(draws) - refused).toBeLessThanOrEqual(Math.ceil((RECONCILE_SHORT.ids / lease) * 1.05) + invocations);
    expect(requests(draws)).toBeLessThan(RECONCILE_SHORT.ids * 0.75);
  });

  it('runs with the settings the stacks deploy', async () => {
    // The full scale's system (fewer ids: the deployed settings do not depend on them).
    const idleMinutes = 1;
    const system = await startSystem(reconcileSystemOptions({ ...RECONCILE_FULL, ids: 100, idleMinutes }, {}));
    try {
      const { reconciler, sync, sweep } = system.functions;
      // The reconciler's schedule, time-out and memory; the sync's memory.
      expect(reconciler?.timeoutMs).toBe(RECONCILER_TIMEOUT_SECONDS * 1000);
      expect(reconciler?.memoryMb).toBe(RECONCILER_MEMORY_MB);
      expect(sync[0]?.memoryMb).toBe(NUMBER_RULES.syncMemorySize.fallback);
      const t0 = system.clock.ms();
      const interval = RECONCILE_SCHEDULE_MINUTES * 60_000;
      const first = idleMinutes * 60_000;
      await system.pollUntil(() => system.clock.ms() >= t0 + first + 2.5 * interval);
      expect(system.ticks.map((tick) => tick.startedAt - t0)).toEqual([first, first + interval, first + 2 * interval]);
      // Both event sources at syncMaxConcurrency (infra/reconciler/reconciler.ts addReconcileEventSource).
      const deployed = systemConfig();
      expect(sync).toHaveLength(syncEventSourceDeployment(deployed).maxConcurrency);
      expect(sweep).toHaveLength(syncEventSourceDeployment(deployed).maxConcurrency);
      expect(reconciler?.environment[ENV.freshnessHours]).toBe(String(deployed.freshnessHours));
      // The function's default high-water mark, as the stack leaves it.
      expect(reconciler?.environment[ENV.reconcileHighWater]).toBeUndefined();
    } finally {
      await system.close();
    }
  });
});
