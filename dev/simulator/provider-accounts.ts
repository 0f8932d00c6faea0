/**
 * The provider's accounts (provider-model.ts answers the requests): every account that authorized
 * the client application has its own grants, its own items and its own counters.
 *
 * A grant is one authorization: a refresh token (replaced when the provider rotates it) and the
 * access tokens issued with it, which reach only that account's items. Revoking an account ends its
 * grants; re-authorizing it starts a new one. The registry maps every token it ever issued to its
 * grant, so a request is checked and attributed to its account in O(1) lookups, whatever the number
 * of accounts, and a refused token is still counted against the account it belonged to.
 */
import { isRecord, nextStringRevision } from './provider-answers.js';
import { FolderLists, type ChildrenSettings, type Placement } from './provider-children.js';
import type { AccountCounters, AccountOptions, ReauthorizeOptions, SimulatorItem, StoredItem } from './provider-types.js';

/** The account made of the simulator's own `clientId`, `refreshToken` and `items`. */
export const DEFAULT_ACCOUNT = 'default';

const ACCOUNT_ID = /^[A-Za-z0-9._-]{1,64}$/;

/** One authorization of the client application by an account. */
export interface Grant {
  readonly account: ProviderAccount;
  revoked: boolean;
  /** The refresh token that works now; the ones it replaced stay in the registry, rotated away. */
  refreshToken: string;
  /** The access tokens issued since the last `revokeAccessTokens`. */
  access: AccessGeneration;
}

/** A generation of a grant's access tokens: one flag ends them all at once. */
export interface AccessGeneration {
  readonly grant: Grant;
  valid: boolean;
}

/** What an account takes from the model's own options unless it says otherwise. */
export interface AccountDefaults {
  clientId: string;
  rotate: boolean;
  revokeOnReplay: boolean;
  revisionPath: readonly string[];
  /** Folders embed their children (undefined: they do not). */
  children: ChildrenSettings | undefined;
  now: () => number;
}

/** The rate limit's bucket of one account (scope 'account'). */
export interface Bucket {
  tokens: number;
  at: number;
}

/** Every account and every token issued, by value. */
export class AccountRegistry {
  readonly accounts = new Map<string, ProviderAccount>();
  private readonly refreshTokens = new Map<string, Grant>();
  private readonly accessTokens = new Map<string, AccessGeneration>();
  /** Client id -> how many accounts use it. */
  private readonly clientIds = new Map<string, number>();
  private tokenCounter = 0;

  constructor(
    private readonly defaults: AccountDefaults,
    private readonly randomHex: (chars: number) => string,
  ) {}

  add(options: AccountOptions, initialRefreshToken?: () => string): ProviderAccount {
    const { id } = options;
    if (typeof id !== 'string' || !ACCOUNT_ID.test(id)) throw new RangeError(`invalid account id ${JSON.stringify(id)}`);
    if (this.accounts.has(id)) throw new Error(`account ${JSON.stringify(id)} exists already`);
    const clientId = options.clientId ?? this.defaults.clientId;
    const account = new ProviderAccount(this, id, clientId, {
      ...this.defaults,
      rotate: options.rotateRefreshToken ?? this.defaults.rotate,
      revokeOnReplay: options.revokeOnReplay ?? this.defaults.revokeOnReplay,
    });
    const refreshToken = options.refreshToken ?? initialRefreshToken?.() ?? this.newRefreshToken();
    this.checkUnused(refreshToken);
    account.loadItems(options.items ?? []);
    this.accounts.set(id, account);
    this.clientIds.set(clientId, (this.clientIds.get(clientId) ?? 0) + 1);
    account.startGrant(refreshToken);
    return account;
  }

  get(id: string): ProviderAccount {
    const account = this.accounts.get(id);
    if (!account) throw new Error(`no account ${JSON.stringify(id)}`);
    return account;
  }

  knowsClient(clientId: string): boolean {
    return this.clientIds.has(clientId);
  }

  /** The grant a refresh token belongs to (now or before a rotation), if it was ever issued. */
  refreshGrant(token: string): Grant | undefined {
    return this.refreshTokens.get(token);
  }

  /** The generation an access token belongs to, if it was ever issued. */
  accessGeneration(token: string): AccessGeneration | undefined {
    return this.accessTokens.get(token);
  }

