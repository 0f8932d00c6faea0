/**
 * The token refresher at scale in virtual time, short (dev/sim/refresher-scenario.ts
 * REFRESHER_SHORT: 60 connections in use for an hour, a token endpoint of 2 getToken a second the
 * system is not told): the real refresher handler on its deployed schedule, its real DynamoDB
 * adapters and provider client, the token pace finding the endpoint's limit. `npm run sim --
 * refresher` runs it at full scale (10,000 connections for 24 hours); docs/measurements.md has
 * those figures. No timing assertion: time is virtual.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { REFRESHER_SHORT, refresherScenario } from '../../../dev/sim/refresher-scenario.js';
import type { ScenarioResult } from '../../../dev/sim/scenario.js';

const { connections } = REFRESHER_SHORT;

describe(`the token refresher: ${connections} connections in use, in virtual time`, () => {
  let result: ScenarioResult;

  beforeAll(async () => {
    result = await refresherScenario(REFRESHER_SHORT);
  });

  it('passes every check: no token in use renewed late or left old, every run within its time-out, none left, none failing', () => {
    expect(result.checks.filter((check) => !check.ok).map((check) => `${check.what}: ${check.value}`)).toEqual([]);
    expect(result.checks).toHaveLength(5);
    expect(result.figures['connections without a token at the end']).toBe(0);
    expect(result.figures['connections at the end']).toBe(`${connections} active, 0 paused, 0 failing, 0 removed`);
  });

  it("finds the token endpoint's limit: a few 429s, then the pace below its ceiling of 10 a second", () => {
    const calls = String(result.figures['getToken calls']);
    const ok = Number(/([\d,]+) × 200/.exec(calls)?.[1]?.replace(/,/g, ''));
    const limited = Number(/([\d,]+) × 429/.exec(calls)?.[1]?.replace(/,/g, ''));
    // Every connection's first token, and its renewals.
    expect(ok).toBeGreaterThanOrEqual(2 * connections);
    expect(limited).toBeGreaterThan(0);
    expect(limited).toBeLessThan(ok / 4);
    const rate = Number(/^([\d.]+)\/s$/.exec(String(result.figures["token pace's rate at the end"]))?.[1]);
    expect(rate).toBeGreaterThanOrEqual(0.5);
    expect(rate).toBeLessThan(10);
    expect(Number(/^(\d+) calls/.exec(String(result.figures['token endpoint: busiest second']))?.[1])).toBeLessThanOrEqual(10);
  });

  it("spreads the renewals: tokens all issued by one run are renewed a run's share at a time within an interval", () => {
    expect(Number(result.figures['renewed early (spreading)'])).toBeGreaterThan(0);
    const perRun = /^(\d+) to (\d+), .* \(a run's share: (\d+)\)$/.exec(String(result.figures['refreshes per run once spread (from an interval after the first tokens were all issued)']));
    expect(perRun).not.toBeNull();
    const [min, max, share] = perRun!.slice(1).map(Number) as [number, number, number];
    expect(min).toBeGreaterThanOrEqual(share);
    expect(max).toBeLessThanOrEqual(share + 1);
  });
});
