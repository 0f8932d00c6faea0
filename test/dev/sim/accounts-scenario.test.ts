/**
 * A reconciliation pass over many accounts in virtual time, short (dev/sim/accounts-scenario.ts
 * ACCOUNTS_SHORT: 200 connections × 10 ids at L = 50/s, run 20 virtual minutes): the real
 * reconciler, item-sync handlers on both queues, token refresher, pace, provider client and
 * DynamoDB adapters. `npm run sim -- accounts` runs it at full scale (10,000 × 100);
 * docs/measurements.md has those figures. No timing assertion: time is virtual.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { ACCOUNTS_SHORT, accountsPass } from '../../../dev/sim/accounts-scenario.js';
import type { ScenarioResult } from '../../../dev/sim/scenario.js';

const { connections, idsEach } = ACCOUNTS_SHORT;

describe(`a reconciliation pass over ${connections} connections × ${idsEach} ids in virtual time`, () => {
  let result: ScenarioResult;

  beforeAll(async () => {
    result = await accountsPass(ACCOUNTS_SHORT);
  });

  it('passes every check: every (connection, id) checked, every account within freshnessHours, nothing dead', () => {
    expect(result.checks.filter((check) => !check.ok).map((check) => `${check.what}: ${check.value}`)).toEqual([]);
    expect(result.checks.map((check) => check.what)).toEqual([
      'every (connection, id) checked by the sweep in the pass',
      'the pass within freshnessHours (24 h)',
      'every account checked through within freshnessHours',
      'nothing dead-lettered',
      'every refresher run within its time-out',
    ]);
    const n = connections * idsEach;
    expect(result.figures['ids checked by the sweep in the pass']).toBe(`${n.toLocaleString('en-US')} of ${n.toLocaleString('en-US')}`);
    expect(result.figures['accounts checked through']).toBe(`${connections} of ${connections}`);
  });

  it('keeps every connection in use refreshed by the refresher, within its time-out', () => {
    const runs = /^(\d+) \(([\d.]+) s, (\d+) s\)$/.exec(String(result.figures['refresher runs (longest, time-out)']));
    expect(runs).not.toBeNull();
    const scheduled = /^(\d+) \(one every \d+ minutes\)$/.exec(String(result.figures['refresher runs its schedule makes in the run']));
    expect(Number(scheduled?.[1])).toBeGreaterThanOrEqual(2);
    expect(Number(runs![1])).toBe(Number(scheduled![1]));
    expect(Number(runs![2])).toBeLessThan(Number(runs![3]));
    // Each connection's first token on demand, then the refresher's renewal of the ones in use.
    const perConnection = Number(result.figures['getToken calls a connection over the run']);
    expect(perConnection).toBeGreaterThanOrEqual(1);
    expect(perConnection).toBeLessThanOrEqual(4);
    expect(result.figures["refreshes left to a later run (a run's time ran short)"]).toBe(0);
  });

  it('prices the pass per million ids, line by line', () => {
    expect(Number(result.figures['AWS cost per million ids (USD)'])).toBeGreaterThan(0);
    expect(Object.keys(result.figures).filter((key) => key.startsWith('… ')).join('\n')).toMatch(/SQS SendMessageBatch \(reconciler\)/);
  });
});
