/**
 * Discovery's figures and checks (discovery-scenario.ts runs the crawl; this page reports on it): the
 * goals, what a run measured as printed, and per 100,000 items what it cost.
 */
import { SYNC_METRIC_NAMES } from '../../functions/shared/metric-names.js';
import type { DiscoveryRun } from './discovery-run.js';
import { BUSY_USERS_FACTOR } from './busy-scenario.js';
import { FAIRNESS_P99_FACTOR } from './fairness-scenario.js';
import { quantiles } from './quiet-accounts.js';
import { passCost, who } from './reconcile-cost.js';
import { check, round, type Check } from './scenario.js';

/** The figures are given per this many items. */
export const PER_ITEMS = 100_000;

/** The goals: provider item requests per item, and the crawl's time against N ÷ the sweep's rate. */
export const REQUESTS_PER_ITEM_GOAL = 1.01;
export const CRAWL_TIME_FACTOR = 1.1;

/**
 * The crawl's bound: CRAWL_TIME_FACTOR × N ÷ the sweep's rate, and one batching window a level (the
 * root's level included): a level's first children gather their batch for up to a window when the
 * queue holds fewer than a batch.
 */
export function crawlBoundSeconds(items: number, sweepRate: number, depth: number, batchWindowSeconds: number): number {
  return (CRAWL_TIME_FACTOR * items) / sweepRate + (depth + 1) * batchWindowSeconds;
}

