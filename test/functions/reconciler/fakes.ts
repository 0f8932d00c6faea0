/**
 * Fakes of the reconciler's ports, with the adapters' semantics (the adapter tests check those
 * against DynamoDB Local and the SDK): a cursor store whose writes are conditional exactly as the
 * control-table row's, an items table (keys: connection and id) walked by hash segments with
 * DynamoDB's paging (a full page carries a LastEvaluatedKey even when nothing follows), a queue that
 * records what was sent and lets the test take messages off it, and a clock the sleeps move.
 *
 * An item is given as its key, or as a string: the id of the connection `default`. What was sent is
 * counted by label: the id for `default`, `<connection>/<id>` for any other.
 */
import { createHash } from 'node:crypto';
import type {
  Cursor,
  CursorStore,
  ItemIds,
  ItemKey,
  Page,
  PageRequest,
  ReconcileQueue,
  SegmentCursor,
  SendResult,
  WriteResult,
} from '../../../functions/reconciler/ports.js';
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

/** An item given as its key, or as the id of the connection `default`. */
export type Item = string | ItemKey;

export function keyOf(item: Item): ItemKey {
  return typeof item === 'string' ? { connection: 'default', id: item } : item;
}

/** How the fakes count an item: its id for the connection `default`, `<connection>/<id>` for any other. */
export function label(item: Item): string {
  const key = keyOf(item);
  return key.connection === 'default' ? key.id : `${key.connection}/${key.id}`;
}

/** The order of keys in a segment (a Scan's): by connection, then by id. */
export function compareKeys(a: ItemKey, b: ItemKey): number {
  if (a.connection !== b.connection) return a.connection < b.connection ? -1 : 1;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/** The segment DynamoDB's parallel Scan would give an item: here a hash of its key, so segments are uneven as they are there. */
export function segmentOf(item: Item, totalSegments: number): number {
  const key = keyOf(item);
  const text = key.connection === 'default' ? key.id : `${key.connection}\u0000${key.id}`;
  return createHash('md5').update(text).digest().readUInt32BE(0) % totalSegments;
}

export class FakeItemIds implements ItemIds {
  readonly pages: PageRequest[] = [];
  count: number | undefined;
  /** Thrown by the next page read, once. */
  failNext: Error | undefined;
  /** Run before each page is answered (lets overlapping ticks interleave). */
  beforePage: ((request: PageRequest) => Promise<void> | void) | undefined;
  keys: ItemKey[];

  constructor(items: readonly Item[]) {
    this.keys = items.map(keyOf);
    this.count = items.length;
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
    const inSegment = this.keys.filter((key) => segmentOf(key, request.totalSegments) === request.segment).sort(compareKeys);
    const start = request.after === undefined ? 0 : inSegment.findIndex((key) => compareKeys(key, request.after!) > 0);
    const rest = start < 0 ? [] : inSegment.slice(start);
    const keys = rest.slice(0, request.limit).map((key) => ({ ...key }));
    // As DynamoDB: a page that reached the limit carries a LastEvaluatedKey, even when nothing follows.
    return keys.length === request.limit ? { keys, after: { ...keys[keys.length - 1]! } } : { keys };
  }

  async approximateCount(): Promise<number | undefined> {
    return this.count;
  }
}

export class FakeQueue implements ReconcileQueue {
  /** Every message sent, in order. */
  readonly sent: Array<{ connection: string; id: string; pass: number }> = [];
  /** Messages the sync has taken (and finished) so far. */
  taken = 0;
  /** Items (by label) SQS refuses as the sender's fault. */
  refuse = new Set<string>();
  /** Thrown by the next send, once, after `sendBeforeFailing` of its ids went out. */
  failNext: { error: Error; sendBeforeFailing: number } | undefined;
  backlogReads = 0;
  /** The largest backlog there ever was (sent − taken). */
  maxBacklog = 0;
  /** Messages others sent to the queue and the sync has not taken yet (a backfill). */
  others = 0;

  async backlog(): Promise<number> {
    this.backlogReads += 1;
    return this.sent.length - this.taken + this.others;
  }

  async send(keys: readonly ItemKey[], pass: number): Promise<SendResult> {
    await Promise.resolve();
    const refused: SendResult['refused'] = [];
    const failure = this.failNext;
    this.failNext = undefined;
    for (const [index, { connection, id }] of keys.entries()) {
      if (failure && index >= failure.sendBeforeFailing) throw failure.error;
      if (this.refuse.has(label({ connection, id }))) refused.push({ connection, id, reason: 'InvalidMessageContents: refused' });
      else this.sent.push({ connection, id, pass });
      this.maxBacklog = Math.max(this.maxBacklog, this.sent.length - this.taken);
    }
    return { refused };
  }

  /** The sync takes up to `n` messages. */
  take(n = Number.POSITIVE_INFINITY): void {
    this.taken = Math.min(this.sent.length, this.taken + n);
  }

  /** How often each item was sent (in `pass`, when given), by label. */
  counts(pass?: number): Map<string, number> {
    const counts = new Map<string, number>();
    for (const message of this.sent) {
      if (pass !== undefined && message.pass !== pass) continue;
      const name = label(message);
      counts.set(name, (counts.get(name) ?? 0) + 1);
    }
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

export function world(ids: readonly Item[]): World {
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
