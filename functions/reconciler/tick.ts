/**
 * One reconciler tick, the core: no AWS imports. A pass checks every item the items table holds (a
 * connection and an id: every connection's), tombstones included, once: parallel Scan segments are
 * walked page by page and every page's keys are sent to the reconcile queue, whose backlog is kept
 * at a high-water mark so that the item sync takes them at the provider's pace. "Ids" below are
 * items: one row, one message.
 *
 * The cursor (CursorStore, one control-table row) holds the pass and, per segment, the last key sent
 * and a version. A page is sent first and the segment advanced past it after, on condition that
 * the segment still holds the version read. So:
 * - a tick that fails or is stopped between the two leaves the segment where it was: the next tick
 *   sends that page again (at most one page repeated), and nothing is skipped;
 * - of two ticks that overlap on a segment, one advances it and the other loses the condition and
 *   stops (the page both sent is the one repeated); the winner's next page starts where it left.
 * Advancing first and sending after could skip a page (a crash in between): never done.
 *
 * A pass ends when every segment is done. The next one starts at the first tick after
 * `startedAt + freshnessHours` (at once when the pass took longer, or freshnessHours is 0): a
 * small table is not checked more often than the target asks.
 *
 * Fan-out: segments are spread over `workers` invocations (segment s belongs to worker
 * s mod workers), each filling its share (1/workers) of what the queue lacks below the high-water mark. Advances of different segments never
 * conflict (each is conditional on its own version), so workers only meet at the pass's start
 * and end, both conditional writes as well.
 */
import type { Clock, Log } from '../shared/ports.js';
import type { Cursor, CursorStore, ItemIds, Page, PassRecord, ReconcileQueue, SegmentCursor, SendResult } from './ports.js';

const HOUR_MS = 3_600_000;

export interface TickSettings {
  /** Target pass length, hours; 0: the next pass starts as soon as one ends. */
  freshnessHours: number;
  /** TotalSegments of a new pass (a running pass keeps its own). */
  segments: number;
  /** The reconcile queue's backlog the workers fill up to, together. */
  highWater: number;
  /** Scan's Limit: rows per page (a page is the unit sent, then advanced past). */
  pageSize: number;
  /** This invocation's share of the segments: segment s is its own when s mod workers = worker. */
  worker: number;
  workers: number;
  /** Wait between two top-ups within a tick. */
  refillWaitMs: number;
  /** The schedule's interval: a tick stays only while the backlog would run dry before the next one. */
  tickIntervalMs: number;
  /** No projection before the pass is this old (the first minutes' rate says little). */
  projectionWarmupMs: number;
}

export interface TickDeps {
  cursor: CursorStore;
  ids: ItemIds;
  queue: ReconcileQueue;
  clock: Clock;
  sleep: (ms: number) => Promise<void>;
  log: Log;
}

/**
 * - running: the pass goes on (this tick sent what the high-water mark allowed);
 * - ended: this tick ended the pass (its last pages were sent);
 * - waiting: the pass ended earlier; the next starts at `nextPassAt`;
 * - lost: another tick advanced a segment this tick was working on; this tick stopped.
 */
export type TickState = 'running' | 'ended' | 'waiting' | 'lost';

export interface TickReport {
  state: TickState;
  pass: number;
  /** This tick started the pass. */
  startedPass: boolean;
  /** Epoch ms. */
  passStartedAt: number;
  /** Ids this tick sent to the reconcile queue. */
  enqueued: number;
  /** Ids SQS refused as the sender's fault (never sendable; logged and passed over). */
  refused: number;
  /** Pages this tick sent and advanced past. */
  pages: number;
  /** The reconcile queue's backlog last seen (undefined when the tick did not look). */
  backlog: number | undefined;
  /** Ids sent so far in the pass. */
  passIds: number;
  /** N of the projection: the largest of the table's item count, the last pass's ids and this pass's ids. */
  idsKnown: number;
  passAgeSeconds: number;
  /**
   * W = idsKnown ÷ achieved rate, seconds, the rate being the ids taken off the queue this pass
   * (sent − backlog) ÷ pass age. Once the pass ended: its length. Undefined during the warm-up, and
   * while the backlog is above the high-water mark: the queue then holds more than this pass put
   * there (a backfill shares it), and sent − backlog would not be what the sync took of the pass.
   */
  projectedPassSeconds: number | undefined;
  /** Set by the tick that ended the pass: its length in seconds. */
  passLengthSeconds: number | undefined;
  /** While waiting: when the next pass may start (epoch ms). */
  nextPassAt?: number;
}

