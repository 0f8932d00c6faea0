/**
 * The changes log's sequencer: numbers, without a hole and once each, the changes the items table's
 * stream carries (docs/changes.md, "How a change is numbered"). Pure: it talks to the changes table
 * through the ChangesLogWriter port (adapters/dynamodb-changes-writer.ts), to time through the
 * injected clock and sleep. No AWS import.
 *
 * The item sync writes a row alone (one conditional PutItem); DynamoDB puts the write in the
 * table's stream, which holds it 24 hours, in order per item. Fed one shard's batch at a time
 * (records in stream order), the sequencer appends each connection's changes in chunks, each
 * chunk with one move of the connection's head:
 *
 * 1. read the head `{head: n, epoch, lastSrc}` (strongly consistent), or take the one this
 *    container moved last (HEADS_KEPT): a shard's next batch often comes to the same container. A
 *    kept head may be behind: its next number is then held, and the head is read again at once;
 * 2. drop the changes already numbered: a change whose record (its SequenceNumber, `src`) is
 *    above `lastSrc` is new: the common case, one shard in order. One at or below it may have been
 *    numbered already (the batch came again after a failure, or another shard's record went first):
 *    those are looked up among the log's last changes, back to the record's own time, by their
 *    identity (the row write's id, time, revision and kind; `changeIdentity`). A head written
 *    before the sequencer (no `lastSrc`) has every change looked up so;
 * 3. put the chunk's changes at n + 1, n + 2, …, each on condition that its number is free; above
 *    a head just read (never a kept one), also over this writer's own row or a row left over by a
 *    writer that died: one written more than `staleAfterMs` ago, which no live writer can still
 *    commit. n + 1 is put first: it is the chunk's claim, so two live writers never both hold rows
 *    above one head;
 * 4. move the head n → n + k (on condition that it is n), with `lastSrc` the chunk's last record.
 *
 * A reader takes the head first and reads changes up to it (feed.ts): rows above the head are
 * never read. Another writer that moved the head first, or holds n + 1, makes this one read the
 * head again and go on from there: the same records, numbered later; nothing is handed back for
 * it. A writer's token is its chunk's first record: the same batch, delivered again after its
 * writer died, takes that writer's rows over at once. A mend (mend.ts) numbers changes no record
 * carries through the same steps, under a token of its own.
 */
import { BoundedMap } from '../bounded-map.js';
import type { ChangeKind } from './transition.js';

/** A change read from one record of the items table's stream. */
export interface StreamedChange {
  connection: string;
  id: string;
  change: ChangeKind;
  /** The row's `type`; undefined when it has none. */
  type: string | undefined;
  revision: string;
  previousRevision: string | null;
  syncedAt: string;
  /** The record's SequenceNumber (decimal digits). */
  src: string;
  /** The record's ApproximateCreationDateTime, epoch seconds. */
  srcAt: number;
}

/** A connection's head as the sequencer needs it. */
export interface SequencerHead {
  head: number;
  epoch: string;
  /** The highest record numbered in this log; undefined before the first (or in a log written before the sequencer). */
  lastSrc: string | undefined;
}

export interface ChangesLogWriter {
  /** The head, strongly consistent; undefined before the log's first change. */
  head(connection: string): Promise<SequencerHead | undefined>;
  /**
   * Puts `change` as number `seq` written by `writer` at `writtenAtMs`, on condition that no row
   * holds `seq`, or (with `takeOver`) `writer`'s own row or one written before `takeOver.staleBeforeMs`.
   * 'taken' otherwise.
   */
  put(seq: number, change: StreamedChange, writer: string, writtenAtMs: number, takeOver: { staleBeforeMs: number } | undefined): Promise<'written' | 'taken'>;
  /**
   * Moves the head from `from` (undefined: no head yet; a new log, new epoch) to `to`, with
   * `lastSrc` and `writer`; false when the head was not `from`.
   */
  move(connection: string, from: SequencerHead | undefined, to: number, lastSrc: string, writer: string): Promise<boolean>;
  /**
   * Which of `wanted` (changes, by `changeIdentity`) the log holds, among the changes numbered up to
   * `head` and written at `sinceMs` or later (a change written before the sequencer, by its
   * `syncedAt`); it stops looking once it has found them all.
   */
  numberedAmong(connection: string, head: number, sinceMs: number, wanted: ReadonlySet<string>): Promise<Set<string>>;
}

