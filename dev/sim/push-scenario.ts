/**
 * The push path measured in virtual time: what the ids users send cost, per million ids.
 *
 * The system as deployed (system.ts): the real item-sync handlers on the sync queue with the
 * deployed containers, the real pace, provider client and DynamoDB adapters on DynamoDB Local, the SQS
 * model; L told (providerRequestsPerSecond); reconciliation deployed with the deployed
 * freshnessHours but its schedule's first tick after the measurement (no pass runs); the items
 * table's stream and the real change-events function on it (items-stream.ts).
 *
 * Two runs, each on a system of its own with the table preloaded with the N rows (preload.ts):
 * - unchanged: users send all N ids at once with the enqueue tool's sending code (SendMessageBatch
 *   of 10, users' lane, to the sync queue); each is fetched, found unchanged, done (one account's N
 *   ids at once are a backlog: a users' batch syncs 10 of them and sends the rest to the background
 *   lane, where they are done: both lanes are counted).
 * - changed: the same after every item got a new revision at the provider: each row is written
 *   with its change and the connection's head in one TransactWriteItems (the changes feed), its
 *   stream record read by the change-events function, its event put on the bus.
 *
 * Measured from the first send to the last record done (and the stream read through): every
 * request, priced (push-cost.ts), per million ids.
 */
import { enqueueIds } from '../../tools/enqueue/send.js';
import type { CallCounts } from '../fakes/in-process-aws.js';
import { systemConfig } from '../system/config.js';
import { pushCost, SERVICES, type PushCost } from './push-cost.js';
import { check, round, timed, type Check, type ScenarioResult } from './scenario.js';
import { atLimit, startSystem, type SimMeter, type SimSystem, type SystemOptions } from './system.js';

const HOUR = 3_600_000;

export interface PushScale {
  ids: number;
  /** The provider's limit, told to the system (providerRequestsPerSecond). */
  limit: number;
  providerLatencyMs: number;
  /** Virtual time of one PutEvents call. */
  eventBridgeRoundTripMs: number;
  seed: number;
  meterLogs: boolean;
  /** A run stops here if its ids are not done by then. */
  maxHours: number;
  /** The context key syncBatchSize, to price it (`npm run sim -- push --batch-size N`); default the deployed one. */
  syncBatchSize?: number;
}

/** 200,000 ids (about 7 minutes of real time a run): the figures per million by scaling, the counts shown. */
export const PUSH_FULL: PushScale = {
  ids: 200_000,
  limit: 200,
  providerLatencyMs: 50,
  eventBridgeRoundTripMs: 20,
  seed: 11,
  meterLogs: true,
  maxHours: 12,
};

/** What `npm test` runs. */
export const PUSH_SHORT: PushScale = { ...PUSH_FULL, ids: 600, maxHours: 1 };

export type PushRunKind = 'unchanged' | 'changed';

export interface PushRun {
  kind: PushRunKind;
  ids: number;
  done: number;
  /** Virtual ms from the first send to the last record done (and the stream read through). */
  measuredMs: number;
  /** Virtual ms from the first send to the last record done, and to the changes writer's stream read through after it (every change numbered). */
  phases: { doneMs: number; numberedMs: number | undefined };
  providerRequests: number;
  rateLimited: number;
  deadLettered: number;
  /** The sync's item log lines by message (`record done`, `record postponed`, ...). */
  itemLogs: Record<string, number>;
  cost: PushCost;
  sends: CallCounts;
  /** The sync's DynamoDB counts on each queue (what the cost lines price). */
  dynamo: Pick<SimMeter['dynamo'], 'sync' | 'reconcile' | 'changesWriter'>;
  realMs: number;
}

/** Both runs, their figures and checks. */
export function pushScenario(scale: PushScale, progress: (line: string) => void = () => undefined): Promise<ScenarioResult> {
  const name = `push path: ${scale.ids.toLocaleString('en-US')} ids sent at once by users, L = ${scale.limit}/s told`;
  return timed(name, async () => {
    const unchanged = await pushRun(scale, 'unchanged', progress);
    const changed = await pushRun(scale, 'changed', progress);
    return {
      virtualMs: unchanged.measuredMs + changed.measuredMs,
      figures: { ...deployedFigures(scale), ...runFigures(unchanged), ...runFigures(changed) },
      checks: [...runChecks(unchanged), ...runChecks(changed)],
    };
  });
}

