/**
 * Item sync, the core: one SQS batch in, one outcome per record out. No AWS import: it talks to the
 * provider, the items table, the items bucket, the dead-letter queue and the source queue through
 * ports.
 *
 *   1. parse every body (a bad body or id is dead at once) and group records by item id, so that
 *      several records for one id cost one fetch;
 *   2. read the stored revisions of the whole batch at once;
 *   3. per id, with bounded concurrency: fetch (transient failures retried with jittered backoff
 *      while the invocation has time, one fresh token read after a 401), validate, compare and
 *      write only what changed, conditionally on the stored row being the one compared (an item too
 *      large for a row goes whole to the items bucket first: item-writer.ts); a lost race re-reads
 *      the row, fetches again and re-decides, a bounded number of times;
 *   4. map every result or error to done / retry / dead in one place (outcome.ts), send the dead
 *      to the dead-letter queue, postpone rate-limited records by their Retry-After.
 *
 * Stored row first, fetch second, conditional write last: a write succeeds only if nothing was
 * written since the row was read, and the fetch it writes came after that read, so an older
 * revision can never replace a newer one.
 */
import { backoffDelayMs } from '../shared/backoff.js';
import { ProviderError, TransientError } from '../shared/errors.js';
import type { Grant, PaceGate } from '../shared/provider/pace/provider-pace.js';
import type { Clock, Log, ProviderClient } from '../shared/ports.js';
import type { AccessTokenSource } from '../shared/provider/access-token.js';
import { validateItem, type ValidItem } from './item.js';
import { ItemWriter } from './item-writer.js';
import { parseMessageBody } from './message.js';
import { OutOfTimeError, outcomeOf, postponeDelaySeconds, WaitError, type DoneResult, type Outcome } from './outcome.js';
import type {
  DeadLetter,
  DeadLetterSink,
  ItemObjectStore,
  ItemStore,
  MessageRequeue,
  MessageVisibility,
  PostponeRequest,
  RequeueRequest,
  StoredRevision,
} from './ports.js';

/** The part of an SQS record the core needs. */
export interface SyncRecord {
  messageId: string;
  body: string;
  receiptHandle: string;
  /** The source queue's ARN (eventSourceARN). */
  queueArn: string;
  /** Times this message was postponed before (message attribute `postponements`); default 0. */
  postponements?: number;
  /**
   * Set when the reconciler sent this id (message attribute `reconcilePass`): the sweep, whose
   * requests yield to users' ids in the pace.
   */
  reconcilePass?: number;
}

export interface SyncDeps {
  provider: ProviderClient;
  tokens: AccessTokenSource;
  store: ItemStore;
  /** The items bucket: items too large for a row. */
  objects: ItemObjectStore;
  /** The random part of an item object's key (item-writer.ts); default from the system's random source. */
  objectKeySuffix?: () => string;
  deadLetters: DeadLetterSink;
  visibility: MessageVisibility;
  /** Sends a waiting record again, delayed (its delivery is then done). */
  requeue: MessageRequeue;
  /** The one provider pace every container shares: asked before, told after, every provider request. */
  pace: PaceGate;
  clock: Clock;
  log: Log;
  /** [0, 1), for the backoff jitter. */
  random: () => number;
  sleep: (ms: number) => Promise<void>;
  revisionField: string;
  /** Most provider requests in flight at once. */
  fetchConcurrency: number;
  /** Attempts per fetch for transient provider failures. */
  fetchAttempts: number;
  /** Shortest delay before a rate-limited record comes back, in seconds (outcome.ts). */
  rateLimitMinDelaySeconds: number;
  /** Longest delay of the outage postponement schedule, in seconds (outcome.ts). */
  postponeMaxSeconds: number;
  /** Rounds of fetch-decide-write per id before a lost race is given up as retry-later; default 3. */
  writeRounds?: number;
  /** Backoff between fetch attempts: base × 2^(attempt-1), capped, with jitter; defaults 200 / 2,000 ms. */
  backoffBaseMs?: number;
  backoffMaxMs?: number;
}

