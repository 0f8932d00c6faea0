/**
 * Discovery in virtual time (system.ts with `discovery`, `tree`, `children`, `accounts` and
 * `reconcile`): one connection's whole tree mirrored from its root, beside quiet users.
 *
 * The account `default` holds a deep tree (generateDeepTree: `items` items, `depth` levels, with a
 * cycle when asked) whose folders embed their children (the simulator's `children`, Box's
 * `item_collection`); the system is built with discovery's four context keys (DISCOVERY_CONTEXT)
 * through the builder the stacks' configuration goes through, the real item-sync handlers on both
 * queues (their deployed containers), the real reconciler on its deployed schedule and
 * freshnessHours, the real pace (L told to the system), provider client and DynamoDB adapters on
 * DynamoDB Local, and the SQS model. Quiet accounts each send one id every `sendEverySeconds` to the sync
 * queue, as users do (quiet-accounts.ts; their folders list their children too,
 * so their own small trees are crawled in the warm-up). With `ownUsers`, the crawled account's own
 * users send an id every `everyMs` to the sync queue throughout, each an item of the account that no
 * folder lists (the crawl never reaches it): their send-to-done times idle and during their own
 * account's crawl, and those put behind it (done in the background lane). After the warm-up (each quiet account's
 * first id) and `idleMinutes` of that alone (idle), the root's id is sent once, between two quiet
 * ids, as `npm run enqueue` sends it (the users' lane, the sync queue); the crawl follows in the
 * background lane.
 *
 * The crawl is over once every item has its row and the reconcile queue is empty; the run goes on
 * `settleMinutes` more, to see that the provider is asked nothing more for the account (a cycle must
 * end by itself), or stops `maxCrawlMinutes` after the root was sent.
 *
 * Measured: rows (every item's, each with the provider's revision), provider item requests per
 * item, the time from the root's send to the last row against N ÷ the sweep's rate (L × (1 −
 * usersReservedPercent/100), from the system's configuration), the discovery counters, the crawl's
 * AWS requests and cost per 100,000 items (reconcile-cost.ts's prices, on the sweep's meters over
 * the crawl), the quiet accounts' send-to-done p99 idle and during the crawl, 429s, dead letters.
 * And what a crawl must never do (docs/discovery.md): send an id to check once the table holds its
 * row (its PutItem answered before the send), or while its sync is in flight (its first request
 * at the provider made, its row not written yet); fetch an item twice in one delivery (a lost write
 * race that fetches again, the sync's own log line); with the items fetched more than once.
 */
