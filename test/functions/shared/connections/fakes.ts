/**
 * Fakes for the connections' tests: an in-memory ConnectionStore (tokens kept in clear; each
 * access token's stamp is that of its clear value) with the adapter's conditional semantics (the DynamoDB adapter's own tests hold it to DynamoDB's), a provider whose getToken
 * answers per refresh token and can be held open, a token pace that says what it is told and keeps
 * what it is told back, a log that keeps its lines, and a clock.
 */
import type { ConnectionListing, ConnectionRecord, ConnectionStatus, EraseProgress } from '../../../../functions/shared/connections/connection.js';
import type { ConnectionPage, ConnectionStore, TokenSlot, TokenSlots } from '../../../../functions/shared/connections/ports.js';
import { stampOf } from '../../../../functions/shared/connections/sealing.js';
import type { RequestResult } from '../../../../functions/shared/provider/pace/provider-pace.js';
import { ProviderError } from '../../../../functions/shared/errors.js';
import type { Clock, Credentials, Log, ProviderClient, TokenGrant } from '../../../../functions/shared/ports.js';

export const T0 = Date.parse('2026-11-24T10:00:00.000Z');

export class FakeClock implements Clock {
  constructor(public ms: number = T0) {}
  now(): Date {
    return new Date(this.ms);
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}

export class MemoryConnectionStore implements ConnectionStore {
  readonly rows = new Map<string, ConnectionRecord>();
  readonly calls: string[] = [];
  /** Makes the next calls of an operation throw. */
  readonly failing = new Map<string, Error>();
  /** What an eventually consistent read of a connection answers while set (undefined: no row yet), instead of the row. */
  readonly stale = new Map<string, ConnectionRecord | undefined>();
  readonly consistentReads: string[] = [];

  seed(record: Partial<ConnectionRecord> & { connection: string }): void {
    this.rows.set(record.connection, {
      clientId: 'client-1',
      status: 'active',
      refreshToken: `rt-${record.connection}-secret`,
      credentialsVersion: 1,
      health: { consecutiveFailures: 0 },
      createdAt: new Date(T0).toISOString(),
      updatedAt: new Date(T0).toISOString(),
      ...record,
    });
  }

  row(connection: string): ConnectionRecord | undefined {
    const row = this.rows.get(connection);
    if (!row) return undefined;
    const copy = structuredClone(row);
    delete copy.accessTokenStamp;
    return copy.accessToken === undefined ? copy : { ...copy, accessTokenStamp: stampOf(copy.accessToken) };
  }

  private listing(connection: string): ConnectionListing | undefined {
    const row = this.row(connection);
    if (!row) return undefined;
    const { refreshToken: _refresh, accessToken: _access, ...listing } = row;
    return listing;
  }

  async view(connection: string): Promise<ConnectionListing | undefined> {
    this.enter('view');
    return this.listing(connection);
  }

  async page(options: { status?: ConnectionStatus; limit: number; after?: string }): Promise<ConnectionPage> {
    this.enter('page');
    const all = [...this.rows.keys()].sort().filter((c) => (options.after === undefined || c > options.after) && (options.status === undefined || this.rows.get(c)!.status === options.status));
    const connections = all.slice(0, options.limit).map((c) => this.listing(c)!);
    return { connections, ...(all.length > options.limit ? { after: connections.at(-1)!.connection } : {}) };
  }

  async requestErase(connection: string, erase: { startedAt: string; notBefore: string }): Promise<'written' | 'requested' | 'missing' | 'conflict'> {
    this.enter('requestErase');
    const row = this.rows.get(connection);
    if (!row) return 'missing';
    if (row.status !== 'removed') return 'conflict';
    if (row.erase) return 'requested';
    row.erase = { state: 'waiting', startedAt: erase.startedAt, notBefore: erase.notBefore, rowsDeleted: 0, objectsDeleted: 0 };
    return 'written';
  }

  async updateErase(connection: string, progress: EraseProgress): Promise<boolean> {
    this.enter('updateErase');
    const row = this.rows.get(connection);
    if (!row || row.status !== 'removed' || row.erase?.startedAt !== progress.startedAt) return false;
    row.erase = { ...progress };
    return true;
  }

  async sealClearTokens(): Promise<number> {
    this.enter('sealClearTokens');
    return 0;
  }

