/**
 * What can be done to a connection, once, for every caller: the client API (functions/client-api)
 * and the operator CLI (tools/connections) both call these (docs/connections.md). Each checks its
 * input, decides from the connection's status, writes through the ConnectionStore port and answers
 * with the connection's view (view.ts) or a refusal: `bad-request` (an input the contract refuses),
 * `not-found` (no such connection), `conflict` (its status does not allow it). A refusal's message
 * is a sentence that says why and never quotes a token or a refused value. A request repeated
 * changes nothing the second time. No AWS import.
 */
import { sendableIdProblem } from '../../item-sync/message.js';
import type { Cursor } from '../../reconciler/ports.js';
import type { Clock } from '../ports.js';
import { clientIdProblem, connectionIdProblem, refreshTokenProblem, type ConnectionListing, type ConnectionStatus } from './connection.js';
import type { MendResult } from '../changes/mend.js';
import type { EraseScheduler } from './erase.js';
import type { Done, Outcome, Refusal, RefusalCode } from './outcome.js';
import type { ConnectionStore } from './ports.js';
import { connectionView, type ConnectionView } from './view.js';

/** Ids one request may send at most (contract: `POST /connections/{connection}/items`). */
export const MAX_IDS_PER_REQUEST = 1000;
/** Connections one page lists at most, and by default. */
export const MAX_PAGE_SIZE = 1000;
export const DEFAULT_PAGE_SIZE = 100;

/** `users`: the sync queue (users' ids, first); `background`: the reconcile queue (a backfill, after users' ids). */
export type Lane = 'users' | 'background';
export const LANES: readonly Lane[] = ['users', 'background'];

/** Sends a connection's ids for the sync, in a lane. */
export interface IdLanes {
  /** Sends every id (duplicates once); throws when some could not be sent (the message says how many were). */
  send(connection: string, ids: readonly string[], lane: Lane): Promise<{ sent: number }>;
}

export interface OperationsPorts {
  store: ConnectionStore;
  clock: Clock;
  /** The reconciler's cursor (each connection's last pass); none: not known here (views then say no last pass). */
  cursor?: () => Promise<Cursor | undefined>;
  /** Where an erase is asked to run (the erase queue); none: the caller runs it itself (the CLI). */
  erasures?: EraseScheduler;
  lanes?: IdLanes;
  /** Mends a connection's changes feed from the items table (changes/mend.ts `mendFeed`); none: this caller cannot. */
  feed?: { mend(connection: string): Promise<MendResult> };
}

export interface OperationsSettings {
  /** Context `freshnessHours` (0: reconciliation off). */
  freshnessHours: number;
  /** The safety wait between a removal and its erase (erase.ts `eraseSettleSeconds`). */
  eraseSettleSeconds: number;
}

export type { Done, Outcome, Refusal, RefusalCode } from './outcome.js';

const refuse = (code: RefusalCode, message: string, rejected?: Refusal['rejected']): Refusal => ({ ok: false, code, message, ...(rejected ? { rejected } : {}) });

/**
 * A connection as a route that serves it or sends for it sees it: none is `not-found`, and so is
 * one whose erase was asked for (its data is going: only its view, which shows the erase, is read;
 * a PUT may still cancel an erase that waits, and an erase asked again changes nothing).
 */
export function servedConnection(connection: string, listing: ConnectionListing | undefined): Refusal | undefined {
  if (!listing) return refuse('not-found', `connection "${connection}" is not known`);
  if (listing.erase) return refuse('not-found', `connection "${connection}" is being erased (GET /connections/${connection} shows how far)`);
  return undefined;
}
const done = <T>(value: T, changed: boolean): Done<T> => ({ ok: true, value, changed });

export class ConnectionOperations {
  constructor(
    private readonly ports: OperationsPorts,
    private readonly settings: OperationsSettings,
  ) {}

  /** The connection's view; `not-found` when there is none. */
  async get(connection: string): Promise<Outcome<ConnectionView>> {
    const bad = this.badId(connection);
    if (bad) return bad;
    const listing = await this.ports.store.view(connection, { consistent: true });
    if (!listing) return this.unknown(connection);
    return done(await this.viewOf(listing), false);
  }

