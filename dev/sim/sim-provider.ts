/**
 * The provider model a simulation runs against, and its accounts as the system's connections: the
 * account `default` with the generated item tree (the connection `default`; with `tree`, a tree of
 * that depth for crawls, generateDeepTree), and with `accounts`,
 * that many more accounts, each with its own tree (its own seed: two accounts hold the same ids with
 * other contents), all with the one client id. `addConnections` adds each to the connections table
 * through the store, as the operator's `add` does (client id and refresh token; no access token).
 */
import { DEFAULT_CONNECTION } from '../../functions/shared/connections/connection.js';
import type { ConnectionStore } from '../../functions/shared/connections/ports.js';
import { generateDeepTree, generateItemTree } from '../simulator/item-tree.js';
import { ProviderModel, type RateLimit } from '../simulator/provider-model.js';
import type { VirtualClock } from './virtual-clock.js';

/** The account `default`'s items as a tree of this depth (generateDeepTree), for crawls that follow folders' lists. */
export interface DeepTreeShape {
  depth: number;
  /** A folder near the bottom also lists an ancestor of its own: a cycle. */
  cycle?: boolean;
}

/** More accounts at the provider, each a connection of the system. */
export interface AccountsOption {
  count: number;
  /** Items each account holds. */
  idsEach: number;
}

export interface ProviderOptions {
  /** Items of the account `default` (none when 0: then `default` is no connection). */
  ids: number;
  accounts?: AccountsOption;
  /** The account `default`'s items as a deep tree (default: generateItemTree's). */
  tree?: DeepTreeShape;
  /** Folders embed their children (the model's option `children`): every account's. */
  children?: { cap: number };
  seed: number;
  rateLimit?: RateLimit;
  providerLatencyMs: number;
  /** Keep only this many recorded requests (long runs); default all. */
  recordedRequests?: number;
}

/** The id of the `k`-th account (from 0), which is its connection's id: `conn-0001`, … */
export function accountId(k: number, count: number): string {
  return `conn-${String(k + 1).padStart(Math.max(4, String(count).length), '0')}`;
}

/** The provider model with its accounts; `ids` the account `default`'s in its tree's order; `connectionIds` the connections to add. */
export function startProvider(options: ProviderOptions, clock: VirtualClock): { provider: ProviderModel; ids: string[]; connectionIds: string[] } {
  const { tree } = options;
  const items =
    options.ids <= 0
      ? []
      : tree
        ? generateDeepTree({ count: options.ids, depth: tree.depth, seed: options.seed, ...(tree.cycle ? { cycle: true } : {}) })
        : generateItemTree({ count: options.ids, seed: options.seed });
  const ids = items.map((item) => item.id);
  const provider = new ProviderModel({
    items,
    latencyMs: options.providerLatencyMs,
    now: () => clock.ms(),
    seed: options.seed,
    ...(options.rateLimit ? { rateLimit: options.rateLimit } : {}),
    ...(options.children ? { children: options.children } : {}),
  });
  items.length = 0; // the model holds its own copies
  const connectionIds = ids.length > 0 ? [DEFAULT_CONNECTION] : [];
  const accounts = options.accounts;
  for (let k = 0; accounts && k < accounts.count; k += 1) {
    const id = accountId(k, accounts.count);
    provider.addAccount({ id, items: generateItemTree({ count: accounts.idsEach, seed: (options.seed * 7_919 + k + 1) >>> 0 }) });
    connectionIds.push(id);
  }
  if (options.recordedRequests !== undefined) provider.limitRecordedRequests(options.recordedRequests);
  return { provider, ids, connectionIds };
}

/** Adds every account of `connectionIds` as its connection (its client id and current refresh token), 16 writes at a time. */
export async function addConnections(store: ConnectionStore, provider: ProviderModel, connectionIds: readonly string[], at: string): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < connectionIds.length) {
      const connection = connectionIds[next++]!;
      const account = provider.account(connection);
      await store.putCredentials({ connection, clientId: account.clientId, refreshToken: account.refreshToken, at });
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
}