  private enter(operation: string): void {
    this.calls.push(operation);
    const error = this.failing.get(operation);
    if (error) throw error;
  }

  async get(connection: string, options: { consistent?: boolean } = {}): Promise<ConnectionRecord | undefined> {
    await Promise.resolve();
    this.enter('get');
    if (options.consistent) this.consistentReads.push(connection);
    else if (this.stale.has(connection)) return structuredClone(this.stale.get(connection));
    return this.row(connection);
  }

  async *list(): AsyncIterable<ConnectionListing> {
    this.enter('list');
    for (const connection of [...this.rows.keys()].sort()) yield this.listing(connection)!;
  }

  async putCredentials(input: { connection: string; clientId: string; refreshToken: string; at: string }): Promise<'created' | 'replaced' | 'erasing'> {
    this.enter('putCredentials');
    const old = this.rows.get(input.connection);
    if (old?.erase?.state === 'running') return 'erasing';
    this.rows.set(input.connection, {
      connection: input.connection,
      clientId: input.clientId,
      status: 'active',
      refreshToken: input.refreshToken,
      credentialsVersion: (old?.credentialsVersion ?? 0) + 1,
      health: { consecutiveFailures: 0 },
      createdAt: old?.createdAt ?? input.at,
      updatedAt: input.at,
      ...(old?.lastUsedAt ? { lastUsedAt: old.lastUsedAt } : {}),
    });
    return old ? 'replaced' : 'created';
  }

  async setStatus(connection: string, to: ConnectionStatus, from: readonly ConnectionStatus[], at: string): Promise<'written' | 'missing' | 'conflict'> {
    this.enter('setStatus');
    const row = this.rows.get(connection);
    if (!row) return 'missing';
    if (!from.includes(row.status)) return 'conflict';
    row.status = to;
    row.updatedAt = at;
    if (to === 'removed') {
      row.refreshToken = '';
      delete row.accessToken;
      row.credentialsVersion += 1;
    }
    return 'written';
  }

  async delete(connection: string): Promise<'deleted' | 'conflict' | 'missing'> {
    this.enter('delete');
    const row = this.rows.get(connection);
    if (!row) return 'missing';
    if (row.status !== 'removed') return 'conflict';
    this.rows.delete(connection);
    return 'deleted';
  }

  async takeRefreshLease(connection: string, lease: { owner: string; until: number; now: number; includeFailing?: boolean }) {
    await Promise.resolve();
    this.enter('takeRefreshLease');
    const row = this.rows.get(connection);
    if (!row) return { kind: 'missing' as const };
    if (!(row.status === 'active' || (lease.includeFailing && row.status === 'failing'))) return { kind: 'not-refreshable' as const, status: row.status };
    if (row.refreshLease && row.refreshLease.until >= lease.now) return { kind: 'held' as const, until: row.refreshLease.until };
    row.refreshLease = { owner: lease.owner, until: lease.until };
    return { kind: 'taken' as const, record: this.row(connection)! };
  }

  async completeRefresh(input: {
    connection: string;
    owner: string;
    credentialsVersion: number;
    accessToken: string;
    refreshedAt: string;
    rotatedRefreshToken?: string;
  }): Promise<{ kind: 'written'; status: ConnectionStatus; accessTokenStamp: string } | { kind: 'conflict' }> {
    await Promise.resolve();
    this.enter('completeRefresh');
    const row = this.rows.get(input.connection);
    if (!row || row.credentialsVersion !== input.credentialsVersion) return { kind: 'conflict' };
    row.accessToken = input.accessToken;
    row.refreshedAt = input.refreshedAt;
    row.health = { ...row.health, lastSuccessAt: input.refreshedAt, consecutiveFailures: 0 };
    if (input.rotatedRefreshToken !== undefined) {
      row.refreshToken = input.rotatedRefreshToken;
      row.credentialsVersion += 1;
    }
    if (row.status === 'failing') row.status = 'active';
    if (row.refreshLease?.owner === input.owner) delete row.refreshLease;
    return { kind: 'written', status: row.status, accessTokenStamp: stampOf(input.accessToken) };
  }

