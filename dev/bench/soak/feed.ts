/**
 * What the soak puts in the queue and changes at the provider:
 *
 * - the initial feed: every id once, shuffled, with the bad messages at random places, some
 *   messages delivered twice (SQS's at-least-once delivery);
 * - the change feed, while the sync runs: revision bumps (often of items in flight right then; a
 *   share of them make an item cross DynamoDB's row limit: a large one shrinks back, a small file
 *   grows past it), deletions, creations and re-creations, each followed by a change notification
 *   for the id;
 * - token rotations at fixed points of the first deliveries: every access token is revoked (and the
 *   stored one made old), then two refreshers run at once (containers holding a cached token meet
 *   401s in between and refresh it on demand; every getToken takes the connection's lease first, and
 *   the provider rotates the refresh token at each, revoking the grant if an old one ever comes back).
 *
 * The ledger keeps what the checks and the report need: which messages were good or bad, which
 * were delivered, which are in flight.
 */
import type { StoredMessage } from '../../fakes/sqs-model.js';
import { mulberry32 } from '../../simulator/item-tree.js';
import type { SimulatorItem } from '../../simulator/provider-simulator.js';
import { withRevision, type BadMessage } from './bad-messages.js';
import { LARGE_FIELD, largeText, NAMES, type SoakWorld } from './world.js';

export type ChangeKind = 'bump' | 'delete' | 'create' | 'resurrect';

/** Longest a rotation's 401 window waits for a container to meet the revoked token. */
const ROTATION_WINDOW_LIMIT_MS = 10_000;

/**
 * The kinds of the change-feed events, drawn up front so that a seed always gives the same mix:
 * 70% revision bumps, 15% deletions, 15% creations (half of them, when an item is deleted,
 * re-creating it with a newer revision). From 4 events on, every kind occurs at least once.
 */
export function changePlan(count: number, seed: number): ChangeKind[] {
  const random = mulberry32((seed ^ 0xc4a76e) >>> 0);
  const plan: ChangeKind[] = [];
  let deleted = 0;
  for (let i = 0; i < count; i += 1) {
    const roll = random();
    if (roll < 0.7) plan.push('bump');
    else if (roll < 0.85) {
      plan.push('delete');
      deleted += 1;
    } else if (deleted > 0 && random() < 0.5) {
      plan.push('resurrect');
      deleted -= 1;
    } else plan.push('create');
  }
  if (count >= 4) {
    const ensure = (kind: ChangeKind, at: number): void => {
      if (!plan.includes(kind)) plan[at] = kind;
    };
    ensure('delete', Math.floor(count / 4));
    ensure('create', Math.floor(count / 2));
    ensure('resurrect', Math.floor((3 * count) / 4));
  }
  // A re-creation needs a deleted item at that point; make any that has none a creation.
  deleted = 0;
  for (let i = 0; i < plan.length; i += 1) {
    if (plan[i] === 'delete') deleted += 1;
    else if (plan[i] === 'resurrect') {
      if (deleted > 0) deleted -= 1;
      else plan[i] = 'create';
    }
  }
  return plan;
}

/**
 * The messages in the queue, and where they are: the ones the soak sent, and the ones the sync sent
 * again itself (a waiting record goes back to the queue as a new message with the same body).
 */
class Ledger {
  /** Every id sent in a well-formed message. */
  readonly goodIds = new Set<string>();
  readonly badByMessageId = new Map<string, BadMessage>();
  readonly initialMessageIds = new Set<string>();
  readonly deliveredInitial = new Set<string>();
  readonly itemIdOfMessage = new Map<string, string>();
  /** Item ids with a message in flight, and how many. */
  readonly inFlightItems = new Map<string, number>();
  /** Messages the sync sent again → the bad message they carry. */
  readonly originalOf = new Map<string, string>();
  changeNotifications = 0;
  /** Deliveries of a message while another copy of it was in flight in another instance. */
  concurrentDuplicates = 0;
  private readonly inFlightByMessage = new Map<string, number>();
  private readonly badMessageIdOfBody = new Map<string, string>();
  private readonly itemIdOfBody = new Map<string, string>();

  sentGood(messageId: string, body: string, itemId: string): void {
    this.goodIds.add(itemId);
    this.itemIdOfMessage.set(messageId, itemId);
    this.itemIdOfBody.set(body, itemId);
  }

  sentBad(messageId: string, message: BadMessage): void {
    this.badByMessageId.set(messageId, message);
    this.badMessageIdOfBody.set(message.body, messageId);
  }

