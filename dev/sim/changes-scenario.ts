/**
 * The changes feed in virtual time (`npm run sim -- changes`): a million changes written by the
 * real item sync and read back through the real client API, with the hazards the feed is built
 * against (docs/changes.md, "Why nothing is missed, and nothing is read twice").
 *
 * The system (system.ts): many connections, each an account at the provider model; the real
 * item-sync handlers on the SQS model (both queues, as deployed), writing each row alone (one
 * conditional write) on DynamoDB Local; the items table's own stream, and on it the real changes
 * writer (numbering each connection's changes into the changes table:
 * functions/shared/changes/sequencer.ts) and the real change-events function; the real client API
 * handler, built as dev/system builds it, each call an API Gateway event.
 *
 * The work (changes-rounds.ts): `rounds` rounds; in each, every item of every account changes once
 * at the provider (created, then updated, deleted, restored) and users send every id; the next
 * round starts once both queues are empty. So the sync writes connections × items × rounds changes,
 * and with `busyItems` one busy connection (the account `default`) that many items × rounds more,
 * its ids among the others'; its changes a second are reported.
 *
 * The hazards, each counted: ids sent twice (two containers race on a row); SQS duplicate copies and
 * invocations that fail after their work (their batch comes again); lost write answers below the
 * SDK's retries, the sync's and the changes writer's; changes-writer invocations that fail after
 * their work (their stream batch comes again); stream batches lost by the change-events function's
 * event source (the events are lost; the feed must not be); a consumer that stops for a while and
 * goes on from the cursors it stored, then reads again from an older cursor (changes-consumer.ts).
 *
 * The truth is what DynamoDB committed (changes-ledger.ts): every items-table row write that changed
 * the item, read from the table's stream, by the rule of functions/shared/changes/transition.ts, in
 * commit order per connection; the change rows as the changes table holds them.
 * Checked: each connection's changes read equal it (none missed, none duplicated, numbered 1..head
 * without a hole, each item's in its commit order), the replay is the same bytes, a read right after
 * a change is numbered returns it. Figures: the hazards, the lag from a row's commit to its change's
 * number and to the consumer's read, what a million changes cost written, read and kept
 * (changes-cost.ts).
 */
import { GetItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DEFAULT_CONNECTION } from '../../functions/shared/connections/connection.js';
import { API_SERVICE, CHANGES_WRITER_METRIC_NAMES } from '../../functions/shared/metric-names.js';
import { systemConfig } from '../system/config.js';
import { countingObservability, quietObservability } from '../system/observability.js';
import { FeedConsumer } from './changes-consumer.js';
import { ChangesLedger, type LedgerCheck } from './changes-ledger.js';
import { changesFigures, type ChangesRun } from './changes-report.js';
import { Rounds, syncFaults, WriteAttempts } from './changes-rounds.js';
import { trackedDynamo, type DynamoCount, type LogCount } from './meters.js';
import { changesExpected, type ChangesScale } from './changes-scale.js';
import { timed, type ScenarioResult } from './scenario.js';
import { atLimit, startSystem, type SimSystem } from './system.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
/** A progress line this often (virtual). */
const PROGRESS_EVERY_MS = 5 * MINUTE;

/** The scenario; `progress` gets a line every 5 virtual minutes. */
export function changesScenario(scale: ChangesScale, progress: (line: string) => void = () => undefined): Promise<ScenarioResult> {
  const expected = changesExpected(scale);
  const busy = scale.busyItems > 0 ? ` and a busy one of ${scale.busyItems.toLocaleString('en-US')} items` : '';
  const name = `changes feed: ${expected.toLocaleString('en-US')} changes, ${scale.connections.toLocaleString('en-US')} connections × ${scale.itemsEach} items${busy} × ${scale.rounds} rounds, L = ${scale.limit}/s told`;
  return timed(name, async () => {
    const run = await changesRun(scale, progress);
    return { virtualMs: run.endMs - run.t0, ...changesFigures(run, scale) };
  });
}

