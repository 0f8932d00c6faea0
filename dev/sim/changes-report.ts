/**
 * The changes scenario's figures and checks (changes-scenario.ts): what was written, the hazards met,
 * what the consumer read against the truth, the lag, and what a million changes cost written, read
 * and kept (changes-cost.ts).
 */
import type { ApiCalls, ProbeResult, ReplayResult } from './changes-consumer.js';
import { feedShare, readCost, storageCost, writeCost } from './changes-cost.js';
import type { LedgerCheck } from './changes-ledger.js';
import type { RoundCounts } from './changes-rounds.js';
import type { ChangesScale } from './changes-scale.js';
import type { DynamoCount, LogCount, SimMeter } from './meters.js';
import { SERVICES } from './push-cost.js';
import { HOURS_PER_MONTH } from './reconcile-cost.js';
import { check, percentile, round, type Check } from './scenario.js';

export interface ChangesRun {
  t0: number;
  endMs: number;
  /** Virtual time the replay took, after the end. */
  replayMs: number;
  expected: number;
  roundStarts: number[];
  rounds: RoundCounts;
  check: LedgerCheck;
  heads: { checked: number; differing: number };
  /** Connections of the run (the busy one included). */
  connections: number;
  replay: ReplayResult;
  probes: ProbeResult;
  consumer: { calls: ApiCalls; reads: number; readsFailed: number; stop: { from: number; to: number } | undefined; periodMs: number };
  replayCalls: ApiCalls;
  probeCalls: ApiCalls;
  apiDynamo: Record<string, DynamoCount>;
  apiLogs: Record<string, LogCount>;
  /** The sync's and the change-events function's log lines were counted (the scale's meterLogs). */
  logsMetered: boolean;
  faults: { failedInvocations: number; lostAcks: number; throttled: number; writerLostAcks: number };
  attempts: { most: number; retried: number };
  /** The changes writer's outcomes, summed over its invocations (its metrics). */
  writer: { numbered: number; already: number; erased: number; unreadable: number; retried: number };
  meter: SimMeter;
  deadLettered: number;
  redeliveries: number;
  names: { items: string; changes: string };
  tracing: boolean;
  retentionDays: number;
  realMs: number;
}

const n = (value: number): string => value.toLocaleString('en-US');
const usd = (value: number, digits = 4): string => `$${value.toFixed(digits)}`;

/** The sync's DynamoDB count of `key` on both queues, summed. */
function syncCount(meter: SimMeter, key: string): { requests: number; conditionFailures: number; cancelled: number; replays: number } {
  const sum = { requests: 0, conditionFailures: 0, cancelled: 0, replays: 0 };
  for (const source of ['sync', 'reconcile'] as const) {
    const count = meter.dynamo[source][key];
    if (!count) continue;
    sum.requests += count.requests;
    sum.conditionFailures += count.conditionFailures;
    sum.cancelled += count.transactions?.cancelled ?? 0;
    sum.replays += count.transactions?.replays ?? 0;
  }
  return sum;
}

/** The changes writer's DynamoDB count of `key`. */
function writerCount(meter: SimMeter, key: string): DynamoCount {
  return meter.dynamo.changesWriter[key] ?? { requests: 0, capacityUnits: 0, conditionFailures: 0 };
}

/** The lags of the changes committed while the consumer was reading (its next read not in its stop), and of those it caught up after it. */
function lagsOf(run: ChangesRun): { steady: Float64Array; stopped: Float64Array } {
  const { lags, committedAt } = run.check;
  const stop = run.consumer.stop;
  const steady: number[] = [];
  const stopped: number[] = [];
  for (let i = 0; i < lags.length; i += 1) {
    const at = committedAt[i]!;
    if (stop && at >= stop.from - run.consumer.periodMs && at < stop.to) stopped.push(lags[i]!);
    else steady.push(lags[i]!);
  }
  return { steady: Float64Array.from(steady), stopped: Float64Array.from(stopped) };
}