  /** Indexes a grant's new refresh token. */
  indexRefreshToken(token: string, grant: Grant): void {
    this.checkUnused(token);
    this.refreshTokens.set(token, grant);
  }

  newRefreshToken(): string {
    let token: string;
    do token = `rt-${this.randomHex(24)}`;
    while (this.refreshTokens.has(token));
    return token;
  }

  issueAccessToken(grant: Grant): string {
    this.tokenCounter += 1;
    const token = `at-${this.randomHex(16)}-${this.tokenCounter.toString(36)}`;
    this.accessTokens.set(token, grant.access);
    return token;
  }

  /** Throws unless `token` can be a new refresh token. */
  checkUnused(token: string): void {
    if (typeof token !== 'string' || token === '' || /\s/.test(token)) throw new RangeError('a refresh token is a non-empty string without spaces');
    if (this.refreshTokens.has(token)) throw new Error('this refresh token was issued already');
  }
}

function noCounts(): AccountCounters {
  return {
    tokenRequests: 0,
    tokensIssued: 0,
    itemRequests: 0,
    itemsServed: 0,
    notFound: 0,
    unauthorized: 0,
    rateLimited: 0,
    replays: 0,
    lastRequestAt: undefined,
  };
}

/** One account: its grants, items and counters. Made by the model (`addAccount`), never directly. */
export class ProviderAccount {
  /** Its rate-limit bucket (scope 'account'), kept by the model. */
  bucket: Bucket | undefined;
  /** The model's clock (epoch ms) when its last grant ended (revoked, or a replay); undefined while authorized. */
  revokedAt: number | undefined;

  private readonly items = new Map<string, StoredItem>();
  /** The children index, when folders embed their children. */
  private readonly lists: FolderLists | undefined;
  /** Live grants, oldest first (one, unless re-authorized with keepOtherGrants). */
  private grants: Grant[] = [];
  private latest: Grant | undefined;
  private tally: AccountCounters = noCounts();

  /** @internal */
  constructor(
    private readonly registry: AccountRegistry,
    readonly id: string,
    readonly clientId: string,
    private readonly settings: AccountDefaults,
  ) {
    this.lists = settings.children && new FolderLists(settings.children, settings.revisionPath, (itemId) => this.items.has(itemId));
  }

  // ---- authorization ----------------------------------------------------------------------------

  /** Its newest grant's current refresh token (still the revoked one's after a revocation). */
  get refreshToken(): string {
    return this.latest!.refreshToken;
  }

  /** The current refresh token of every live grant. */
  get refreshTokens(): string[] {
    return this.grants.map((grant) => grant.refreshToken);
  }

  /** True while a grant lives (getToken can answer 200). */
  get authorized(): boolean {
    return this.grants.length > 0;
  }

  get rotates(): boolean {
    return this.settings.rotate;
  }

  get revokesOnReplay(): boolean {
    return this.settings.revokeOnReplay;
  }

  /** @internal A new grant with this refresh token. */
  startGrant(refreshToken: string): Grant {
    // The generation and its grant point to each other.
    const access = { valid: true } as { grant: Grant; valid: boolean };
    const grant: Grant = { account: this, revoked: false, refreshToken, access };
    access.grant = grant;
    this.registry.indexRefreshToken(refreshToken, grant);
    this.grants.push(grant);
    this.latest = grant;
    this.revokedAt = undefined;
    return grant;
  }

  /** Ends every grant: its refresh and access tokens answer 401 until `reauthorize`. */
  revoke(): void {
    for (const grant of [...this.grants]) this.endGrant(grant);
  }

  /** A new grant (the account authorizes the application again); its refresh token, for the system's operator. */
  reauthorize(options: ReauthorizeOptions = {}): string {
    const refreshToken = options.refreshToken ?? this.registry.newRefreshToken();
    // Checked before anything ends: a refused token leaves the account as it was.
    this.registry.checkUnused(refreshToken);
    if (!options.keepOtherGrants) this.revoke();
    return this.startGrant(refreshToken).refreshToken;
  }