/** One run: the system, the rounds, the consumer; the truth checked, everything counted. */
export async function changesRun(scale: ChangesScale, progress: (line: string) => void = () => undefined): Promise<ChangesRun> {
  const realStart = Date.now();
  const injected = syncFaults(scale, scale.seed);
  const attempts = new WriteAttempts();
  const writers: DynamoDBClient[] = [];
  let numbering: DynamoDBClient | undefined;
  // The changes writer's outcomes, from its metrics as it publishes them.
  const writer = { numbered: 0, already: 0, erased: 0, unreadable: 0, retried: 0 };
  const metricKeys = new Map<string, keyof typeof writer>(Object.entries(CHANGES_WRITER_METRIC_NAMES).map(([key, name]) => [name, key as keyof typeof writer]));
  const system = await startSystem({
    // The busy connection: the account `default` (none when 0).
    ids: scale.busyItems,
    accounts: { count: scale.connections, idsEach: scale.itemsEach },
    ...atLimit(scale),
    // freshnessHours as deployed (the background lane has its queue and containers); no pass while measured.
    reconcile: { freshnessHours: systemConfig().freshnessHours, firstTickAfterMs: (scale.maxHours + 1) * HOUR },
    changeEvents: { eventBridgeRoundTripMs: 20 },
    changesWriter: true,
    meterLogs: scale.meterLogs,
    faults: injected.faults,
    dynamodbOnDisk: scale.dynamodbOnDisk,
    observe: {
      syncDynamo: (client) => {
        attempts.watch(client);
        writers.push(client);
      },
      writerDynamo: (client) => void (numbering = client),
      metric: (source, name, value) => {
        const key = source === 'changesWriter' ? metricKeys.get(name) : undefined;
        if (key) writer[key] += value;
      },
    },
  });
  const names = system.local.names;
  let consumer: FeedConsumer | undefined;
  const expected = changesExpected(scale);
  // Every probeEvery-th commit is read at once, from the cursor before it.
  const probeEvery = Math.max(1, Math.round(expected / scale.probes));
  let commits = 0;
  const ledger = new ChangesLedger(system.clock, system.dynamo, { items: names.itemsTable, changes: names.changesTable }, (committed) => {
    commits += 1;
    if (consumer && commits % probeEvery === 0) system.clock.at(system.clock.ms(), () => void consumer!.probe(committed));
  });
  for (const writer of writers) ledger.watchRows(writer);
  if (numbering) ledger.watchNumbering(numbering);
  try {
    const api = apiFunctions(system);
    consumer = new FeedConsumer({
      clock: system.clock,
      handlers: { consumer: api.consumer.handler, replay: api.replay.handler, probe: api.probe.handler },
      memoryMb: api.memoryMb,
      ledger,
      connections: system.connectionIds,
      periodMs: scale.consumerPeriodSeconds * 1000,
    });
    const rounds = new Rounds(system, scale, system.local.deployment.syncEventSource.batchSize, scale.seed);
    const t0 = system.clock.ms();
    let endMs: number | undefined;
    const roundStarts: number[] = [];
    const queues = [system.queueUrl, system.reconcileQueueUrl].filter((url): url is string => url !== undefined);
    const drained = (): boolean => queues.every((url) => system.sqs.size(url) === 0);
    const ended = (): boolean => endMs !== undefined;
    // The streams' event sources (the change events', the changes writer's) have read every record the ledger read, and handed on all they read.
    const streamDone = (): boolean =>
      [system.changeEvents, system.changesWriter].every((source) => !source || (source.stream.size === 0 && source.stream.count.records >= ledger.records));
    const drive = (): void => {
      const now = system.clock.ms();
      if (drained() && rounds.counts.rounds < scale.rounds) {
        if (rounds.counts.rounds === scale.stopAtRound) consumer!.stopFor(scale.stopMinutes * MINUTE);
        roundStarts.push(now);
        rounds.next();
      } else if (drained() && streamDone() && !consumer!.isStopped && ledger.caughtUp() && ledger.total >= expected) {
        endMs = now;
      }
      if (endMs === undefined) system.clock.at(now + 1000, drive);
    };
    system.clock.at(t0, drive);
    consumer.start(t0, ended);
    watchProgress(system, scale, { t0, realStart, ledger, consumer, rounds, injected, ended, progress });
    const hardStop = t0 + scale.maxHours * HOUR;
    await system.pollUntil(() => ended() || system.clock.ms() >= hardStop);
    endMs ??= system.clock.ms();
    const replayStart = system.clock.ms();
    const replay = await inVirtualTime(system, () => consumer!.replay());
    const heads = await headsAgainstLedger(system, ledger);
    const check: LedgerCheck = await ledger.check(scale.busyItems > 0 ? DEFAULT_CONNECTION : undefined);
    return {
      t0,
      endMs,
      replayMs: system.clock.ms() - replayStart,
      expected,
      roundStarts,
      rounds: rounds.counts,
      check,
      heads,
      connections: system.connectionIds.length,
      replay,
      probes: consumer.probes,
      consumer: { calls: consumer.calls, reads: consumer.reads, readsFailed: consumer.readsFailed, stop: consumer.stop, periodMs: scale.consumerPeriodSeconds * 1000 },
      replayCalls: consumer.replayCalls,
      probeCalls: consumer.probeCalls,
      apiDynamo: api.consumerCounts,
      apiLogs: api.logs,
      logsMetered: scale.meterLogs,
      faults: { failedInvocations: injected.failedInvocations(), ...injected.dynamo.injected, writerLostAcks: injected.writerDynamo.injected.lostAcks },
      writer,
      attempts: { most: attempts.most, retried: attempts.retried },
      meter: system.meter,
      deadLettered: [system.dlqUrl, system.reconcileDlqUrl].reduce((sum, url) => sum + (url ? system.sqs.size(url) : 0), 0),
      redeliveries: queues.reduce((sum, url) => sum + system.sqs.queue(url).stats.redeliveries, 0),
      names: { items: names.itemsTable, changes: names.changesTable },
      tracing: system.local.deployment.sync.tracing,
      retentionDays: systemConfig().changesRetentionDays,
      realMs: Date.now() - realStart,
    };
  } finally {
    ledger.close();
    await system.close();
  }
}