export interface SyncCounts {
  fetched: number;
  created: number;
  updated: number;
  unchanged: number;
  deleted: number;
  retried: number;
  deadLettered: number;
  /** Records sent again with a delay: they wait for the pace or for an outage to pass. */
  postponed: number;
  /** Provider answers 429 met by this batch. */
  rateLimited: number;
}

export interface BatchReport {
  /** Message ids to report in batchItemFailures, in the order of the batch. */
  failures: string[];
  counts: SyncCounts;
  /** The final outcome of every record, by message id. */
  outcomes: Map<string, Outcome>;
}

export interface BatchOptions {
  /** Epoch milliseconds: no provider work starts after it and requests in flight are aborted at it. */
  deadline: number;
}

type Fetched = ValidItem | 'not-found';

export const DEFAULT_WRITE_ROUNDS = 3;

/** A pace slot later than this before the deadline is of no use: the record waits instead. */
const SLOT_MARGIN_MS = 1_000;

export async function syncBatch(records: readonly SyncRecord[], deps: SyncDeps, options: BatchOptions): Promise<BatchReport> {
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
  const { itemIds, byId } = groupById(records, outcomes, deps);

  const now = (): number => deps.clock.now().getTime();
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), Math.max(0, options.deadline - now()));
  timer.unref?.();
  // A batch comes from one queue: the reconciler's sweep, or users' ids.
  const sweep = records.some((record) => record.reconcilePass !== undefined);
  const run = new ItemRun(deps, counts, options.deadline, controller.signal, now, sweep);
  try {
    const idOutcomes = await syncIds([...byId.keys()], run, deps);
    for (const [id, group] of byId) {
      const outcome = idOutcomes.get(id) ?? outcomeOf(new Error('no outcome was recorded for this item'), deps);
      for (const record of group) outcomes.set(record.messageId, outcome);
    }
  } finally {
    clearTimeout(timer);
  }

  await sendDeadLetters(records, outcomes, deps);
  await requeueWaiting(records, outcomes, deps);
  await postpone(records, outcomes, deps);
  const failures = settle(records, outcomes, itemIds, counts, deps);
  return { failures, counts, outcomes };
}

/** Parses every body (a bad one is dead at once) and groups the records by item id. */
function groupById(
  records: readonly SyncRecord[],
  outcomes: Map<string, Outcome>,
  deps: SyncDeps,
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
      outcomes.set(record.messageId, outcomeOf(error, deps));
    }
  }
  return { itemIds, byId };
}

/**
 * The outcome of every id: the stored revisions read at once, then each id synced with bounded
 * concurrency. While the breaker is open and no probe is due here, every id waits, without a read
 * or a request.
 */
async function syncIds(ids: readonly string[], run: ItemRun, deps: SyncDeps): Promise<Map<string, Outcome>> {
  const idOutcomes = new Map<string, Outcome>();
  if (ids.length === 0) return idOutcomes;
  const outage = deps.pace.waitingForProbe() ? deps.pace.outageKnown() : undefined;
  if (outage) {
    const waiting = outcomeOf(run.outage(outage.reason), deps);
    for (const id of ids) idOutcomes.set(id, waiting);
    return idOutcomes;
  }
  let stored: Map<string, StoredRevision>;
  try {
    run.checkTime();
    stored = await deps.store.getRevisions(ids);
  } catch (error) {
    const failure = outcomeOf(error, deps);
    for (const id of ids) idOutcomes.set(id, failure);
    return idOutcomes;
  }
  await forEachLimited(ids, deps.fetchConcurrency, async (id) => {
    idOutcomes.set(id, await run.syncItem(id, stored.get(id)));
  });
  return idOutcomes;
}