export function changesFigures(run: ChangesRun, scale: ChangesScale): { figures: Record<string, number | string>; checks: Check[] } {
  const { check: c, meter, rounds } = run;
  const rowPuts = syncCount(meter, `PutItem ${run.names.items}`);
  const rowUpdates = syncCount(meter, `UpdateItem ${run.names.items}`);
  const rowRaces = rowPuts.conditionFailures + rowUpdates.conditionFailures;
  const changePuts = writerCount(meter, `PutItem ${run.names.changes}`);
  const headMoves = writerCount(meter, `UpdateItem ${run.names.changes}`);
  const stream = meter.stream;
  const writerStream = meter.writerStream;
  const transactions = (['sync', 'reconcile', 'changesWriter'] as const).reduce(
    (sum, source) => sum + Object.entries(meter.dynamo[source]).filter(([key]) => key.startsWith('TransactWriteItems ')).reduce((total, [, count]) => total + count.requests, 0),
    0,
  );
  const lags = lagsOf(run);
  const seconds = (ms: number): string => `${round(ms / 1000, 1)} s`;
  const minutesAt = (ms: number): string => `${round((ms - run.t0) / 60_000, 1)} min`;
  const stop = run.consumer.stop;
  const committed = c.committed;
  const perMillion = committed > 0 ? 1e6 / committed : 0;

  const figures: Record<string, number | string> = {
    'connections × items × rounds': `${n(scale.connections)} × ${scale.itemsEach} × ${scale.rounds}${scale.busyItems > 0 ? `, and a busy connection of ${n(scale.busyItems)} items` : ''} (every item changes once a round at the provider: created, then updated, deleted ${scale.deletes * 100}% a round, restored the round after)`,
    'provider limit': `${scale.limit}/s, told (providerRequestsPerSecond); provider latency ${scale.providerLatencyMs} ms; DynamoDB: AWS's latency as modelled (virtual)`,
    'changes made at the provider': n(rounds.changesMade),
    'changes committed (items-table row writes that changed the item, by transition.ts)': n(committed),
    'messages sent by users': n(rounds.messages),
    'rounds began at (virtual)': run.roundStarts.map(minutesAt).join(', '),
    'hazard: ids sent twice (racing writers)': n(rounds.sentTwice),
    '… row writes lost to another container (the row\'s condition; no change written)': n(rowRaces),
    '… row writes that took more than one request; the most one took': `${n(run.attempts.retried)}; ${run.attempts.most}`,
    'changes writer: invocations; changes numbered; found numbered already (a batch delivered again)': `${n(meter.lambda.changesWriter.invocations)}; ${n(run.writer.numbered)}; ${n(run.writer.already)}`,
    '… change rows put; head moves (one a chunk of a connection); changes a head move': `${n(changePuts.requests)}; ${n(headMoves.requests)}; ${round(run.writer.numbered / Math.max(1, headMoves.requests - headMoves.conditionFailures), 2)}`,
    '… numbers held by another writer, or a head moved first (the writer read the head again; nothing handed back for it)': n(changePuts.conditionFailures + headMoves.conditionFailures),
    '… records handed back to the event source (a failure that passes); records it could not read': `${n(run.writer.retried)}; ${n(run.writer.unreadable)}`,
    'transactions (TransactWriteItems requests, any function)': n(transactions),
    'hazard: SQS duplicate copies': n(rounds.sqsDuplicates),
    'hazard: sync invocations failed after their work (their batch delivered again)': `${n(run.faults.failedInvocations)} (every ${scale.failEvery}th)`,
    '… records delivered again (SQS redeliveries)': n(run.redeliveries),
    'hazard: write answers lost, the sync\'s (the SDK sent the request again)': n(run.faults.lostAcks),
    'hazard: write answers lost, the changes writer\'s (the SDK sent the put or the head move again)': n(run.faults.writerLostAcks),
    'hazard: changes-writer invocations failed after their work (their stream batch delivered again)': `${n(writerStream.failedAfterWork)} (every ${scale.writerFailEvery}th; ${n(writerStream.retried)} records handed again)`,
    'hazard: stream batches lost by the change-events function\'s event source': `${n(stream.lostBatches)} batches, ${n(stream.lostRecords)} records of ${n(stream.records)} (change events put: ${n(meter.eventBridge.entries)})`,
    'hazard: the consumer stopped': stop ? `from ${minutesAt(stop.from)} to ${minutesAt(stop.to)} (virtual), then went on from its stored cursors` : 'no',
    'consumer': `every connection read every ${scale.consumerPeriodSeconds} s (virtual), to the end of its feed, pages of 1,000: ${n(run.consumer.reads)} reads, ${n(run.consumer.calls.invocations)} API calls (${run.consumer.calls.failed} not 200, ${run.consumer.readsFailed} reads failed)`,
    'changes read once, equal to the commit at their place': `${n(c.matched)} of ${n(committed)}`,
    'missed': c.missed,
    'duplicated': c.duplicated,
    'read out of order or not as committed; read but never committed': `${c.mismatched}; ${c.phantom}`,
    'change rows not numbered as their commit order; heads not equal to the changes committed': `${c.misnumbered}; ${run.heads.differing} of ${run.heads.checked}`,
    'committed row writes that changed nothing (by transition.ts); change rows left above a head (never read)': `${c.unchangedWrites}; ${c.rowsAboveHead}`,
    'lag commit → its change numbered (readable): p50 / p99 / max': `${seconds(percentile(c.numberingLags, 0.5))} / ${seconds(percentile(c.numberingLags, 0.99))} / ${seconds(percentile(c.numberingLags, 1))} (${n(c.numberingLags.length)} changes)`,
    [`lag commit → the consumer's read (read every ${scale.consumerPeriodSeconds} s), changes committed while it read: p50 / p99 / max`]: `${seconds(percentile(lags.steady, 0.5))} / ${seconds(percentile(lags.steady, 0.99))} / ${seconds(percentile(lags.steady, 1))} (${n(lags.steady.length)} changes)`,
    '… changes committed while it was stopped (or its next read fell in the stop): p50 / max': `${seconds(percentile(lags.stopped, 0.5))} / ${seconds(percentile(lags.stopped, 1))} (${n(lags.stopped.length)} changes)`,
    'a read at the instant a change was numbered (its head move answered), from the cursor before it, returned it': `${run.probes.found} of ${run.probes.probes}`,
    'replay from the cursors stored at the stop, to the end': `${run.replay.connections} connections, ${n(run.replay.changes)} changes, ${run.replay.differing} connections not the same bytes (${n(run.replayCalls.invocations)} API calls)`,
    'dead-lettered': run.deadLettered,
  };
  const busy = c.watched;
  if (busy) {
    figures['the busy connection: changes committed; each round: its changes, from the round\'s start to its last, changes a second'] =
      `${n(busy.committed)}; ${busyRounds(busy.committedAt, run.roundStarts)
        .map(({ changes, ms }) => `${n(changes)} in ${seconds(ms)} (${ms > 0 ? round(changes / (ms / 1000), 1) : '-'}/s)`)
        .join(', ')}`;
    figures['… its lag commit → its change numbered: p50 / p99 / max'] =
      `${seconds(percentile(busy.numberingLags, 0.5))} / ${seconds(percentile(busy.numberingLags, 0.99))} / ${seconds(percentile(busy.numberingLags, 1))} (${n(busy.numberingLags.length)} changes)`;
  }
  costFigures(figures, run, committed, perMillion);
  figures['real time'] = `${round(run.realMs / 1000, 0)} s (${round((run.realMs / Math.max(1, committed)) * 1000, 0)} µs a change)`;

  const hazards: Array<[string, number]> = [
    ['ids sent twice', rounds.sentTwice],
    ['SQS duplicates', rounds.sqsDuplicates],
    ['failed invocations', run.faults.failedInvocations],
    ['lost answers', run.faults.lostAcks],
    ['lost answers of the changes writer', run.faults.writerLostAcks],
    ['changes-writer invocations failed after their work', writerStream.failedAfterWork],
    ['lost stream batches', stream.lostBatches],
  ];
  const checks: Check[] = [
    check('every change made at the provider committed once', `${n(committed)} of ${n(run.expected)}`, committed === run.expected && rounds.changesMade === run.expected),
    check('0 changes missed, 0 duplicated', `${c.missed} missed, ${c.duplicated} duplicated`, c.missed === 0 && c.duplicated === 0),
    check(
      'each connection\'s changes read equal its committed writes, in commit order (each item\'s in its order)',
      `${n(c.matched)} of ${n(committed)}; ${c.mismatched} not, ${c.phantom} never committed`,
      c.matched === committed && c.mismatched === 0 && c.phantom === 0,
    ),
    check('numbered 1..head without a hole', `${c.misnumbered} misnumbered, ${run.heads.differing} heads differing`, c.misnumbered === 0 && run.heads.differing === 0),
    check('no transaction: every row and every change a single-item write', `${transactions} TransactWriteItems`, transactions === 0),
    check('no record handed back for another writer of its connection; none unreadable', `${run.writer.retried} handed back, ${run.writer.unreadable} unreadable`, run.writer.retried === 0 && run.writer.unreadable === 0),
    check('the replay from an older cursor is the same changes, byte for byte', `${run.replay.differing} of ${run.replay.connections} connections differ`, run.replay.connections === run.connections && run.replay.differing === 0),
    check('a read at the instant a change is numbered returns it', `${run.probes.found} of ${run.probes.probes}`, run.probes.probes > 0 && run.probes.found === run.probes.probes),
    check('every hazard met', hazards.map(([what, count]) => `${count} ${what}`).join(', '), hazards.every(([, count]) => count > 0) && stop !== undefined),
    check('nothing dead-lettered', run.deadLettered, run.deadLettered === 0),
  ];
  return { figures, checks };
}

