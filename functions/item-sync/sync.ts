/**
 * Item sync, the core: one SQS batch in, one outcome per record out. No AWS import: it talks to the
 * connections' access layer, the provider, the items table, the items bucket, the dead-letter queue
 * and the source queue through ports (SyncPorts), and works by its settings (SyncSettings).
 *
 *   1. parse every body (a bad body, id or connection is dead at once) and group records by
 *      connection and item id, so that several records for one item cost one fetch;
 *   2. ask each connection of the batch once whether its items can be fetched now (its gate,
 *      ConnectionAccess.open, with the batch's deadline: no token refresh starts that could not
 *      end before it): `dead` (unknown, removed) dead-letters its records with the gate's
 *      reason; `wait` (paused, failing, a refresh in progress) sends them again after the gate's
 *      seconds; `ready` gives the token and the provider pace (`paceKey`) its items are fetched
 *      with. One connection's gate never touches another's records;
 *   3. in a users' batch, send a ready connection's ids beyond what it keeps (users-ids.ts: a
 *      user's ids and bursts whole, a few of an import sent to the users' queue) to the background
 *      lane, where they yield to users' ids (`moved`);
 *      of a connection whose pace has a hold (PACE_SCOPE=connection), keep what the pace serves
 *      within it and send the others back, each to return one slot of the pace after the last
 *      (`later`); read the stored revisions of every ready item left at once;
 *   4. per item, the connections taken in turn (the one with fewest ids first), with bounded
 *      concurrency (item-run.ts): fetch (the paced provider call,
 *      shared/provider/paced-call.ts: the connection's pace and token, retries of transient
 *      failures), validate, compare and write only what changed, conditionally on the stored row
 *      being the one compared (an item too large for a row goes whole to the items bucket first:
 *      item-writer.ts); a lost race re-reads the row, fetches again and re-decides, a bounded
 *      number of times;
 *   5. every result or error becomes done / later / retry / dead in one place (outcome/decide.ts),
 *      and is carried out beside it (outcome/carry-out.ts): dead letters, re-sends, postponements.
 *
 * Stored row first, fetch second, conditional write last: a write succeeds only if nothing was
 * written since the row was read, and the fetch it writes came after that read, so an older
 * revision can never replace a newer one.
 */
import type { Backoff } from '../shared/backoff.js';
import type { ConnectionAccess } from '../shared/connections/ports.js';
import { ConfigError } from '../shared/errors.js';
import { forEachLimited } from '../shared/limited.js';
import type { PaceGate } from '../shared/provider/pace/provider-pace.js';
import {
  connectionWaitError,
  outageError,
  PacedCaller,
  type ConnectionSession,
  type PacedCallPorts,
} from '../shared/provider/paced-call.js';
import type { BatchOptions, BatchReport, SyncCounts, SyncRecord } from './batch.js';
import { ItemRun, type ItemRunPorts, type ItemRunSettings } from './item-run.js';
import { parseMessageBody, type SyncMessage } from './message.js';
import { carryOut, type CarryOutPorts } from './outcome/carry-out.js';
import { outcomeOf, type Outcome, type OutcomePolicy, type PostponePolicy } from './outcome/decide.js';
import type { BackgroundLane, ItemKey, StoredRevisions } from './ports.js';
import { USERS_HOLD_MS, USERS_IDS_PER_CONNECTION, usersIdsKept } from './users-ids.js';

export type { BatchOptions, BatchReport, SyncCounts, SyncRecord } from './batch.js';

/**
 * What the batch talks to: the connections' access layer, the provider paces, the provider call's
 * ports (clock, log, random, sleep: see shared/provider/paced-call.ts), the provider itself, the
 * items table and bucket, the queues.
 */
export interface SyncPorts extends PacedCallPorts, CarryOutPorts, ItemRunPorts {
  /** Asked once per connection of a batch (open) and after a 401 (afterRefusal). */
  connections: ConnectionAccess;
  /**
   * The provider pace of a pace key (a ready gate's `paceKey`), guarded by the breaker of
   * `breakerKey` (the gate's: its client id's): one per key, shared by the batches of a container.
   */
  paceFor(paceKey: string, breakerKey?: string): PaceGate;
  /** The background lane (the reconcile queue), where a users' batch sends a connection's backlog; none: it is synced where it is. */
  background?: BackgroundLane;
}

