/**
 * The push path in virtual time, short (dev/sim/push-scenario.ts PUSH_SHORT: 600 ids at L =
 * 200/s told): users send every id at once with the enqueue tool's code; the real sync, pace,
 * provider client and DynamoDB adapters; the items table's stream and the real change-events
 * function. `npm run sim -- push` runs it at full scale.
 */
import { describe, expect, it } from 'vitest';
import { PRICES } from '../../../dev/cost/prices.js';
import { pushCost, SERVICES } from '../../../dev/sim/push-cost.js';
import { PUSH_SHORT, pushRun, runChecks, runFigures, type PushRun } from '../../../dev/sim/push-scenario.js';
import { emptyMeter } from '../../../dev/sim/meters.js';
import { NUMBER_RULES } from '../../../infra/context.js';

/** The deployed sync: its memory and batch size. */
const SYNC_MEMORY_MB = NUMBER_RULES.syncMemorySize.fallback;
const BATCH = NUMBER_RULES.syncBatchSize.fallback;

const N = PUSH_SHORT.ids;

/** The cost line whose description starts with `what`. */
function line(run: PushRun, what: string): { requests: number; units: string; usd: number } {
  const found = run.cost.lines.filter((l) => l.what.startsWith(what));
  expect(found.map((l) => l.what)).toHaveLength(1);
  return found[0]!;
}

function expectSyncCounted(run: PushRun): void {
  expect(run.done).toBe(N);
  expect(run.deadLettered).toBe(0);
  expect(runChecks(run).every((c) => c.ok)).toBe(true);
  expect(run.providerRequests).toBeGreaterThanOrEqual(N);
  // The enqueue tool's sends: SendMessageBatch of 10.
  expect(run.sends).toEqual({ SendMessageBatch: N / 10 });
  expect(line(run, 'SQS SendMessageBatch (users').requests).toBe(N / 10);
  // The event source: batches of up to the deployed size, gathered 10 messages a receive and
  // deleted 10 a DeleteMessageBatch; receives at least as many as deletes.
  const invocations = line(run, 'Lambda sync on the sync queue').requests;
  expect(invocations).toBeGreaterThanOrEqual(N / BATCH);
  expect(invocations).toBeLessThan(N / 10);
  const deletes = line(run, 'SQS DeleteMessageBatch (event source on the sync queue').requests;
  expect(deletes).toBeGreaterThanOrEqual(N / 10);
  expect(line(run, 'SQS ReceiveMessage (event source on the sync queue').requests).toBeGreaterThanOrEqual(deletes);
  // Each invocation reads its rows with one BatchGetItem (100 keys at most); the pace's draws are conditional writes on the control table.
  expect(line(run, 'DynamoDB BatchGetItem items (sync on the sync queue').requests).toBeGreaterThanOrEqual(N / BATCH);
  expect(line(run, 'DynamoDB PutItem control (sync on the sync queue').requests).toBeGreaterThan(0);
  for (const what of ['Lambda sync on the sync queue', 'CloudWatch Logs ingestion (sync on the sync queue', 'SQS ReceiveMessage (event source on the sync queue', 'DynamoDB BatchGetItem items (sync on the sync queue']) {
    expect(line(run, what).usd).toBeGreaterThan(0);
  }
  // Tracing is off as deployed by default: no trace is priced.
  expect(run.cost.lines.some((l) => l.what.startsWith('X-Ray'))).toBe(false);
  expect(run.cost.byService['X-Ray']).toBe(0);
  // The per-million figures are the run's cost scaled by the same function.
  const total = run.cost.lines.reduce((sum, l) => sum + l.usd, 0);
  expect(run.cost.total).toBeCloseTo(total, 12);
  expect(run.cost.perMillion).toBeCloseTo((total * 1_000_000) / N, 9);
  expect(SERVICES.reduce((sum, s) => sum + run.cost.perMillionByService[s], 0)).toBeCloseTo(run.cost.perMillion, 9);
  expect(runFigures(run)[`${run.kind}: cost per million ids (USD)`]).toBe(Math.round(run.cost.perMillion * 10_000) / 10_000);
}

