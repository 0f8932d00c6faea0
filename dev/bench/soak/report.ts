/** The soak's report: the verdict's figures and everything the run did, as data and as text. */
import type { CallCounts } from '../../fakes/in-process-aws.js';
import { dynamoLatencyLabel, n, table } from '../support/format.js';
import type { DeadLetterSummary } from './checks.js';
import type { SoakFigures, Verdict } from './verdict.js';
import type { Feed, FeedStats } from './feed.js';
import type { SoakOptions } from './options.js';
import type { ProviderFigures } from './provider-tally.js';
import type { RunResult } from './run.js';
import { LARGE_FIELD, NAMES, type SoakWorld } from './world.js';

export interface SoakReport {
  ok: boolean;
  /** One sentence per figure that is off. */
  problems: string[];
  options: Omit<SoakOptions, 'progress'>;
  startedAt: string;
  durationMs: number;
  /** From the last change-feed event to quiescence. */
  drainMs: number;
  figures: SoakFigures;
  deadLetters: DeadLetterSummary[];
  activity: {
    items: { initial: number; atEnd: number; deletedAtEnd: number; rowsAtEnd: number; tombstones: number };
    messages: {
      initial: number;
      bad: number;
      changeNotifications: number;
      /** Records the sync sent again to the queue (waiting), as new messages. */
      sentAgain: number;
      sent: number;
      duplicatesInjected: number;
      /** Deliveries of a message while another copy of it was in flight in another instance. */
      concurrentDuplicates: number;
      deliveries: number;
      redeliveries: number;
      redriven: number;
      invocations: number;
      postponed: number;
      visibilityChangeFailuresInjected: number;
      deadLetterSendFailuresInjected: number;
    };
    changeFeed: FeedStats;
    tokens: {
      rotations: number;
      refresherFailures: number;
      issued: number;
      revocations: number;
      refresherRuns: number;
      refreshed: number;
      skipped: number;
      failed: number;
      /** getToken requests the provider took, and the most in flight at once. */
      getTokenRequests: number;
      getTokenAtOnce: number;
    };
    provider: ProviderFigures;
    dynamodb: {
      requests: Record<string, number>;
      conditionalFailures: Record<string, number>;
      writes: number;
      distinctStates: number;
      throttlesInjected: number;
      unprocessedResponsesInjected: number;
      unprocessedKeysInjected: number;
      lostAcksInjected: number;
      /** Lost answers to writes that replaced a row pointing to an object (that object must be gone or logged as left). */
      lostAcksReplacingObjects: number;
    };
    /** The connections table: requests by operation (the containers' and the refreshers'), the containers' reads refused (injected). */
    connections: { requests: CallCounts; readFailuresInjected: number };
    /** The items bucket: rows pointing there at the end, what the sync did with objects, the faults injected. */
    objects: {
      rowsWithObject: number;
      largeAtStart: number;
      written: number;
      deleted: number;
      keptAfterLostAnswer: number;
      leftBehind: number;
      orphansExplained: number;
      putFailuresInjected: number;
      deleteFailuresInjected: number;
    };
    sqs: CallCounts;
    /** Sums of the handlers' own EMF metrics. */
    handlerMetrics: Record<string, number>;
    outputBytes: number;
  };
  logFile?: string;
}

export function buildReport(world: SoakWorld, feed: Feed, run: RunResult, verdict: Verdict): SoakReport {
  const { progress: _progress, ...options } = world.o;
  const tombstones = [...verdict.rows.values()].filter((row) => row['deleted']?.BOOL === true).length;
  return {
    ok: verdict.problems.length === 0,
    problems: verdict.problems,
    options,
    startedAt: world.startedAt.toISOString(),
    durationMs: run.quiescentAt - world.t0,
    drainMs: run.quiescentAt - feed.lastEventAt,
    figures: verdict.figures,
    deadLetters: verdict.deadLetters.byReason,
    activity: {
      items: { initial: world.tree.length, atEnd: feed.liveIds.length, deletedAtEnd: feed.deletedItems.size, rowsAtEnd: verdict.rows.size, tombstones },
      messages: messageActivity(world, feed, run),
      changeFeed: feed.stats,
      tokens: { ...world.tokenStats, issued: world.tokens.size, getTokenRequests: world.tally.figures.tokenRequests, getTokenAtOnce: verdict.getTokenAtOnce },
      provider: world.tally.figures,
      dynamodb: {
        requests: { ...world.meter.requests },
        conditionalFailures: { ...world.meter.conditionalFailures },
        writes: world.meter.writes.length,
        distinctStates: verdict.writes.distinctStates,
        throttlesInjected: world.meter.injected.throttled,
        unprocessedResponsesInjected: world.meter.injected.unprocessedResponses,
        unprocessedKeysInjected: world.meter.injected.unprocessedKeys,
        lostAcksInjected: world.meter.injected.lostAcks,
        lostAcksReplacingObjects: world.meter.lostAckReplacedObjectKeys.length,
      },
      objects: {
        rowsWithObject: verdict.objects.rowsWithObject,
        largeAtStart: world.tree.filter((item) => item[LARGE_FIELD] !== undefined).length,
        written: verdict.objectLog.written,
        deleted: verdict.objectLog.deleted,
        keptAfterLostAnswer: verdict.objectLog.kept,
        leftBehind: verdict.objectLog.left,
        orphansExplained: verdict.objects.orphansExplained,
        putFailuresInjected: world.injected.s3PutFailures,
        deleteFailuresInjected: world.injected.s3DeleteFailures,
      },
      connections: { requests: { ...world.calls.connections }, readFailuresInjected: world.injected.connectionReadFailures },
      sqs: { ...world.calls.sqs },
      handlerMetrics: verdict.handlerMetrics,
      outputBytes: verdict.outputBytes,
    },
    ...(world.o.logFile ? { logFile: world.o.logFile } : {}),
  };
}