/** The figures of a run, as printed, and its checks against the goals. */
export function crawlFigures(run: DiscoveryRun): { figures: Record<string, number | string>; checks: Check[] } {
  const { scale } = run;
  const n = scale.items;
  const per = PER_ITEMS / n;
  const perItem = run.itemRequests / n;
  const goalSeconds = crawlBoundSeconds(n, run.sweepRate, scale.depth, run.batchWindowSeconds);
  const idle = quantiles(run.quiet.idle);
  const during = quantiles(run.quiet.during);
  const ratio = idle.p99 > 0 ? round(during.p99 / idle.p99, 2) : Number.POSITIVE_INFINITY;
  const line = (count: number, q: { p50: number; p99: number; max: number }): string => `${count} ids: p50 ${q.p50} s, p99 ${q.p99} s, max ${q.max} s`;
  const metric = (name: string): number => run.metrics[name] ?? 0;
  const figures: Record<string, number | string> = {
    tree: `${n.toLocaleString('en-US')} items, ${scale.depth} levels below the root${scale.cycle ? ', one folder listing an ancestor (a cycle)' : ''}; lists of up to ${scale.childrenCap.toLocaleString('en-US')}`,
    'provider limit': `${scale.limit}/s, known (providerRequestsPerSecond); usersReservedPercent ${run.usersReservedPercent}: the sweep's rate ${round(run.sweepRate, 1)}/s`,
    'quiet accounts': `${scale.quietAccounts}, one id each every ${scale.sendEverySeconds} s to the sync queue; ${scale.idleMinutes} idle minutes before the root`,
    'rows of the connection': `${run.rows.toLocaleString('en-US')} (${run.missing} items without one, ${run.mismatched} not the provider's revision)`,
    'provider item requests for the account': `${run.itemRequests.toLocaleString('en-US')}: ${round(perItem, 4)} per item`,
    "entries in the folders' lists": `${run.listedEntries.toLocaleString('en-US')}${run.listedEntries > n - 1 ? ` (${(run.listedEntries - (n - 1)).toLocaleString('en-US')} listed a second time: the cycle)` : ''}`,
    'items done more than once': run.doneAgain,
    'items requested more than once at the provider': run.fetchedTwice,
    'ids sent for checking that the table held (written before the send)': run.sentHeld,
    'ids sent for checking while their sync was in flight (requested, not written)': run.sentInFlight,
    'lost write races that fetched again (a second request in one delivery)': run.fetchedAgain,
    'root sent to last row': run.crawlSeconds === undefined ? 'not every item' : `${round(run.crawlSeconds, 1)} s: ${round(n / run.crawlSeconds, 1)} items/s`,
    'N ÷ the sweep\'s rate': `${round(n / run.sweepRate, 1)} s`,
    'crawl time ÷ (N ÷ the sweep\'s rate)': run.crawlSeconds === undefined ? '-' : round(run.crawlSeconds / (n / run.sweepRate), 3),
    ChildrenDiscovered: metric(SYNC_METRIC_NAMES.childrenDiscovered),
    ChildrenSkipped: metric(SYNC_METRIC_NAMES.childrenSkipped),
    ListingsTruncated: metric(SYNC_METRIC_NAMES.listingsTruncated),
    'ItemsFetched, ItemsCreated (both queues, the quiet accounts\' included)': `${metric(SYNC_METRIC_NAMES.fetched)}, ${metric(SYNC_METRIC_NAMES.created)}`,
    'ids the reconciler sent during the crawl': run.reconcilerSent,
    'quiet ids sent idle, send to done': line(run.quiet.idle.length, idle),
    'quiet ids sent during the crawl, send to done': line(run.quiet.during.length, during),
    'quiet p99 during ÷ p99 idle': ratio,
    ...ownFigures(run, line),
    'reconcile queue at the end': run.reconcileQueueLeft,
    [`item requests for the account in the ${scale.settleMinutes} minutes after the crawl`]: run.requestsAfterDrain ?? 'the crawl did not end',
    '429s': run.rateLimited,
    'dead-lettered': run.deadLettered,
  };
  if (run.usage) {
    const crawlSeconds = run.crawlSeconds ?? 0;
    const cost = passCost(run.usage, crawlSeconds, { logsMetered: scale.meterLogs, tracing: run.tracing, itemsTable: run.itemsTable });
    for (const [key, count] of Object.entries(run.usage.dynamo.reconcile)) {
      if (count.requests > 0) figures[`per ${PER_ITEMS.toLocaleString('en-US')} items: DynamoDB ${key} (${who('reconcile')})`] = `${Math.round(count.requests * per).toLocaleString('en-US')} requests, ${Math.round(count.capacityUnits * per).toLocaleString('en-US')} units`;
    }
    for (const [operation, calls] of Object.entries(run.usage.sqs.reconcile)) {
      if (calls > 0) figures[`per ${PER_ITEMS.toLocaleString('en-US')} items: SQS ${operation} (${who('reconcile')})`] = Math.round(calls * per);
    }
    const events = run.usage.eventSource.reconcile;
    figures[`per ${PER_ITEMS.toLocaleString('en-US')} items: SQS ReceiveMessage, DeleteMessageBatch (event source on the reconcile queue)`] =
      `${Math.round(events.receives * per).toLocaleString('en-US')} (${Math.round(events.emptyReceives * per).toLocaleString('en-US')} empty), ${Math.round(events.deleteBatches * per).toLocaleString('en-US')}`;
    figures[`per ${PER_ITEMS.toLocaleString('en-US')} items: sync invocations on the reconcile queue`] = Math.round(run.usage.lambda.reconcile.invocations * per);
    for (const costLine of cost.lines) {
      if (costLine.usd > 0) figures[`cost per ${PER_ITEMS.toLocaleString('en-US')} items: ${costLine.what}`] = `${costLine.units} → $${(costLine.usd * per).toFixed(4)}`;
    }
    figures[`AWS cost per ${PER_ITEMS.toLocaleString('en-US')} items (USD)${scale.meterLogs ? '' : ', logs left out'}`] = (cost.total * per).toFixed(4);
  }
  figures['real time'] = `${round(run.realMs / 1000, 1)} s`;

  const checks: Check[] = [
    check('every item mirrored: a row each, with the provider\'s revision', `${run.rows} rows of ${n}, ${run.missing} missing, ${run.mismatched} not the provider's`, run.rows === n && run.missing === 0 && run.mismatched === 0),
    check(`provider item requests per item ≤ ${REQUESTS_PER_ITEM_GOAL}`, round(perItem, 4), perItem <= REQUESTS_PER_ITEM_GOAL),
    check(
      `root to last row ≤ ${CRAWL_TIME_FACTOR} × N ÷ the sweep's rate + a batching window a level (${round(goalSeconds, 1)} s)`,
      run.crawlSeconds === undefined ? 'not every item' : `${round(run.crawlSeconds, 1)} s`,
      run.crawlSeconds !== undefined && run.crawlSeconds <= goalSeconds,
      { fullScaleOnly: true },
    ),
    check(
      'the crawl ends: the reconcile queue empty, nothing of the account left on the sync queue, no request for it after',
      `${run.reconcileQueueLeft} on the reconcile queue, ${run.syncQueueLeft} on the sync queue, ${run.requestsAfterDrain ?? 'never drained'} requests in the ${scale.settleMinutes} minutes after`,
      run.reconcileQueueLeft === 0 && run.syncQueueLeft === 0 && run.requestsAfterDrain === 0,
    ),
    check('each child sent for checking once (ChildrenDiscovered = N − 1)', metric(SYNC_METRIC_NAMES.childrenDiscovered), metric(SYNC_METRIC_NAMES.childrenDiscovered) === n - 1),
    check(
      'no id sent for checking that the table held, or whose sync was in flight',
      `${run.sentHeld} held, ${run.sentInFlight} in flight`,
      run.sentHeld === 0 && run.sentInFlight === 0,
    ),
    check('no item fetched twice in one delivery (a lost write race fetching again)', run.fetchedAgain, run.fetchedAgain === 0),
    check(
      `the quiet accounts' p99 during the crawl at most ${FAIRNESS_P99_FACTOR}× their idle p99`,
      `${during.p99} s against ${idle.p99} s (${ratio}×)`,
      run.quiet.idle.length > 0 && run.quiet.during.length > 0 && during.p99 <= FAIRNESS_P99_FACTOR * idle.p99,
    ),
    check('every quiet id done', `${run.quiet.left} left`, run.quiet.left === 0),
    ...ownChecks(run),
    check('nothing dead-lettered', run.deadLettered, run.deadLettered === 0),
    check('no 429 (the limit is known)', run.rateLimited, run.rateLimited === 0),
  ];
  return { figures, checks };
}