  /** An access token as getToken would give, without a request: bound to the grant of `refreshToken`
   *  (one of this account's live ones), by default the newest live grant. */
  issueAccessToken(refreshToken?: string): string {
    const grant = refreshToken === undefined ? this.grants.at(-1) : this.registry.refreshGrant(refreshToken);
    if (!grant || grant.account !== this || grant.revoked) {
      throw new Error(`account ${JSON.stringify(this.id)} has no live grant${refreshToken === undefined ? '' : ' for this refresh token'}`);
    }
    return this.registry.issueAccessToken(grant);
  }

  /** Every access token issued so far stops working; the refresh tokens still do. */
  revokeAccessTokens(): void {
    for (const grant of this.grants) {
      grant.access.valid = false;
      grant.access = { grant, valid: true };
    }
  }

  /** @internal A grant's current refresh token is replaced (rotation); the new one. */
  rotate(grant: Grant): string {
    const token = this.registry.newRefreshToken();
    this.registry.indexRefreshToken(token, grant);
    grant.refreshToken = token;
    return token;
  }

  /** @internal A rotated-away refresh token of `grant` came back: ends the grant when so configured. */
  replayed(grant: Grant): void {
    this.tally.replays += 1;
    if (this.settings.revokeOnReplay && !grant.revoked) this.endGrant(grant);
  }

  private endGrant(grant: Grant): void {
    grant.revoked = true;
    grant.access.valid = false;
    this.grants = this.grants.filter((g) => g !== grant);
    if (this.grants.length === 0) this.revokedAt = this.settings.now();
  }

  // ---- counters ---------------------------------------------------------------------------------

  /** A copy of its counters. */
  counters(): AccountCounters {
    return { ...this.tally };
  }

  resetCounters(): void {
    this.tally = noCounts();
  }

  /** @internal */
  countRequest(endpoint: 'token' | 'items', at: number): void {
    if (endpoint === 'token') this.tally.tokenRequests += 1;
    else this.tally.itemRequests += 1;
    this.tally.lastRequestAt = at;
  }

  /** @internal */
  countAnswer(endpoint: 'token' | 'items', status: number): void {
    const t = this.tally;
    if (status === 401) t.unauthorized += 1;
    else if (endpoint === 'token') {
      if (status === 200) t.tokensIssued += 1;
    } else if (status === 200) t.itemsServed += 1;
    else if (status === 404) t.notFound += 1;
    else if (status === 429) t.rateLimited += 1;
  }

  // ---- items ------------------------------------------------------------------------------------

  /** Stores a deep copy under `storeAs` (default item.id); a different key lets a test serve an item
   *  whose body names another id. With children embedding, the folders whose list this changes get
   *  a new revision (see `listsChanged`); the item itself keeps the revision it is given. */
  setItem(item: SimulatorItem, storeAs: string = item.id): void {
    if (typeof storeAs !== 'string') throw new TypeError('item id must be a string');
    const lists = this.lists;
    if (!lists) {
      this.items.set(storeAs, { item: structuredClone(item) });
      return;
    }
    FolderLists.check(storeAs, item);
    const before = this.items.get(storeAs);
    const was = before ? lists.placement(storeAs, before.item) : undefined;
    this.store(storeAs, structuredClone(item));
    this.listsChanged(storeAs, was, lists.placement(storeAs, this.items.get(storeAs)!.item));
  }

  /** @internal The account's first items, stored as given: no folder's revision changes. */
  loadItems(items: readonly SimulatorItem[]): void {
    for (const item of items) {
      if (typeof item.id !== 'string') throw new TypeError('item id must be a string');
      if (this.lists) FolderLists.check(item.id, item);
      this.store(item.id, structuredClone(item));
    }
  }

  private store(id: string, item: SimulatorItem): void {
    const before = this.items.get(id);
    if (before) this.lists?.remove(id, before.item);
    this.items.set(id, { item });
    this.lists?.add(id, item);
  }

  getItem(id: string): SimulatorItem | undefined {
    const stored = this.items.get(id);
    return stored ? structuredClone(stored.item) : undefined;
  }

  /** The item as the items endpoint answers it (with its children, when folders embed them), a copy. */
  servedItem(id: string): Record<string, unknown> | undefined {
    const body = this.body(id);
    return body ? (JSON.parse(body.toString('utf8')) as Record<string, unknown>) : undefined;
  }