import { LOCAL_PAGE_ROWS } from '../fakes/dynamodb-local.js';
import { QueryCommand, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { revisionText } from '../../functions/item-sync/item.js';
import { parseMessageBody, type SyncMessage } from '../../functions/item-sync/message.js';
import { DEFAULT_CONNECTION } from '../../functions/shared/connections/connection.js';
import { getPath } from '../../functions/shared/json.js';
import { setAtPath } from '../simulator/item-tree.js';
import { SYNC_METRIC_NAMES } from '../../functions/shared/metric-names.js';
import { enqueueMessages } from '../../tools/enqueue/send.js';
import { systemConfig } from '../system/config.js';
import { snapshot, usageBetween, type Usage } from './connections-cost.js';
import { crawlFigures } from './discovery-report.js';
import type { DiscoveryRun, DiscoveryScale } from './discovery-run.js';

export type { DiscoveryRun, DiscoveryScale } from './discovery-run.js';
import { quietIdDone, quietLeft, quietTimes, sendOneByOne, sendQuietIds, type QuietWatch } from './quiet-accounts.js';
import type { SimulatorItem } from '../simulator/provider-types.js';
import { timed, type ScenarioResult } from './scenario.js';
import { atLimit, startSystem, type DiscoveryContext, type EventSourceName, type SimSystem } from './system.js';

const SECOND = 1_000;
const MINUTE = 60_000;

/** Discovery's context keys for folders shaped as Box's (and the simulator's `children`). */
export const DISCOVERY_CONTEXT: DiscoveryContext = {
  childrenPath: 'item_collection.entries',
  childIdPath: 'id',
  childRevisionPath: 'etag',
  childrenTotalPath: 'item_collection.total_count',
};

/** 100,000 items 12 deep, lists of up to 1,000, L = 200/s told, 100 quiet accounts (one id a minute each), the account's own users an id every 200 ms. */
export const DISCOVERY_FULL: DiscoveryScale = {
  items: 100_000,
  depth: 12,
  cycle: false,
  childrenCap: 1_000,
  limit: 200,
  quietAccounts: 100,
  sendEverySeconds: 60,
  idleMinutes: 5,
  maxCrawlMinutes: 60,
  settleMinutes: 2,
  ownUsers: { everyMs: 200 },
  providerLatencyMs: 50,
  meterLogs: true,
  seed: 7,
};

/**
 * What `npm test` runs: 2,000 items 6 deep with a cycle, 5 quiet accounts sending an id every 3 s
 * each (so that the short crawl meets 20 of them): seconds of real time.
 */
export const DISCOVERY_SHORT: DiscoveryScale = {
  ...DISCOVERY_FULL,
  items: 2_000,
  depth: 6,
  cycle: true,
  quietAccounts: 5,
  sendEverySeconds: 3,
  idleMinutes: 0.5,
  maxCrawlMinutes: 1,
  settleMinutes: 0.25,
  meterLogs: false,
  seed: 5,
};

/** What the sync and the provider did about the crawled account, and the quiet accounts' ids. */
interface CrawlWatch extends QuietWatch {
  rootAt: number;
  /** Items of the account `default` done at least once since the root was sent (its row written or found). */
  rows: Set<string>;
  lastRowAt: number;
  /** `record done` of an item of `default` already done. */
  doneAgain: number;
  /** The sync's discovery counters and ItemsFetched, ItemsCreated, summed since the root was sent, both queues. */
  metrics: Record<string, number>;
  /** Ids the reconciler sent since the root was sent. */
  reconcilerSent: number;
  rateLimited: number;
  /** Ids of `default` the sync sent to the reconcile queue since the root was sent (discovery's children), with when SQS answered. */
  childSends: Array<{ id: string; at: number }>;
  /** When the first PutItem of each row of `default` was answered (the row held from then on). */
  writtenAt: Map<string, number>;
  /** `write race lost; reading the row and fetching again` of an item of `default`: a second request in one delivery. */
  fetchedAgain: number;
  /** The account's own users' ids (no folder lists them): sent and done as the quiet ones', and those done in the background lane, with when they were sent. */
  own: QuietWatch & { ids: Set<string>; inBackground: number[] };
}

/** One run's measures. */
/** One crawl; `progress` gets a line every virtual minute of it. */
export async function discoveryRun(scale: DiscoveryScale, progress: (line: string) => void = () => undefined): Promise<DiscoveryRun> {
  const realStart = Date.now();
  const warmupMs = scale.sendEverySeconds * SECOND;
  const runMs = warmupMs + (scale.idleMinutes + scale.maxCrawlMinutes + scale.settleMinutes) * MINUTE;
  const sendsEach = Math.ceil(runMs / (scale.sendEverySeconds * SECOND)) + 1;
  const watch: CrawlWatch = {
    pending: new Map(),
    quietDone: [],
    rootAt: Number.POSITIVE_INFINITY,
    rows: new Set(),
    lastRowAt: 0,
    doneAgain: 0,
    metrics: {},
    reconcilerSent: 0,
    rateLimited: 0,
    childSends: [],
    writtenAt: new Map(),
    fetchedAgain: 0,
    own: { pending: new Map(), quietDone: [], ids: new Set(), inBackground: [] },
  };
  const counted = new Set<string>([SYNC_METRIC_NAMES.childrenDiscovered, SYNC_METRIC_NAMES.childrenSkipped, SYNC_METRIC_NAMES.listingsTruncated, SYNC_METRIC_NAMES.fetched, SYNC_METRIC_NAMES.created]);
  // Known once the system is up (the hooks below run only then).
  const live: { ms: () => number; reconcileQueueUrl?: string } = { ms: () => 0 };
  const system = await startSystem({
    ids: scale.items,
    tree: { depth: scale.depth, cycle: scale.cycle },
    children: { cap: scale.childrenCap },
    discovery: DISCOVERY_CONTEXT,
    accounts: { count: scale.quietAccounts, idsEach: sendsEach },
    ...atLimit(scale),
    // Every request kept (the account each was made for): what was fetched when.
    recordedRequests: Number.POSITIVE_INFINITY,
    // The schedule's first tick at the start: pass 1 finds the table empty and ends; the next one
    // comes freshnessHours later. The crawl's items are checked once, by the crawl.
    reconcile: { freshnessHours: systemConfig().freshnessHours, firstTickAfterMs: 0 },
    observe: {
      providerAnswer(_source, _itemId, status, at) {
        if (status === 429 && at >= watch.rootAt) watch.rateLimited += 1;
      },
      itemLog(source, message, itemId, at, connection) {
        if (connection === undefined) return;
        if (connection !== DEFAULT_CONNECTION) return message === 'record done' ? quietIdDone(watch, source, itemId, at, connection) : undefined;
        if (watch.own.ids.has(itemId)) return message === 'record done' ? ownIdDone(watch.own, source, itemId, at) : undefined;
        if (at < watch.rootAt) return;
        if (message === 'write race lost; reading the row and fetching again') watch.fetchedAgain += 1;
        if (message !== 'record done') return;
        if (watch.rows.has(itemId)) watch.doneAgain += 1;
        else {
          watch.rows.add(itemId);
          watch.lastRowAt = at;
        }
      },
      reconcileSent(ids, at) {
        if (at >= watch.rootAt) watch.reconcilerSent += ids.length;
      },
      syncSent(_source, queueUrl, messages, at) {
        if (at < watch.rootAt || queueUrl !== live.reconcileQueueUrl) return;
        for (const message of messages) {
          if ((message.connection ?? DEFAULT_CONNECTION) === DEFAULT_CONNECTION && !watch.own.ids.has(message.id)) watch.childSends.push({ id: message.id, at });
        }
      },
      syncDynamo(client) {
        watchRowWrites(client, () => live.ms(), watch.writtenAt);
      },
      metric(source, name, value, at) {
        if ((source === 'sync' || source === 'reconcile') && at >= watch.rootAt && counted.has(name)) watch.metrics[name] = (watch.metrics[name] ?? 0) + value;
      },
    },
  });
  live.ms = () => system.clock.ms();
  if (system.reconcileQueueUrl !== undefined) live.reconcileQueueUrl = system.reconcileQueueUrl;
  try {
    const quiet = system.connectionIds.filter((connection) => connection !== DEFAULT_CONNECTION);
    const rootId = system.ids[0]!;
    const t0 = system.clock.ms();
    const sqs = system.local.aws.sqsClient();
    const send = { sleep: system.clock.sleep };
    sendQuietIds(system, scale.sendEverySeconds, quiet, sendsEach, watch, t0 + warmupMs, (messages) => void enqueueMessages(sqs, system.queueUrl, messages, send));
    if (scale.ownUsers) {
      const ownIds = addOwnItems(system, Math.ceil(runMs / scale.ownUsers.everyMs) + 1);
      for (const id of ownIds) watch.own.ids.add(id);
      sendOneByOne(system, DEFAULT_CONNECTION, ownIds, scale.ownUsers.everyMs, t0, watch.own, t0 + warmupMs, (messages) => void enqueueMessages(sqs, system.queueUrl, messages, send));
    }
    // Between two quiet ids (they come every sendEverySeconds ÷ quietAccounts): a quiet id in the
    // root's batch would wait for the crawled connection's first access token, once, which is not the crawl.
    const rootAt = t0 + warmupMs + scale.idleMinutes * MINUTE + Math.floor((scale.sendEverySeconds * SECOND) / scale.quietAccounts / 2);
    const hardStop = rootAt + scale.maxCrawlMinutes * MINUTE;
    let atRoot: Usage | undefined;
    system.clock.at(rootAt, () => {
      watch.rootAt = rootAt;
      atRoot = snapshot(system.meter);
      void enqueueMessages(sqs, system.queueUrl, [{ connection: DEFAULT_CONNECTION, id: rootId }], send);
    });
    reportProgress(system, scale, watch, rootAt, realStart, progress);
    // The tree's item requests as the provider received them: the account's own users' ids are not the crawl's.
    const requests = (): number =>
      watch.own.ids.size === 0
        ? system.provider.accountCounters(DEFAULT_CONNECTION).itemRequests
        : system.provider.requests.filter((request) => request.account === DEFAULT_CONNECTION && request.endpoint === 'items' && !watch.own.ids.has(request.itemId ?? '')).length;
    let drained: { at: number; requests: number; usage: Usage } | undefined;
    await system.pollUntil(() => {
      const now = system.clock.ms();
      if (drained === undefined && watch.rows.size >= scale.items && system.sqs.size(system.reconcileQueueUrl!) === 0) {
        drained = { at: now, requests: requests(), usage: snapshot(system.meter) };
      }
      return (drained !== undefined && now >= drained.at + scale.settleMinutes * MINUTE) || now >= hardStop;
    });
    const end = system.clock.ms();
    const table = await checkRows(system, scale.items, watch.own.ids);
    const races = raceCounts(system, watch);
    const config = system.local.config;
    const crawled = watch.rows.size >= scale.items;
    return {
      scale,
      sweepRate: scale.limit * (1 - config.usersReservedPercent / 100),
      usersReservedPercent: config.usersReservedPercent,
      ...table,
      itemRequests: requests(),
      crawlSeconds: crawled ? (watch.lastRowAt - rootAt) / SECOND : undefined,
      reconcileQueueLeft: system.sqs.size(system.reconcileQueueUrl!),
      syncQueueLeft: system.sqs.peek(system.queueUrl).filter((message) => {
        const body = messageOf(message.body);
        return body?.connection === DEFAULT_CONNECTION && !watch.own.ids.has(body.id);
      }).length,
      requestsAfterDrain: drained === undefined ? undefined : requests() - drained.requests,
      doneAgain: watch.doneAgain,
      metrics: watch.metrics,
      reconcilerSent: watch.reconcilerSent,
      usage: drained && atRoot ? usageBetween(atRoot, drained.usage) : undefined,
      itemsTable: system.local.names.itemsTable,
      tracing: system.local.deployment.sync.tracing,
      batchWindowSeconds: system.local.deployment.syncEventSource.maxBatchingWindowSeconds ?? 0,
      quiet: {
        idle: quietTimes(watch, t0 + warmupMs, rootAt),
        during: quietTimes(watch, rootAt, crawled ? watch.lastRowAt : end),
        left: quietLeft(watch, end),
      },
      ...(scale.ownUsers
        ? {
            own: {
              idle: quietTimes(watch.own, t0 + warmupMs, rootAt),
              during: quietTimes(watch.own, rootAt, crawled ? watch.lastRowAt : end),
              inBackground: {
                idle: watch.own.inBackground.filter((sentAt) => sentAt >= t0 + warmupMs && sentAt < rootAt).length,
                during: watch.own.inBackground.filter((sentAt) => sentAt >= rootAt && sentAt < (crawled ? watch.lastRowAt : end)).length,
              },
              left: quietLeft(watch.own, end),
            },
          }
        : {}),
      rateLimited: watch.rateLimited,
      deadLettered: system.sqs.size(system.dlqUrl) + system.sqs.size(system.reconcileDlqUrl!),
      ...races,
      virtualMs: end - t0,
      realMs: Date.now() - realStart,
    };
  } finally {
    await system.close();
  }
}

/** Tells `writtenAt` when each row of `default` was first written: its PutItem answered (the sync's client; the middleware runs after the backend's answer). */
function watchRowWrites(client: DynamoDBClient, now: () => number, writtenAt: Map<string, number>): void {
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const result = await next(args);
      const item = (args.input as { Item?: Record<string, AttributeValue> }).Item;
      const id = item?.['id']?.S;
      if (context.commandName === 'PutItemCommand' && item?.['connection']?.S === DEFAULT_CONNECTION && id !== undefined && item['revision'] !== undefined && !writtenAt.has(id)) {
        writtenAt.set(id, now());
      }
      return result;
    },
    { step: 'initialize', priority: 'high', name: 'watchRowWrites' },
  );
}

