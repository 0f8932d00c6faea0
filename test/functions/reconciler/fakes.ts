/**
 * Fakes of the reconciler's ports, with the adapters' semantics (the adapter tests check those
 * against dynalite and the SDK): a cursor store whose writes are conditional exactly as the
 * control-table row's, an items table walked by hash segments with DynamoDB's paging (a full page
 * carries a LastEvaluatedKey even when nothing follows), a queue that records what was sent and
 * lets the test take messages off it, and a clock the sleeps move.
 */
import { createHash } from 'node:crypto';
import type { Cursor, CursorStore, ItemIds, Page, PageRequest, ReconcileQueue, SegmentCursor, SendResult, WriteResult } from '../../../functions/reconciler/ports.js';
import type { TickDeps, TickSettings } from '../../../functions/reconciler/tick.js';
import type { Log } from '../../../functions/shared/ports.js';

export const T0 = Date.UTC(2026, 0, 1, 0, 0, 0);
export const HOUR = 3_600_000;

const clone = <T>(value: T): T => structuredClone(value);

/** A hook run before a write is decided; it may throw (a crash) or let other work run. */
export type WriteHook = (write: { kind: 'start' | 'advance' | 'end'; pass: number; segment?: number }) => Promise<void> | void;

export class MemoryCursorStore implements CursorStore {
  row: Cursor | undefined;
  readonly writes: Array<{ kind: 'start' | 'advance' | 'end'; result: WriteResult; segment?: number }> = [];
  beforeWrite: WriteHook | undefined;

  async read(): Promise<Cursor | undefined> {
    await Promise.resolve();
    return this.row === undefined ? undefined : clone(this.row);
  }

  async startPass(cursor: Cursor, expectedPass: number | undefined): Promise<WriteResult> {
    await this.beforeWrite?.({ kind: 'start', pass: cursor.pass });
    const ok = expectedPass === undefined ? this.row === undefined : this.row?.pass === expectedPass;
    if (ok) this.row = clone(cursor);
    return this.record('start', ok);
  }

  async advance(pass: number, segment: number, next: SegmentCursor, expectedVersion: number): Promise<WriteResult> {
    await this.beforeWrite?.({ kind: 'advance', pass, segment });
    const ok = this.row?.pass === pass && this.row.segments[segment]?.version === expectedVersion;
    if (ok) this.row!.segments[segment] = clone(next);
    return this.record('advance', ok, segment);
  }

  async endPass(pass: number, endedAt: number): Promise<WriteResult> {
    await this.beforeWrite?.({ kind: 'end', pass });
    const ok = this.row?.pass === pass && this.row.endedAt === undefined;
    if (ok) this.row!.endedAt = endedAt;
    return this.record('end', ok);
  }

  private record(kind: 'start' | 'advance' | 'end', ok: boolean, segment?: number): WriteResult {
    const result: WriteResult = ok ? 'written' : 'conflict';
    this.writes.push({ kind, result, ...(segment !== undefined ? { segment } : {}) });
    return result;
  }
}

/** The segment DynamoDB's parallel Scan would give an id: here a hash of it, so segments are uneven as they are there. */
export function segmentOf(id: string, totalSegments: number): number {
  return createHash('md5').update(id).digest().readUInt32BE(0) % totalSegments;
}

export class FakeItemIds implements ItemIds {
  readonly pages: PageRequest[] = [];
  count: number | undefined;
  /** Thrown by the next page read, once. */
  failNext: Error | undefined;
  /** Run before each page is answered (lets overlapping ticks interleave). */
  beforePage: ((request: PageRequest) => Promise<void> | void) | undefined;

  constructor(public ids: string[]) {
    this.count = ids.length;
  }

  async page(request: PageRequest): Promise<Page> {
    this.pages.push({ ...request });
    await this.beforePage?.(request);
    await Promise.resolve();
    if (this.failNext) {
      const error = this.failNext;
      this.failNext = undefined;
      throw error;
    }
    const inSegment = this.ids.filter((id) => segmentOf(id, request.totalSegments) === request.segment).sort();
    const start = request.after === undefined ? 0 : inSegment.findIndex((id) => id > request.after!);
    const rest = start < 0 ? [] : inSegment.slice(start);
    const ids = rest.slice(0, request.limit);
    // As DynamoDB: a page that reached the limit carries a LastEvaluatedKey, even when nothing follows.
    return ids.length === request.limit ? { ids, after: ids[ids.length - 1]! } : { ids };
  }

