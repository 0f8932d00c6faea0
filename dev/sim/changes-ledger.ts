/**
 * The changes scenario's ground truth and its check of what the feed's consumer read
 * (changes-scenario.ts).
 *
 * The truth is what DynamoDB committed: every transaction the harness's dynalite reports
 * (dev/fakes/dynalite-commits.ts `onCommit`, in commit order), its items-table rows before and
 * after. A row write is a change when the rule of functions/shared/changes/transition.ts says so
 * (`changeKindOf`, the one rule the feed and the events follow); each connection's changes in
 * commit order are its truth, each with the virtual time it committed. The change row the same
 * transaction wrote carries its number: it must be its place in that order (1, 2, 3…), and its
 * size is what a million changes keep in the table.
 *
 * What the consumer read is checked against it as it reads: each change's number (from its
 * cursor), a number at or below the last one read is a duplicate, one past the next a hole (the
 * changes skipped are missed); at the end, each connection's changes read must equal its truth,
 * element by element (id, change, revision, previous revision), and every one of them must have
 * been read: nothing missed, nothing duplicated, every item's changes in its commit order. The lag
 * of each change is the time from its commit to the consumer's read that returned it.
 */
import { estimateItemSize } from '../../functions/item-sync/adapters/attribute-values.js';
import { decodeFeedCursor } from '../../functions/shared/changes/feed.js';
import { changeKindOf, type ChangeKind, type RowSide } from '../../functions/shared/changes/transition.js';
import type { Change } from '../../tools/changes/consumer.js';
import { onCommit, type CommittedTransaction, type Row } from '../fakes/dynalite-commits.js';
import type { VirtualClock } from './virtual-clock.js';

/** A change as both sides can name it. */
function changeKey(id: string, change: ChangeKind, revision: string, previousRevision: string | null): string {
  return `${id}\u0000${change}\u0000${revision}\u0000${previousRevision ?? '\u0001'}`;
}

/** One connection's truth and what its consumer read. */
interface ConnectionLedger {
  truth: string[];
  committedAt: number[];
  /** The read that returned each change, by its number − 1 (NaN: skipped by a hole). */
  received: string[];
  readAt: number[];
  lastSeq: number;
  epoch: string | undefined;
}

/** A commit the scenario may probe: the change `seq` of `connection` just committed. */
export interface CommittedChange {
  connection: string;
  seq: number;
  epoch: string;
  key: string;
}

export interface LedgerCheck {
  connections: number;
  /** Changes DynamoDB committed (items-table row writes that changed the item). */
  committed: number;
  /** Committed row writes that changed nothing (by the rule): none is expected in a transaction. */
  unchangedWrites: number;
  /** Changes read once, in their place, equal to the truth. */
  matched: number;
  missed: number;
  duplicated: number;
  /** Changes read in a place whose truth is another change (out of order, or not what was committed). */
  mismatched: number;
  /** Changes read beyond the truth (never committed). */
  phantom: number;
  /** Transactions whose change row's number was not its place in the connection's commit order. */
  misnumbered: number;
  /** The consumer's reads that returned each change, ms after its commit (in change order). */
  lags: Float64Array;
  /** The commit time of each change, aligned with `lags`. */
  committedAt: Float64Array;
  /** Change rows: how many, and their bytes as DynamoDB sizes them (attribute names and values). */
  changeRows: number;
  changeRowBytes: number;
}

export class ChangesLedger {
  private readonly connections = new Map<string, ConnectionLedger>();
  private unchangedWrites = 0;
  private misnumbered = 0;
  private duplicated = 0;
  private holes = 0;
  private changeRows = 0;
  private changeRowBytes = 0;
  private readonly stop: () => void;

  /** Listens to every commit from now on, until `close()`; `committed` hears each change as it commits. */
  constructor(
    private readonly clock: VirtualClock,
    private readonly tables: { items: string; changes: string },
    private readonly committed?: (change: CommittedChange) => void,
  ) {
    this.stop = onCommit((commit) => this.record(commit));
  }

  close(): void {
    this.stop();
  }

  /** Changes committed so far. */
  get total(): number {
    let sum = 0;
    for (const ledger of this.connections.values()) sum += ledger.truth.length;
    return sum;
  }

  /** Whether every change of every connection committed so far has been read. */
  caughtUp(): boolean {
    for (const ledger of this.connections.values()) if (ledger.lastSeq < ledger.truth.length) return false;
    return true;
  }

  private ledger(connection: string): ConnectionLedger {
    let ledger = this.connections.get(connection);
    if (!ledger) this.connections.set(connection, (ledger = { truth: [], committedAt: [], received: [], readAt: [], lastSeq: 0, epoch: undefined }));
    return ledger;
  }