export function pushSystemOptions(scale: PushScale, observe: SystemOptions['observe']): SystemOptions {
  return {
    ids: scale.ids,
    ...atLimit(scale),
    // freshnessHours as deployed; the first tick after the run's hard stop: no pass while measured.
    reconcile: { freshnessHours: systemConfig().freshnessHours, firstTickAfterMs: (scale.maxHours + 1) * HOUR },
    changeEvents: { eventBridgeRoundTripMs: scale.eventBridgeRoundTripMs },
    // As deployed: the changes writer numbers each changed row into its connection's feed.
    changesWriter: true,
    ...(scale.syncBatchSize !== undefined ? { syncBatchSize: scale.syncBatchSize } : {}),
    ...(observe ? { observe } : {}),
  };
}

/** One run: a system of its own, the table preloaded, (changed: every item revised), every id sent at once, synced, priced. */
export async function pushRun(scale: PushScale, kind: PushRunKind, progress: (line: string) => void = () => undefined): Promise<PushRun> {
  const realStart = Date.now();
  const done = new Set<string>();
  const itemLogs: Record<string, number> = {};
  let providerRequests = 0;
  let rateLimited = 0;
  const system = await startSystem(
    pushSystemOptions(scale, {
      // Either lane: a users' batch sends a connection's ids beyond what it keeps (an import's: a few of each batch,
      // functions/item-sync/users-ids.ts) to the background lane (docs/fairness.md), done there.
      itemLog(_source, message, itemId) {
        itemLogs[message] = (itemLogs[message] ?? 0) + 1;
        if (message === 'record done') done.add(itemId);
      },
      providerAnswer(_source, _itemId, status) {
        providerRequests += 1;
        if (status === 429) rateLimited += 1;
      },
    }),
  );
  try {
    const rows = await system.preloadItems();
    progress(`${kind}: preloaded ${rows} rows in ${((Date.now() - realStart) / 1000).toFixed(1)} s real`);
    if (kind === 'changed') for (const id of system.ids) system.provider.bumpRevision(id);
    const sends: CallCounts = {};
    const sqs = system.local.aws.sqsClient({ calls: sends });
    const t0 = system.clock.ms();
    let sending: Promise<unknown> | undefined;
    system.clock.at(t0, () => void (sending = enqueueIds(sqs, system.queueUrl, system.ids, { sleep: system.clock.sleep })));
    const { end, allDoneAt, writerThroughAt } = await runUntilDone(system, scale, done, t0, realStart, kind, progress);
    await sending;
    const seconds = (end - t0) / 1000;
    const cost = pushCost(system.meter, sends, scale.ids, seconds, { logsMetered: scale.meterLogs, tracing: system.local.deployment.sync.tracing });
    const deadLettered = system.sqs.size(system.dlqUrl);
    const dynamo = structuredClone({ sync: system.meter.dynamo.sync, reconcile: system.meter.dynamo.reconcile, changesWriter: system.meter.dynamo.changesWriter });
    const phases = { doneMs: (allDoneAt ?? end) - t0, numberedMs: writerThroughAt === undefined ? undefined : writerThroughAt - t0 };
    return { kind, ids: scale.ids, done: done.size, measuredMs: end - t0, phases, providerRequests, rateLimited, deadLettered, itemLogs, cost, sends, dynamo, realMs: Date.now() - realStart };
  } finally {
    await system.close();
  }
}

/**
 * Runs until every id is done and the stream read through (or `maxHours`); progress every 10 virtual
 * minutes. The time it was through, when every id was done, and when the changes writer was through after that.
 */