function messageActivity(world: SoakWorld, feed: Feed, run: RunResult): SoakReport['activity']['messages'] {
  const stats = world.sqs.queue(NAMES.syncQueue).stats;
  return {
    initial: feed.ledger.initialMessageIds.size,
    bad: feed.ledger.badByMessageId.size,
    changeNotifications: feed.ledger.changeNotifications,
    sentAgain: stats.sent - feed.ledger.initialMessageIds.size - feed.ledger.changeNotifications,
    sent: stats.sent,
    duplicatesInjected: stats.duplicatesInjected,
    concurrentDuplicates: feed.ledger.concurrentDuplicates,
    deliveries: stats.receives,
    redeliveries: stats.redeliveries,
    redriven: stats.redriven,
    invocations: run.invocations,
    postponed: stats.visibilityChanges,
    visibilityChangeFailuresInjected: world.injected.visibilityChangeFailures,
    deadLetterSendFailuresInjected: world.injected.deadLetterSendFailures,
  };
}

// ---- printing ------------------------------------------------------------------------------------

export function formatSoakReport(report: SoakReport): string {
  return [
    ...header(report),
    '',
    checksTable(report.figures),
    '',
    'Dead letters by reason:',
    ...report.deadLetters.map((entry) => {
      const reason = entry.reason.length > 110 ? `${entry.reason.slice(0, 110)}…` : entry.reason;
      return `  ${String(entry.entries).padStart(3)} × [${entry.what}] ${reason}`;
    }),
    '',
    'Faults injected and met:',
    ...faultLines(report),
    '',
    report.ok ? 'RESULT: ok — every figure as expected' : `RESULT: FAILED\n${report.problems.map((p) => `  ${p}`).join('\n')}`,
  ].join('\n');
}

function header(report: SoakReport): string[] {
  const o = report.options;
  return [
    `Chaos soak — ${n(o.ids)} ids, seed ${o.seed}, ${o.instances} instances × batch ${o.batchSize}, provider latency ${o.latencyMs} ms, DynamoDB ${dynamoLatencyLabel(o.dynamoLatency)} — ` +
      `${(report.durationMs / 1000).toFixed(1)} s (drain after the last change ${(report.drainMs / 1000).toFixed(1)} s)`,
    `SQS time is scaled: 1 s = ${o.msPerSecond} ms (visibility ${o.visibilityTimeoutSeconds} s; 429s carry Retry-After 1 s, 2 s or none, and stop every instance that long, in real time (the provider pace)); the handlers' own backoff sleeps × ${o.backoffScale}; the SDK's retry backoff and the provider run in real time`,
  ];
}

function checksTable(f: SoakFigures): string {
  const rows: Array<[string, string, string]> = [
    ['items lost', n(f.itemsLost), '0'],
    ['items stale after quiescence (revision or tombstone)', n(f.itemsStale), '0'],
    ['rows whose item differs from the provider', n(f.contentMismatches), '0'],
    ['rows for ids never sent as good messages', n(f.unexpectedRows), '0'],
    ['rows pointing to no object in the items bucket', n(f.pointersToNothing), '0'],
    ['objects not what their row says (size, SHA-256, content)', n(f.objectMismatches), '0'],
    ['objects no row points to, unexplained', n(f.orphanedObjects), '0'],
    ['objects the check could not read or list', n(f.objectsUnchecked), '0'],
    ['writes minus real changes', n(f.excessWrites), '0'],
    ['dead-lettered: deliberately bad, right reason', `${n(f.deadLetteredExpected)} of ${n(f.badMessages)}`, `${n(f.badMessages)} of ${n(f.badMessages)}`],
    ['dead-lettered: anything else', n(f.deadLetteredUnexpected), '0'],
    ['dead-lettered: bad, wrong reason / missing', `${n(f.deadLetteredWrongReason)} / ${n(f.deadLettersMissing)}`, '0 / 0'],
    ['tokens in output', n(f.tokensInOutput), '0'],
    ['messages left in the queue', n(f.messagesLeft), '0'],
    ['invocations failed as a whole', n(f.handlerErrors), '0'],
    ['records delivered before their Retry-After', n(f.deliveredBeforeRetryAfter), '0'],
    ['getToken calls in flight at once beyond one (the lease)', n(f.concurrentGetToken), '0'],
    ['refresh tokens lost or replayed (the connection active, its token live)', n(f.refreshTokensLost), '0'],
  ];
  return table(['check', 'value', 'expected', ''], rows.map(([label, value, expected]) => [label, value, expected, value === expected ? 'ok' : 'FAIL']));
}