/** Runs one tick until `deadline` (epoch ms: no page is started after it). */
export async function runTick(deps: TickDeps, settings: TickSettings, deadline: number): Promise<TickReport> {
  checkSettings(settings);
  const tickStart = nowMs(deps.clock);
  const current = await currentPass(deps, settings);
  if (current.cursor.endedAt !== undefined) {
    // The pass has ended (this tick may have recorded its end): nothing to send until the next starts.
    const state: TickState = current.passLengthMs !== undefined ? 'ended' : 'waiting';
    return report(deps, settings, { state, cursor: current.cursor, passLengthMs: current.passLengthMs, startedPass: false, ...NOTHING_SENT });
  }
  const work = startWork(current.cursor, settings, deadline);
  await fillToHighWater(deps, settings, work, tickStart);
  const left = await leavePass(deps, work, current);
  const { enqueued, refused, pages, backlog } = work;
  return report(deps, settings, { ...left, startedPass: current.startedPass, enqueued, refused, pages, backlog });
}

const NOTHING_SENT = { enqueued: 0, refused: 0, pages: 0, backlog: undefined } as const;

/** What a tick works on and what it has done so far. */
interface Work {
  readonly pass: number;
  /** The pass's segments as this tick knows them (its own copy, updated as it advances them). */
  readonly segments: SegmentCursor[];
  /** This worker's segments: s mod workers = worker. */
  readonly mine: number[];
  /** Epoch ms: no page is started after it. */
  readonly deadline: number;
  enqueued: number;
  refused: number;
  pages: number;
  /** Another tick advanced a segment this tick was working on: this tick stops. */
  lost: boolean;
  /** The first error of a segment's pages: every segment stops at its next page, then the tick throws it. */
  failure: { error: unknown } | undefined;
  /** The reconcile queue's backlog last seen, plus what this tick sent since (undefined until it looks). */
  backlog: number | undefined;
}

function startWork(cursor: Cursor, settings: TickSettings, deadline: number): Work {
  const segments: SegmentCursor[] = cursor.segments.map((segment) => ({ ...segment }));
  return {
    pass: cursor.pass,
    segments,
    mine: segments.map((_, index) => index).filter((index) => index % settings.workers === settings.worker),
    deadline,
    enqueued: 0,
    refused: 0,
    pages: 0,
    lost: false,
    failure: undefined,
    backlog: undefined,
  };
}

function mineDone(work: Work): boolean {
  return work.mine.every((index) => work.segments[index]!.done);
}

/**
 * Keeps the reconcile queue at the high-water mark: looks at its backlog, sends this worker's share
 * of what it lacks, then waits and looks again, until this worker's segments are done, another tick
 * takes over, the deadline comes, or the backlog would last until the next tick.
 */
async function fillToHighWater(deps: TickDeps, settings: TickSettings, work: Work, tickStart: number): Promise<void> {
  let previous: BacklogSeen | undefined;
  for (;;) {
    const open = work.mine.filter((index) => !work.segments[index]!.done);
    if (open.length === 0 || work.lost || nowMs(deps.clock) >= work.deadline) return;
    const backlog = await deps.queue.backlog();
    work.backlog = backlog;
    const drain = drainPerMs(previous, backlog, nowMs(deps.clock));
    // This worker's share of what the queue lacks: together the workers fill it to the mark.
    const room = Math.floor((settings.highWater - backlog) / settings.workers);
    const sent = room > 0 ? await fill(deps, settings, work, open, room) : 0;
    if (work.failure !== undefined) throw work.failure.error;
    previous = { at: nowMs(deps.clock), backlog: backlog + sent };
    work.backlog = previous.backlog;
    if (!looksAgain(deps, settings, work, tickStart, previous.backlog, drain)) return;
    await deps.sleep(settings.refillWaitMs);
  }
}