/** Logs and counts how each record ended; returns the message ids to report in batchItemFailures. */
function settle(
  records: readonly SyncRecord[],
  outcomes: ReadonlyMap<string, Outcome>,
  itemIds: ReadonlyMap<string, string>,
  counts: SyncCounts,
  deps: SyncDeps,
): string[] {
  const failures: string[] = [];
  for (const record of records) {
    const outcome = outcomes.get(record.messageId)!;
    const itemId = itemIds.get(record.messageId);
    const where = { messageId: record.messageId, ...(itemId !== undefined ? { itemId } : {}) };
    switch (outcome.kind) {
      case 'done':
        deps.log.info('record done', { ...where, result: outcome.result });
        break;
      case 'later':
        counts.postponed += 1;
        deps.log.info('record postponed', { ...where, reason: outcome.reason });
        break;
      case 'retry':
        failures.push(record.messageId);
        counts.retried += 1;
        deps.log.warn('record will be retried', {
          ...where,
          reason: outcome.reason,
          ...(outcome.delaySeconds !== undefined ? { delaySeconds: outcome.delaySeconds } : {}),
        });
        break;
      case 'dead':
        counts.deadLettered += 1;
        deps.log.error('record dead-lettered', { ...where, reason: outcome.reason, bodyLength: record.body.length });
        break;
    }
  }
  return failures;
}

/** Per-id work of one batch: fetch with retries, decide, conditional write, re-decide on a lost race. */
class ItemRun {
  private readonly writeRounds: number;
  private readonly backoffBaseMs: number;
  private readonly backoffMaxMs: number;

  constructor(
    private readonly deps: SyncDeps,
    private readonly counts: SyncCounts,
    private readonly deadline: number,
    private readonly signal: AbortSignal,
    private readonly now: () => number,
    private readonly sweep: boolean,
  ) {
    this.writeRounds = Math.max(1, deps.writeRounds ?? DEFAULT_WRITE_ROUNDS);
    this.backoffBaseMs = deps.backoffBaseMs ?? 200;
    this.backoffMaxMs = deps.backoffMaxMs ?? 2_000;
  }

  checkTime(): void {
    if (this.now() >= this.deadline) {
      throw new OutOfTimeError('the invocation ran out of time before this item was done');
    }
  }

  async syncItem(id: string, stored: StoredRevision | undefined): Promise<Outcome> {
    try {
      let current = stored;
      for (let round = 1; ; round += 1) {
        const fetched = await this.fetch(id);
        const result = await this.decideAndWrite(id, current, fetched);
        if (result !== 'conflict') {
          if (result !== 'absent') this.counts[result] += 1;
          return { kind: 'done', result };
        }
        if (round >= this.writeRounds) {
          throw new TransientError(
            `another invocation kept writing this item: the conditional write lost ${round} times in a row`,
          );
        }
        this.deps.log.info('write race lost; reading the row and fetching again', { itemId: id, round });
        this.checkTime();
        // The row first, then the fetch: the fetch must not be older than the row it is compared with.
        current = (await this.deps.store.getRevisions([id], { consistent: true })).get(id);
      }
    } catch (error) {
      return outcomeOf(error, this.deps);
    }
  }

  private async decideAndWrite(
    id: string,
    current: StoredRevision | undefined,
    fetched: Fetched,
  ): Promise<DoneResult | 'conflict'> {
    const syncedAt = this.deps.clock.now().toISOString();
    if (fetched === 'not-found') {
      if (current === undefined) return 'absent';
      if (current.deleted) return 'unchanged';
      const written = await this.deps.store.markDeleted(id, current.revision, syncedAt);
      return written === 'written' ? 'deleted' : 'conflict';
    }
    const row = { id, type: fetched.type, revision: fetched.revision, item: fetched.item, syncedAt };
    if (current === undefined) {
      return (await this.writer().write(row, { exists: false })) === 'written' ? 'created' : 'conflict';
    }
    if (!current.deleted && current.revision === fetched.revision) return 'unchanged';
    const written = await this.writer().write(row, { exists: true, revision: current.revision, deleted: current.deleted });
    return written === 'written' ? 'updated' : 'conflict';
  }

