/**
 * Many connections in virtual time, short (dev/sim/connections-scenario.ts CONNECTIONS_SHORT: 50
 * connections × 20 ids, one revoked at the provider 10 s in, two simulated days): the real item-sync
 * handlers with the connections' access layer, the real token refresher on its schedule, the real
 * provider client and DynamoDB adapters. `npm run sim -- connections` runs it at full scale
 * (1,000 × 100); docs/measurements.md has those figures. No timing assertion: time is virtual.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { CONNECTIONS_SHORT, connectionsScenario } from '../../../dev/sim/connections-scenario.js';
import type { ScenarioResult } from '../../../dev/sim/scenario.js';

const { connections, idsEach } = CONNECTIONS_SHORT;

describe(`${connections} connections × ${idsEach} ids in virtual time, one revoked`, () => {
  let result: ScenarioResult;

  beforeAll(async () => {
    result = await connectionsScenario(CONNECTIONS_SHORT);
  });

  it('passes every check', () => {
    expect(result.checks.filter((check) => !check.ok).map((check) => `${check.what}: ${check.value}`)).toEqual([]);
    expect(result.checks).toHaveLength(8);
  });

  it("syncs every other connection's ids, rows equal to the accounts' items, and dead-letters nothing", () => {
    const f = result.figures;
    const others = (connections - 1) * idsEach;
    expect(f['ids sent by users']).toBe(connections * idsEach);
    expect(f["ids of the other connections synced (rows equal to the account's items)"]).toBe(`${others.toLocaleString('en-US')} of ${others.toLocaleString('en-US')}`);
    expect(f["rows that are not the account's item"]).toBe(0);
    expect(f['dead-lettered']).toBe(0);
  });

  it("keeps the revoked connection's ids waiting, the connection failing, and its account left alone", () => {
    const f = result.figures;
    expect(String(f['… its status at the end'])).toMatch(/^failing \(.*401/);
    const synced = Number(f['… its ids synced before the revocation']);
    const waiting = Number(f['… its ids waiting in the sync queue']);
    expect(synced + waiting).toBe(idsEach);
    expect(waiting).toBeGreaterThan(0);
    expect(Number(f['… provider requests a minute after it became failing (average)'])).toBeLessThanOrEqual(1);
    expect(f['connections at the end']).toBe(`${connections - 1} active, 0 paused, 1 failing, 0 removed`);
  });

  it('counts the refresher and the connections table per day: getToken once a day for an idle connection', () => {
    const f = result.figures;
    // Every connection's first token is refreshed on demand by the item sync on day 1 (the revoked
    // one's refused refresh too, after its items met the revoked access token).
    const first = /, (\d+) on demand by the item sync$/.exec(String(f['day 1 (the sync): getToken calls']));
    expect(Number(first?.[1])).toBeGreaterThanOrEqual(connections);
    expect(Number(first?.[1])).toBeLessThanOrEqual(connections + 1);
    // Day 2: every idle connection once, the failing one at its retries; nothing on demand.
    const idle = /^(\d+) .*: (\d+) by the refresher .*, (\d+) on demand/.exec(String(f['day 2 (idle): getToken calls']));
    expect(idle).not.toBeNull();
    const [all, byRefresher, onDemand] = idle!.slice(1).map(Number) as [number, number, number];
    expect(onDemand).toBe(0);
    expect(byRefresher).toBe(all);
    expect(all).toBeGreaterThanOrEqual(connections - 1);
    expect(all).toBeLessThanOrEqual(connections - 1 + 24);
    // A run every 5 minutes (refresh-schedule.ts), each scanning the table once.
    expect(f['day 2 (idle): refresher runs']).toBe(288);
    expect(f['day 2 (idle): DynamoDB Scan connections (token refresher)']).toMatch(/^288 /);
    expect(Number(f[`idle connection a month at 10,000 connections (USD)`])).toBeLessThanOrEqual(0.05);
  });
});