  private record(commit: CommittedTransaction): void {
    let changeRow: Row | undefined;
    let head: Row | undefined;
    const rows: Array<{ old: Row | undefined; row: Row }> = [];
    for (const write of commit.writes) {
      if (!write.newImage) continue;
      if (write.table === this.tables.items) rows.push({ old: write.oldImage, row: write.newImage });
      else if (write.table === this.tables.changes) {
        if (Number(write.newImage['seq']?.['N']) === 0) head = write.newImage;
        else changeRow = write.newImage;
      }
    }
    for (const { old, row } of rows) {
      const kind = changeKindOf(old ? side(old) : undefined, side(row));
      if (kind === undefined) {
        this.unchangedWrites += 1;
        continue;
      }
      const connection = text(row, 'connection');
      const ledger = this.ledger(connection);
      const key = changeKey(text(row, 'id'), kind, text(row, 'revision'), old ? text(old, 'revision') : null);
      ledger.truth.push(key);
      ledger.committedAt.push(this.clock.ms());
      const seq = Number(changeRow?.['seq']?.['N']);
      if (seq !== ledger.truth.length) this.misnumbered += 1;
      if (changeRow) {
        this.changeRows += 1;
        this.changeRowBytes += estimateItemSize(changeRow as never);
      }
      const epoch = head?.['epoch']?.['S'];
      if (typeof epoch === 'string') ledger.epoch = epoch;
      if (this.committed && ledger.epoch !== undefined) this.committed({ connection, seq: ledger.truth.length, epoch: ledger.epoch, key });
    }
  }

  /** The consumer read `change` of `connection` at `at` (virtual ms). */
  read(connection: string, change: Change, at: number): void {
    const ledger = this.ledger(connection);
    const seq = decodeFeedCursor(change.cursor)?.seq ?? Number.NaN;
    if (!(seq > ledger.lastSeq)) {
      this.duplicated += 1;
      return;
    }
    for (let skipped = ledger.lastSeq + 1; skipped < seq; skipped += 1) {
      this.holes += 1;
      ledger.received.push('');
      ledger.readAt.push(Number.NaN);
    }
    ledger.received.push(keyOf(change));
    ledger.readAt.push(at);
    ledger.lastSeq = seq;
  }

  /** Whether a change read elsewhere (a probe, a replay) is the one committed as `seq` of `connection`. */
  isCommitted(connection: string, seq: number, change: Change): boolean {
    return this.connections.get(connection)?.truth[seq - 1] === keyOf(change);
  }

  /** The last change each connection's consumer has read. */
  lastRead(connection: string): number {
    return this.connections.get(connection)?.lastSeq ?? 0;
  }

  /** Every connection's changes read against its truth. */
  check(): LedgerCheck {
    let committed = 0;
    let matched = 0;
    let mismatched = 0;
    let phantom = 0;
    let missed = 0;
    const lags: number[] = [];
    const committedAt: number[] = [];
    for (const ledger of this.connections.values()) {
      committed += ledger.truth.length;
      for (const [i, key] of ledger.received.entries()) {
        if (key === '') continue;
        if (i >= ledger.truth.length) phantom += 1;
        else if (key === ledger.truth[i]) {
          matched += 1;
          lags.push(ledger.readAt[i]! - ledger.committedAt[i]!);
          committedAt.push(ledger.committedAt[i]!);
        } else mismatched += 1;
      }
      missed += Math.max(0, ledger.truth.length - ledger.received.length);
    }
    missed += this.holes;
    return {
      connections: this.connections.size,
      committed,
      unchangedWrites: this.unchangedWrites,
      matched,
      missed,
      duplicated: this.duplicated,
      mismatched,
      phantom,
      misnumbered: this.misnumbered,
      lags: Float64Array.from(lags),
      committedAt: Float64Array.from(committedAt),
      changeRows: this.changeRows,
      changeRowBytes: this.changeRowBytes,
    };
  }
}

/** A change as the feed answered it, named as the truth names it. */
export function keyOf(change: Pick<Change, 'id' | 'change' | 'revision' | 'previousRevision'>): string {
  return changeKey(change.id, change.change, change.revision, change.previousRevision);
}

function side(row: Row): RowSide {
  return { deleted: row['deleted']?.['BOOL'] === true, revision: typeof row['revision']?.['S'] === 'string' ? (row['revision']['S'] as string) : undefined };
}

function text(row: Row, name: string): string {
  const value = row[name]?.['S'];
  return typeof value === 'string' ? value : '';
}