  /** Inline, or whole in the items bucket when the row would be too large (item-writer.ts). */
  private writer(): ItemWriter {
    const { store, objects, log, objectKeySuffix } = this.deps;
    return new ItemWriter({ store, objects, log, ...(objectKeySuffix ? { uniqueSuffix: objectKeySuffix } : {}) });
  }

  /**
   * One item from the provider: 'not-found' for a 404, the valid item, or a thrown error. Every
   * request waits for a slot of the shared pace and reports how it ended. A 429 is not a failure:
   * the pace stops every container until its Retry-After, and the request is made again when the
   * pace allows (or the record waits, postponed). An open breaker postpones the record.
   */
  private async fetch(id: string): Promise<Fetched> {
    this.checkTime();
    let token = await this.deps.tokens.get();
    let tokenRefreshed = false;
    for (let attempt = 1; ; ) {
      const grant = await this.slot(attempt > 1);
      if (grant.probe && grant.reason === 'token') {
        // The breaker is open because the provider refused the token the secret held: probe only
        // with another token, once the refresher has written one.
        token = await this.deps.tokens.refresh(token);
        if (this.deps.tokens.isRefused(token)) {
          await this.deps.pace.report({ kind: 'token-refused' }, grant);
          throw this.outage('token');
        }
      }
      let body: unknown;
      try {
        body = await this.deps.provider.getItem(id, token, { signal: this.signal });
      } catch (error) {
        if (!(error instanceof ProviderError)) throw error;
        switch (error.kind) {
          case 'not-found':
            await this.deps.pace.report({ kind: 'ok' }, grant);
            return 'not-found';
          case 'rate-limited':
            this.counts.rateLimited += 1;
            await this.deps.pace.report(
              { kind: 'rate-limited', ...(error.retryAfterSeconds !== undefined ? { retryAfterMs: error.retryAfterSeconds * 1000 } : {}) },
              grant,
            );
            this.deps.log.info('rate limited; waiting for the pace', { itemId: id, retryAfterSeconds: error.retryAfterSeconds });
            continue;
          case 'unauthorized': {
            await this.deps.pace.report({ kind: 'ok' }, grant); // the provider answered: it is up
            if (!tokenRefreshed) {
              tokenRefreshed = true;
              const fresh = await this.deps.tokens.refresh(token);
              if (fresh !== token) {
                this.deps.log.info('access token refused; retrying with the token read afresh', { itemId: id });
                token = fresh;
                continue;
              }
            }
            // The secret still holds the refused token: nothing can succeed until the refresher runs.
            this.deps.tokens.markRefused(token);
            await this.deps.pace.report({ kind: 'token-refused' }, grant);
            throw this.outage('token', error);
          }
          case 'transient': {
            if (this.signal.aborted) throw error; // our own deadline, not the provider's failure
            await this.deps.pace.report({ kind: 'failed', repeat: attempt > 1 }, grant);
            if (this.deps.pace.outageKnown()) throw this.outage('provider', error);
            if (attempt < this.deps.fetchAttempts) {
              const delay = this.backoff(attempt);
              if (this.now() + delay >= this.deadline) throw error; // no time left for another attempt
              this.deps.log.info('transient provider failure; retrying', { itemId: id, attempt, delayMs: delay, error: error.message });
              await this.deps.sleep(delay);
              attempt += 1;
              continue;
            }
            throw error;
          }
          default:
            await this.deps.pace.report({ kind: 'ok' }, grant); // 4xx, malformed: the provider is up
            throw error;
        }
      }
      await this.deps.pace.report({ kind: 'ok' }, grant);
      this.counts.fetched += 1;
      return validateItem(body, id, this.deps.revisionField);
    }
  }