  /** The share of the initial messages delivered at least once. */
  initialShareDelivered(): number {
    return this.deliveredInitial.size / Math.max(1, this.initialMessageIds.size);
  }

  delivered(messages: ReadonlyArray<{ messageId: string; body: string }>): void {
    for (const { messageId, body } of messages) {
      if (!this.itemIdOfMessage.has(messageId) && !this.badByMessageId.has(messageId)) this.learn(messageId, body);
      if (this.initialMessageIds.has(messageId)) this.deliveredInitial.add(messageId);
      const running = this.inFlightByMessage.get(messageId) ?? 0;
      if (running > 0) this.concurrentDuplicates += 1;
      this.inFlightByMessage.set(messageId, running + 1);
      const itemId = this.itemIdOfMessage.get(messageId);
      if (itemId !== undefined) this.inFlightItems.set(itemId, (this.inFlightItems.get(itemId) ?? 0) + 1);
    }
  }

  /** A message the soak did not send: the sync sent a record again. */
  private learn(messageId: string, body: string): void {
    const bad = this.badMessageIdOfBody.get(body);
    if (bad !== undefined) this.originalOf.set(messageId, bad);
    const itemId = this.itemIdOfBody.get(body);
    if (itemId !== undefined) this.itemIdOfMessage.set(messageId, itemId);
  }

  settled(messageIds: readonly string[]): void {
    for (const messageId of messageIds) {
      decrement(this.inFlightByMessage, messageId);
      const itemId = this.itemIdOfMessage.get(messageId);
      if (itemId !== undefined) decrement(this.inFlightItems, itemId);
    }
  }
}

function decrement(counts: Map<string, number>, key: string): void {
  const left = (counts.get(key) ?? 1) - 1;
  if (left > 0) counts.set(key, left);
  else counts.delete(key);
}

export interface FeedStats {
  bumped: number;
  bumpedWhileInFlight: number;
  /** Bumps that made a file too large for a row, and bumps that made a large one fit again. */
  grown: number;
  shrunk: number;
  deleted: number;
  created: number;
  resurrected: number;
}

export class Feed {
  readonly ledger = new Ledger();
  readonly stats: FeedStats = { bumped: 0, bumpedWhileInFlight: 0, grown: 0, shrunk: 0, deleted: 0, created: 0, resurrected: 0 };
  /** Date.now() of the last change or rotation. */
  lastEventAt = Date.now();
  /** Items live at the provider, and deleted ones with their last state. */
  readonly liveIds: string[];
  readonly deletedItems = new Map<string, SimulatorItem>();
  readonly mutationsPlanned: number;
  mutationsDone = 0;
  rotationsStarted = 0;

  private readonly liveIndex: Map<string, number>;
  private readonly plan: ChangeKind[];
  private readonly rotationAt: number[];
  /** Draws the initial feed (the same for a seed); `runRandom` what happens at run time. */
  private readonly random: () => number;
  private readonly runRandom: () => number;
  private created = 0;
  private rotation: Promise<void> | undefined;

  constructor(private readonly world: SoakWorld) {
    const { o } = world;
    this.random = mulberry32(o.seed);
    this.runRandom = mulberry32((o.seed ^ 0x7a11c0de) >>> 0);
    this.liveIds = world.tree.map((item) => item.id);
    this.liveIndex = new Map(this.liveIds.map((id, index) => [id, index]));
    this.mutationsPlanned = Math.round(o.ids * o.mutationRate);
    this.plan = changePlan(this.mutationsPlanned, o.seed);
    this.rotationAt = Array.from({ length: o.rotations }, (_, k) => (0.9 * (k + 0.5)) / Math.max(1, o.rotations));
  }

