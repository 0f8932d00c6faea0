/**
 * The provider pace's scenarios, short (dev/sim/pace-scenarios.ts SHORT_SCALE: L = 20/s, 100 ids,
 * 3 containers, an outage a minute longer than the age at which the item sync refreshes a token on
 * demand), in virtual time: the real handlers, pace, provider client and DynamoDB adapters. `npm run sim` runs them at full scale; docs/measurements.md has those figures.
 */
import { describe, expect, it } from 'vitest';
import { knownLimit, outage, SHORT_SCALE, unknownLimit, type ScenarioResult } from '../../../dev/sim/pace-scenarios.js';

function failed(result: ScenarioResult): string[] {
  return result.checks.filter((check) => !check.ok).map((check) => `${check.what}: ${check.value}`);
}

describe('the provider pace in virtual time (short scenarios)', () => {

  it('finds an unknown limit, follows it down and up, and dead-letters nothing', async () => {
    const result = await unknownLimit(SHORT_SCALE);
    expect(failed(result)).toEqual([]);
    expect(result.checks.map((check) => check.what)).toHaveLength(6);
  });

  it('uses a known limit fully without a 429', async () => {
    const result = await knownLimit(SHORT_SCALE);
    expect(failed(result)).toEqual([]);
    expect(result.figures['429s']).toBe(0);
  });

  it.each(['provider', 'token'] as const)('rides out a %s outage: nothing dead-lettered or lost, the provider left alone, the backlog drained', async (kind) => {
    const result = await outage(SHORT_SCALE, kind);
    expect(failed(result)).toEqual([]);
    expect(result.figures['dead-lettered']).toBe(0);
    expect(result.figures['ids lost or stale at the end']).toBe(0);
    // The drain splits into the seconds ids were served, never faster than the pace allows (L, and its burst), and the wait for the rest.
    const serving = result.figures['drain: seconds with ids served'] as number;
    expect(serving).toBeGreaterThan(0);
    expect(serving).toBeLessThanOrEqual((result.figures['drain: seconds from the first success'] as number) + 1);
    expect(result.figures['drain: rate in those seconds (req/s)']).toBeLessThanOrEqual(2 * SHORT_SCALE.limit);
  });
});