  /** A slot of the shared pace: waits for it while the invocation has time, else the record waits. */
  private async slot(afterFailure = false): Promise<Extract<Grant, { kind: 'go' }>> {
    for (;;) {
      this.checkTime();
      const grant = await this.deps.pace.acquire({ afterFailure, sweep: this.sweep });
      switch (grant.kind) {
        case 'go':
          return grant;
        case 'outage':
          throw this.outage(grant.reason);
        case 'wait': {
          const now = this.now();
          // Keep back the time a request needs: a slot too close to the deadline is no use.
          if (grant.until >= this.deadline - SLOT_MARGIN_MS) {
            const seconds = (grant.until - now) / 1000;
            const why = grant.why === 'retry-after' ? "the provider's Retry-After" : 'the provider pace';
            throw new WaitError(`no slot of the provider pace before this invocation ends (${why})`, {
              kind: 'pace',
              seconds,
              retryAfter: grant.why === 'retry-after',
            });
          }
          await this.deps.sleep(Math.max(1, grant.until - now));
          break;
        }
      }
    }
  }

  outage(reason: 'provider' | 'token', cause?: Error): WaitError {
    const what =
      reason === 'token'
        ? 'the provider refuses the access token the secret holds (waiting for the token refresher)'
        : 'the provider fails every request (outage)';
    return new WaitError(`${what}${cause ? `; last answer: ${cause.message}` : ''}`, { kind: 'outage', reason });
  }

  /** Exponential backoff with "equal jitter": half the step fixed, half random. */
  private backoff(attempt: number): number {
    return backoffDelayMs(attempt, { baseMs: this.backoffBaseMs, capMs: this.backoffMaxMs, jitter: 'equal' }, this.deps.random);
  }
}

async function sendDeadLetters(records: readonly SyncRecord[], outcomes: Map<string, Outcome>, deps: SyncDeps): Promise<void> {
  const letters: DeadLetter[] = [];
  for (const record of records) {
    const outcome = outcomes.get(record.messageId);
    if (outcome?.kind === 'dead') {
      letters.push({ body: record.body, reason: outcome.reason, sourceMessageId: record.messageId });
    }
  }
  if (letters.length === 0) return;
  for (const failed of await deps.deadLetters.send(letters)) {
    // Never dropped: a record that could not be dead-lettered is retried (and dead-lettered next time).
    outcomes.set(failed.sourceMessageId, {
      kind: 'retry',
      reason: `sending it to the dead-letter queue failed (${failed.error})`,
    });
  }
}

/** Sends every waiting record again, delayed; one that cannot be sent is retried instead (never dropped). */
async function requeueWaiting(records: readonly SyncRecord[], outcomes: Map<string, Outcome>, deps: SyncDeps): Promise<void> {
  const requests: RequeueRequest[] = [];
  for (const record of records) {
    const outcome = outcomes.get(record.messageId);
    if (outcome?.kind !== 'later') continue;
    const postponements = record.postponements ?? 0;
    requests.push({
      messageId: record.messageId,
      body: record.body,
      queueArn: record.queueArn,
      delaySeconds: postponeDelaySeconds(outcome.wait, postponements, deps, deps.random),
      postponements: postponements + 1,
      ...(record.reconcilePass !== undefined ? { reconcilePass: record.reconcilePass } : {}),
    });
  }
  if (requests.length === 0) return;
  for (const failed of await deps.requeue.requeue(requests)) {
    const request = requests.find((r) => r.messageId === failed.messageId);
    outcomes.set(failed.messageId, {
      kind: 'retry',
      reason: `it waits, but sending it again failed (${failed.error})`,
      ...(request ? { delaySeconds: request.delaySeconds } : {}),
    });
  }
}

async function postpone(records: readonly SyncRecord[], outcomes: Map<string, Outcome>, deps: SyncDeps): Promise<void> {
  const requests: PostponeRequest[] = [];
  for (const record of records) {
    const outcome = outcomes.get(record.messageId);
    if (outcome?.kind === 'retry' && outcome.delaySeconds !== undefined) {
      requests.push({
        messageId: record.messageId,
        receiptHandle: record.receiptHandle,
        queueArn: record.queueArn,
        delaySeconds: outcome.delaySeconds,
      });
    }
  }
  if (requests.length === 0) return;
  for (const failed of await deps.visibility.postpone(requests)) {
    deps.log.warn('could not delay the next delivery of a rate-limited record', {
      messageId: failed.messageId,
      error: failed.error,
    });
  }
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