  /** @internal The serialised answer for an id, cached until the item or (with children) its list changes. */
  body(id: string): Buffer | undefined {
    const stored = this.items.get(id);
    if (!stored) return undefined;
    if (!stored.json) {
      const lists = this.lists;
      const served = lists ? lists.served(id, stored.item, (childId) => this.items.get(childId)!.item) : stored.item;
      stored.json = ownBuffer(JSON.stringify(served));
    }
    return stored.json;
  }

  deleteItem(id: string): void {
    const before = this.items.get(id);
    if (!before) return;
    const was = this.lists?.placement(id, before.item);
    this.lists?.remove(id, before.item);
    this.items.delete(id);
    if (was) this.listsChanged(id, was, undefined);
  }

  itemIds(): string[] {
    return [...this.items.keys()];
  }

  get itemCount(): number {
    return this.items.size;
  }

  /** number -> +1; string -> trailing digits incremented (width kept) or '-1' appended; missing -> 1.
   *  With children embedding, the folders listing it get a new revision too. */
  bumpRevision(id: string): void {
    const stored = this.items.get(id);
    if (!stored) throw new Error(`no item ${JSON.stringify(id)}`);
    const was = this.lists?.placement(id, stored.item);
    const problem = bumpAt(stored.item, this.settings.revisionPath);
    if (problem !== undefined) throw new TypeError(`cannot bump revision of ${id}: ${problem}`);
    stored.json = undefined;
    if (was) this.listsChanged(id, was, this.lists!.placement(id, stored.item));
  }

  /**
   * The item stored under `origin` was listed as `was` and is now listed as `now` (undefined: not
   * held). Every folder whose list differs (an entry added, removed, or with another type, name or
   * etag) gets a new revision (+1, as bumpRevision; a folder whose revision is neither a number nor
   * a string keeps it), which changes its own entry in the lists holding it, and so on up to the
   * root: each folder once per change (a cycle ends there), `origin` never.
   */
  private listsChanged(origin: string, was: Placement | undefined, now: Placement | undefined): void {
    const seen = new Set([origin]);
    const due: string[] = [];
    const compare = (before: Placement | undefined, after: Placement | undefined): void => {
      for (const folder of new Set([...(before?.containers ?? []), ...(after?.containers ?? [])])) {
        if (seen.has(folder)) continue;
        const old = before?.containers.includes(folder) ? before.entry : undefined;
        const current = after?.containers.includes(folder) ? after.entry : undefined;
        if (old === current) continue;
        seen.add(folder);
        due.push(folder);
      }
    };
    compare(was, now);
    for (let next = 0; next < due.length; next += 1) {
      const stored = this.items.get(due[next]!);
      if (!stored || stored.item.type !== 'folder') continue;
      stored.json = undefined;
      const before = this.lists!.placement(due[next]!, stored.item);
      if (bumpAt(stored.item, this.settings.revisionPath) !== undefined) continue;
      compare(before, this.lists!.placement(due[next]!, stored.item));
    }
  }
}

/** Bumps the revision at `path` (see bumpRevision); what prevents it, if anything (nothing changed then). */
function bumpAt(item: Record<string, unknown>, path: readonly string[]): string | undefined {
  let holder = item;
  for (const key of path.slice(0, -1)) {
    const next = holder[key];
    if (next === undefined) {
      holder[key] = {};
    } else if (!isRecord(next)) {
      return `"${key}" is not an object`;
    }
    holder = holder[key] as Record<string, unknown>;
  }
  const last = path[path.length - 1]!;
  const current = holder[last];
  if (current === undefined) holder[last] = 1;
  else if (typeof current === 'number') holder[last] = current + 1;
  else if (typeof current === 'string') holder[last] = nextStringRevision(current);
  else return `value is a ${typeof current}`;
  return undefined;
}

/**
 * `text` in a buffer of its own. Buffer.from takes a small one from Node.js's shared 8 KiB pool,
 * and a cached body kept the whole block alive: about 5.6 KiB for a body of 450 bytes, some 700 MiB
 * for the changes simulation's 100,000 items.
 */
function ownBuffer(text: string): Buffer {
  const buffer = Buffer.allocUnsafeSlow(Buffer.byteLength(text, 'utf8'));
  buffer.write(text, 'utf8');
  return buffer;
}