async function runUntilDone(
  system: SimSystem,
  scale: PushScale,
  done: ReadonlySet<string>,
  t0: number,
  realStart: number,
  kind: PushRunKind,
  progress: (line: string) => void,
): Promise<{ end: number; allDoneAt: number | undefined; writerThroughAt: number | undefined }> {
  const stream = system.changeEvents?.stream;
  const writerStream = system.changesWriter?.stream;
  let end: number | undefined;
  const report = (): void => {
    if (end !== undefined) return;
    const now = system.clock.ms();
    progress(
      `${kind}: ${((now - t0) / HOUR).toFixed(2)} h virtual, ${((Date.now() - realStart) / 1000).toFixed(0)} s real: ` +
        `${done.size.toLocaleString('en-US')} of ${scale.ids.toLocaleString('en-US')} done, sync queue ${system.sqs.size(system.queueUrl)}, stream ${stream?.size ?? '-'}`,
    );
    system.clock.at(now + 10 * 60_000, report);
  };
  system.clock.at(t0 + 10 * 60_000, report);
  const hardStop = t0 + scale.maxHours * HOUR;
  // When every id was done: the stream is read through once a read after that finds nothing more.
  let allDoneAt: number | undefined;
  let writerThroughAt: number | undefined;
  await system.pollUntil(() => {
    if (end !== undefined) return true;
    const now = system.clock.ms();
    if (allDoneAt === undefined && done.size >= scale.ids) allDoneAt = now;
    if (allDoneAt !== undefined && writerThroughAt === undefined && writerStream?.readThroughSince(allDoneAt)) writerThroughAt = now;
    const through =
      allDoneAt !== undefined && [stream, writerStream].every((source) => source === undefined || source.readThroughSince(allDoneAt!));
    if (through || now >= hardStop) end = now;
    return end !== undefined;
  });
  return { end: end ?? system.clock.ms(), allDoneAt, writerThroughAt };
}

function deployedFigures(scale: PushScale): Record<string, string | number> {
  const config = systemConfig();
  return {
    ids: scale.ids,
    'provider limit': `${scale.limit}/s, told (providerRequestsPerSecond); provider latency ${scale.providerLatencyMs} ms`,
    'deployed settings': `syncBatchSize ${scale.syncBatchSize ?? config.syncBatchSize}${scale.syncBatchSize === undefined ? '' : ' (--batch-size)'}, syncMaxConcurrency ${config.syncMaxConcurrency}, freshnessHours ${config.freshnessHours} (no pass while measured)`,
    'sending': "all at once, the enqueue tool's code (SendMessageBatch of 10, users' lane, the sync queue)",
  };
}

/** One run's figures, each named after its run; the cost lines with their counts, then per service per million ids. */
export function runFigures(run: PushRun): Record<string, string | number> {
  const k = run.kind;
  const perMillion = 1_000_000 / run.ids;
  const figures: Record<string, string | number> = {
    [`${k}: ids done`]: `${run.done} of ${run.ids}`,
    [`${k}: measured (virtual, first send to last done)`]: `${round(run.measuredMs / 1000, 1)} s (${round(run.ids / (run.measuredMs / 1000), 1)} ids/s)`,
    [`${k}: every id done (virtual, first send to last done)`]: `${round(run.phases.doneMs / 1000, 1)} s (${round(run.ids / (run.phases.doneMs / 1000), 1)} ids/s)`,
    [`${k}: every change numbered (the changes writer read through after the last done)`]:
      run.phases.numberedMs === undefined ? 'not within the run' : `${round(run.phases.numberedMs / 1000, 1)} s (${round(run.ids / (run.phases.numberedMs / 1000), 1)} ids/s)`,
    [`${k}: provider requests`]: `${run.providerRequests} (${run.rateLimited} answered 429)`,
    [`${k}: item log lines`]: JSON.stringify(run.itemLogs),
    [`${k}: dead-lettered`]: run.deadLettered,
  };
  for (const line of run.cost.lines) {
    figures[`${k}: cost: ${line.what}`] =
      `${line.requests.toLocaleString('en-US')} requests, ${line.units} → $${line.usd.toFixed(4)} ($${(line.usd * perMillion).toFixed(4)} per million ids)`;
  }
  for (const service of SERVICES) figures[`${k}: per million ids: ${service} (USD)`] = round(run.cost.perMillionByService[service], 4);
  figures[`${k}: cost of the run (USD)`] = round(run.cost.total, 4);
  figures[`${k}: cost per million ids (USD)`] = round(run.cost.perMillion, 4);
  figures[`${k}: real time`] = `${(run.realMs / 1000).toFixed(0)} s (${((run.realMs / run.ids) * 1000).toFixed(0)} µs an id)`;
  return figures;
}

export function runChecks(run: PushRun): Check[] {
  const k = run.kind;
  return [
    check(`${k}: every id done`, `${run.done} of ${run.ids}`, run.done === run.ids),
    check(`${k}: nothing dead-lettered`, run.deadLettered, run.deadLettered === 0),
  ];
}
