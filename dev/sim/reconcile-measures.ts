/** The reconciliation pass's measures, from what the scenario watched and the system left. */
import { LOCAL_PAGE_ROWS } from '../fakes/dynamodb-local.js';
import { QueryCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { DEFAULT_CONNECTION } from '../../functions/shared/connections/connection.js';
import { revisionText } from '../../functions/item-sync/item.js';
import { passCost } from './reconcile-cost.js';
import type { PassRun, PassWatch } from './reconcile-watch.js';
import { percentile } from './scenario.js';
import type { SimSystem } from './system.js';

/** The pass's own figures: its length, every id's check, and its projected length W. */
export interface PassTiming {
  /** Pass 1 as the reconciler's reports have it. */
  pass: { startedAt?: number; endedAt?: number };
  passStart: number;
  /** Until every id was checked. */
  passMs: number | undefined;
  checkedInPass: number;
  projections: Array<{ at: number; seconds: number }>;
  wMid: number | undefined;
  wLast: number | undefined;
  wWhich: string;
  p99Age: number | undefined;
}

/** Ids checked more than once by the sweep, and why; ids sent more than once by the reconciler. */
export interface SweepRepeats {
  twice: number;
  sentAgain: number;
  redelivered: number;
  raced: number;
  unexplained: number;
  alsoByUsers: number;
  sentIds: number;
  sentTwice: number;
}

/** The rows against the provider at the end, and the changes made during the run. */
export interface RowsAgainstProvider {
  mismatched: Set<number>;
  changedBeforeCheck: number;
  changedAfterCheck: number;
  changedStale: number;
  otherStale: number;
  changesMade: number;
}

/** Users' send-to-done times (ms): idle (before the first tick) and during the pass. */
export interface UserTimes {
  idle: number[];
  during: number[];
  idleP99: number;
  passP99: number;
}

export interface PassMeasures {
  timing: PassTiming;
  repeats: SweepRepeats;
  rows: RowsAgainstProvider;
  users: UserTimes;
  cost: ReturnType<typeof passCost>;
  perMillion: number;
  dead: number;
}

export async function measurePass(run: PassRun, changed: ReadonlyMap<number, number>): Promise<PassMeasures> {
  const { scale, system, end } = run;
  const timing = passTiming(run);
  const repeats = sweepRepeats(run.watch);
  const rows = await rowsAgainstProvider(run, changed);
  const users = userTimes(run.watch, timing.passStart);
  const passSeconds = (timing.passMs ?? end - timing.passStart) / 1000;
  const cost = passCost(system.meter, passSeconds, { logsMetered: scale.meterLogs, tracing: system.local.deployment.sync.tracing, itemsTable: system.local.names.itemsTable });
  const perMillion = (cost.total - cost.changedWrites) * (1_000_000 / scale.ids);
  const dead = system.sqs.size(system.dlqUrl) + system.sqs.size(system.reconcileDlqUrl!);
  return { timing, repeats, rows, users, cost, perMillion, dead };
}

function passTiming({ system, watch }: PassRun): PassTiming {
  const { passEndAt } = watch;
  const pass = passOf(system);
  const passStart = pass.startedAt ?? watch.firstTickAt;
  let checkedInPass = 0;
  for (const at of watch.firstInPass) if (at >= passStart) checkedInPass += 1;
  const passMs = passEndAt !== undefined ? passEndAt - passStart : undefined;
  const projections = projectionsOf(system, 1);
  // No projection while the pass ran (shorter than the warm-up): the length it published at its end.
  const published = pass.endedAt === undefined ? undefined : (pass.endedAt - passStart) / 1000;
  const wLast = projections.at(-1)?.seconds ?? published;
  const wWhich = projections.length > 0 ? 'the last projection while the pass ran' : 'the pass length published at its end (no projection ran)';
  const wMid = passEndAt === undefined ? undefined : projections.find((p) => p.at >= passStart + (passEndAt - passStart) / 2)?.seconds;
  const p99Age = watch.ages === undefined ? undefined : percentile(watch.ages, 0.99) / 1000;
  return { pass, passStart, passMs, checkedInPass, projections, wMid, wLast, wWhich, p99Age };
}

function sweepRepeats(watch: PassWatch): SweepRepeats {
  const { sent, sweepChecks, userChecks, sweepDeliveries, races } = watch;
  const counts: SweepRepeats = { twice: 0, sentAgain: 0, redelivered: 0, raced: 0, unexplained: 0, alsoByUsers: 0, sentIds: 0, sentTwice: 0 };
  for (let i = 0; i < watch.n; i += 1) {
    if (sent[i]! > 0) counts.sentIds += 1;
    if (sent[i]! > 1) counts.sentTwice += 1;
    if (sweepChecks[i]! > 0 && userChecks[i]! > 0) counts.alsoByUsers += 1;
    if (sweepChecks[i]! < 2) continue;
    counts.twice += 1;
    if (sent[i]! > 1) counts.sentAgain += 1;
    else if (sweepDeliveries[i]! > 1) counts.redelivered += 1;
    else if (races[i]! > 0) counts.raced += 1;
    else counts.unexplained += 1;
  }
  return counts;
}

async function rowsAgainstProvider({ system, watch, end }: PassRun, changed: ReadonlyMap<number, number>): Promise<RowsAgainstProvider> {
  const mismatched = await mismatchedRows(system);
  let changedBeforeCheck = 0;
  let changedAfterCheck = 0;
  let changedStale = 0;
  let otherStale = 0;
  for (const [i, at] of changed) {
    if (at > end) continue;
    const late = !(watch.lastCheck[i]! > at) && !(watch.firstInPass[i]! > at);
    if (late) changedAfterCheck += 1;
    else changedBeforeCheck += 1;
    if (mismatched.has(i) && !late) changedStale += 1;
  }
  for (const i of mismatched) if (!changed.has(i)) otherStale += 1;
  const changesMade = [...changed.values()].filter((at) => at <= end).length;
  return { mismatched, changedBeforeCheck, changedAfterCheck, changedStale, otherStale, changesMade };
}

function userTimes(watch: PassWatch, passStart: number): UserTimes {
  const { userDone, passEndAt } = watch;
  const idle = userDone.filter((u) => u.sentAt < watch.firstTickAt).map((u) => u.ms);
  const during = userDone.filter((u) => u.sentAt >= passStart && (passEndAt === undefined || u.sentAt <= passEndAt)).map((u) => u.ms);
  const idleP99 = percentile(Float64Array.from(idle), 0.99) / 1000;
  const passP99 = percentile(Float64Array.from(during), 0.99) / 1000;
  return { idle, during, idleP99, passP99 };
}


/** Pass 1 as the reconciler's tick reports have it. */
export function passOf(system: SimSystem): { startedAt?: number; endedAt?: number } {
  const reports = system.ticks.flatMap((t) => (t.report && t.report.pass === 1 ? [t.report] : []));
  const started = reports[0]?.passStartedAt;
  const ended = reports.find((r) => r.passLengthSeconds !== undefined);
  return {
    ...(started !== undefined ? { startedAt: started } : {}),
    ...(started !== undefined && ended ? { endedAt: started + ended.passLengthSeconds! * 1000 } : {}),
  };
}

/** The projected pass lengths W published while pass `pass` was running (seconds), in order. */
export function projectionsOf(system: SimSystem, pass: number): Array<{ at: number; seconds: number }> {
  return system.ticks.flatMap((t) =>
    t.report && t.report.pass === pass && t.report.state === 'running' && t.report.projectedPassSeconds !== undefined
      ? [{ at: t.endedAt, seconds: t.report.projectedPassSeconds }]
      : [],
  );
}

export function lastProjection(system: SimSystem, pass: number): number | undefined {
  return projectionsOf(system, pass).at(-1)?.seconds;
}

/**
 * Indexes (in system.ids) of the rows whose revision (or liveness) is not the provider's: the
 * connection `default`'s rows, read by a Query of its partition. (DynamoDB Local's Scan pages cost
 * more the larger the table: 150,000 rows took 33.9 s in pages of 1,000 where the Query took 5.1 s,
 * and a Scan of a million rows ran on for more than half an hour.)
 */
async function mismatchedRows(system: SimSystem): Promise<Set<number>> {
  const client = system.dynamo.client();
  const rows = new Map<string, { revision?: string; deleted: boolean }>();
  let start: Record<string, AttributeValue> | undefined;
  do {
    const page = await client.send(
      new QueryCommand({
        TableName: system.local.names.itemsTable,
        ConsistentRead: true,
        KeyConditionExpression: '#connection = :connection',
        ProjectionExpression: '#id, #revision, #deleted',
        ExpressionAttributeNames: { '#connection': 'connection', '#id': 'id', '#revision': 'revision', '#deleted': 'deleted' },
        ExpressionAttributeValues: { ':connection': { S: DEFAULT_CONNECTION } },
        Limit: LOCAL_PAGE_ROWS,
        ...(start ? { ExclusiveStartKey: start } : {}),
      }),
    );
    for (const row of page.Items ?? []) {
      const revision = row['revision']?.S;
      rows.set(row['id']?.S ?? '', { ...(revision !== undefined ? { revision } : {}), deleted: row['deleted']?.BOOL === true });
    }
    start = page.LastEvaluatedKey;
  } while (start);
  client.destroy();
  const stale = new Set<number>();
  system.ids.forEach((id, i) => {
    const item = system.provider.getItem(id);
    const row = rows.get(id);
    const live = item !== undefined;
    if (row === undefined || row.deleted === live || (live && row.revision !== revisionText(item['revision']))) stale.add(i);
  });
  return stale;
}

