/**
 * One item of one connection in a batch (sync.ts): fetch it with the connection's token and pace
 * (the paced provider call, shared/provider/paced-call.ts), validate it, compare it with the stored row and write only what changed, conditionally on the
 * row being the one compared (item-writer.ts); a lost race re-reads the row and, unless the row
 * now holds what was fetched, fetches again and re-decides, a bounded number of times
 * (ItemRunSettings.writeRounds). With discovery on (discovery.ts), a folder about to be written
 * first sends the children that left its list, is written with `childrenPending`, then sends its
 * listed children and removes the marker; one about to be tombstoned sends its last list first; a
 * folder found unchanged whose row still carries the marker (whichever round, and after a race lost
 * to a write of the fetched revision) sends its listed children. Ids whose sync is in flight in this
 * batch are never sent. Every error ends as the id's outcome (outcome/decide.ts), except a
 * configuration error, which the batch fails with.
 */
import { ConfigError, ProviderError, TransientError } from '../shared/errors.js';
import type { ConnectionSession, PacedCaller } from '../shared/provider/paced-call.js';
import { Discovery, type Child, type DiscoverySettings } from './discovery.js';
import { validateItem, type ValidItem } from './item.js';
import { ItemWriter } from './item-writer.js';
import { outcomeOf, type DoneResult, type Outcome } from './outcome/decide.js';
import type { SyncCounts } from './batch.js';
import type { Clock, Log, ProviderClient } from '../shared/ports.js';
import type { OutcomePolicy } from './outcome/decide.js';
import type { DiscoverySink, ItemKey, ItemObjectStore, ItemStore, StoredRevision } from './ports.js';

/** What one id's run talks to (part of the batch's SyncPorts). */
export interface ItemRunPorts {
  provider: ProviderClient;
  store: ItemStore;
  /** The items bucket: items too large for a row. */
  objects: ItemObjectStore;
  /** The random part of an item object's key (item-writer.ts); default from the system's random source. */
  objectKeySuffix?: () => string;
  /** Where a folder's children are sent for checking (the reconcile queue); with discovery on only. */
  discovery?: DiscoverySink;
  clock: Clock;
  log: Log;
}

/** How one id's run works (part of the batch's SyncSettings). */
export interface ItemRunSettings extends OutcomePolicy {
  revisionField: string;
  /** Rounds of fetch-decide-write per id before a lost race is given up as retry-later (DEFAULT_WRITE_ROUNDS). */
  writeRounds: number;
  /** Where a folder item lists its children; undefined: discovery off. */
  discovery?: DiscoverySettings;
}

type Fetched = ValidItem | 'not-found';

/** Per-item work of one batch: fetch (the paced provider call), decide, conditional write, re-decide on a lost race. */
export class ItemRun {
  private readonly writer: ItemWriter;
  /** The crawl, when discovery is on (settings and sink both given). */
  private readonly discovery: Discovery | undefined;
  /** The configuration error an id met, if any: no further id is started, and the batch fails with it. */
  fatal: ConfigError | undefined;
  /**
   * The ids whose sync is in flight in this batch, by connection: discovery sends none of them. An
   * id leaves when its sync ends: what it wrote, discovery's strongly consistent read sees, and one
   * that ended with no row (a 404 before the provider created it) must be sent when a folder lists it.
   */
  private readonly inFlight = new Map<string, Set<string>>();

  constructor(
    private readonly ports: ItemRunPorts,
    private readonly settings: ItemRunSettings,
    private readonly caller: PacedCaller,
    private readonly counts: SyncCounts,
  ) {
    const { store, objects, log, objectKeySuffix } = ports;
    // Inline, or whole in the items bucket when the row would be too large (item-writer.ts).
    this.writer = new ItemWriter({ store, objects, log, ...(objectKeySuffix ? { uniqueSuffix: objectKeySuffix } : {}) });
    this.discovery =
      settings.discovery !== undefined && ports.discovery !== undefined
        ? new Discovery({ store, objects, sink: ports.discovery, log }, settings.discovery, counts, (key) => this.inFlight.get(key.connection)?.has(key.id) === true)
        : undefined;
  }

  checkTime(): void {
    this.caller.checkTime();
  }