/**
 * Discovery's sends against the rows and the provider's requests (the account `default`'s, since
 * the root was sent): ids sent once their row was written, ids sent while their sync was in flight
 * (first requested, not written), items requested more than once, lost races that fetched again.
 */
function raceCounts(system: SimSystem, watch: CrawlWatch): Pick<DiscoveryRun, 'sentHeld' | 'sentInFlight' | 'fetchedTwice' | 'fetchedAgain'> {
  const firstAsked = new Map<string, number>();
  const asked = new Map<string, number>();
  for (const request of system.provider.requests) {
    if (request.account !== DEFAULT_CONNECTION || request.endpoint !== 'items' || request.itemId === undefined || (request.receivedAt ?? 0) < watch.rootAt) continue;
    asked.set(request.itemId, (asked.get(request.itemId) ?? 0) + 1);
    if (!firstAsked.has(request.itemId)) firstAsked.set(request.itemId, request.receivedAt ?? 0);
  }
  let sentHeld = 0;
  let sentInFlight = 0;
  for (const { id, at } of watch.childSends) {
    const written = watch.writtenAt.get(id);
    if (written !== undefined && written <= at) sentHeld += 1;
    else if ((firstAsked.get(id) ?? Number.POSITIVE_INFINITY) <= at) sentInFlight += 1;
  }
  return { sentHeld, sentInFlight, fetchedTwice: [...asked.values()].filter((count) => count > 1).length, fetchedAgain: watch.fetchedAgain };
}