/** How the batch works: the configuration's values (SyncConfig) and the core's own constants. */
export interface SyncSettings extends PostponePolicy, ItemRunSettings {
  /** Most provider requests in flight at once. */
  fetchConcurrency: number;
  /** Requests per fetch for transient provider failures. */
  fetchAttempts: number;
  /** Backoff between fetch attempts (DEFAULT_FETCH_BACKOFF). */
  backoff: Backoff;
  /**
   * A users' backlog in the background lane (`lane` = `backlog`) is not held to the sweep's share of
   * its pace: PACE_SCOPE=connection, where the pace is its own account's. Under `client` it draws as
   * the sweep (the pace is every account's, and the share kept for users is the others' too).
   */
  backlogOwnsPace?: boolean;
}

export const DEFAULT_WRITE_ROUNDS = 3;

/** 200 ms, doubling up to 2 s, half fixed and half random. */
export const DEFAULT_FETCH_BACKOFF: Backoff = { baseMs: 200, capMs: 2_000, jitter: 'equal' };

/** The records of a batch by connection, then by item id. */
type Grouped = Map<string, Map<string, SyncRecord[]>>;

/** Outcomes by connection, then by item id. */
class ItemOutcomes {
  private readonly byConnection = new Map<string, Map<string, Outcome>>();

  get(key: ItemKey): Outcome | undefined {
    return this.byConnection.get(key.connection)?.get(key.id);
  }

  set(key: ItemKey, outcome: Outcome): void {
    let items = this.byConnection.get(key.connection);
    if (!items) this.byConnection.set(key.connection, (items = new Map()));
    items.set(key.id, outcome);
  }
}

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
    movedToBackground: 0,
    childrenDiscovered: 0,
    childrenSkipped: 0,
    listingsTruncated: 0,
  };
  const outcomes = new Map<string, Outcome>();
  const { messages, grouped } = group(records, outcomes, settings);

  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), Math.max(0, options.deadline - ports.clock.now().getTime()));
  timer.unref?.();
  // The batch is the sweep when every record is the background lane's (a batch comes from one
  // queue); one users' id among them makes it users': users' ids never wait behind the sweep.
  const sweep = records.length > 0 && records.every((record) => record.background === true);
  const caller = new PacedCaller(
    ports,
    { attempts: settings.fetchAttempts, backoff: settings.backoff },
    { deadline: options.deadline, signal: controller.signal, sweep, counts },
  );
  const run = new ItemRun(ports, settings, caller, counts);
  try {
    const itemOutcomes = await syncConnections(grouped, run, ports, settings, options.deadline, sweep, sweep ? undefined : ports.background);
    for (const [connection, items] of grouped) {
      for (const [id, itemRecords] of items) {
        const outcome = itemOutcomes.get({ connection, id }) ?? outcomeOf(new Error('no outcome was recorded for this item'), settings);
        for (const record of itemRecords) outcomes.set(record.messageId, outcome);
      }
    }
  } finally {
    clearTimeout(timer);
  }
  // Nothing can succeed as configured: the invocation fails, and every record comes back.
  if (run.fatal) throw run.fatal;

  const failures = await carryOut(records, outcomes, messages, counts, ports, settings);
  return { failures, counts, outcomes };
}

/** Parses every body (a bad one is dead at once) and groups the records by connection and item id. */
function group(
  records: readonly SyncRecord[],
  outcomes: Map<string, Outcome>,
  policy: OutcomePolicy,
): { messages: Map<string, SyncMessage>; grouped: Grouped } {
  const messages = new Map<string, SyncMessage>();
  const grouped: Grouped = new Map();
  for (const record of records) {
    let message: SyncMessage;
    try {
      message = parseMessageBody(record.body);
    } catch (error) {
      outcomes.set(record.messageId, outcomeOf(error, policy));
      continue;
    }
    messages.set(record.messageId, message);
    let items = grouped.get(message.connection);
    if (!items) grouped.set(message.connection, (items = new Map()));
    const itemRecords = items.get(message.id);
    if (itemRecords) itemRecords.push(record);
    else items.set(message.id, [record]);
  }
  return { messages, grouped };
}