/** A change as the log can name it: its row write's id, time, revision and kind (two writes of a row never share all four). */
export function changeIdentity(change: Pick<StreamedChange, 'id' | 'syncedAt' | 'revision' | 'change'>): string {
  return `${change.id}\u0000${change.syncedAt}\u0000${change.revision}\u0000${change.change}`;
}

export interface SequencerOptions {
  writer: ChangesLogWriter;
  now: () => number;
  sleep: (ms: number) => Promise<void>;
  random: () => number;
  /** A row above the head written this long ago belongs to a writer that is gone: the function's time-out and a margin. */
  staleAfterMs: number;
  /** Changes per head move; default CHUNK_SIZE. */
  chunkSize?: number;
}

/** Changes per head move. */
export const CHUNK_SIZE = 100;
/** Puts of one chunk in flight at once, after its claim. */
export const PUTS_IN_FLIGHT = 10;
/** How far before a record's own time its change may have been written (clocks, the record's rounding). */
export const CLOCK_SKEW_MS = 60_000;
/** Connections whose head a sequencer (a container) keeps. */
export const HEADS_KEPT = 10_000;
/** The longest wait before reading a head again, ms. */
const WAIT_CAP_MS = 1_000;

/** A wait for the head would end past the caller's deadline: the changes not numbered yet are handed back. */
export class SequencerDeadlineError extends Error {
  override readonly name = 'SequencerDeadlineError';
}

/** What became of a connection's changes. */
export interface SequencedOutcome {
  /** Changes numbered by this call. */
  numbered: number;
  /** Changes found already numbered (a batch that came again). */
  already: number;
  /** Times another writer held the next number or moved the head first. */
  lost: number;
  /** Changes not numbered because the connection has no log and may not start one (`mayStart`: its erase runs). */
  refused: number;
}

export interface AppendOptions {
  /** Epoch ms: a wait for the head that would end past it, or a chunk begun past it, hands the rest back (SequencerDeadlineError). */
  deadline?: number;
  /** Asked before a new log is started (the connection has no head): false leaves the changes unnumbered (`refused`). */
  mayStart?: () => Promise<boolean>;
  /**
   * The writer's name on its rows (what a take-over compares), for changes no stream record
   * carries (a mend: mend.ts); default each chunk's first record, `src`.
   */
  writer?: string;
}

/** Compares two SequenceNumbers (decimal digits of any length) as numbers. */
export function compareSequenceNumbers(a: string, b: string): number {
  const x = a.replace(/^0+(?=\d)/, '');
  const y = b.replace(/^0+(?=\d)/, '');
  if (x.length !== y.length) return x.length < y.length ? -1 : 1;
  return x < y ? -1 : x > y ? 1 : 0;
}

export class ChangeSequencer {
  private readonly chunkSize: number;
  /** The heads this sequencer moved last, by connection. */
  private readonly heads = new BoundedMap<string, SequencerHead>(HEADS_KEPT);

  constructor(private readonly options: SequencerOptions) {
    this.chunkSize = options.chunkSize ?? CHUNK_SIZE;
    if (!Number.isInteger(this.chunkSize) || this.chunkSize < 1) throw new Error(`chunkSize must be a whole number ≥ 1 (got ${this.chunkSize})`);
  }