/** `count` more files of the account `default` that no folder lists (the crawl never reaches them): its own users' ids. */
function addOwnItems(system: SimSystem, count: number): string[] {
  const account = system.provider.account(DEFAULT_CONNECTION);
  const revisionField = system.local.config.revisionField;
  const width = Math.max(5, String(count).length);
  return Array.from({ length: count }, (_, k) => {
    const id = `own-${String(k + 1).padStart(width, '0')}`;
    const item: SimulatorItem = { id, type: 'file', parentId: null, name: `note ${k + 1}.txt`, size: 1_024 };
    setAtPath(item, revisionField, 1);
    account.setItem(item);
    return id;
  });
}

/** An own id's `record done`: on the sync queue its send-to-done time (as a quiet id's); on the reconcile queue, one put behind the crawl. */
function ownIdDone(own: CrawlWatch['own'], source: EventSourceName, itemId: string, at: number): void {
  const key = `${DEFAULT_CONNECTION}\n${itemId}`;
  const sentAt = own.pending.get(key);
  if (sentAt === undefined) return;
  if (source === 'sync') return quietIdDone(own, source, itemId, at, DEFAULT_CONNECTION);
  own.pending.delete(key);
  own.inBackground.push(sentAt);
}

/** A message's connection and id as the sync reads them (message.ts); undefined for one it refuses. */
function messageOf(body: string): SyncMessage | undefined {
  try {
    return parseMessageBody(body);
  } catch {
    return undefined;
  }
}