/** The reconcile queue's backlog as seen at `at` (epoch ms), counting what the tick sent then. */
interface BacklogSeen {
  at: number;
  backlog: number;
}

/** Ids the sync took off the queue per ms since the last look (none known at the tick's first look). */
function drainPerMs(previous: BacklogSeen | undefined, backlog: number, seenAt: number): number | undefined {
  return previous === undefined ? undefined : Math.max(0, previous.backlog - backlog) / Math.max(1, seenAt - previous.at);
}

/** After a top-up: whether the tick waits `refillWaitMs` and tops up again. */
function looksAgain(deps: TickDeps, settings: TickSettings, work: Work, tickStart: number, backlog: number, drain: number | undefined): boolean {
  const now = (): number => nowMs(deps.clock);
  if (work.lost || mineDone(work) || now() >= work.deadline) return false;
  // Stay only while the backlog would run dry before the next tick comes.
  const untilNextTick = tickStart + settings.tickIntervalMs - now();
  if (drain !== undefined && backlog > drain * untilNextTick) return false;
  return now() + settings.refillWaitMs < work.deadline;
}

/** One top-up: ids it may still claim, ids the queue accepted. */
interface TopUp {
  budget: number;
  sent: number;
}

/** Sends pages of the open segments, together, until `room` ids were claimed or nothing is left; returns the ids accepted. */
async function fill(deps: TickDeps, settings: TickSettings, work: Work, open: number[], room: number): Promise<number> {
  const topUp: TopUp = { budget: room, sent: 0 };
  // The first failure stops every segment at its next page; the tick throws it once all have stopped.
  await Promise.all(
    open.map((index) =>
      sendPages(deps, settings, work, topUp, index).catch((error: unknown) => {
        work.failure ??= { error };
      }),
    ),
  );
  return topUp.sent;
}

/**
 * Sends segment `index`'s pages one after another, each sent first and the segment advanced past
 * it after (on the version read), while the top-up's budget and the deadline allow.
 */
async function sendPages(deps: TickDeps, settings: TickSettings, work: Work, topUp: TopUp, index: number): Promise<void> {
  const { pass, segments } = work;
  while (!work.lost && work.failure === undefined && topUp.budget > 0 && nowMs(deps.clock) < work.deadline) {
    const segment = segments[index]!;
    if (segment.done) return;
    const limit = Math.min(settings.pageSize, topUp.budget);
    topUp.budget -= limit;
    const page = await deps.ids.page({
      segment: index,
      totalSegments: segments.length,
      ...(segment.after !== undefined ? { after: segment.after } : {}),
      limit,
    });
    topUp.budget += limit - Math.min(limit, page.keys.length);
    const result = page.keys.length > 0 ? await deps.queue.send(page.keys, pass) : { refused: [] };
    const accepted = countSent(deps, work, topUp, index, page.keys.length, result.refused);
    const next = advancedPast(segment, page, accepted);
    if ((await deps.cursor.advance(pass, index, next, segment.version)) === 'conflict') {
      deps.log.info('another tick advanced this segment; this tick stops', { pass, segment: index });
      work.lost = true;
      return;
    }
    segments[index] = next;
    work.pages += 1;
  }
}

/** Counts a page sent (`ids` ids, `refused` of them refused, each logged); returns the ids accepted. */
function countSent(deps: TickDeps, work: Work, topUp: TopUp, segment: number, ids: number, refused: SendResult['refused']): number {
  for (const { connection, id, reason } of refused) {
    deps.log.error('the reconcile queue refused an id; it is passed over in this pass', { connection, id, reason, pass: work.pass, segment });
  }
  const accepted = ids - refused.length;
  work.enqueued += accepted;
  work.refused += refused.length;
  topUp.sent += accepted;
  return accepted;
}