function faultLines(report: SoakReport): string[] {
  const { activity: a, options: o } = report;
  const p = a.provider;
  const d = a.dynamodb;
  const m = a.messages;
  return [
    `  provider: ${n(p.itemRequests)} item requests — ${n(p.serverErrors)} 5xx, ${n(p.byStatus['408'] ?? 0)} 408, ${n(p.dropped)} dropped, ` +
      `${n(p.rateLimited)} 429, ${n(p.slow)} slow (${o.slowMs} ms), ${n(p.hung)} hung (time-out ${o.providerTimeoutMs} ms), ${n(p.unauthorized)} 401; ` +
      `${n(p.tokenRequests)} token requests (${n(p.tokenByStatus['503'] ?? 0)} answered 503)`,
    `  tokens: ${a.tokens.rotations} rotations (all access tokens revoked and the stored one made old ${o.rotationGapMs} ms before each, then two refreshers at once), ` +
      `${a.tokens.refresherRuns} refresher runs (${a.tokens.refreshed} refreshed, ${a.tokens.skipped} met the other's lease or a newer token, ${a.tokens.failed} failed for now), ` +
      `${a.tokens.refresherFailures} run(s) failed and were retried; ${n(a.tokens.getTokenRequests)} getToken requests (refresher and on demand), at most ${a.tokens.getTokenAtOnce} at once; ` +
      `${a.tokens.issued} tokens issued`,
    `  change feed: ${n(a.changeFeed.bumped)} revisions bumped (${n(a.changeFeed.bumpedWhileInFlight)} while the item was in flight), ` +
      `${n(a.changeFeed.deleted)} deleted, ${n(a.changeFeed.created)} created, ${n(a.changeFeed.resurrected)} re-created`,
    `  SQS: ${n(m.sent)} messages (${n(m.initial)} initial incl. ${m.bad} bad, ${n(m.changeNotifications)} change notifications, ${n(m.sentAgain)} sent again by the sync), ` +
      `${n(m.duplicatesInjected)} duplicate copies (${n(m.concurrentDuplicates)} delivered while another copy was in flight), ` +
      `${n(m.deliveries)} deliveries in ${n(m.invocations)} invocations, ${n(m.redeliveries)} redeliveries, ${n(m.postponed)} visibility delays (waiting records that could not be sent again), ` +
      `${n(m.redriven)} redriven; injected: ${m.deadLetterSendFailuresInjected} dead-letter send failures, ${m.visibilityChangeFailuresInjected} visibility-change failures`,
    `  DynamoDB: ${Object.entries(d.requests).map(([op, count]) => `${n(count)} ${op}`).join(', ')}; ` +
      `${n(d.throttlesInjected)} throttled, ${n(d.unprocessedResponsesInjected)} BatchGetItem answers with ${n(d.unprocessedKeysInjected)} unprocessed keys, ` +
      `${n(d.lostAcksInjected)} write acknowledgements lost (${n(d.lostAcksReplacingObjects)} of writes that replaced an object); ${n(d.writes)} writes, ` +
      `${Object.entries(d.conditionalFailures).map(([op, count]) => `${n(count)} ${op}`).join(', ') || 'no'} conditional failures`,
    `  items bucket: ${n(a.objects.largeAtStart)} files too large for a row at the start, ${n(a.changeFeed.grown)} grew past the limit and ${n(a.changeFeed.shrunk)} shrank back; ` +
      `${n(a.objects.written)} objects written, ${n(a.objects.deleted)} deleted, ${n(a.objects.keptAfterLostAnswer)} kept after a lost answer, ` +
      `${n(a.objects.leftBehind)} left behind (logged; ${n(a.objects.orphansExplained)} explained objects without a row at the end); ` +
      `injected: ${a.objects.putFailuresInjected} PutObject and ${a.objects.deleteFailuresInjected} DeleteObject failures; ${n(a.objects.rowsWithObject)} rows point to the bucket at the end`,
    `  connections table: ${Object.entries(a.connections.requests).map(([op, count]) => `${n(count)} ${op}`).join(', ') || 'no requests'} ` +
      `(${(((a.connections.requests['GetItem'] ?? 0) * 1000) / Math.max(1, m.deliveries)).toFixed(1)} GetItem per 1,000 deliveries, refreshers included); ` +
      `${a.connections.readFailuresInjected} of the containers' reads refused (injected throttling)`,
    `  handlers' metrics: ${Object.entries(a.handlerMetrics).map(([name, value]) => `${name} ${n(value)}`).join(', ')}`,
    `  end state: ${n(a.items.atEnd)} items at the provider, ${n(a.items.deletedAtEnd)} deleted; ${n(a.items.rowsAtEnd)} rows (${n(a.items.tombstones)} tombstones); ${n(a.outputBytes)} bytes of output searched`,
  ];
}
