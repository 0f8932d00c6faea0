/**
 * The simulated provider of the local run and its three accounts, each of which authorized the
 * client application (one client id, as a provider authorizes one application once per account)
 * and holds its own items:
 * - `default`: the seeded tree of `itemCount` items, one file too large for a DynamoDB row;
 * - `acme` and `globex`: smaller trees of their own, from other seeds: the same item ids
 *   (fld-0001, fil-0002, ...) as each other's and default's, with other contents, so that the
 *   table's rows, one per connection and id, show each connection kept apart.
 * The simulator rotates the refresh token at every refresh, and answers 429 beyond its rate limit.
 * Its folders embed their children, as Box's folder object does (`item_collection`), and the local
 * deployment turns discovery on with that shape (LOCAL_DISCOVERY), so a root brings its whole tree.
 */
import { DEFAULT_CONNECTION } from '../../functions/shared/connections/connection.js';
import type { ContextOverrides } from '../system/config.js';
import { generateItemTree } from '../simulator/item-tree.js';
import { ProviderSimulator, type SimulatorItem } from '../simulator/provider-simulator.js';
import { LARGE_FIELD, LARGE_TEXT, largeFileOf } from './story-changes.js';

/** The connections of the local run, one per account, in the order they are added. */
export const CONNECTIONS = [DEFAULT_CONNECTION, 'acme', 'globex'] as const;
/** The account that withdraws its authorization mid-run, and authorizes the application again. */
export const REVOKED = 'globex';

/**
 * The simulator's rate limit: a token bucket of this many requests a second (429 with Retry-After: 1
 * beyond it), for every account together. The run is not told: the shared pace has to find it, as
 * it would a real provider's.
 */
export const LOCAL_PROVIDER_LIMIT = 40;
/** The bucket's size: how many requests beyond the rate a quiet spell lets through at once. */
export const LOCAL_PROVIDER_BURST = 10;

/**
 * Most entries a folder's list holds (the simulator's option `children: { cap }`): Box's own default
 * page of a folder's `item_collection`. No folder of the demo trees has as many children (the
 * largest of 100,000 items has a few dozen), so no list is truncated and a root brings every item.
 */
export const LOCAL_CHILDREN_CAP = 100;

/**
 * The context keys of discovery for the simulator's folders (docs/discovery.md): the local
 * deployment is made with them, as `-c childrenPath=item_collection.entries ...` would make it.
 */
export const LOCAL_DISCOVERY = {
  childrenPath: 'item_collection.entries',
  childIdPath: 'id',
  childRevisionPath: 'etag',
  childrenTotalPath: 'item_collection.total_count',
} as const satisfies ContextOverrides;

export interface AccountSettings {
  itemCount: number;
  seed: number;
  revisionField: string;
}

/** Items of acme and globex each: a fifth of default's, 8 to 100. */
export function smallAccountSize(itemCount: number): number {
  return Math.min(100, Math.max(8, Math.round(itemCount / 5)));
}

/** The simulator with its three accounts. */
export async function startSimulator({ itemCount, seed, revisionField }: AccountSettings): Promise<ProviderSimulator> {
  const items = generateItemTree({ count: itemCount, seed, revisionField });
  const large = items.find((item) => item.id === largeFileOf(items));
  if (large) large[LARGE_FIELD] = LARGE_TEXT;
  const small = smallAccountSize(itemCount);
  return ProviderSimulator.start({
    items,
    seed,
    revisionField,
    rotateRefreshToken: true,
    children: { cap: LOCAL_CHILDREN_CAP },
    prefix: '/api/v2',
    rateLimit: { requestsPerSecond: LOCAL_PROVIDER_LIMIT, burst: LOCAL_PROVIDER_BURST, retryAfterSeconds: 1 },
    accounts: CONNECTIONS.filter((id) => id !== DEFAULT_CONNECTION).map((id, n) => ({
      id,
      items: generateItemTree({ count: small, seed: seed + 1 + n, revisionField }),
    })),
  });
}

/** The items an account holds now, as the provider serves them (a folder with its list of children). */
export function accountItems(simulator: ProviderSimulator, connection: string): SimulatorItem[] {
  const account = simulator.account(connection);
  return account.itemIds().map((id) => account.servedItem(id) as SimulatorItem);
}

/** The root of an account's tree: its item without a parent (the first one, as generated). */
export function rootOf(simulator: ProviderSimulator, connection: string): string {
  const account = simulator.account(connection);
  const ids = account.itemIds();
  return ids.find((id) => typeof account.getItem(id)?.parentId !== 'string') ?? ids[0]!;
}

/** How many levels below the root an item is (0: the root), by its parents. */
export function depthOf(simulator: ProviderSimulator, connection: string, id: string): number {
  const account = simulator.account(connection);
  let depth = 0;
  const seen = new Set<string>();
  for (let parent = account.getItem(id)?.parentId; typeof parent === 'string' && !seen.has(parent); parent = account.getItem(parent)?.parentId) {
    seen.add(parent);
    depth += 1;
  }
  return depth;
}

/** The ids acme and globex both hold with different contents. */
export function idsInCommon(simulator: ProviderSimulator, a: string, b: string): string[] {
  const other = simulator.account(b);
  return simulator
    .account(a)
    .itemIds()
    .filter((id) => {
      const theirs = other.getItem(id);
      return theirs !== undefined && JSON.stringify(theirs) !== JSON.stringify(simulator.account(a).getItem(id));
    });
}