/**
 * A users' batch's backlogs: each ready connection's ids beyond those it keeps (usersIdsKept: a
 * user's whole, within what its pace serves in USERS_HOLD_MS; a few of an import's) go to the
 * background lane, their outcome `moved`; the ids left to sync here are returned. An id that could
 * not be sent stays. (A connection that must wait keeps its records where they are.)
 */
async function moveBacklog(
  keys: readonly ItemKey[],
  session: ConnectionSession,
  outcomes: ItemOutcomes,
  ports: Pick<SyncPorts, 'log'>,
  background: BackgroundLane,
): Promise<ItemKey[]> {
  const kept = usersIdsKept(keys.length, session.pace.serves?.(USERS_HOLD_MS));
  if (keys.length <= kept) return [...keys];
  const { connection } = keys[0]!;
  const overflow = keys.slice(kept);
  const failed = await background.send(connection, overflow.map(({ id }) => id));
  const unsent = new Set(failed.map(({ id }) => id));
  if (failed.length > 0) {
    ports.log.warn('ids of a backlog could not be sent to the background lane; they are synced here', { connection, ids: failed.length, error: failed[0]!.error });
  }
  const reason = `connection "${connection}" had ${keys.length} ids in a users' batch, more than it keeps of one connection (a user's sends, within what its pace serves in ${USERS_HOLD_MS / 1000} s; ${USERS_IDS_PER_CONNECTION} of an import's); the ids beyond the first ${kept} go to the background lane`;
  for (const key of overflow) if (!unsent.has(key.id)) outcomes.set(key, { kind: 'moved', reason });
  return [...keys.slice(0, kept), ...overflow.filter(({ id }) => unsent.has(id))];
}

/**
 * The batch's items in the order they are fetched: the connections in turn, one id each, the
 * connection with the fewest ids first. A connection with many ids is fetched beside the others,
 * not before them.
 */
export function fairOrder(keysByConnection: ReadonlyArray<readonly ItemKey[]>): ItemKey[] {
  const lists = [...keysByConnection].sort((a, b) => a.length - b.length);
  const total = lists.reduce((sum, list) => sum + list.length, 0);
  const order: ItemKey[] = [];
  for (let round = 0; order.length < total; round += 1) {
    for (const list of lists) if (round < list.length) order.push(list[round]!);
  }
  return order;
}

/**
 * The outcome of every item: each connection's gate asked once (all at once), then (a users' batch:
 * `background` given) each ready connection's backlog moved, then of each connection what its pace
 * admits within its hold (the others sent back), then the stored revisions of the ready
 * connections' items left read at once, then each item synced with bounded concurrency, the
 * connections in turn. A connection whose pace's breaker is open, with no probe due here, waits
 * without a read or a request.
 */
async function syncConnections(
  grouped: Grouped,
  run: ItemRun,
  ports: SyncPorts,
  settings: SyncSettings,
  deadline: number,
  sweep: boolean,
  background: BackgroundLane | undefined,
): Promise<ItemOutcomes> {
  const outcomes = new ItemOutcomes();
  const keysOf = (connection: string): ItemKey[] => [...(grouped.get(connection)?.keys() ?? [])].map((id) => ({ connection, id }));
  const sessions = new Map<string, ConnectionSession>();
  await Promise.all(
    [...grouped.keys()].map(async (connection) => {
      const session = await openConnection(connection, run, ports, settings, deadline);
      if ('kind' in session) for (const key of keysOf(connection)) outcomes.set(key, session);
      else sessions.set(connection, settings.backlogOwnsPace && isBacklog(grouped.get(connection)!) ? { ...session, backlog: true } : session);
    }),
  );
  // A users' batch (the background lane given) keeps few ids of each ready connection; a backlog's others move.
  const kept = await Promise.all(
    [...sessions].map(([connection, session]) => (background ? moveBacklog(keysOf(connection), session, outcomes, ports, background) : keysOf(connection))),
  );
  // A pace with a hold (PACE_SCOPE=connection) takes what it can serve within it; the rest waits outside.
  const keys = fairOrder(kept.map((connectionKeys) => admitWithinHold(connectionKeys, sessions, outcomes, sweep, ports.clock.now().getTime())));
  if (keys.length === 0) return outcomes;
  let stored: StoredRevisions;
  try {
    run.checkTime();
    stored = await ports.store.getRevisions(keys);
  } catch (error) {
    const failure = outcomeOf(error, settings);
    for (const key of keys) outcomes.set(key, failure);
    return outcomes;
  }
  const claims = expectRequests(keys, sessions);
  try {
    await forEachLimited(keys, settings.fetchConcurrency, async (key) => {
      outcomes.set(key, await run.syncItem(key, stored.get(key.connection)?.get(key.id), sessions.get(key.connection)!));
    });
  } finally {
    for (const release of claims) release();
  }
  return outcomes;
}