/**
 * The connection `default`'s rows of its tree as stored (a Query of its partition, its own users'
 * items passed over): how many, how many hold a revision other than the provider's served item's (or
 * are tombstones), how many items have none.
 */
async function checkRows(system: SimSystem, items: number, own: ReadonlySet<string>): Promise<{ rows: number; mismatched: number; missing: number; listedEntries: number }> {
  const client = system.dynamo.client();
  const account = system.provider.account(DEFAULT_CONNECTION);
  const revisionField = system.local.config.revisionField;
  const seen = new Set<string>();
  let mismatched = 0;
  let listedEntries = 0;
  try {
    let after: Record<string, AttributeValue> | undefined;
    do {
      const page = await client.send(
        new QueryCommand({
          TableName: system.local.names.itemsTable,
          KeyConditionExpression: '#c = :c',
          ExpressionAttributeNames: { '#c': 'connection', '#r': 'revision', '#d': 'deleted' },
          ExpressionAttributeValues: { ':c': { S: DEFAULT_CONNECTION } },
          ProjectionExpression: 'id, #r, #d',
          Limit: LOCAL_PAGE_ROWS,
          ...(after ? { ExclusiveStartKey: after } : {}),
        }),
      );
      for (const row of page.Items ?? []) {
        const id = row['id']!.S!;
        // The account's own users' items are not the tree's.
        if (own.has(id)) continue;
        seen.add(id);
        const served = account.servedItem(id);
        const revision = served === undefined ? undefined : revisionText(getPath(served, revisionField));
        if (row['deleted']?.BOOL === true || revision === undefined || row['revision']?.S !== revision) mismatched += 1;
        const entries = served === undefined ? undefined : getPath(served, DISCOVERY_CONTEXT.childrenPath);
        if (Array.isArray(entries)) listedEntries += entries.length;
      }
      after = page.LastEvaluatedKey;
    } while (after);
  } finally {
    client.destroy();
  }
  const missing = system.ids.filter((id) => !seen.has(id)).length;
  return { rows: seen.size, mismatched, missing: Math.max(missing, items - seen.size), listedEntries };
}