  /** One page of connections (of `status`), and where the next page starts. */
  async list(options: { status?: string; limit?: number; after?: string }): Promise<Outcome<{ connections: ConnectionView[]; after?: string }>> {
    const limit = options.limit ?? DEFAULT_PAGE_SIZE;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE_SIZE) return refuse('bad-request', `limit must be a whole number from 1 to ${MAX_PAGE_SIZE}`);
    if (options.status !== undefined && !(['active', 'paused', 'failing', 'removed'] as string[]).includes(options.status)) {
      return refuse('bad-request', 'status must be one of active, paused, failing, removed');
    }
    if (options.after !== undefined && connectionIdProblem(options.after) !== undefined) return refuse('bad-request', 'the cursor is not one this API gave');
    const page = await this.ports.store.page({ limit, ...(options.status ? { status: options.status as ConnectionStatus } : {}), ...(options.after ? { after: options.after } : {}) });
    const cursor = await this.cursor();
    const now = this.ports.clock.now().getTime();
    const connections = page.connections.map((listing) => connectionView(listing, { cursor, freshnessHours: this.settings.freshnessHours, now }));
    return done({ connections, ...(page.after !== undefined ? { after: page.after } : {}) }, false);
  }

  /**
   * Creates the connection (active), or replaces its credentials (status back to active, refresh
   * health reset). The same credentials put again on an active connection change nothing.
   */
  async put(connection: string, input: { clientId: string; refreshToken: string }): Promise<Outcome<{ view: ConnectionView; result: 'created' | 'replaced' | 'unchanged' }>> {
    const bad = this.badId(connection);
    if (bad) return bad;
    const clientProblem = clientIdProblem(input.clientId);
    if (clientProblem !== undefined) return refuse('bad-request', `clientId: ${clientProblem}`);
    const tokenProblem = refreshTokenProblem(input.refreshToken);
    if (tokenProblem !== undefined) return refuse('bad-request', `refreshToken: ${tokenProblem} (it is not shown)`);
    const current = await this.ports.store.view(connection, { consistent: true });
    if (current?.status === 'active' && current.clientId === input.clientId) {
      // Opening the stored token only to compare it: one KMS Decrypt, then cached.
      const record = await this.ports.store.get(connection, { consistent: true });
      if (record?.status === 'active' && record.clientId === input.clientId && record.refreshToken === input.refreshToken) {
        return done({ view: await this.viewOf(current), result: 'unchanged' }, false);
      }
    }
    const result = await this.ports.store.putCredentials({ connection, clientId: input.clientId, refreshToken: input.refreshToken, at: this.now() });
    if (result === 'erasing') {
      return refuse('conflict', `connection "${connection}" is being erased: put it again once its erase is over (it then answers 404)`);
    }
    const after = await this.ports.store.view(connection, { consistent: true });
    if (!after) return this.unknown(connection);
    return done({ view: await this.viewOf(after), result }, true);
  }

  /** Its messages wait until it is resumed: from active or failing; already paused changes nothing. */
  async pause(connection: string): Promise<Outcome<ConnectionView>> {
    return this.setStatus(connection, 'paused', ['active', 'failing'], (current) => {
      if (current.status === 'paused') return undefined;
      return `connection "${connection}" was removed: it cannot be paused; put it again with a refresh token to use it`;
    });
  }

  /** A paused connection is synced again; already active changes nothing; a failing one needs new credentials. */
  async resume(connection: string): Promise<Outcome<ConnectionView>> {
    return this.setStatus(connection, 'active', ['paused'], (current) => {
      if (current.status === 'active') return undefined;
      if (current.status === 'failing') {
        return (
          `connection "${connection}" is failing, not paused: the provider refused its refresh token (${current.health.lastFailureReason ?? 'no reason recorded'}); ` +
          'resume does not apply: put it again with new credentials'
        );
      }
      return `connection "${connection}" was removed: it cannot be resumed; put it again with a refresh token to use it`;
    });
  }

  /** Its messages are dead-lettered from now on and its tokens deleted; already removed changes nothing; one whose erase was asked for is not found. */
  async remove(connection: string): Promise<Outcome<ConnectionView>> {
    return this.setStatus(connection, 'removed', ['active', 'paused', 'failing'], () => undefined, { refuseErasing: true });
  }

  /**
   * Removes the connection (if it is not yet) and asks for its erase (erase.ts): its rows, objects
   * and row are deleted once the safety wait after the removal has passed. Asked again, it changes
   * nothing (the erase is asked to run again, which is harmless, in case the first request was lost).
   */
  async erase(connection: string): Promise<Outcome<ConnectionView>> {
    const removed = await this.setStatus(connection, 'removed', ['active', 'paused', 'failing'], () => undefined);
    if (!removed.ok) return removed;
    const listing = await this.ports.store.view(connection, { consistent: true });
    if (!listing) return this.unknown(connection);
    const removedAt = Date.parse(listing.updatedAt) || this.ports.clock.now().getTime();
    const startedAt = this.now();
    const notBefore = new Date(removedAt + this.settings.eraseSettleSeconds * 1000).toISOString();
    const asked = listing.erase ? 'requested' : await this.ports.store.requestErase(connection, { startedAt, notBefore });
    if (asked === 'missing') return this.unknown(connection);
    if (asked === 'conflict') return refuse('conflict', `connection "${connection}" was put again while its erase was asked for: its row and new credentials are kept`);
    const current = await this.ports.store.view(connection, { consistent: true });
    if (!current?.erase) return current ? refuse('conflict', `connection "${connection}" was put again while its erase was asked for`) : this.unknown(connection);
    if (current.erase.state !== 'done' && this.ports.erasures) {
      const wait = Math.ceil((Date.parse(current.erase.notBefore) - this.ports.clock.now().getTime()) / 1000);
      await this.ports.erasures.schedule({ connection, startedAt: current.erase.startedAt }, Math.max(0, wait));
    }
    return done(await this.viewOf(current), asked === 'written' || removed.changed);
  }

  /**
   * Sends the connection's ids in a lane, every id checked first: one refused id refuses them all
   * (`rejected` lists each with its position and why) and nothing is sent. Paused and failing
   * connections' ids wait in the queue; a removed connection's are refused.
   */
  async send(connection: string, input: { ids: readonly unknown[]; lane: Lane }): Promise<Outcome<{ sent: number }>> {
    const bad = this.badId(connection);
    if (bad) return bad;
    if (input.ids.length === 0) return refuse('bad-request', 'ids is empty: send at least one id');
    if (input.ids.length > MAX_IDS_PER_REQUEST) return refuse('bad-request', `ids holds ${input.ids.length} ids; the limit is ${MAX_IDS_PER_REQUEST} a request`);
    const rejected: Array<{ index: number; reason: string }> = [];
    input.ids.forEach((id, index) => {
      const reason = typeof id === 'string' ? sendableIdProblem(id) : `the id is ${id === null ? 'null' : Array.isArray(id) ? 'an array' : typeof id}, not a string`;
      if (reason !== undefined) rejected.push({ index, reason });
    });
    if (rejected.length > 0) return refuse('bad-request', `${rejected.length} of the ${input.ids.length} ids cannot be sent; nothing was sent`, rejected);
    const listing = await this.ports.store.view(connection, { consistent: true });
    const unserved = servedConnection(connection, listing);
    if (unserved) return unserved;
    if (listing!.status === 'removed') return refuse('conflict', `connection "${connection}" was removed: its ids would be dead-lettered; put it again to use it`);
    if (!this.ports.lanes) throw new Error('this caller cannot send ids');
    return done(await this.ports.lanes.send(connection, input.ids as string[], input.lane), true);
  }

  /**
   * Appends to the connection's feed the changes it lacks (changes/mend.ts): only while its
   * messages wait (paused or failing), so that the sync writes none of its rows meanwhile; never
   * while it is removed or being erased.
   */
  async mendChanges(connection: string): Promise<Outcome<MendResult>> {
    const bad = this.badId(connection);
    if (bad) return bad;
    const listing = await this.ports.store.view(connection, { consistent: true });
    const unserved = servedConnection(connection, listing);
    if (unserved) return unserved;
    if (listing!.status === 'removed') return refuse('conflict', `connection "${connection}" was removed: its feed is not mended`);
    if (listing!.status === 'active') {
      return refuse('conflict', `connection "${connection}" is active: pause it first, so that the sync writes none of its rows while its feed is mended, then resume it`);
    }
    if (!this.ports.feed) throw new Error('this caller cannot mend a feed');
    const result = await this.ports.feed.mend(connection);
    return done(result, result.appended > 0);
  }

  private async setStatus(
    connection: string,
    to: ConnectionStatus,
    from: readonly ConnectionStatus[],
    otherwise: (current: ConnectionListing) => string | undefined,
    options: { refuseErasing?: boolean } = {},
  ): Promise<Outcome<ConnectionView>> {
    const bad = this.badId(connection);
    if (bad) return bad;
    const result = await this.ports.store.setStatus(connection, to, from, this.now());
    const current = await this.ports.store.view(connection, { consistent: true });
    if (!current) return this.unknown(connection);
    if (result === 'written') return done(await this.viewOf(current), true);
    // Already so: a plain removal of one whose erase was asked for is not found (the erase asked again is not refused).
    if (options.refuseErasing) {
      const unserved = servedConnection(connection, current);
      if (unserved) return unserved;
    }
    if (current.status === to) return done(await this.viewOf(current), false);
    // Refused: one whose erase was asked for (always removed) is not found, as on every route.
    const unserved = servedConnection(connection, current);
    if (unserved) return unserved;
    const why = otherwise(current);
    return why === undefined ? done(await this.viewOf(current), false) : refuse('conflict', why);
  }

  private async viewOf(listing: ConnectionListing): Promise<ConnectionView> {
    return connectionView(listing, { cursor: await this.cursor(), freshnessHours: this.settings.freshnessHours, now: this.ports.clock.now().getTime() });
  }

  private async cursor(): Promise<Cursor | undefined> {
    return this.settings.freshnessHours > 0 && this.ports.cursor ? this.ports.cursor() : undefined;
  }

  private badId(connection: string): Refusal | undefined {
    const problem = connectionIdProblem(connection);
    return problem === undefined ? undefined : refuse('bad-request', problem);
  }

  private unknown(connection: string): Refusal {
    return refuse('not-found', `connection "${connection}" is not known`);
  }

  private now(): string {
    return this.ports.clock.now().toISOString();
  }
}