  async failRefresh(input: { connection: string; owner: string; credentialsVersion: number; at: string; reason: string; refused: boolean }): Promise<'written' | 'conflict'> {
    await Promise.resolve();
    this.enter('failRefresh');
    const row = this.rows.get(input.connection);
    if (!row || row.credentialsVersion !== input.credentialsVersion) return 'conflict';
    row.health = { ...row.health, lastFailureAt: input.at, lastFailureReason: input.reason, consecutiveFailures: row.health.consecutiveFailures + 1 };
    if (input.refused && row.status === 'active') row.status = 'failing';
    if (row.refreshLease?.owner === input.owner) delete row.refreshLease;
    return 'written';
  }

  async releaseRefreshLease(connection: string, owner: string): Promise<void> {
    this.enter('releaseRefreshLease');
    const row = this.rows.get(connection);
    if (row?.refreshLease?.owner === owner) delete row.refreshLease;
  }

  async markUsed(connection: string, at: string): Promise<void> {
    this.enter('markUsed');
    const row = this.rows.get(connection);
    if (row && (row.lastUsedAt === undefined || row.lastUsedAt < at)) row.lastUsedAt = at;
  }
}

type Answer = TokenGrant | Error | ((credentials: Credentials) => TokenGrant | Error);

/** getToken answers by refresh token (default: a new access token each call); `hold()` keeps calls open until released. */
export class FakeProvider implements ProviderClient {
  readonly calls: Credentials[] = [];
  readonly answers = new Map<string, Answer>();
  inFlight = 0;
  maxInFlight = 0;
  private issued = 0;
  private gate: Promise<void> | undefined;
  private open: (() => void) | undefined;

  hold(): void {
    this.gate = new Promise((resolve) => (this.open = resolve));
  }

  release(): void {
    this.open?.();
    this.gate = undefined;
  }

  async getToken(credentials: Credentials): Promise<TokenGrant> {
    this.calls.push({ ...credentials });
    this.inFlight += 1;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      if (this.gate) await this.gate;
      else await Promise.resolve();
      let answer = this.answers.get(credentials.refreshToken) ?? { accessToken: `at-issued-secret-${++this.issued}` };
      if (typeof answer === 'function') answer = answer(credentials);
      if (answer instanceof Error) throw answer;
      return answer;
    } finally {
      this.inFlight -= 1;
    }
  }

  async getItem(): Promise<unknown> {
    throw new Error('not used');
  }
}

/**
 * The token endpoint's pace as the refresh core sees it: `go` unless `answers` holds something else
 * for the next slots (taken in order); every request (client id, startBy) and every report kept.
 */
export class FakeTokenSlots implements TokenSlots {
  readonly asked: Array<{ clientId: string; startBy: number | undefined }> = [];
  readonly reports: RequestResult[] = [];
  readonly answers: Array<Exclude<TokenSlot, { kind: 'go' }>> = [];

  async slot(clientId: string, startBy: number | undefined): Promise<TokenSlot> {
    await Promise.resolve();
    this.asked.push({ clientId, startBy });
    const answer = this.answers.shift();
    if (answer) return answer;
    return { kind: 'go', report: async (result) => void this.reports.push(result) };
  }
}

/** A getToken refusal as HttpProviderClient throws it. */
export function providerError(kind: ProviderError['kind'], status: number, providerMessage?: string): ProviderError {
  return new ProviderError(`the provider answered ${status}`, { kind, operation: 'getToken', status, ...(providerMessage ? { providerCode: 1001, providerMessage } : {}) });
}

export class MemoryLog implements Log {
  readonly lines: Array<{ level: string; message: string; attributes: Record<string, unknown> }> = [];
  private add(level: string, message: string, attributes: Record<string, unknown>[]): void {
    this.lines.push({ level, message, attributes: Object.assign({}, ...attributes) });
  }
  debug(message: string, ...attributes: Record<string, unknown>[]): void {
    this.add('debug', message, attributes);
  }
  info(message: string, ...attributes: Record<string, unknown>[]): void {
    this.add('info', message, attributes);
  }
  warn(message: string, ...attributes: Record<string, unknown>[]): void {
    this.add('warn', message, attributes);
  }
  error(message: string, ...attributes: Record<string, unknown>[]): void {
    this.add('error', message, attributes);
  }
  text(): string {
    return JSON.stringify(this.lines);
  }
}

/** Every token a test handled must appear nowhere in `text`. */
export function expectNoToken(text: string, tokens: Iterable<string>): void {
  for (const token of tokens) {
    if (token && text.includes(token)) throw new Error(`a token appears in the output (${token.slice(0, 3)}…)`);
  }
}