/** A line every virtual minute once the root was sent. */
function reportProgress(system: SimSystem, scale: DiscoveryScale, watch: CrawlWatch, rootAt: number, realStart: number, progress: (line: string) => void): void {
  const look = (): void => {
    const minutes = (system.clock.ms() - rootAt) / MINUTE;
    progress(
      `${minutes.toFixed(0)} min into the crawl, ${((Date.now() - realStart) / 1000).toFixed(0)} s real: ` +
        `${watch.rows.size.toLocaleString('en-US')} of ${scale.items.toLocaleString('en-US')} rows, ` +
        `reconcile queue ${system.sqs.size(system.reconcileQueueUrl!)}, sync queue ${system.sqs.size(system.queueUrl)}`,
    );
    if (watch.rows.size < scale.items || system.sqs.size(system.reconcileQueueUrl!) > 0) system.clock.at(system.clock.ms() + MINUTE, look);
  };
  system.clock.at(rootAt + MINUTE, look);
}

/** The scenario: one crawl, its figures and its checks. */
export function discoveryScenario(scale: DiscoveryScale, progress: (line: string) => void = () => undefined): Promise<ScenarioResult> {
  const name =
    `discovery: a tree of ${scale.items.toLocaleString('en-US')} items ${scale.depth} deep${scale.cycle ? ' with a cycle' : ''} from its root, ` +
    `beside ${scale.quietAccounts} quiet accounts, L = ${scale.limit}/s known`;
  return timed(name, async () => {
    const run = await discoveryRun(scale, progress);
    const { figures, checks } = crawlFigures(run);
    return { virtualMs: run.virtualMs, figures, checks };
  });
}