/** The crawled account's own users' figures (DiscoveryScale.ownUsers), when it had some. */
function ownFigures(run: DiscoveryRun, line: (count: number, q: { p50: number; p99: number; max: number }) => string): Record<string, string> {
  const own = run.own;
  if (!own || !run.scale.ownUsers) return {};
  const idle = quantiles(own.idle);
  const during = quantiles(own.during);
  const ratio = (a: number, b: number): number | string => (b > 0 ? round(a / b, 2) : '-');
  return {
    "the account's own users": `an id every ${run.scale.ownUsers.everyMs} ms to the sync queue, each an item no folder lists`,
    "the account's own users' ids sent idle, send to done": line(own.idle.length, idle),
    "the account's own users' ids sent during its crawl, send to done": line(own.during.length, during),
    "the account's own users: p50 during ÷ idle, p99 during ÷ idle": `${ratio(during.p50, idle.p50)}, ${ratio(during.p99, idle.p99)}`,
    "the account's own users' ids done in the background lane, of those sent idle and during the crawl": `${own.inBackground.idle}, ${own.inBackground.during}`,
  };
}

/** The goals for the crawled account's own users: within BUSY_USERS_FACTOR of idle, never put behind the crawl, every id done. */
function ownChecks(run: DiscoveryRun): Check[] {
  const own = run.own;
  if (!own) return [];
  const idle = quantiles(own.idle);
  const during = quantiles(own.during);
  const within = (a: number, b: number): boolean => b > 0 && a <= BUSY_USERS_FACTOR * b;
  return [
    check(
      `the account's own users: p50 and p99 during its crawl at most ${BUSY_USERS_FACTOR}× idle`,
      `p50 ${during.p50} s against ${idle.p50} s, p99 ${during.p99} s against ${idle.p99} s`,
      own.idle.length > 0 && own.during.length > 0 && within(during.p50, idle.p50) && within(during.p99, idle.p99),
    ),
    check("the account's own users: no id sent during the crawl put behind it (done in the background lane)", own.inBackground.during, own.inBackground.during === 0),
    check("every id of the account's own users done", `${own.left} left`, own.left === 0),
  ];
}
