/**
 * The simulated provider of the local run and its three accounts, each of which authorized the
 * client application (one client id, as a provider authorizes one application once per account)
 * and holds its own items:
 * - `default`: the seeded tree of `itemCount` items, one file too large for a DynamoDB row;
 * - `acme` and `globex`: smaller trees of their own, from other seeds: the same item ids
 *   (fld-0001, fil-0002, ...) as each other's and default's, with other contents, so that the
 *   table's rows, one per connection and id, show each connection kept apart.
 * The simulator rotates the refresh token at every refresh, and answers 429 beyond its rate limit.
 */
import { DEFAULT_CONNECTION } from '../../functions/shared/connections/connection.js';
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
    prefix: '/api/v2',
    rateLimit: { requestsPerSecond: LOCAL_PROVIDER_LIMIT, burst: LOCAL_PROVIDER_BURST, retryAfterSeconds: 1 },
    accounts: CONNECTIONS.filter((id) => id !== DEFAULT_CONNECTION).map((id, n) => ({
      id,
      items: generateItemTree({ count: small, seed: seed + 1 + n, revisionField }),
    })),
  });
}

/** The items an account holds now. */
export function accountItems(simulator: ProviderSimulator, connection: string): SimulatorItem[] {
  const account = simulator.account(connection);
  return account.itemIds().map((id) => account.getItem(id)!);
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