  /**
   * Numbers `changes` (one connection's, in stream order) after the connection's last change.
   * Resolves once every one is numbered; rejects with what the store answered, or with
   * SequencerDeadlineError when a wait for the head would end past `deadline` (epoch ms): the
   * caller hands the records back, and a later call finds those already numbered.
   */
  async append(connection: string, changes: readonly StreamedChange[], options: AppendOptions = {}): Promise<SequencedOutcome> {
    const outcome: SequencedOutcome = { numbered: 0, already: 0, lost: 0, refused: 0 };
    for (const change of changes) {
      if (change.connection !== connection) throw new Error(`a change of connection ${JSON.stringify(change.connection)} given as one of ${JSON.stringify(connection)}`);
    }
    let pending = [...changes];
    let waits = 0;
    while (pending.length > 0) {
      if (options.deadline !== undefined && this.options.now() > options.deadline) {
        throw new SequencerDeadlineError(`connection ${JSON.stringify(connection)}: the deadline passed with ${pending.length} changes not numbered`);
      }
      const kept = this.heads.use(connection);
      const head = kept ?? (await this.options.writer.head(connection));
      const fresh = await this.withoutNumbered(connection, head, pending);
      outcome.already += pending.length - fresh.length;
      pending = fresh;
      if (pending.length === 0) break;
      if (head === undefined && options.mayStart && !(await options.mayStart())) {
        outcome.refused += pending.length;
        break;
      }
      const chunk = pending.slice(0, this.chunkSize);
      // A row above a head may be taken over (the writer's own, or one left by a writer that is gone)
      // only above a head just read: a kept head may be behind a change another writer committed.
      const moved = await this.commit(connection, head, chunk, kept === undefined, options.writer ?? chunk[0]!.src);
      if (moved) {
        this.heads.set(connection, moved);
        outcome.numbered += chunk.length;
        pending = pending.slice(chunk.length);
        waits = 0;
        continue;
      }
      this.heads.delete(connection);
      // The head kept was not the head any more: read it, at once.
      if (kept !== undefined) continue;
      outcome.lost += 1;
      waits += 1;
      // Another writer is at work on this head: wait a little (full jitter, growing), then read it again.
      const wait = Math.floor(this.options.random() * Math.min(WAIT_CAP_MS, 10 * 2 ** Math.min(waits, 10)));
      if (options.deadline !== undefined && this.options.now() + wait > options.deadline) {
        throw new SequencerDeadlineError(`connection ${JSON.stringify(connection)}: another writer held its head until the deadline (${pending.length} changes not numbered)`);
      }
      await this.options.sleep(wait);
    }
    return outcome;
  }

  /**
   * `pending` without the changes the log holds already: those at or below the head's `lastSrc`
   * (a batch delivered again, another shard's records) are looked up; with a head written before
   * the sequencer (no `lastSrc`: the stream's last day was numbered with the rows), all of them.
   */
  private async withoutNumbered(connection: string, head: SequencerHead | undefined, pending: StreamedChange[]): Promise<StreamedChange[]> {
    if (head === undefined || head.head === 0) return pending;
    const lastSrc = head.lastSrc;
    const suspect = lastSrc === undefined ? pending : pending.filter((change) => compareSequenceNumbers(change.src, lastSrc) <= 0);
    if (suspect.length === 0) return pending;
    const since = Math.min(...suspect.map((change) => change.srcAt * 1000)) - CLOCK_SKEW_MS;
    const numbered = await this.options.writer.numberedAmong(connection, head.head, since, new Set(suspect.map(changeIdentity)));
    return pending.filter((change) => !numbered.has(changeIdentity(change)));
  }

  /**
   * Puts the chunk above `head` and moves the head over it: the head as moved; undefined when another
   * writer came first. `takeOver`: `head` was just read, so a row above it that is this writer's or
   * stale is no committed change.
   */
  private async commit(connection: string, head: SequencerHead | undefined, chunk: StreamedChange[], takeOver: boolean, token: string): Promise<SequencerHead | undefined> {
    const { writer, now, staleAfterMs } = this.options;
    const n = head?.head ?? 0;
    const writtenAt = now();
    const over = takeOver ? { staleBeforeMs: writtenAt - staleAfterMs } : undefined;
    if ((await writer.put(n + 1, chunk[0]!, token, writtenAt, over)) === 'taken') return undefined;
    let taken = false;
    for (let start = 1; start < chunk.length; start += PUTS_IN_FLIGHT) {
      const results = await Promise.all(
        chunk.slice(start, start + PUTS_IN_FLIGHT).map((change, index) => writer.put(n + 1 + start + index, change, token, writtenAt, over)),
      );
      if (results.includes('taken')) taken = true;
    }
    if (taken) return undefined;
    const lastSrc = chunk.reduce((max, change) => (compareSequenceNumbers(change.src, max) > 0 ? change.src : max), head?.lastSrc ?? chunk[0]!.src);
    if (!(await writer.move(connection, head, n + chunk.length, lastSrc, token))) return undefined;
    // A new log's epoch is the store's to choose: unknown here, and not needed to write.
    return { head: n + chunk.length, epoch: head?.epoch ?? '', lastSrc };
  }
}