/**
 * A connection's ids its pace admits (ProviderPace.admits: what it serves within its hold); the
 * others wait outside the invocation, each one's return booked one slot of the pace after the last
 * (outcome `later`, the pace's wait: no Retry-After's floor). No hold, no limit.
 */
function admitWithinHold(keys: readonly ItemKey[], sessions: ReadonlyMap<string, ConnectionSession>, outcomes: ItemOutcomes, sweep: boolean, now: number): ItemKey[] {
  if (keys.length === 0) return [];
  const { pace, backlog } = sessions.get(keys[0]!.connection)!;
  const holdMs = pace.maxHoldMs;
  if (holdMs === undefined || !pace.admits || !pace.bookReturn) return [...keys];
  const n = pace.admits(keys.length, sweep, backlog === true);
  const reason = `more of the connection's ids than its provider pace serves within ${holdMs / 1000} s; the others wait outside the invocation`;
  for (const key of keys.slice(n)) {
    const at = pace.bookReturn(holdMs, sweep, backlog === true);
    outcomes.set(key, { kind: 'later', reason, wait: { kind: 'pace', seconds: (at - now) / 1000, retryAfter: false } });
  }
  return keys.slice(0, n);
}

/** A connection's records in a batch are a users' backlog in the background lane (one of them is enough: they draw as one). */
function isBacklog(items: ReadonlyMap<string, readonly SyncRecord[]>): boolean {
  for (const records of items.values()) if (records.some((record) => record.backlog === true)) return true;
  return false;
}

/** Tells each pace how many requests the batch is about to ask of it: one an item (ProviderPace.expect). */
function expectRequests(keys: readonly ItemKey[], sessions: ReadonlyMap<string, ConnectionSession>): Array<() => void> {
  const requests = new Map<PaceGate, number>();
  for (const { connection } of keys) {
    const { pace } = sessions.get(connection)!;
    requests.set(pace, (requests.get(pace) ?? 0) + 1);
  }
  return [...requests].flatMap(([pace, count]) => (pace.expect ? [pace.expect(count)] : []));
}

/**
 * The connection's session (its token and its pace) when its gate is `ready` and its pace can be
 * asked; otherwise the outcome of every one of its items: dead (the gate's reason), later (the
 * gate's wait, or the pace's outage), or what a failure to ask maps to. The access layer is given
 * the batch's deadline: it starts no token refresh that could not end before it.
 */
async function openConnection(
  connection: string,
  run: ItemRun,
  ports: SyncPorts,
  settings: SyncSettings,
  deadline: number,
): Promise<ConnectionSession | Exclude<Outcome, { kind: 'done' }>> {
  try {
    run.checkTime();
    const gate = await ports.connections.open(connection, { deadline });
    switch (gate.kind) {
      case 'dead':
        return { kind: 'dead', reason: gate.reason };
      case 'wait':
        return outcomeOf(connectionWaitError(gate.reason, gate.seconds), settings);
      case 'ready': {
        const pace = ports.paceFor(gate.paceKey, gate.breakerKey);
        if (pace.waitingForProbe() && pace.outageKnown()) return outcomeOf(outageError(), settings);
        return { connection, token: gate.token, pace };
      }
    }
  } catch (error) {
    if (error instanceof ConfigError) run.fatal ??= error;
    return outcomeOf(error, settings);
  }
}