/**
 * The client API's function three times, each with its own metered DynamoDB client (the run's round
 * trip in virtual time): the consumer's, the replay's, the probes'. The consumer's log lines counted
 * (its line a request: what the reads ingest), the others' kept nowhere.
 */
function apiFunctions(system: SimSystem) {
  const counts = (): Record<string, DynamoCount> => ({});
  const logs: Record<string, LogCount> = {};
  const build = (dynamo: Record<string, DynamoCount>, counted: boolean) =>
    system.local.api({
      dynamodb: trackedDynamo(system.dynamo, { clock: system.clock, counts: dynamo, itemsTable: system.local.names.itemsTable, itemCount: () => undefined }),
      clock: system.clock,
      sleep: system.clock.sleep,
      ...(counted ? countingObservability(API_SERVICE, logs) : quietObservability()),
    });
  const consumerCounts = counts();
  const consumer = build(consumerCounts, true);
  return { consumer, replay: build(counts(), false), probe: build(counts(), false), consumerCounts, memoryMb: consumer.memoryMb, logs };
}

/** Runs `work` (API calls take virtual time) until it settles. */
async function inVirtualTime<T>(system: SimSystem, work: () => Promise<T>): Promise<T> {
  let settled = false;
  const running = work().finally(() => void (settled = true));
  await system.clock.run(Number.MAX_SAFE_INTEGER, () => settled);
  return running;
}

/** Each connection's head as stored, against the changes committed: how many differ. */
async function headsAgainstLedger(system: SimSystem, ledger: ChangesLedger): Promise<{ checked: number; differing: number }> {
  const client = system.dynamo.client();
  let differing = 0;
  try {
    for (const connection of system.connectionIds) {
      const out = await client.send(new GetItemCommand({ TableName: system.local.names.changesTable, Key: { connection: { S: connection }, seq: { N: '0' } }, ConsistentRead: true }));
      const head = Number(out.Item?.['head']?.N ?? 0);
      if (head !== ledger.lastRead(connection)) differing += 1;
    }
  } finally {
    client.destroy();
  }
  return { checked: system.connectionIds.length, differing };
}

/** A progress line every 5 virtual minutes; the fault meter's record of writes kept short. */
function watchProgress(
  system: SimSystem,
  scale: ChangesScale,
  parts: {
    t0: number;
    realStart: number;
    ledger: ChangesLedger;
    consumer: FeedConsumer;
    rounds: Rounds;
    injected: ReturnType<typeof syncFaults>;
    ended: () => boolean;
    progress: (line: string) => void;
  },
): void {
  const { t0, realStart, ledger, consumer, rounds, injected, ended, progress } = parts;
  const report = (): void => {
    if (ended()) return;
    // The writes the meters record are not read here: emptied, as they would grow by one a write.
    injected.dynamo.writes.length = 0;
    injected.writerDynamo.writes.length = 0;
    const now = system.clock.ms();
    progress(
      `${((now - t0) / HOUR).toFixed(2)} h virtual, ${((Date.now() - realStart) / 1000).toFixed(0)} s real: round ${rounds.counts.rounds} of ${scale.rounds}, ` +
        `${ledger.total.toLocaleString('en-US')} changes committed, consumer ${consumer.isStopped ? 'stopped' : `${consumer.calls.invocations.toLocaleString('en-US')} calls`}, ` +
        `sync queue ${system.sqs.size(system.queueUrl)}, reconcile queue ${system.reconcileQueueUrl ? system.sqs.size(system.reconcileQueueUrl) : '-'}, stream ${system.changeEvents?.stream.size ?? '-'}, ` +
        `heap ${Math.round(process.memoryUsage().heapUsed / 2 ** 20)} MiB`,
    );
    system.clock.at(now + PROGRESS_EVERY_MS, report);
  };
  system.clock.at(t0 + PROGRESS_EVERY_MS, report);
}
