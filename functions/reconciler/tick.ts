/**
 * One reconciler tick, the core: no AWS imports. A pass checks every id the items table holds,
 * tombstones included, once: parallel Scan segments are walked page by page and every page's ids
 * are sent to the reconcile queue, whose backlog is kept at a high-water mark so that the item sync
 * takes them at the provider's pace.
 *
 * The cursor (CursorStore, one control-table row) holds the pass and, per segment, the last id sent
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
import type { Cursor, CursorStore, ItemIds, PassRecord, ReconcileQueue, SegmentCursor } from './ports.js';

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
   * (sent − backlog) ÷ pass age. Once the pass ended: its length. Undefined during the warm-up.
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
  const { clock } = deps;
  const now = (): number => clock.now().getTime();
  const tickStart = now();
  const current = await currentPass(deps, settings);
  let cursor = current.cursor;
  let passLengthMs = current.passLengthMs;

  if (cursor.endedAt !== undefined) {
    // Waiting for the next pass: nothing to send.
    return report(deps, settings, {
      state: passLengthMs !== undefined ? 'ended' : 'waiting',
      cursor,
      startedPass: false,
      enqueued: 0,
      refused: 0,
      pages: 0,
      backlog: undefined,
      passLengthMs,
    });
  }

  const pass = cursor.pass;
  const segments: SegmentCursor[] = cursor.segments.map((segment) => ({ ...segment }));
  const mine = segments.map((_, index) => index).filter((index) => index % settings.workers === settings.worker);
  let enqueued = 0;
  let refused = 0;
  let pages = 0;
  let lost = false;
  let failure: { error: unknown } | undefined;
  let backlog: number | undefined;
  let previous: { at: number; backlog: number } | undefined;

  /** Sends pages of the open segments, together, until `room` ids were claimed or nothing is left. */
  const fill = async (open: number[], room: number): Promise<number> => {
    let budget = room;
    let sent = 0;
    const walk = async (index: number): Promise<void> => {
      while (!lost && failure === undefined && budget > 0 && now() < deadline) {
        const segment = segments[index]!;
        if (segment.done) return;
        const limit = Math.min(settings.pageSize, budget);
        budget -= limit;
        const page = await deps.ids.page({
          segment: index,
          totalSegments: segments.length,
          ...(segment.after !== undefined ? { after: segment.after } : {}),
          limit,
        });
        budget += limit - Math.min(limit, page.ids.length);
        const result = page.ids.length > 0 ? await deps.queue.send(page.ids, pass) : { refused: [] };
        for (const { id, reason } of result.refused) {
          deps.log.error('the reconcile queue refused an id; it is passed over in this pass', { id, reason, pass, segment: index });
        }
        const accepted = page.ids.length - result.refused.length;
        enqueued += accepted;
        refused += result.refused.length;
        sent += accepted;
        const next: SegmentCursor = {
          ...(page.after !== undefined ? { after: page.after } : {}),
          done: page.after === undefined,
          version: segment.version + 1,
          ids: segment.ids + accepted,
        };
        if ((await deps.cursor.advance(pass, index, next, segment.version)) === 'conflict') {
          deps.log.info('another tick advanced this segment; this tick stops', { pass, segment: index });
          lost = true;
          return;
        }
        segments[index] = next;
        pages += 1;
      }
    };
    // The first failure stops every segment at its next page; the tick throws it once all have stopped.
    await Promise.all(
      open.map((index) =>
        walk(index).catch((error: unknown) => {
          failure ??= { error };
        }),
      ),
    );
    return sent;
  };

  for (;;) {
    const open = mine.filter((index) => !segments[index]!.done);
    if (open.length === 0 || lost || now() >= deadline) break;
    backlog = await deps.queue.backlog();
    const seenAt = now();
    // Ids the sync took off the queue per ms since the last look (none known at the tick's first look).
    const drainPerMs = previous === undefined ? undefined : Math.max(0, previous.backlog - backlog) / Math.max(1, seenAt - previous.at);
    // This worker's share of what the queue lacks: together the workers fill it to the mark.
    const room = Math.floor((settings.highWater - backlog) / settings.workers);
    const sent = room > 0 ? await fill(open, room) : 0;
    if (failure !== undefined) throw failure.error;
    previous = { at: now(), backlog: backlog + sent };
    backlog = previous.backlog;
    if (lost || mine.every((index) => segments[index]!.done) || now() >= deadline) break;
    // Stay only while the backlog would run dry before the next tick comes.
    const untilNextTick = tickStart + settings.tickIntervalMs - now();
    if (drainPerMs !== undefined && previous.backlog > drainPerMs * untilNextTick) break;
    if (now() + settings.refillWaitMs >= deadline) break;
    await deps.sleep(settings.refillWaitMs);
  }

  let state: TickState = lost ? 'lost' : 'running';
  cursor = { ...cursor, segments };
  if (!lost && mine.every((index) => segments[index]!.done)) {
    // This worker is through; the pass ends with the last worker's last page.
    const fresh = await deps.cursor.read();
    if (fresh !== undefined && fresh.pass === pass) {
      cursor = fresh;
      if (fresh.endedAt === undefined && allDone(fresh)) {
        const endedAt = now();
        if ((await deps.cursor.endPass(pass, endedAt)) === 'written') {
          cursor = { ...fresh, endedAt };
          passLengthMs = endedAt - fresh.startedAt;
          state = 'ended';
        }
      }
    }
  }
  return report(deps, settings, { state, cursor, startedPass: current.startedPass, enqueued, refused, pages, backlog, passLengthMs });
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

/**
 * The pass to work on: the stored one, the first one when there is none, or the next one when the
 * stored pass has ended and the freshness target allows. Ends a pass whose segments are all done
 * but whose end was not recorded (its last tick stopped in between). Every write is conditional:
 * a tick that loses reads the row again.
 */
async function currentPass(deps: TickDeps, settings: TickSettings): Promise<{ cursor: Cursor; startedPass: boolean; passLengthMs: number | undefined }> {
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
  } else if (ageMs >= settings.projectionWarmupMs && ageMs > 0) {
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
