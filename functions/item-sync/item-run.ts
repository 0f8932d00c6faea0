/**
 * One item of one connection in a batch (sync.ts): fetch it with the connection's token and pace
 * (the paced provider call, shared/provider/paced-call.ts), validate it, compare it with the stored row and write only what changed, conditionally on the
 * row being the one compared (item-writer.ts); a lost race re-reads the row, fetches again and
 * re-decides, a bounded number of times (ItemRunSettings.writeRounds). With discovery on, a
 * folder about to be written or tombstoned first sends its children for checking (discovery.ts).
 * Every error ends as the id's outcome (outcome/decide.ts), except a configuration error, which
 * the batch fails with.
 */
import { ConfigError, ProviderError, TransientError } from '../shared/errors.js';
import type { ConnectionSession, PacedCaller } from '../shared/provider/paced-call.js';
import { Discovery, type DiscoverySettings } from './discovery.js';
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
        ? new Discovery({ store, objects, sink: ports.discovery, log }, settings.discovery, counts)
        : undefined;
  }

  checkTime(): void {
    this.caller.checkTime();
  }

  /** The outcome of `key`, fetched with `session` (the key's connection's token and pace), compared with `stored`. */
  async syncItem(key: ItemKey, stored: StoredRevision | undefined, session: ConnectionSession): Promise<Outcome> {
    if (this.fatal) return outcomeOf(this.fatal, this.settings);
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
        this.ports.log.info('write race lost; reading the row and fetching again', { connection: key.connection, itemId: key.id, round });
        this.checkTime();
        // The row first, then the fetch: the fetch must not be older than the row it is compared with.
        const again = await this.ports.store.getRevisions([{ connection: key.connection, id: key.id }], { consistent: true });
        current = again.get(key.connection)?.get(key.id);
      }
    } catch (error) {
      if (error instanceof ConfigError) this.fatal ??= error;
      return outcomeOf(error, this.settings);
    }
  }

  private async decideAndWrite(
    key: ItemKey,
    current: StoredRevision | undefined,
    fetched: Fetched,
    sent: Set<string>,
  ): Promise<DoneResult | 'conflict'> {
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
    const row = { connection, id, type: fetched.type, revision: fetched.revision, item: fetched.item, syncedAt };
    if (current !== undefined && !current.deleted && current.revision === fetched.revision) return 'unchanged';
    // A folder about to be written sends its children first: once its row is written, they are out.
    if (this.discovery && fetched.type === 'folder') {
      this.checkTime();
      await this.discovery.beforeWrite(key, fetched.item, current, sent);
    }
    if (current === undefined) {
      return (await this.writer.write(row, { exists: false })) === 'written' ? 'created' : 'conflict';
    }
    const { revision, deleted, objectKey } = current;
    const written = await this.writer.write(row, { exists: true, revision, deleted, ...(objectKey !== undefined ? { objectKey } : {}) });
    return written === 'written' ? 'updated' : 'conflict';
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