/** The segment once past `page`: done when the page was its last, `accepted` more ids, the next version. */
function advancedPast(segment: SegmentCursor, page: Page, accepted: number): SegmentCursor {
  return {
    ...(page.after !== undefined ? { after: page.after } : {}),
    done: page.after === undefined,
    version: segment.version + 1,
    ids: segment.ids + accepted,
  };
}

/** Where the tick leaves the pass: the report's state, cursor and (when a pass ended) its length. */
type PassLeft = Pick<Outcome, 'state' | 'cursor' | 'passLengthMs'>;

/**
 * How the tick leaves the pass. A worker through with its segments reads the cursor again: the
 * pass ends with the last worker's last page, when every segment is done.
 */
async function leavePass(deps: TickDeps, work: Work, current: CurrentPass): Promise<PassLeft> {
  const left: PassLeft = {
    state: work.lost ? 'lost' : 'running',
    cursor: { ...current.cursor, segments: work.segments },
    passLengthMs: current.passLengthMs,
  };
  if (work.lost || !mineDone(work)) return left;
  const fresh = await deps.cursor.read();
  if (fresh === undefined || fresh.pass !== work.pass) return left;
  if (fresh.endedAt !== undefined || !allDone(fresh)) return { ...left, cursor: fresh };
  const endedAt = nowMs(deps.clock);
  if ((await deps.cursor.endPass(work.pass, endedAt)) !== 'written') return { ...left, cursor: fresh };
  return { state: 'ended', cursor: { ...fresh, endedAt }, passLengthMs: endedAt - fresh.startedAt };
}

function nowMs(clock: Clock): number {
  return clock.now().getTime();
}

/** Ids sent so far in the pass the cursor holds. */
export function passIds(cursor: Cursor): number {
  return cursor.segments.reduce((sum, segment) => sum + segment.ids, 0);
}

export function allDone(cursor: Cursor): boolean {
  return cursor.segments.every((segment) => segment.done);
}

/** A new pass: every segment at its start. */
export function newPass(pass: number, startedAt: number, segments: number, previous: PassRecord | undefined): Cursor {
  return {
    pass,
    startedAt,
    segments: Array.from({ length: segments }, () => ({ done: false, version: 0, ids: 0 })),
    ...(previous !== undefined ? { previous } : {}),
  };
}

/** When the pass after `cursor`'s may start: its start plus the freshness target. */
export function nextPassAt(cursor: Cursor, freshnessHours: number): number {
  return cursor.startedAt + freshnessHours * HOUR_MS;
}

interface CurrentPass {
  cursor: Cursor;
  /** This tick started the pass. */
  startedPass: boolean;
  /** Set when this tick ended the stored pass (before starting the next): its length. */
  passLengthMs: number | undefined;
}

/**
 * The pass to work on: the stored one, the first one when there is none, or the next one when the
 * stored pass has ended and the freshness target allows. Ends a pass whose segments are all done
 * but whose end was not recorded (its last tick stopped in between). Every write is conditional:
 * a tick that loses reads the row again.
 */