  async approximateCount(): Promise<number | undefined> {
    return this.count;
  }
}

export class FakeQueue implements ReconcileQueue {
  /** Every message sent, in order. */
  readonly sent: Array<{ id: string; pass: number }> = [];
  /** Messages the sync has taken (and finished) so far. */
  taken = 0;
  /** Ids SQS refuses as the sender's fault. */
  refuse = new Set<string>();
  /** Thrown by the next send, once, after `sendBeforeFailing` of its ids went out. */
  failNext: { error: Error; sendBeforeFailing: number } | undefined;
  backlogReads = 0;
  /** The largest backlog there ever was (sent − taken). */
  maxBacklog = 0;

  async backlog(): Promise<number> {
    this.backlogReads += 1;
    return this.sent.length - this.taken;
  }

  async send(ids: readonly string[], pass: number): Promise<SendResult> {
    await Promise.resolve();
    const refused: SendResult['refused'] = [];
    const failure = this.failNext;
    this.failNext = undefined;
    for (const [index, id] of ids.entries()) {
      if (failure && index >= failure.sendBeforeFailing) throw failure.error;
      if (this.refuse.has(id)) refused.push({ id, reason: 'InvalidMessageContents: refused' });
      else this.sent.push({ id, pass });
      this.maxBacklog = Math.max(this.maxBacklog, this.sent.length - this.taken);
    }
    return { refused };
  }

  /** The sync takes up to `n` messages. */
  take(n = Number.POSITIVE_INFINITY): void {
    this.taken = Math.min(this.sent.length, this.taken + n);
  }

  /** How often each id was sent (in `pass`, when given). */
  counts(pass?: number): Map<string, number> {
    const counts = new Map<string, number>();
    for (const message of this.sent) if (pass === undefined || message.pass === pass) counts.set(message.id, (counts.get(message.id) ?? 0) + 1);
    return counts;
  }
}

export class TestClock {
  constructor(public ms = T0) {}
  now(): Date {
    return new Date(this.ms);
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}

export interface RecordedLog extends Log {
  lines: Array<{ level: string; message: string; attributes: Record<string, unknown> }>;
}

export function recordingLog(): RecordedLog {
  const lines: RecordedLog['lines'] = [];
  const at = (level: string) => (message: string, ...attributes: Record<string, unknown>[]) =>
    void lines.push({ level, message, attributes: Object.assign({}, ...attributes) });
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

export interface World {
  cursor: MemoryCursorStore;
  ids: FakeItemIds;
  queue: FakeQueue;
  clock: TestClock;
  log: RecordedLog;
  deps: TickDeps;
  sleeps: number[];
}

/** Ids `id-0000`… */
export function idList(count: number, prefix = 'id'): string[] {
  return Array.from({ length: count }, (_, index) => `${prefix}-${String(index).padStart(5, '0')}`);
}

export function world(ids: string[]): World {
  const cursor = new MemoryCursorStore();
  const items = new FakeItemIds(ids);
  const queue = new FakeQueue();
  const clock = new TestClock();
  const log = recordingLog();
  const sleeps: number[] = [];
  const sleep = async (ms: number): Promise<void> => {
    sleeps.push(ms);
    clock.advance(ms);
  };
  return { cursor, ids: items, queue, clock, log, sleeps, deps: { cursor, ids: items, queue, clock, sleep, log } };
}

export const SETTINGS: TickSettings = {
  freshnessHours: 24,
  segments: 4,
  highWater: 1_000_000,
  pageSize: 10,
  worker: 0,
  workers: 1,
  refillWaitMs: 5_000,
  tickIntervalMs: 60_000,
  projectionWarmupMs: 10 * 60_000,
};

export const settings = (overrides: Partial<TickSettings> = {}): TickSettings => ({ ...SETTINGS, ...overrides });
