/**
 * Item sync, the core: one SQS batch in, one outcome per record out. No AWS import: it talks to the
 * provider, the items table, the items bucket, the dead-letter queue and the source queue through
 * ports (SyncPorts), and works by its settings (SyncSettings).
 *
 *   1. parse every body (a bad body or id is dead at once) and group records by item id, so that
 *      several records for one id cost one fetch;
 *   2. read the stored revisions of the whole batch at once;
 *   3. per id, with bounded concurrency (item-run.ts): fetch (the paced provider call,
 *      shared/provider/paced-call.ts: the pace, the token, retries of transient failures),
 *      validate, compare and write only what changed, conditionally on the stored row being the
 *      one compared (an item too large for a row goes whole to the items bucket first:
 *      item-writer.ts); a lost race re-reads the row, fetches again and re-decides, a bounded
 *      number of times;
 *   4. every result or error becomes done / later / retry / dead in one place (outcome/decide.ts),
 *      and is carried out beside it (outcome/carry-out.ts): dead letters, re-sends, postponements.
 *
 * Stored row first, fetch second, conditional write last: a write succeeds only if nothing was
 * written since the row was read, and the fetch it writes came after that read, so an older
 * revision can never replace a newer one.
 */
import type { Backoff } from '../shared/backoff.js';
import { outageError, PacedCaller, type PacedCallPorts } from '../shared/provider/paced-call.js';
import type { BatchOptions, BatchReport, SyncCounts, SyncRecord } from './batch.js';
import { ItemRun, type ItemRunPorts, type ItemRunSettings } from './item-run.js';
import { parseMessageBody } from './message.js';
import { carryOut, type CarryOutPorts } from './outcome/carry-out.js';
import { outcomeOf, type Outcome, type OutcomePolicy, type PostponePolicy } from './outcome/decide.js';
import type { StoredRevision } from './ports.js';

export type { BatchOptions, BatchReport, SyncCounts, SyncRecord } from './batch.js';

/**
 * What the batch talks to: the provider call's ports (pace, tokens, clock, log, random, sleep: see
 * shared/provider/paced-call.ts), the provider itself, the items table and bucket, the queues.
 */
export interface SyncPorts extends PacedCallPorts, CarryOutPorts, ItemRunPorts {}

/** How the batch works: the configuration's values (SyncConfig) and the core's own constants. */
export interface SyncSettings extends PostponePolicy, ItemRunSettings {
  /** Most provider requests in flight at once. */
  fetchConcurrency: number;
  /** Requests per fetch for transient provider failures. */
  fetchAttempts: number;
  /** Backoff between fetch attempts (DEFAULT_FETCH_BACKOFF). */
  backoff: Backoff;
}

export const DEFAULT_WRITE_ROUNDS = 3;

/** 200 ms, doubling up to 2 s, half fixed and half random. */
export const DEFAULT_FETCH_BACKOFF: Backoff = { baseMs: 200, capMs: 2_000, jitter: 'equal' };

/**
 * Syncs the batch and carries out every record's outcome. Throws only a ConfigError: a request that
 * can never succeed as configured (e.g. an endpoint that does not resolve), before anything is
 * carried out.
 */
export async function syncBatch(
  records: readonly SyncRecord[],
  ports: SyncPorts,
  settings: SyncSettings,
  options: BatchOptions,
): Promise<BatchReport> {
  const counts: SyncCounts = {
    fetched: 0,
    created: 0,
    updated: 0,
    unchanged: 0,
    deleted: 0,
    retried: 0,
    deadLettered: 0,
    postponed: 0,
    rateLimited: 0,
  };
  const outcomes = new Map<string, Outcome>();
  const { itemIds, byId } = groupById(records, outcomes, settings);

  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), Math.max(0, options.deadline - ports.clock.now().getTime()));
  timer.unref?.();
  // A batch comes from one queue: the reconciler's sweep, or users' ids.
  const sweep = records.some((record) => record.reconcilePass !== undefined);
  const caller = new PacedCaller(
    ports,
    { attempts: settings.fetchAttempts, backoff: settings.backoff },
    { deadline: options.deadline, signal: controller.signal, sweep, counts },
  );
  const run = new ItemRun(ports, settings, caller, counts);
  try {
    const idOutcomes = await syncIds([...byId.keys()], run, ports, settings);
    for (const [id, group] of byId) {
      const outcome = idOutcomes.get(id) ?? outcomeOf(new Error('no outcome was recorded for this item'), settings);
      for (const record of group) outcomes.set(record.messageId, outcome);
    }
  } finally {
    clearTimeout(timer);
  }
  // Nothing can succeed as configured: the invocation fails, and every record comes back.
  if (run.fatal) throw run.fatal;

  const failures = await carryOut(records, outcomes, itemIds, counts, ports, settings);
  return { failures, counts, outcomes };
}

/** Parses every body (a bad one is dead at once) and groups the records by item id. */
function groupById(
  records: readonly SyncRecord[],
  outcomes: Map<string, Outcome>,
  policy: OutcomePolicy,
): { itemIds: Map<string, string>; byId: Map<string, SyncRecord[]> } {
  const itemIds = new Map<string, string>();
  const byId = new Map<string, SyncRecord[]>();
  for (const record of records) {
    try {
      const id = parseMessageBody(record.body);
      itemIds.set(record.messageId, id);
      const group = byId.get(id);
      if (group) group.push(record);
      else byId.set(id, [record]);
    } catch (error) {
      outcomes.set(record.messageId, outcomeOf(error, policy));
    }
  }
  return { itemIds, byId };
}

/**
 * The outcome of every id: the stored revisions read at once, then each id synced with bounded
 * concurrency. While the breaker is open and no probe is due here, every id waits, without a read
 * or a request.
 */
async function syncIds(ids: readonly string[], run: ItemRun, ports: SyncPorts, settings: SyncSettings): Promise<Map<string, Outcome>> {
  const idOutcomes = new Map<string, Outcome>();
  if (ids.length === 0) return idOutcomes;
  const outage = ports.pace.waitingForProbe() ? ports.pace.outageKnown() : undefined;
  if (outage) {
    const waiting = outcomeOf(outageError(outage.reason), settings);
    for (const id of ids) idOutcomes.set(id, waiting);
    return idOutcomes;
  }
  let stored: Map<string, StoredRevision>;
  try {
    run.checkTime();
    stored = await ports.store.getRevisions(ids);
  } catch (error) {
    const failure = outcomeOf(error, settings);
    for (const id of ids) idOutcomes.set(id, failure);
    return idOutcomes;
  }
  await forEachLimited(ids, settings.fetchConcurrency, async (id) => {
    idOutcomes.set(id, await run.syncItem(id, stored.get(id)));
  });
  return idOutcomes;
}

/** Runs `fn` over `items` with at most `limit` at once. `fn` must not throw. */
async function forEachLimited<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next]!;
      next += 1;
      await fn(item);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
}
