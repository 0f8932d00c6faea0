/**
 * The changes feed in virtual time, short (dev/sim/changes-scale.ts CHANGES_SHORT: 12 connections
 * × 20 items and a busy one of 60, 3 rounds): the real item sync writes each row alone and the real changes writer
 * numbers the changes from the items table's stream, under racing writers, redelivered records and
 * stream batches, lost answers (the sync's and the writer's) and lost change-events batches; a
 * consumer reads the feed through the real client API, stops, goes on from its cursors and reads
 * again from an older one. `npm run sim -- changes` runs it at full scale (a
 * million changes).
 */
import { describe, expect, it } from 'vitest';
import { CHANGES_SHORT, changesExpected } from '../../../dev/sim/changes-scale.js';
import { changesRun } from '../../../dev/sim/changes-scenario.js';
import { busyRounds, changesFigures } from '../../../dev/sim/changes-report.js';
import { PRICES } from '../../../dev/cost/prices.js';
import { readCost, storageCost } from '../../../dev/sim/changes-cost.js';

describe('the changes feed in virtual time (short)', () => {
  it('reads every committed change once, in commit order, through every hazard; prices a million', async () => {
    const scale = CHANGES_SHORT;
    const run = await changesRun(scale);
    const { figures, checks } = changesFigures(run, scale);
    const failed = checks.filter((c) => !c.ok);
    expect(failed).toEqual([]);

    const expected = changesExpected(scale);
    expect(expected).toBe((scale.connections * scale.itemsEach + scale.busyItems) * scale.rounds);
    expect(run.check.committed).toBe(expected);
    // The busy connection (the account `default`) committed each of its items once a round, among the others.
    expect(run.connections).toBe(scale.connections + 1);
    expect(run.check.watched).toMatchObject({ connection: 'default', committed: scale.busyItems * scale.rounds });
    expect(run.check.watched!.numberingLags).toHaveLength(scale.busyItems * scale.rounds);
    const perRound = busyRounds(run.check.watched!.committedAt, run.roundStarts);
    expect(perRound.map(({ changes }) => changes)).toEqual(Array.from({ length: scale.rounds }, () => scale.busyItems));
    expect(perRound.every(({ ms }) => ms > 0)).toBe(true);
    expect(figures["the busy connection: changes committed; each round: its changes, from the round's start to its last, changes a second"]).toMatch(
      new RegExp(`^${scale.busyItems * scale.rounds}; ${scale.busyItems} in [\\d.]+ s \\([\\d.]+/s\\)`),
    );
    expect(run.check).toMatchObject({ matched: expected, missed: 0, duplicated: 0, mismatched: 0, phantom: 0, misnumbered: 0, unchangedWrites: 0 });
    expect(run.heads).toEqual({ checked: run.connections, differing: 0 });
    // Every hazard was met at least once.
    expect(run.rounds.sentTwice).toBeGreaterThan(0);
    expect(run.rounds.sqsDuplicates).toBeGreaterThan(0);
    expect(run.faults.failedInvocations).toBeGreaterThan(0);
    expect(run.faults.lostAcks).toBeGreaterThan(0);
    expect(run.faults.writerLostAcks).toBeGreaterThan(0);
    expect(run.meter.writerStream.failedAfterWork).toBeGreaterThan(0);
    // Numbered by the changes writer (a batch delivered again, or a head move whose answer was lost,
    // finds its changes numbered already), no record handed back, none unreadable.
    expect(run.writer).toMatchObject({ unreadable: 0, retried: 0, erased: 0 });
    expect(run.writer.numbered).toBeLessThanOrEqual(expected);
    expect(run.writer.numbered + run.writer.already).toBeGreaterThanOrEqual(expected);
    expect(run.writer.already).toBeGreaterThan(0);
    expect(run.meter.stream.lostBatches).toBeGreaterThan(0);
    // The events of a lost batch never reached the bus; the feed has every change all the same.
    expect(run.meter.eventBridge.entries).toBe(run.meter.stream.records - run.meter.stream.lostRecords);
    expect(run.meter.stream.records).toBe(expected);
    // The consumer stopped, went on, and its replay from the cursors it stored then is the same.
    expect(run.consumer.stop).toBeDefined();
    expect(run.consumer.readsFailed).toBe(0);
    expect(run.replay).toMatchObject({ connections: run.connections, differing: 0 });
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

    // Single-item writes only: a change row each (1 WRU under 1 KB), a head move a chunk.
    for (const source of ['sync', 'reconcile', 'changesWriter'] as const) {
      expect(Object.keys(run.meter.dynamo[source]).filter((key) => key.startsWith('TransactWriteItems'))).toEqual([]);
    }
    const changeRows = run.meter.dynamo.changesWriter['PutItem changes']!;
    expect(changeRows.capacityUnits).toBe(changeRows.requests - changeRows.conditionFailures);
    expect(changeRows.requests - changeRows.conditionFailures).toBeGreaterThanOrEqual(expected);
    // The feed's share of the written cost, per million changes (docs/changes.md).
    expect(Number(figures["… the feed's share, per million changes (USD)"])).toBeLessThanOrEqual(1.5);

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
