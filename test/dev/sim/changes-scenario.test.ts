/**
 * The changes feed in virtual time, short (dev/sim/changes-scale.ts CHANGES_SHORT: 20 connections
 * × 20 items × 3 rounds): the real item sync writes every change with its row and head in one
 * transaction, under racing writers, redelivered records, lost answers, TransactionConflict and lost
 * stream batches; a consumer reads the feed through the real client API, stops, goes on from its
 * cursors and reads again from an older one. `npm run sim -- changes` runs it at full scale (a
 * million changes).
 */
import { describe, expect, it } from 'vitest';
import { CHANGES_SHORT } from '../../../dev/sim/changes-scale.js';
import { changesRun } from '../../../dev/sim/changes-scenario.js';
import { changesFigures } from '../../../dev/sim/changes-report.js';
import { PRICES } from '../../../dev/sim/reconcile-cost.js';
import { readCost, storageCost } from '../../../dev/sim/changes-cost.js';

describe('the changes feed in virtual time (short)', () => {
  it('reads every committed change once, in commit order, through every hazard; prices a million', async () => {
    const scale = CHANGES_SHORT;
    const run = await changesRun(scale);
    const { figures, checks } = changesFigures(run, scale);
    const failed = checks.filter((c) => !c.ok);
    expect(failed).toEqual([]);

    const expected = scale.connections * scale.itemsEach * scale.rounds;
    expect(run.check.committed).toBe(expected);
    expect(run.check).toMatchObject({ matched: expected, missed: 0, duplicated: 0, mismatched: 0, phantom: 0, misnumbered: 0, unchangedWrites: 0 });
    expect(run.heads).toEqual({ checked: scale.connections, differing: 0 });
    // Every hazard was met at least once.
    expect(run.rounds.sentTwice).toBeGreaterThan(0);
    expect(run.rounds.sqsDuplicates).toBeGreaterThan(0);
    expect(run.faults.failedInvocations).toBeGreaterThan(0);
    expect(run.faults.lostAcks).toBeGreaterThan(0);
    expect(run.faults.conflicts).toBeGreaterThan(0);
    expect(run.meter.stream.lostBatches).toBeGreaterThan(0);
    // The events of a lost batch never reached the bus; the feed has every change all the same.
    expect(run.meter.eventBridge.entries).toBe(run.meter.stream.records - run.meter.stream.lostRecords);
    expect(run.meter.stream.records).toBe(expected);
    // The consumer stopped, went on, and its replay from the cursors it stored then is the same.
    expect(run.consumer.stop).toBeDefined();
    expect(run.consumer.readsFailed).toBe(0);
    expect(run.replay).toMatchObject({ connections: scale.connections, differing: 0 });
    expect(run.replay.changes).toBeGreaterThan(0);
    expect(run.probes.probes).toBeGreaterThan(0);
    expect(run.probes.found).toBe(run.probes.probes);
    // Read while it read, a change waits at most one period (and the API's round trips).
    const periodMs = scale.consumerPeriodSeconds * 1000;
    const steady = run.check.lags.filter((lag, i) => {
      const at = run.check.committedAt[i]!;
      return !(at >= run.consumer.stop!.from - periodMs && at < run.consumer.stop!.to);
    });
    expect(steady.length).toBeGreaterThan(0);
    expect(Math.max(...steady)).toBeLessThanOrEqual(periodMs + 1_000);

    // Each change's transaction is metered against both tables: 2 WRU per item under 1 KB.
    for (const source of ['sync', 'reconcile'] as const) {
      const items = run.meter.dynamo[source]['TransactWriteItems items'];
      const changes = run.meter.dynamo[source]['TransactWriteItems changes'];
      if (!items || !changes) continue;
      expect(changes.requests).toBe(items.requests);
      expect(changes.capacityUnits).toBe(2 * items.capacityUnits);
    }
    const committedUnits = (['sync', 'reconcile'] as const).reduce((sum, s) => sum + (run.meter.dynamo[s]['TransactWriteItems items']?.capacityUnits ?? 0), 0);
    expect(committedUnits).toBe(2 * expected);

    // The figures name the million's cost by service, read and kept.
    expect(Number(figures['written, per million changes (USD)'])).toBeGreaterThan(0);
    expect(Number(figures['read, per million changes (USD)'])).toBeGreaterThan(0);
    expect(String(figures['kept: a million changes, a month (table storage; continuous backups)'])).toMatch(/^\$\d/);
  });

  it('prices the reads and the storage at the public prices', () => {
    const calls = { invocations: 1_000, durationMs: 20_000, memoryMb: 256, failed: 0 };
    const cost = readCost(calls, { 'GetItem changes': { requests: 1_000, capacityUnits: 1_000, conditionFailures: 0 }, 'Query changes': { requests: 500, capacityUnits: 600, conditionFailures: 0 } }, undefined);
    expect(cost.byService['API Gateway']).toBeCloseTo((1_000 / 1e6) * PRICES.apiGatewayHttpRequestPerMillion, 12);
    expect(PRICES.apiGatewayHttpRequestPerMillion).toBe(1);
    expect(cost.byService.Lambda).toBeCloseTo((1_000 / 1e6) * PRICES.lambdaRequestPerMillion + 20 * 0.25 * PRICES.lambdaArmGbSecond, 12);
    expect(cost.byService.DynamoDB).toBeCloseTo((1_600 / 1e6) * PRICES.dynamoReadRequestUnitPerMillion, 12);
    const kept = storageCost(124, 35);
    expect(kept.rowBytes).toBe(224);
    expect(kept.perMillionMonth.storage).toBeCloseTo(((224 * 1e6) / 2 ** 30) * PRICES.dynamoStoragePerGbMonth, 12);
    expect(kept.steady.rows).toBe(35_000_000);
  });
});
