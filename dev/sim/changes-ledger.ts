/**
 * The changes scenario's ground truth and its check of what the feed's consumer read
 * (changes-scenario.ts).
 *
 * The truth is what DynamoDB holds and streams, read on its own, not from the writer:
 *
 * - the items table's stream (DynamoDB Local's, NEW_AND_OLD_IMAGES), read by a reader of the
 *   ledger's own (items-stream.ts TableStream: a second reader of each shard, as DynamoDB allows)
 *   every LEDGER_POLL_MS of virtual time, each call held in virtual time. A record's images are the
 *   row before and after a write DynamoDB committed; the write is a change when the rule of
 *   functions/shared/changes/transition.ts says so (`changeKindOf`, the one rule the feed and the
 *   events follow). Every record of a connection's rows is in one shard's lineage (the partition
 *   key is the connection), in commit order: each connection's changes in stream order are its
 *   truth. Reading them is also when `committed` hears of a change (the scenario's probes read it
 *   from the feed then: up to LEDGER_POLL_MS after its commit), with the connection's epoch from its
 *   head row (read once a connection).
 * - the changes table's rows, read at `check` (Query, every connection): the change row numbered n
 *   must be the n-th change of the truth (the same id, change, revision and previous revision), and
 *   no number may be missing or extra; their size is what a million changes keep in the table.
 *
 * A change's commit time is stamped when the sync's write of its row is sent (`watchRows`, a
 * middleware on the sync's clients, below the SDK's retries and the injected faults: the instant
 * DynamoDB applies it, half a round trip before its answer), by the row's connection, id and
 * `syncedAt`, and unstamped when that attempt is refused (the first attempt that commits keeps it,
 * even when its answer is then lost). A
 * change whose stamp is missing is stamped when its record is read. It becomes readable when the
 * changes writer moves the connection's head over its number (`watchNumbering`, on the writer's
 * client): that instant is stamped too, and `committed` hears of the change then (the scenario's
 * probes read it from the feed at that instant, from the cursor before it).
 *
 * What the consumer read is checked against the truth as it reads: each change's number (from its
 * cursor), a number at or below the last one read is a duplicate, one past the next a hole (the
 * changes skipped are missed); at the end, each connection's changes read must equal its truth,
 * element by element (id, change, revision, previous revision), and every one of them must have
 * been read: nothing missed, nothing duplicated, every item's changes in its commit order. The lag
 * of each change is the time from its commit to the consumer's read that returned it.
 */