  /** The outcome of `key`, fetched with `session` (the key's connection's token and pace), compared with `stored`. */
  async syncItem(key: ItemKey, stored: StoredRevision | undefined, session: ConnectionSession): Promise<Outcome> {
    if (this.fatal) return outcomeOf(this.fatal, this.settings);
    let ids = this.inFlight.get(key.connection);
    if (!ids) this.inFlight.set(key.connection, (ids = new Set()));
    ids.add(key.id);
    try {
      let current = stored;
      // Children this item (a folder) sent for checking: a round after a lost race sends none twice.
      const sent = new Set<string>();
      for (let round = 1; ; round += 1) {
        const fetched = await this.fetch(key, session);
        const result = await this.decideAndWrite(key, current, fetched, sent);
        if (result !== 'conflict') {
          if (result !== 'absent') this.counts[result] += 1;
          return { kind: 'done', result };
        }
        if (round >= Math.max(1, this.settings.writeRounds)) {
          throw new TransientError(
            `another invocation kept writing this item: the conditional write lost ${round} times in a row`,
          );
        }
        this.checkTime();
        // The row first, then the fetch: the fetch must not be older than the row it is compared with.
        const again = await this.ports.store.getRevisions([{ connection: key.connection, id: key.id }], { consistent: true });
        current = again.get(key.connection)?.get(key.id);
        // The row now holds what was fetched (the other invocation wrote the same): nothing to write, nothing to fetch again.
        const settled = settledBy(current, fetched);
        if (settled !== undefined) {
          this.ports.log.info('write race lost to a write of what was fetched; done without fetching again', { connection: key.connection, itemId: key.id, round });
          // The row read strongly may be a marked one whose writer ended before its sends (this may
          // be its message back, whose batch read an older copy): its children are sent here.
          if (settled === 'unchanged' && fetched !== 'not-found') await this.sendPending(key, fetched, current!, sent);
          if (settled !== 'absent') this.counts[settled] += 1;
          return { kind: 'done', result: settled };
        }
        this.ports.log.info('write race lost; reading the row and fetching again', { connection: key.connection, itemId: key.id, round });
      }
    } catch (error) {
      if (error instanceof ConfigError) this.fatal ??= error;
      return outcomeOf(error, this.settings);
    } finally {
      ids.delete(key.id);
    }
  }

  /**
   * A folder found unchanged (`current` holds the fetched revision) whose row still carries
   * `childrenPending`: its writer ended before its listed children were sent, or is sending them
   * now (then these are duplicates: only extra checks). Sends them and removes the marker.
   */
  private async sendPending(key: ItemKey, fetched: ValidItem, current: StoredRevision, sent: Set<string>): Promise<void> {
    if (fetched.type !== 'folder' || !this.discovery || !current.childrenPending || current.syncedAt === undefined) return;
    this.checkTime();
    await this.discovery.pending(key, fetched.item, { revision: current.revision, syncedAt: current.syncedAt }, sent);
  }

  private async decideAndWrite(key: ItemKey, current: StoredRevision | undefined, fetched: Fetched, sent: Set<string>): Promise<DoneResult | 'conflict'> {
    const syncedAt = this.ports.clock.now().toISOString();
    const { connection, id } = key;
    if (fetched === 'not-found') {
      if (current === undefined) return 'absent';
      if (current.deleted) return 'unchanged';
      // A folder's children first (its last list): once the tombstone is written, they are out.
      if (this.discovery) {
        this.checkTime();
        await this.discovery.beforeTombstone(key, sent);
      }
      return (await this.writer.tombstone({ connection, id }, current, syncedAt)) === 'written' ? 'deleted' : 'conflict';
    }
    const discovery = fetched.type === 'folder' ? this.discovery : undefined;
    if (current !== undefined && !current.deleted && current.revision === fetched.revision) {
      // Unchanged; a folder whose row still carries the marker sends its listed children now.
      await this.sendPending(key, fetched, current, sent);
      return 'unchanged';
    }
    // A folder's children that left its list go first (they cannot be told once the row is replaced);
    // its listed children once its row is written, marked until they are sent.
    let children: Child[] = [];
    if (discovery) {
      this.checkTime();
      children = await discovery.beforeWrite(key, fetched.item, current, sent);
    }
    const pending = children.length > 0;
    const row = { connection, id, type: fetched.type, revision: fetched.revision, item: fetched.item, syncedAt, ...(pending ? { childrenPending: true as const } : {}) };
    let result: 'created' | 'updated' | 'conflict';
    if (current === undefined) {
      result = (await this.writer.write(row, { exists: false })) === 'written' ? 'created' : 'conflict';
    } else {
      const { revision, deleted, objectKey } = current;
      const written = await this.writer.write(row, { exists: true, revision, deleted, ...(objectKey !== undefined ? { objectKey } : {}) });
      result = written === 'written' ? 'updated' : 'conflict';
    }
    if (result !== 'conflict' && pending) {
      try {
        await discovery!.afterWrite(key, children, { revision: fetched.revision, syncedAt }, sent);
      } catch (error) {
        // The row is written (counted as what it did); the record is retried for its children.
        this.counts[result] += 1;
        throw error;
      }
    }
    return result;
  }

  /** One item from the provider (the paced call: shared/provider/paced-call.ts): the valid item, or 'not-found' for a 404. */
  private async fetch(key: ItemKey, session: ConnectionSession): Promise<Fetched> {
    const { connection, id } = key;
    let body: unknown;
    try {
      body = await this.caller.call(session, (token, signal) => this.ports.provider.getItem(id, token, { signal }), { connection, itemId: id });
    } catch (error) {
      if (error instanceof ProviderError && error.kind === 'not-found') return 'not-found';
      throw error;
    }
    return validateItem(body, id, this.settings.revisionField);
  }
}

/**
 * After a lost race, the row read again: the result when it holds what was fetched (a live row of
 * the fetched revision, or for a 404 a tombstone or no row), undefined when it must be fetched again.
 */
function settledBy(current: StoredRevision | undefined, fetched: Fetched): DoneResult | undefined {
  if (fetched === 'not-found') return current === undefined ? 'absent' : current.deleted ? 'unchanged' : undefined;
  return current !== undefined && !current.deleted && current.revision === fetched.revision ? 'unchanged' : undefined;
}
