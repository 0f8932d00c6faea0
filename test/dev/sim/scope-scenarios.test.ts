/**
 * The provider pace's scope in virtual time, short (dev/sim/scope-scenarios.ts LIMITS_SHORT and
 * OUTAGE_SHORT, dev/sim/scope-accounts-scenario.ts SCOPE_ACCOUNTS_SHORT): the real item-sync
 * handlers, pace, connections' access layer, provider client and DynamoDB adapters against a
 * provider with one account per connection. `npm run sim -- scope` runs them at full scale (20
 * accounts of 5 to 50 requests/s; 4 accounts of 10 to 40 requests/s as deployed; an outage over 200
 * connections); docs/measurements.md has those figures. No timing assertion: time is virtual.
 */
import { describe, expect, it } from 'vitest';
import { LIMITS_SHORT, OUTAGE_SHORT, outageByScope, perAccountLimits } from '../../../dev/sim/scope-scenarios.js';
import { SCOPE_ACCOUNTS_SHORT, scopeAccounts } from '../../../dev/sim/scope-accounts-scenario.js';
import type { ScenarioResult } from '../../../dev/sim/scenario.js';

function failed(result: ScenarioResult): string[] {
  return result.checks.filter((check) => !check.ok).map((check) => `${check.what}: ${check.value}`);
}

describe('paceScope connection in virtual time (short)', () => {
  it(`finds each of ${LIMITS_SHORT.accounts} accounts' own limit, and one account's halved limit slows no other`, async () => {
    const result = await perAccountLimits(LIMITS_SHORT);
    expect(failed(result)).toEqual([]);
    expect(result.checks).toHaveLength(5);
    expect(result.figures['dead-lettered']).toBe(0);
    expect(result.figures['halved account']).toMatch(/^conn-0003: 8 → 4\/s/);
  });

  it(`as deployed (both queues, batches of 100): ${SCOPE_ACCOUNTS_SHORT.accounts} accounts each sending a backlog use their own limits, with no idle tail`, async () => {
    const result = await scopeAccounts(SCOPE_ACCOUNTS_SHORT);
    expect(failed(result)).toEqual([]);
    expect(result.checks).toHaveLength(SCOPE_ACCOUNTS_SHORT.accounts + 5);
    expect(result.figures['dead-lettered']).toBe(0);
    // Each busy account's line: all its ids done, and what it used of its limit.
    expect(result.figures['conn-0001']).toMatch(/^limit 4\/s: 160 of 160 done in [\d.]+ s/);
    expect(result.figures['conn-0002']).toMatch(/^limit 8\/s: 320 of 320 done in [\d.]+ s/);
  });

  it(`keeps an outage over ${OUTAGE_SHORT.connections} connections to a few requests a minute under either scope, as under client`, async () => {
    const result = await outageByScope(OUTAGE_SHORT);
    expect(failed(result)).toEqual([]);
    expect(result.checks).toHaveLength(5);
    for (const scope of ['client', 'connection']) {
      expect(result.figures[`${scope}: most in any later minute`]).toBeLessThanOrEqual(10);
      expect(result.figures[`${scope}: dead-lettered`]).toBe(0);
    }
  });
});