import { LOCAL_PAGE_ROWS } from '../fakes/dynamodb-local.js';
import { GetItemCommand, QueryCommand, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { estimateItemSize } from '../../functions/item-sync/adapters/attribute-values.js';
import type { StreamImage } from '../../functions/change-events/ports.js';
import { decodeFeedCursor } from '../../functions/shared/changes/feed.js';
import { changeKindOf, type ChangeKind, type RowSide } from '../../functions/shared/changes/transition.js';
import type { Change } from '../../clients/typescript/src/index.js';
import type { LocalDynamoDb } from '../fakes/local-dynamo.js';
import { GET_RECORDS_LIMIT, TableStream } from './items-stream.js';
import type { VirtualClock } from './virtual-clock.js';

/**
 * How often the ledger reads the stream, in virtual time: seldom enough that its reads (real
 * requests to DynamoDB Local, none of them the system's) stay few beside the event source's four a
 * second; its truth is complete at `check`, which reads the stream to its end.
 */
export const LEDGER_POLL_MS = 2_000;

/** A change as both sides can name it. */
function changeKey(id: string, change: ChangeKind, revision: string, previousRevision: string | null): string {
  // Joined, not a template literal: V8 keeps a template's result as a tree of its pieces (about 250 MB
  // for a million keys, against 64 MB flat), and the ledger keeps a key for each change, twice.
  return [id, change, revision, previousRevision ?? '\u0001'].join('\u0000');
}

/** One connection's truth and what its consumer read. */
interface ConnectionLedger {
  truth: string[];
  committedAt: number[];
  /** When each number became readable (its head move answered), by number − 1. */
  numberedAt: number[];
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
  /** Committed row writes that changed nothing (by the rule): a write that touched a row without changing its revision or its deleted flag. */
  unchangedWrites: number;
  /** Changes read once, in their place, equal to the truth. */
  matched: number;
  missed: number;
  duplicated: number;
  /** Changes read in a place whose truth is another change (out of order, or not what was committed). */
  mismatched: number;
  /** Changes read beyond the truth (never committed). */
  phantom: number;
  /**
   * Change rows whose number is not their change's place in the connection's commit order (another
   * change there), and places of the truth without a row or rows without a change.
   */
  misnumbered: number;
  /** The consumer's reads that returned each change, ms after its commit (in change order). */
  lags: Float64Array;
  /** Each change's number made readable (its head moved), ms after its row's commit. */
  numberingLags: Float64Array;
  /** Change rows above their connection's head at the end (put by a writer whose head move never came: never read). */
  rowsAboveHead: number;
  /** The commit time of each change, aligned with `lags`. */
  committedAt: Float64Array;
  /** Change rows: how many, and their bytes as DynamoDB sizes them (attribute names and values). */
  changeRows: number;
  changeRowBytes: number;
  /** The connection `check` was asked to look at alone: its changes, when each committed, and their numbering lags. */
  watched?: { connection: string; committed: number; committedAt: Float64Array; numberingLags: Float64Array };
}

type AnyInput = Record<string, unknown>;
type Next = (args: { input: AnyInput }) => Promise<{ output: AnyInput; response: unknown }>;

export class ChangesLedger {
  private readonly connections = new Map<string, ConnectionLedger>();
  /** The commit time of each row write, by connection, id and syncedAt; taken when its record is read. */
  private readonly stamps = new Map<string, number>();
  /** The change rows the writer put and has not moved a head over yet, by connection and number: their keys. */
  private readonly puts = new Map<string, Map<number, string>>();
  private readonly reader: TableStream;
  private readonly client: DynamoDBClient;
  private unchangedWrites = 0;
  private duplicated = 0;
  private holes = 0;
  private streamRecords = 0;
  private closed = false;
  /** `check` reads the stream's last records: no probe then. */
  private draining = false;
  private failure: unknown;

  /**
   * Reads the items table's stream from now on (every LEDGER_POLL_MS of virtual time), until
   * `close()`; `committed` hears each change as it is read.
   */
  constructor(
    private readonly clock: VirtualClock,
    dynamo: LocalDynamoDb,
    private readonly tables: { items: string; changes: string },
    private readonly committed?: (change: CommittedChange) => void,
  ) {
    const track = <T>(work: () => Promise<T>): Promise<T> => clock.track(work);
    this.reader = new TableStream(dynamo, tables.items, track, () => clock.ms());
    this.client = dynamo.client();
    clock.at(clock.ms(), () => void this.follow());
  }

  /**
   * Stamps the commit time of every row write `client` sends to the items table (PutItem, UpdateItem):
   * the first attempt DynamoDB answers with success. Add it after the client's fault injection.
   */
  watchRows(client: DynamoDBClient): void {
    client.middlewareStack.add(
      ((next: Next, context: { commandName?: string }) => async (args: { input: AnyInput }) => {
        const name = context.commandName;
        // Stamped as the request is sent (the instant DynamoDB applies it: its answer comes half a
        // round trip later), unstamped if this attempt is refused (a condition that failed).
        const stamped = (name === 'PutItemCommand' || name === 'UpdateItemCommand') && args.input['TableName'] === this.tables.items ? this.stampRow(args.input) : undefined;
        try {
          return await next(args);
        } catch (error) {
          if (stamped !== undefined) this.stamps.delete(stamped);
          throw error;
        }
      }) as never,
      // Same step and priority as the fault injection, added after it: it runs inside it, on each attempt DynamoDB answers.
      { step: 'deserialize', priority: 'high', name: 'changesLedgerCommits' },
    );
  }

  /**
   * Watches the changes writer's client: the change rows it puts, and each head move DynamoDB
   * answers with success, which makes the numbers up to it readable (stamped, and told to
   * `committed`). Add it after the client's fault injection.
   */
  watchNumbering(client: DynamoDBClient): void {
    client.middlewareStack.add(
      ((next: Next, context: { commandName?: string }) => async (args: { input: AnyInput }) => {
        const result = await next(args);
        if (args.input['TableName'] === this.tables.changes) {
          if (context.commandName === 'PutItemCommand') this.notePut(args.input);
          else if (context.commandName === 'UpdateItemCommand') this.numbered(args.input);
        }
        return result;
      }) as never,
      { step: 'deserialize', priority: 'high', name: 'changesLedgerNumbering' },
    );
  }

  close(): void {
    this.closed = true;
    this.reader.close();
    this.client.destroy();
  }

  /** Changes committed (read from the stream) so far. */
  get total(): number {
    let sum = 0;
    for (const ledger of this.connections.values()) sum += ledger.truth.length;
    return sum;
  }

  /** The items table's stream records read so far (changes or not). */
  get records(): number {
    return this.streamRecords;
  }

  /** Whether every change of every connection committed so far has been read. */
  caughtUp(): boolean {
    for (const ledger of this.connections.values()) if (ledger.lastSeq < ledger.truth.length) return false;
    return true;
  }

  private ledger(connection: string): ConnectionLedger {
    let ledger = this.connections.get(connection);
    if (!ledger) this.connections.set(connection, (ledger = { truth: [], committedAt: [], numberedAt: [], received: [], readAt: [], lastSeq: 0, epoch: undefined }));
    return ledger;
  }

  /** Stamps the row's change with the time now, unless stamped already; returns the stamp it set. */
  private stampRow(input: AnyInput): string | undefined {
    const item = input['Item'] as Record<string, AttributeValue> | undefined;
    const key = input['Key'] as Record<string, AttributeValue> | undefined;
    const values = input['ExpressionAttributeValues'] as Record<string, AttributeValue> | undefined;
    const connection = item?.['connection']?.S ?? key?.['connection']?.S;
    const id = item?.['id']?.S ?? key?.['id']?.S;
    const syncedAt = item?.['syncedAt']?.S ?? values?.[':syncedAt']?.S;
    if (connection === undefined || id === undefined || syncedAt === undefined) return undefined;
    const stamp = rowStamp(connection, id, syncedAt);
    if (this.stamps.has(stamp)) return undefined;
    this.stamps.set(stamp, this.clock.ms());
    return stamp;
  }

  private notePut(input: AnyInput): void {
    const item = input['Item'] as Record<string, AttributeValue> | undefined;
    const connection = item?.['connection']?.S;
    const seq = Number(item?.['seq']?.N);
    if (connection === undefined || !(seq > 0)) return;
    let puts = this.puts.get(connection);
    if (!puts) this.puts.set(connection, (puts = new Map()));
    puts.set(seq, rowKeyOf(item!));
  }

  /** A head moved: the numbers it passed are readable now. */
  private numbered(input: AnyInput): void {
    const key = input['Key'] as Record<string, AttributeValue> | undefined;
    const values = input['ExpressionAttributeValues'] as Record<string, AttributeValue> | undefined;
    const connection = key?.['connection']?.S;
    const to = Number(values?.[':to']?.N);
    if (connection === undefined || key?.['seq']?.N !== '0' || !(to > 0)) return;
    const from = Number(values?.[':from']?.N ?? '0');
    const ledger = this.ledger(connection);
    const puts = this.puts.get(connection);
    for (let seq = from + 1; seq <= to; seq++) {
      ledger.numberedAt[seq - 1] ??= this.clock.ms();
      const change = puts?.get(seq);
      puts?.delete(seq);
      if (change !== undefined && this.committed && !this.draining) void this.tell(connection, seq, change);
    }
  }

  private async tell(connection: string, seq: number, key: string): Promise<void> {
    const ledger = this.ledger(connection);
    ledger.epoch ??= await this.epochOf(connection);
    if (ledger.epoch !== undefined) this.committed?.({ connection, seq, epoch: ledger.epoch, key });
  }

  /** Reads the stream through every LEDGER_POLL_MS, until closed. */
  private async follow(): Promise<void> {
    try {
      while (!this.closed) {
        for (;;) {
          const read = await this.reader.read(GET_RECORDS_LIMIT);
          for (const record of read.records) await this.record(record.dynamodb.OldImage, record.dynamodb.NewImage);
          if (this.closed || read.records.length < GET_RECORDS_LIMIT) break;
        }
        await this.clock.sleep(LEDGER_POLL_MS);
      }
    } catch (error) {
      if (!this.closed) this.failure = error;
    }
  }

  private async record(old: StreamImage | undefined, row: StreamImage | undefined): Promise<void> {
    this.streamRecords += 1;
    // A row removed: no change of the feed (the sync keeps tombstones).
    if (!row) return;
    const kind = changeKindOf(old ? side(old) : undefined, side(row));
    if (kind === undefined) {
      this.unchangedWrites += 1;
      this.stamps.delete(rowStamp(text(row, 'connection'), text(row, 'id'), text(row, 'syncedAt')));
      return;
    }
    const connection = text(row, 'connection');
    const ledger = this.ledger(connection);
    const key = changeKey(text(row, 'id'), kind, text(row, 'revision'), old ? text(old, 'revision') : null);
    ledger.truth.push(key);
    const stamp = rowStamp(connection, text(row, 'id'), text(row, 'syncedAt'));
    ledger.committedAt.push(this.stamps.get(stamp) ?? this.clock.ms());
    this.stamps.delete(stamp);
  }

  /** The connection's epoch, from its head row (set by its first change, never changed). */
  private async epochOf(connection: string): Promise<string | undefined> {
    const out = await this.clock.track(() =>
      this.client.send(new GetItemCommand({ TableName: this.tables.changes, Key: { connection: { S: connection }, seq: { N: '0' } }, ConsistentRead: true })),
    );
    return out.Item?.['epoch']?.S;
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

  /**
   * Every connection's changes read against its truth, once the stream has been read to its end;
   * the change rows (Query, every connection) against the truth's order; `watched`'s figures alone.
   */
  async check(watched?: string): Promise<LedgerCheck> {
    if (this.failure !== undefined) throw new Error(`the ledger's reader of the items table's stream failed: ${String(this.failure)}`, { cause: this.failure });
    this.draining = true;
    // To the end of every shard: an empty read may be another shard's turn, or a shard just ended
    // before its children were looked up; the stream is read through once every shard has had an
    // empty read since the drain began.
    const drainFrom = this.clock.ms();
    for (;;) {
      const read = await this.reader.read(GET_RECORDS_LIMIT);
      for (const record of read.records) await this.record(record.dynamodb.OldImage, record.dynamodb.NewImage);
      if (read.records.length === 0 && this.reader.readThroughSince(drainFrom)) break;
    }
    let committed = 0;
    let matched = 0;
    let mismatched = 0;
    let phantom = 0;
    let missed = 0;
    let misnumbered = 0;
    let changeRows = 0;
    let changeRowBytes = 0;
    const lags: number[] = [];
    const committedAt: number[] = [];
    const numberingLags: number[] = [];
    let rowsAboveHead = 0;
    for (const [connection, ledger] of this.connections) {
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
      for (const [i, at] of ledger.committedAt.entries()) {
        const numbered = ledger.numberedAt[i];
        if (numbered !== undefined) numberingLags.push(numbered - at);
      }
      const head = await this.headOf(connection);
      const all = await this.changeRowsOf(connection);
      const rows = all.filter((row) => Number(row['seq']?.N) <= head);
      rowsAboveHead += all.length - rows.length;
      changeRows += rows.length;
      for (const row of rows) changeRowBytes += estimateItemSize(row);
      let place = 0;
      for (const row of rows) {
        const seq = Number(row['seq']?.N);
        const truth = ledger.truth[seq - 1];
        if (seq !== place + 1 || truth === undefined || truth !== rowKeyOf(row)) misnumbered += 1;
        place = seq;
      }
      misnumbered += Math.max(0, ledger.truth.length - rows.length);
    }
    missed += this.holes;
    const alone = watched === undefined ? undefined : this.connections.get(watched);
    return {
      ...(watched !== undefined
        ? {
            watched: {
              connection: watched,
              committed: alone?.truth.length ?? 0,
              committedAt: Float64Array.from(alone?.committedAt ?? []),
              numberingLags: Float64Array.from((alone?.committedAt ?? []).flatMap((at, i) => (alone!.numberedAt[i] === undefined ? [] : [alone!.numberedAt[i]! - at]))),
            },
          }
        : {}),
      connections: this.connections.size,
      committed,
      unchangedWrites: this.unchangedWrites,
      matched,
      missed,
      duplicated: this.duplicated,
      mismatched,
      phantom,
      misnumbered,
      lags: Float64Array.from(lags),
      committedAt: Float64Array.from(committedAt),
      numberingLags: Float64Array.from(numberingLags),
      rowsAboveHead,
      changeRows,
      changeRowBytes,
    };
  }

  /** The connection's head (0 without one), strongly consistent. */
  private async headOf(connection: string): Promise<number> {
    const out = await this.clock.track(() =>
      this.client.send(new GetItemCommand({ TableName: this.tables.changes, Key: { connection: { S: connection }, seq: { N: '0' } }, ConsistentRead: true })),
    );
    return Number(out.Item?.['head']?.N ?? 0);
  }

  /** The connection's change rows (its head left out), by number, strongly consistent. */
  private async changeRowsOf(connection: string): Promise<Array<Record<string, AttributeValue>>> {
    const rows: Array<Record<string, AttributeValue>> = [];
    let start: Record<string, AttributeValue> | undefined;
    do {
      const page = await this.clock.track(() =>
        this.client.send(
          new QueryCommand({
            TableName: this.tables.changes,
            KeyConditionExpression: '#connection = :connection AND #seq > :head',
            ExpressionAttributeNames: { '#connection': 'connection', '#seq': 'seq' },
            ExpressionAttributeValues: { ':connection': { S: connection }, ':head': { N: '0' } },
            ConsistentRead: true,
            Limit: LOCAL_PAGE_ROWS,
            ...(start ? { ExclusiveStartKey: start } : {}),
          }),
        ),
      );
      rows.push(...(page.Items ?? []));
      start = page.LastEvaluatedKey;
    } while (start);
    return rows;
  }
}

/** A change as the feed answered it, named as the truth names it. */
export function keyOf(change: Pick<Change, 'id' | 'change' | 'revision' | 'previousRevision'>): string {
  return changeKey(change.id, change.change, change.revision, change.previousRevision);
}

/** A change row (the changes table), named as the truth names its change. */
function rowKeyOf(row: Record<string, AttributeValue>): string {
  return changeKey(row['id']?.S ?? '', (row['change']?.S ?? '') as ChangeKind, row['revision']?.S ?? '', row['previousRevision']?.S ?? null);
}

/** A row write, named by its connection, id and `syncedAt` (a write's own time: two writes of a row never share it). */
function rowStamp(connection: string, id: string, syncedAt: string): string {
  return [connection, id, syncedAt].join('\u0000');
}

function side(row: StreamImage): RowSide {
  return { deleted: row['deleted']?.BOOL === true, revision: row['revision']?.S };
}

function text(row: StreamImage, name: string): string {
  return row[name]?.S ?? '';
}