async function currentPass(deps: TickDeps, settings: TickSettings): Promise<CurrentPass> {
  let passLengthMs: number | undefined;
  for (let attempt = 0; attempt < 5; attempt += 1) {
    const now = deps.clock.now().getTime();
    const stored = await deps.cursor.read();
    if (stored === undefined) {
      const first = newPass(1, now, settings.segments, undefined);
      if ((await deps.cursor.startPass(first, undefined)) === 'written') {
        deps.log.info('reconciliation pass started', { pass: 1, segments: settings.segments });
        return { cursor: first, startedPass: true, passLengthMs };
      }
      continue;
    }
    let cursor = stored;
    if (cursor.endedAt === undefined && allDone(cursor)) {
      if ((await deps.cursor.endPass(cursor.pass, now)) !== 'written') continue;
      cursor = { ...cursor, endedAt: now };
      passLengthMs = now - cursor.startedAt;
    }
    if (cursor.endedAt === undefined) return { cursor, startedPass: false, passLengthMs };
    if (now < nextPassAt(cursor, settings.freshnessHours)) return { cursor, startedPass: false, passLengthMs };
    const previous: PassRecord = { pass: cursor.pass, startedAt: cursor.startedAt, endedAt: cursor.endedAt, ids: passIds(cursor) };
    const next = newPass(cursor.pass + 1, now, settings.segments, previous);
    if ((await deps.cursor.startPass(next, cursor.pass)) === 'written') {
      deps.log.info('reconciliation pass started', { pass: next.pass, segments: settings.segments, previous });
      return { cursor: next, startedPass: true, passLengthMs };
    }
  }
  throw new Error('the reconcile cursor kept changing under this tick (5 reads); the next tick tries again');
}

interface Outcome {
  state: TickState;
  cursor: Cursor;
  startedPass: boolean;
  enqueued: number;
  refused: number;
  pages: number;
  backlog: number | undefined;
  passLengthMs: number | undefined;
}

async function report(deps: TickDeps, settings: TickSettings, outcome: Outcome): Promise<TickReport> {
  const { cursor } = outcome;
  const now = deps.clock.now().getTime();
  const sent = passIds(cursor);
  let count: number | undefined;
  try {
    count = await deps.ids.approximateCount();
  } catch (error) {
    deps.log.warn('the items table item count could not be read; the projection counts the ids sent', { error: String(error) });
  }
  const idsKnown = Math.max(count ?? 0, cursor.previous?.ids ?? 0, sent);
  const ageMs = Math.max(0, now - cursor.startedAt);
  let projectedPassSeconds: number | undefined;
  if (cursor.endedAt !== undefined) {
    projectedPassSeconds = round((cursor.endedAt - cursor.startedAt) / 1000);
  } else if (ageMs >= settings.projectionWarmupMs && ageMs > 0 && (outcome.backlog ?? 0) <= settings.highWater) {
    // Ids the sync has taken off the queue this pass; at least one, so that a sync that takes
    // nothing projects a pass that never ends (a huge W) rather than none.
    const taken = Math.max(1, sent - (outcome.backlog ?? 0));
    projectedPassSeconds = round(idsKnown / (taken / (ageMs / 1000)));
  }
  return {
    state: outcome.state,
    pass: cursor.pass,
    startedPass: outcome.startedPass,
    passStartedAt: cursor.startedAt,
    enqueued: outcome.enqueued,
    refused: outcome.refused,
    pages: outcome.pages,
    backlog: outcome.backlog,
    passIds: sent,
    idsKnown,
    passAgeSeconds: round(ageMs / 1000),
    projectedPassSeconds,
    passLengthSeconds: outcome.passLengthMs === undefined ? undefined : round(outcome.passLengthMs / 1000),
    ...(cursor.endedAt !== undefined ? { nextPassAt: Math.max(cursor.endedAt, nextPassAt(cursor, settings.freshnessHours)) } : {}),
  };
}

function round(value: number): number {
  return Math.round(value * 10) / 10;
}

function checkSettings(settings: TickSettings): void {
  const whole = (value: number, min: number): boolean => Number.isSafeInteger(value) && value >= min;
  if (!whole(settings.workers, 1) || !whole(settings.worker, 0) || settings.worker >= settings.workers) {
    throw new RangeError(`worker must be a whole number from 0 to workers - 1, got worker ${settings.worker} of ${settings.workers}`);
  }
  if (!whole(settings.segments, 1) || !whole(settings.pageSize, 1) || !whole(settings.highWater, 1)) {
    throw new RangeError('segments, pageSize and highWater must be whole numbers of at least 1');
  }
}