describe('the push path in virtual time (short)', () => {
  it('unchanged ids: every id fetched and done, no row written, no change event, every request counted and priced', async () => {
    const run = await pushRun(PUSH_SHORT, 'unchanged');
    expectSyncCounted(run);
    expect(run.cost.lines.some((l) => /^DynamoDB (PutItem|TransactWriteItems) (items|changes)/.test(l.what))).toBe(false);
    // The stream's event source reads (free) and finds nothing; nothing is put on the bus.
    const reads = line(run, 'DynamoDB Streams GetRecords');
    expect(reads.requests).toBeGreaterThan(0);
    expect(reads.units).toBe('0 records');
    expect(line(run, 'EventBridge PutEvents').requests).toBe(0);
    expect(run.cost.lines.some((l) => l.what.startsWith('Lambda change events'))).toBe(false);
  });

  it('deploys another syncBatchSize when asked (--batch-size 10): an invocation, a BatchGetItem and a pace draw per 10 ids', async () => {
    const run = await pushRun({ ...PUSH_SHORT, syncBatchSize: 10 }, 'unchanged');
    expect(run.done).toBe(N);
    expect(run.deadLettered).toBe(0);
    expect(line(run, 'Lambda sync on the sync queue').requests).toBeGreaterThanOrEqual(N / 10);
    expect(line(run, 'DynamoDB BatchGetItem items (sync on the sync queue').requests).toBeGreaterThanOrEqual(N / 10);
    // A batch of 10 draws a lease of 10 (what it wants): one draw a batch, where the deployed batch draws one per 50.
    expect(line(run, 'DynamoDB PutItem control (sync on the sync queue').requests).toBeGreaterThanOrEqual(N / 10);
  });

  it('changed ids: every row written, read from the stream, its event put on the bus and paid for', async () => {
    const run = await pushRun(PUSH_SHORT, 'changed');
    expectSyncCounted(run);
    // One row written an id, in either lane: the account's N ids at once are an import, and a
    // users' batch keeps a few of each of its batches (users-ids.ts) and moves the others
    // to the background lane.
    // Each row is one conditional PutItem (1 WRU: rows under 1 KB); no transaction anywhere. The
    // changes writer numbers each change from the stream: a change row each (1 WRU), and one head
    // move for each chunk of a connection's changes in a batch.
    const sources = ['sync', 'reconcile'] as const;
    const puts = (source: (typeof sources)[number]) => run.dynamo[source][`PutItem items`] ?? { requests: 0, conditionFailures: 0, capacityUnits: 0 };
    expect(sources.reduce((sum, s) => sum + puts(s).requests - puts(s).conditionFailures, 0)).toBe(N);
    expect(puts('reconcile').requests).toBeGreaterThan(0);
    for (const source of [...sources, 'changesWriter'] as const) {
      expect(Object.keys(run.dynamo[source]).filter((key) => key.startsWith('TransactWriteItems'))).toEqual([]);
    }
    for (const source of sources) expect(puts(source).capacityUnits).toBe(puts(source).requests - puts(source).conditionFailures);
    const changeRows = run.dynamo.changesWriter['PutItem changes']!;
    const heads = run.dynamo.changesWriter['UpdateItem changes']!;
    expect(changeRows.requests - changeRows.conditionFailures).toBe(N);
    expect(heads.requests).toBeGreaterThan(0);
    expect(heads.requests).toBeLessThan(N);
    expect(line(run, 'DynamoDB PutItem changes (changes writer').usd).toBeCloseTo((changeRows.capacityUnits / 1e6) * PRICES.dynamoWriteRequestUnitPerMillion, 12);
    const writer = line(run, 'Lambda changes writer');
    expect(writer.requests).toBeGreaterThan(0);
    expect(line(run, "DynamoDB Streams GetRecords (change events'").units).toBe(`${N} records`);
    expect(line(run, "DynamoDB Streams GetRecords (changes writer's").units).toBe(`${N} records`);
    const changeEvents = line(run, 'Lambda change events').requests;
    expect(changeEvents).toBeGreaterThan(0);
    expect(changeEvents).toBeLessThan(N / 10);
    // The connections' counters: one UpdateItem per batch of the connection's records.
    expect(line(run, 'DynamoDB UpdateItem connections (change events)').requests).toBe(changeEvents);
    const bridge = line(run, 'EventBridge PutEvents');
    expect(bridge.requests).toBeGreaterThanOrEqual(N / 10);
    expect(bridge.units).toBe(`${N} entries, ${N} billed events`);
    expect(bridge.usd).toBeCloseTo((N / 1e6) * PRICES.eventBridgeEventPerMillion, 12);
    expect(run.cost.perMillionByService.EventBridge).toBeCloseTo(PRICES.eventBridgeEventPerMillion, 9);
  });

  it('prices each family as the public prices say', () => {
    const meter = emptyMeter({ sync: SYNC_MEMORY_MB, reconcile: 0, reconciler: 0, refresher: 0, changeEvents: 256, changesWriter: 0 });
    meter.dynamo.sync['BatchGetItem items'] = { requests: 100, capacityUnits: 500, conditionFailures: 0 };
    meter.dynamo.sync['PutItem control'] = { requests: 10, capacityUnits: 8, conditionFailures: 2 };
    meter.eventSource.sync = { receives: 120, emptyReceives: 20, deleteBatches: 100 };
    meter.lambda.sync.invocations = 100;
    meter.lambda.sync.durationMs = 200_000;
    meter.eventBridge = { putEventsCalls: 100, entries: 1_000, billedEvents: 1_000 };
    const cost = pushCost(meter, { SendMessageBatch: 100 }, 1_000, 10, { logsMetered: false, tracing: true });
    expect(cost.byService.DynamoDB).toBeCloseTo((500 / 1e6) * 0.125 + (10 / 1e6) * 0.625, 12);
    // A row written with its change and head: committed write units, cancelled attempts' prepare
    // units and the read units of a replayed answer, each at its price.
    meter.dynamo.sync['TransactWriteItems items'] = {
      requests: 12,
      capacityUnits: 20,
      conditionFailures: 0,
      transactions: { cancelled: 2, cancelledUnits: 2, replays: 1, replayReadUnits: 2 },
    };
    meter.dynamo.sync['TransactWriteItems changes'] = {
      requests: 12,
      capacityUnits: 40,
      conditionFailures: 2,
      transactions: { cancelled: 2, cancelledUnits: 4, replays: 1, replayReadUnits: 4 },
    };
    const transactional = pushCost(meter, { SendMessageBatch: 100 }, 1_000, 10, { logsMetered: false, tracing: true });
    expect(transactional.byService.DynamoDB - cost.byService.DynamoDB).toBeCloseTo((66 / 1e6) * 0.625 + (6 / 1e6) * 0.125, 12);
    const changesLine = transactional.lines.find((l) => l.what.startsWith('DynamoDB TransactWriteItems changes'))!;
    expect(changesLine.units).toBe('44 WRU (40 committed + 4 for 2 cancelled, 2 of them by a condition on this table) + 4 RRU (1 replays of a lost answer)');
    expect(cost.byService.SQS).toBeCloseTo((320 / 1e6) * 0.4, 12);
    expect(cost.byService.Lambda).toBeCloseTo((100 / 1e6) * 0.2 + 200 * (SYNC_MEMORY_MB / 1024) * PRICES.lambdaArmGbSecond, 12);
    // X-Ray: one trace a second (10 s), 5 % of the other 90 invocations.
    expect(cost.byService['X-Ray']).toBeCloseTo(((10 + 4.5) / 1e6) * 5, 12);
    expect(cost.byService.EventBridge).toBeCloseTo(0.001, 12);
    expect(cost.byService['CloudWatch Logs']).toBe(0);
    expect(cost.perMillion).toBeCloseTo(cost.total * 1_000, 12);
    // Untraced (the default), logs metered: no trace; no line was logged but Lambda's own START,
    // END and REPORT of each of the 100 invocations (280 bytes).
    const untraced = pushCost(meter, { SendMessageBatch: 100 }, 1_000, 10, { logsMetered: true, tracing: false });
    expect(untraced.byService['X-Ray']).toBe(0);
    expect(untraced.byService['CloudWatch Logs']).toBeCloseTo(((100 * 280) / 2 ** 30) * 0.5, 15);
  });
});