/** A connection's changes in each round: how many committed in it, and the time from the round's start to the last of them. */
export function busyRounds(committedAt: Float64Array, roundStarts: readonly number[]): Array<{ changes: number; ms: number }> {
  return roundStarts.map((start, r) => {
    const end = roundStarts[r + 1] ?? Number.POSITIVE_INFINITY;
    let changes = 0;
    let last = start;
    for (const at of committedAt) {
      if (at < start || at >= end) continue;
      changes += 1;
      last = Math.max(last, at);
    }
    return { changes, ms: last - start };
  });
}

/** The cost lines: written (by service, and the feed's share), read, kept; each per million changes. */
function costFigures(figures: Record<string, number | string>, run: ChangesRun, committed: number, perMillion: number): void {
  const sends = { SendMessageBatch: Math.ceil(run.rounds.messages / 10) };
  const seconds = (run.endMs - run.t0) / 1000;
  const written = writeCost(run.meter, sends, Math.max(1, committed), seconds, { logsMetered: run.logsMetered, tracing: run.tracing });
  if (!run.logsMetered) figures['written: CloudWatch Logs'] = 'not counted in this run (meterLogs off: the push scenario counts the sync\'s log lines)';
  for (const line of written.lines) {
    if (line.usd === 0 && line.requests === 0) continue;
    figures[`written: ${line.what}`] = `${n(line.requests)} requests, ${line.units} → ${usd(line.usd)} (${usd(line.usd * perMillion)} per million changes)`;
  }
  for (const service of SERVICES) figures[`written, per million changes: ${service} (USD)`] = round(written.perMillionByService[service], 4);
  figures['written, per million changes (USD)'] = round(written.perMillion, 4);
  const units = (sources: ReadonlyArray<'sync' | 'reconcile' | 'changesWriter'>, table: string): number =>
    sources.reduce((sum, s) => sum + ['PutItem', 'UpdateItem'].reduce((total, operation) => total + (run.meter.dynamo[s][`${operation} ${table}`]?.capacityUnits ?? 0), 0), 0);
  if (committed > 0) {
    figures['written: write units a committed change (the row; the change row and its share of a head move)'] =
      `${round(units(['sync', 'reconcile'], run.names.items) / committed, 2)}; ${round(units(['changesWriter'], run.names.changes) / committed, 2)} (single-item writes: 1 a KB)`;
  }
  const share = feedShare(run.meter, run.names.changes, seconds, { logsMetered: run.logsMetered, tracing: run.tracing });
  for (const line of share.lines) figures[`… the feed's share: ${line.what}`] = `${line.units} → ${usd(line.usd * perMillion)} per million changes`;
  figures["… the feed's share, per million changes (USD)"] = round(share.total * perMillion, 4);

  const read = readCost(run.consumer.calls, run.apiDynamo, run.apiLogs);
  for (const line of read.lines) figures[`read: ${line.what}`] = `${n(line.requests)} requests, ${line.units} → ${usd(line.usd)} (${usd(line.usd * perMillion)} per million changes)`;
  for (const [service, cost] of Object.entries(read.byService)) figures[`read, per million changes: ${service} (USD)`] = round(cost * perMillion, 4);
  figures['read, per million changes (USD)'] = round(read.total * perMillion, 4);
  const calls = run.consumer.calls.invocations;
  if (calls > 0) {
    const perCall = read.total / calls;
    const monthly = ((HOURS_PER_MONTH * 3600) / (run.consumer.periodMs / 1000)) * perCall;
    figures['read: API calls per change; cost a call (average)'] = `${round(calls / Math.max(1, committed), 3)}; ${usd(perCall, 8)}`;
    figures[`read: one connection polled every ${run.consumer.periodMs / 1000} s for a month, at that average`] = usd(monthly, 4);
  }

  const average = run.check.changeRows > 0 ? run.check.changeRowBytes / run.check.changeRows : 0;
  const kept = storageCost(average, run.retentionDays);
  figures['kept: a change row (average; + DynamoDB\'s 100 bytes an item)'] = `${round(average, 1)} bytes (${round(kept.rowBytes, 1)} billed)`;
  figures['kept: a million changes, a month (table storage; continuous backups)'] = `${usd(kept.perMillionMonth.storage)}; ${usd(kept.perMillionMonth.backups)}`;
  figures[`kept: a million changes a day, each kept ${run.retentionDays} days (changesRetentionDays)`] =
    `${n(kept.steady.rows)} rows, ${round(kept.steady.gb, 2)} GB: ${usd(kept.steady.storage, 2)} a month storage + ${usd(kept.steady.backups, 2)} backups`;
}