  /** Every id once, shuffled, with the bad messages at random places. */
  sendInitial(): void {
    const order = this.world.tree.map((item) => item.id);
    for (let i = order.length - 1; i > 0; i -= 1) {
      const j = Math.floor(this.random() * (i + 1));
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    const badAt = new Map<number, BadMessage[]>();
    for (const message of this.world.bad) {
      const at = Math.floor(this.random() * order.length);
      badAt.set(at, [...(badAt.get(at) ?? []), message]);
    }
    order.forEach((id, position) => {
      for (const message of badAt.get(position) ?? []) {
        const sent = this.send(message.body);
        this.ledger.sentBad(sent.messageId, message);
        this.ledger.initialMessageIds.add(sent.messageId);
        this.maybeDuplicate(sent, this.random);
      }
      const sent = this.sendGood(id, true);
      // Whatever the draws, the first id's copy comes right behind it: in the same batch, delivered
      // while the original is in flight.
      if (position === 0) this.world.sqs.duplicate(NAMES.syncQueue, sent, 0);
    });
  }

  /** Changes and rotations due by now, paced by the first deliveries of the initial messages. */
  tick(): void {
    const done = this.ledger.initialShareDelivered();
    const target = Math.min(this.mutationsPlanned, Math.round(this.mutationsPlanned * Math.min(1, done / 0.8)));
    while (this.mutationsDone < target) {
      this.mutate(this.plan[this.mutationsDone]!);
      this.mutationsDone += 1;
    }
    if (!this.rotation && this.rotationsStarted < this.world.o.rotations && done >= this.rotationAt[this.rotationsStarted]!) {
      this.rotationsStarted += 1;
      this.rotation = this.rotate().finally(() => {
        this.rotation = undefined;
      });
    }
  }

  /** Every change made and every rotation over. */
  done(): boolean {
    return this.mutationsDone >= this.mutationsPlanned && this.rotationsStarted >= this.world.o.rotations && !this.rotation;
  }

  /** Waits for a rotation still running. */
  async settled(): Promise<void> {
    if (this.rotation) await this.rotation;
  }

  private send(body: string): StoredMessage {
    return this.world.sqs.send(NAMES.syncQueue, { body });
  }

  private sendGood(id: string, initial: boolean): StoredMessage {
    const random = initial ? this.random : this.runRandom;
    const roll = random();
    const sent = this.send(roll < 0.08 ? id : roll < 0.1 ? `  ${id}\n` : JSON.stringify({ id }));
    this.ledger.sentGood(sent.messageId, sent.body, id);
    if (initial) this.ledger.initialMessageIds.add(sent.messageId);
    else this.ledger.changeNotifications += 1;
    this.maybeDuplicate(sent, random);
    return sent;
  }

  /** At-least-once: a second copy, mostly a few batches later (often in another instance at the same time). */
  private maybeDuplicate(message: StoredMessage, random: () => number): void {
    const { o } = this.world;
    if (random() >= o.duplicateRate) return;
    if (random() < 0.7) this.world.sqs.duplicate(NAMES.syncQueue, message, 1 + Math.floor(random() * o.batchSize * o.instances));
    else this.world.sqs.duplicate(NAMES.syncQueue, message, Math.floor(random() * 100), 1 + Math.floor(random() * 60));
  }

  private mutate(planned: ChangeKind): void {
    let kind = planned;
    if (kind === 'resurrect' && this.deletedItems.size === 0) kind = 'create';
    if ((kind === 'bump' || kind === 'delete') && this.liveIds.length < 10) kind = 'create';
    const id = kind === 'bump' ? this.bump() : kind === 'delete' ? this.delete() : kind === 'resurrect' ? this.resurrect() : this.create();
    this.sendGood(id, false);
    this.lastEventAt = Date.now();
  }

  private bump(): string {
    if (this.runRandom() < this.world.o.resizeShare) {
      const resized = this.resize();
      if (resized !== undefined) {
        this.world.sim.bumpRevision(resized);
        this.stats.bumped += 1;
        return resized;
      }
    }
    const inFlight = [...this.ledger.inFlightItems.keys()].filter((id) => this.liveIndex.has(id));
    // Half the bumps, and for certain the first that finds an item in flight, change an item in flight.
    const whileInFlight = inFlight.length > 0 && (this.runRandom() < 0.5 || this.stats.bumpedWhileInFlight === 0);
    const id = whileInFlight ? this.pick(inFlight) : this.pick(this.liveIds);
    this.world.sim.bumpRevision(id);
    this.stats.bumped += 1;
    if (whileInFlight) this.stats.bumpedWhileInFlight += 1;
    return id;
  }

  /** A large file fits in a row again, or a small file outgrows its row (half and half while there are large ones). */
  private resize(): string | undefined {
    const { large, sim, o } = this.world;
    const liveLarge = [...large].filter((id) => this.liveIndex.has(id));
    if (liveLarge.length > 0 && this.runRandom() < 0.5) {
      const id = this.pick(liveLarge);
      const { [LARGE_FIELD]: _dropped, ...small } = sim.getItem(id)!;
      sim.setItem(small as SimulatorItem);
      large.delete(id);
      this.stats.shrunk += 1;
      return id;
    }
    for (let attempt = 0; attempt < 20; attempt += 1) {
      const id = this.pick(this.liveIds);
      const item = sim.getItem(id);
      if (item?.type !== 'file' || large.has(id)) continue;
      sim.setItem({ ...item, [LARGE_FIELD]: largeText(o.seed) });
      large.add(id);
      this.stats.grown += 1;
      return id;
    }
    return undefined;
  }

  /** Whether the item now carries the large field (after a re-creation or a copy). */
  private trackSize(id: string): void {
    if (this.world.sim.getItem(id)?.[LARGE_FIELD] !== undefined) this.world.large.add(id);
    else this.world.large.delete(id);
  }

  private delete(): string {
    const id = this.pick(this.liveIds);
    this.deletedItems.set(id, this.world.sim.getItem(id)!);
    this.world.sim.deleteItem(id);
    this.world.large.delete(id);
    this.removeLive(id);
    this.stats.deleted += 1;
    return id;
  }

  private resurrect(): string {
    const id = this.pick([...this.deletedItems.keys()]);
    this.world.sim.setItem(this.deletedItems.get(id)!);
    this.world.sim.bumpRevision(id); // a revision never goes back: the item returns with a newer one
    this.trackSize(id);
    this.deletedItems.delete(id);
    this.addLive(id);
    this.stats.resurrected += 1;
    return id;
  }

  private create(): string {
    this.created += 1;
    const template = this.world.sim.getItem(this.pick(this.liveIds))!;
    const id = `new-${this.world.o.seed}-${String(this.created).padStart(5, '0')}`;
    this.world.sim.setItem(withRevision({ ...template, id, name: `created while syncing ${this.created}` }, this.world.o.revisionField, 1));
    this.trackSize(id);
    this.addLive(id);
    this.stats.created += 1;
    return id;
  }

  /**
   * Revokes every access token at the provider and makes the stored one old (the soak runs in
   * minutes: a token the provider refuses less than a minute after it was issued only waits), then,
   * once the window has lasted `rotationGapMs` and a container met a 401 in it (or after
   * ROTATION_WINDOW_LIMIT_MS), makes the stored token old again and runs the two refreshers at once:
   * every rotation is met with the revoked token, however the instances' requests fall around it;
   * the containers refresh it on demand, and the refreshers race each other (and any container) for
   * the connection's lease. The first rotation leaves the stored token as it is (issued moments ago
   * by the first refresh): its records wait for the refreshers' new token, sent again to the queue;
   * its window lasts until one has been (a send of it the soak's SQS faults refused comes back and
   * waits again), so that the soak meets a waiting record however the instances' requests fall.
   */
  private async rotate(): Promise<void> {
    const unauthorizedBefore = this.unauthorized();
    this.world.sim.revokeAccessTokens();
    if (this.rotationsStarted > 1) await this.world.ageAccessToken();
    this.world.tokenStats.revocations += 1;
    const started = Date.now();
    const sentAgain = (): number => this.world.sqs.queue(NAMES.syncQueue).stats.sent - this.ledger.initialMessageIds.size - this.ledger.changeNotifications;
    const sentAgainBefore = sentAgain();
    const first = this.rotationsStarted === 1;
    const met = (): boolean => this.unauthorized() > unauthorizedBefore && (!first || sentAgain() > sentAgainBefore);
    while (Date.now() - started < this.world.o.rotationGapMs || (!met() && Date.now() - started < ROTATION_WINDOW_LIMIT_MS)) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await this.world.ageAccessToken();
    await this.world.refresh('schedule');
    this.world.tokenStats.rotations += 1;
    this.lastEventAt = Date.now();
  }

  /** 401s the provider answered so far (tallied, and not yet tallied). */
  private unauthorized(): number {
    return this.world.tally.figures.unauthorized + this.world.sim.requests.filter((request) => request.status === 401).length;
  }

  private pick<T>(list: readonly T[]): T {
    return list[Math.floor(this.runRandom() * list.length)]!;
  }

  private removeLive(id: string): void {
    const index = this.liveIndex.get(id);
    if (index === undefined) return;
    const last = this.liveIds.pop()!;
    if (last !== id) {
      this.liveIds[index] = last;
      this.liveIndex.set(last, index);
    }
    this.liveIndex.delete(id);
  }

  private addLive(id: string): void {
    if (this.liveIndex.has(id)) return;
    this.liveIndex.set(id, this.liveIds.length);
    this.liveIds.push(id);
  }
}
