/**
 * Fair queues, as the SQS model (sqs-model.ts) has them: a standard queue whose messages carry a
 * MessageGroupId (the tenant) delivers the messages of quiet tenants before those of a noisy one.
 *
 * What SQS documents, and what is modelled:
 * - a message's tenant is its MessageGroupId; a message without one is a tenant of its own (so it
 *   is never noisy, and a queue without groups delivers exactly as before);
 * - a tenant is noisy while it holds more than NOISY_SHARE (10%) of the queue's messages in flight
 *   and at least NOISY_MIN_IN_FLIGHT (30) of its own;
 * - a receive returns the messages of quiet tenants first, in queue order; only when none of those
 *   is visible, noisy tenants' messages, the tenant with the fewest in flight first.
 *
 * Simplifications: SQS also counts a tenant noisy for its share of recent processing time, and keeps
 * it noisy until its backlog drains or it sends nothing for 5 minutes; the model looks at the
 * messages in flight at each receive only (no processing time, no memory). Detection is exact here
 * where SQS's is approximate.
 */

/** What the index reads of a stored message (sqs-queue.ts, Entry). */
export interface FairEntry {
  readonly messageGroupId?: string;
  /** Its place in the queue: lower is delivered first. */
  readonly order: number;
  readonly held: boolean;
  readonly gone: boolean;
  /** Epoch ms from which it can be received. */
  readonly visibleAt: number;
}

/** A tenant holding more than this share of the queue's in-flight messages … */
export const NOISY_SHARE = 0.1;
/** … and at least this many of its own is noisy. */
export const NOISY_MIN_IN_FLIGHT = 30;

/** SQS's rule for a MessageGroupId: 1–128 characters, letters, digits and punctuation (printable ASCII without the space). */
export const MESSAGE_GROUP_ID_PATTERN = /^[\x21-\x7e]{1,128}$/;

/** The key of the messages without a group: each is its own tenant, never noisy. */
const UNGROUPED = '';

/** One tenant's messages, in queue order; those before `head` have left the queue, and `gone` more after it. */
interface GroupList<Entry extends FairEntry> {
  entries: Entry[];
  head: number;
  gone: number;
}

/** A queue's messages by tenant, and its messages in flight. */
/**
 * Puts `entry` into `entries` (kept in ascending `order`, equal orders in arrival order), searching
 * from `from`: a message sent again with a delay may come back before later ones.
 */
export function insertInOrder<T extends { order: number }>(entries: T[], entry: T, from = 0): void {
  if (entries.length === 0 || entries[entries.length - 1]!.order <= entry.order) {
    entries.push(entry);
    return;
  }
  let lo = from;
  let hi = entries.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (entries[mid]!.order <= entry.order) lo = mid + 1;
    else hi = mid;
  }
  entries.splice(lo, 0, entry);
}

export class FairIndex<Entry extends FairEntry> {
  private readonly groups = new Map<string, GroupList<Entry>>();
  /** Messages received and not yet deleted or visible again (pruned at each look). */
  private readonly inFlight = new Set<Entry>();

  /** A message entered the queue (sent, duplicated, redriven here). */
  add(entry: Entry): void {
    const key = entry.messageGroupId ?? UNGROUPED;
    let list = this.groups.get(key);
    if (!list) this.groups.set(key, (list = { entries: [], head: 0, gone: 0 }));
    insertInOrder(list.entries, entry, list.head);
  }

  /** A message left the queue (deleted, redriven): its tenant's list drops it now and then. */
  removed(entry: Entry): void {
    const key = entry.messageGroupId ?? UNGROUPED;
    const list = this.groups.get(key);
    if (!list) return;
    list.gone += 1;
    const live = list.entries.length - list.head;
    if (list.gone >= live) this.groups.delete(key);
    else if (list.gone >= 256 && list.gone * 4 >= live) {
      list.entries = list.entries.slice(list.head).filter((kept) => !kept.gone);
      list.head = 0;
      list.gone = 0;
    }
  }

  /** A message was received: it is in flight until deleted, or visible again. */
  delivered(entry: Entry): void {
    this.inFlight.add(entry);
  }

  clear(): void {
    this.groups.clear();
    this.inFlight.clear();
  }

  /** Each group's messages in flight now, and all messages in flight (those without a group included). */
  inFlightNow(now: number): { total: number; byGroup: Map<string, number> } {
    const byGroup = new Map<string, number>();
    for (const entry of this.inFlight) {
      if (entry.gone || (!entry.held && entry.visibleAt <= now)) {
        this.inFlight.delete(entry);
        continue;
      }
      if (entry.messageGroupId !== undefined) byGroup.set(entry.messageGroupId, (byGroup.get(entry.messageGroupId) ?? 0) + 1);
    }
    return { total: this.inFlight.size, byGroup };
  }

  /** The noisy tenants now, with their messages in flight. */
  noisy(now: number): Map<string, number> {
    const { total, byGroup } = this.inFlightNow(now);
    const noisy = new Map<string, number>();
    for (const [group, count] of byGroup) {
      if (count >= NOISY_MIN_IN_FLIGHT && count > NOISY_SHARE * total) noisy.set(group, count);
    }
    return noisy;
  }

  /**
   * The visible messages in the order a receive takes them while some tenants are noisy: the quiet
   * tenants' (and those without a group) merged in queue order, then each noisy tenant's, the one
   * with the fewest in flight first. Lazy: a receive takes what it needs.
   */
  *fairOrder(now: number, noisy: ReadonlyMap<string, number>): Generator<Entry> {
    const quiet: Array<{ list: GroupList<Entry>; at: number }> = [];
    for (const [key, list] of this.groups) {
      if (this.tidy(key, list) && !noisy.has(key)) quiet.push({ list, at: list.head });
    }
    // Quiet tenants: the visible message of lowest order among their next ones, again and again.
    for (;;) {
      let best: { list: GroupList<Entry>; at: number } | undefined;
      for (const cursor of quiet) {
        cursor.at = nextVisible(cursor.list, cursor.at, now);
        if (cursor.at < cursor.list.entries.length && (!best || cursor.list.entries[cursor.at]!.order < best.list.entries[best.at]!.order)) best = cursor;
      }
      if (!best) break;
      const entry = best.list.entries[best.at]!;
      best.at += 1;
      yield entry;
    }
    const loud = [...noisy].sort((a, b) => a[1] - b[1]);
    for (const [key] of loud) {
      const list = this.groups.get(key);
      if (!list) continue;
      for (let at = nextVisible(list, list.head, now); at < list.entries.length; at = nextVisible(list, at + 1, now)) yield list.entries[at]!;
    }
  }

  /** Drops the messages that left from the front of a tenant's list (and an empty list); false when none is left. */
  private tidy(key: string, list: GroupList<Entry>): boolean {
    while (list.head < list.entries.length && list.entries[list.head]!.gone) {
      list.head += 1;
      list.gone -= 1;
    }
    if (list.head >= list.entries.length) {
      this.groups.delete(key);
      return false;
    }
    if (list.head >= 64 && list.head * 2 >= list.entries.length) {
      list.entries = list.entries.slice(list.head);
      list.head = 0;
    }
    return true;
  }
}

/** The first position from `from` of a message that can be received now. */
function nextVisible(list: GroupList<FairEntry>, from: number, now: number): number {
  let at = from;
  while (at < list.entries.length) {
    const entry = list.entries[at]!;
    if (!entry.gone && !entry.held && entry.visibleAt <= now) return at;
    at += 1;
  }
  return at;
}
