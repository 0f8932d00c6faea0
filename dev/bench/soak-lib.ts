/**
 * The chaos soak: a seeded simulation of production, run in process.
 *
 *   - the provider simulator serves a generated item tree and injects faults on the items endpoint
 *     (5xx, 408 and dropped connections: 20% together; 429 with and without Retry-After; slow and
 *     hanging responses) and on the token endpoint;
 *   - a "change feed" bumps revisions, deletes, creates and resurrects items while the sync runs
 *     (often items whose message is being processed right then) and enqueues the id each time, as a
 *     real change notification would;
 *   - the token refresher runs every so often against a provider that rotates the refresh token, and
 *     every access token issued so far is revoked just before it runs, so containers holding a cached
 *     token meet 401s while the token rotates;
 *   - an SQS queue model (at-least-once: duplicate copies, some delivered to two containers at once;
 *     redelivery after batchItemFailures; ChangeMessageVisibility for Retry-After; the redrive to the
 *     dead-letter queue after maxReceiveCount) feeds batches to several handler instances at once, each
 *     built by its own createSyncHandler call (its own token cache and clients: a separate container);
 *   - DynamoDB (dynalite) throttles a share of requests, leaves BatchGetItem keys unprocessed and
 *     loses some write acknowledgements (the SDK re-sends the conditional write);
 *   - a few deliberately bad messages are mixed in.
 *
 * After quiescence (queue drained, no more changes) it checks: items lost, items stale, rows whose
 * item differs from the provider's, writes minus real changes, dead letters (exactly the bad ones,
 * each with its reason), and tokens in the captured stdout/stderr and in the dead letters.
 *
 * Seeded: the same options give the same ids, bad messages, change feed and fault rates. The
 * interleaving of concurrent instances depends on timing, so counts of faults met vary a little from
 * run to run; the checks must hold on every run.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { ScanCommand } from '@aws-sdk/client-dynamodb';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import type { Context, SQSEvent, SQSRecord } from 'aws-lambda';
import { createSyncHandler, type SyncHandler } from '../../functions/item-sync/app.js';
import { loadRefresherConfig, loadSyncConfig } from '../../functions/shared/config.js';
import { createRefresherHandler } from '../../functions/token-refresher/app.js';
import { generateItemTree, mulberry32 } from '../simulator/item-tree.js';
import { ProviderSimulator, type Fault, type FaultRule, type SimulatorItem } from '../simulator/provider-simulator.js';
import { attachFakeSqs, DynamoMeter, FakeSecrets, instrumentDynamo, type SqsCalls } from '../fakes/aws-fakes.js';
import { AWS_CREDENTIALS, AWS_REGION, createItemsTable, dynamoClient, startDynalite, type Dynalite } from './support/dynalite.js';
import { checkDeadLetters, checkState, checkWrites, countTokens, tokensInSecrets, type DeadLetterSummary, type ExpectedDeadLetter, type Row } from './support/checks.js';
import { n, table } from './support/format.js';
import { OutputCapture } from '../fakes/output-capture.js';
import { QueueModel, type MessageCopy } from '../fakes/queue-model.js';

// ---- options -------------------------------------------------------------------------------------

export interface SoakOptions {
  /** Item ids fed to the queue at the start (the provider's tree has as many items). */
  ids: number;
  seed: number;
  /** Handler instances (containers) running at once: the sync's syncMaxConcurrency. */
  instances: number;
  /** SQS records per invocation (syncBatchSize). */
  batchSize: number;
  /** Provider latency per request, ms. */
  latencyMs: number;
  /** Dot path of the revision in an item (REVISION_FIELD). */
  revisionField: string;
  /** SQS redrive policy. */
  maxReceiveCount: number;
  /** SQS visibility time-out, in (scaled) seconds: 6 × the 60 s function time-out in the stack. */
  visibilityTimeoutSeconds: number;
  /** Real milliseconds per SQS second (visibility time-outs, Retry-After delays). */
  msPerSecond: number;
  /** Lambda time-out of one invocation, real ms (the handler's deadline comes from it). */
  invocationTimeoutMs: number;
  /** Scale applied to the handler's own backoff sleeps (fetch re-tries, unprocessed keys). */
  backoffScale: number;
  /** Share of sent messages delivered twice. */
  duplicateRate: number;
  /** Change-feed events per id (bumps, deletes, creations) during the run. */
  mutationRate: number;
  /** Token rotations during the run. */
  rotations: number;
  /** Real ms between revoking the access tokens and the refresher's run (the 401 window). */
  rotationGapMs: number;
  /** Provider faults on the items endpoint, as shares of all item requests. */
  transientRate: number;
  rateLimitRate: number;
  slowRate: number;
  slowMs: number;
  hangRate: number;
  /** Provider time-out (PROVIDER_TIMEOUT_MS) that ends a hanging request. */
  providerTimeoutMs: number;
  /** Share of token requests answered 503. */
  tokenFailureRate: number;
  /** DynamoDB chaos. */
  throttleRate: number;
  unprocessedRate: number;
  lostAckRate: number;
  /** Secrets Manager GetSecretValue failures. */
  secretsFailureRate: number;
  /** SQS faults on the handler's calls. */
  deadLetterSendFailureRate: number;
  visibilityFailureRate: number;
  /** dynalite in a child process (another core) or in this one. */
  dynalite: 'child' | 'in-process';
  /** Give up (and fail) if the queue has not drained after this long, real ms. */
  maxDurationMs: number;
  /** Where to write everything the run printed (optional). */
  logFile?: string;
  /** Progress lines (written around the output capture); none when absent. */
  progress?: (line: string) => void;
}

export const SOAK_DEFAULTS: Omit<SoakOptions, 'logFile' | 'progress'> = {
  ids: 10_000,
  seed: 1,
  instances: 5,
  batchSize: 10,
  latencyMs: 2,
  revisionField: 'revision',
  maxReceiveCount: 5,
  visibilityTimeoutSeconds: 360,
  msPerSecond: 1,
  invocationTimeoutMs: 60_000,
  backoffScale: 0.1,
  duplicateRate: 0.05,
  mutationRate: 0.1,
  rotations: 8,
  rotationGapMs: 30,
  transientRate: 0.2,
  rateLimitRate: 0.03,
  slowRate: 0.03,
  slowMs: 150,
  hangRate: 0.001,
  providerTimeoutMs: 1_000,
  tokenFailureRate: 0.1,
  throttleRate: 0.1,
  unprocessedRate: 0.1,
  lostAckRate: 0.01,
  secretsFailureRate: 0.05,
  deadLetterSendFailureRate: 0.3,
  visibilityFailureRate: 0.1,
  dynalite: 'child',
  maxDurationMs: 20 * 60_000,
};

// ---- report ----------------------------------------------------------------------------------------

export type { DeadLetterSummary };

export interface SoakFigures {
  /** Ids enqueued (not deliberately bad) whose item exists at the provider with no row. */
  itemsLost: number;
  /** Rows whose revision is not the provider's latest, or whose tombstone state is wrong. */
  itemsStale: number;
  /** Rows at the latest revision whose `item` is not the provider's item. */
  contentMismatches: number;
  /** Rows for ids never sent as good messages (a bad id stored). */
  unexpectedRows: number;
  /** Successful writes that stored an (id, revision|deleted) state the table had already held. */
  excessWrites: number;
  /** Distinct bad messages dead-lettered with the expected reason. */
  deadLetteredExpected: number;
  /** Bad messages sent. */
  badMessages: number;
  /** Dead-letter entries for messages that were not deliberately bad (or moved by the redrive). */
  deadLetteredUnexpected: number;
  /** Bad messages dead-lettered with another reason than the expected one. */
  deadLetteredWrongReason: number;
  /** Bad messages never dead-lettered. */
  deadLettersMissing: number;
  /** Occurrences of any token ever issued in stdout/stderr, dead letters and handler answers. */
  tokensInOutput: number;
  /** Messages still in the queue at the end (0 after quiescence). */
  messagesLeft: number;
  /** Invocations that threw, or answered with an identifier that was not in the batch. */
  handlerErrors: number;
  /** Postponed records delivered again before their Retry-After. */
  deliveredBeforeRetryAfter: number;
}

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
    changeFeed: { bumped: number; bumpedWhileInFlight: number; deleted: number; created: number; resurrected: number };
    tokens: { rotations: number; refresherFailures: number; issued: number; revocations: number };
    provider: {
      itemRequests: number;
      tokenRequests: number;
      /** Item requests by status (or fault kind when unanswered). */
      byStatus: Record<string, number>;
      tokenByStatus: Record<string, number>;
      serverErrors: number;
      rateLimited: number;
      unauthorized: number;
      dropped: number;
      slow: number;
      hung: number;
    };
    dynamodb: {
      requests: Record<string, number>;
      conditionalFailures: Record<string, number>;
      writes: number;
      distinctStates: number;
      throttlesInjected: number;
      unprocessedResponsesInjected: number;
      unprocessedKeysInjected: number;
      lostAcksInjected: number;
    };
    secrets: { getSecretValue: number; putSecretValue: number; failuresInjected: number };
    sqs: SqsCalls;
    /** Sums of the handlers' own EMF metrics. */
    handlerMetrics: Record<string, number>;
    outputBytes: number;
  };
  logFile?: string;
}

// ---- deliberately bad messages --------------------------------------------------------------------

export interface BadMessage extends ExpectedDeadLetter {
  body: string;
  setup?: (sim: ProviderSimulator) => void;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The deliberately bad messages of a soak, and the dead-letter reason each must get. */
export function badMessages(revisionField: string): BadMessage[] {
  const field = escapeRegExp(revisionField);
  const itemWithout = (id: string, extra: Record<string, unknown>): SimulatorItem => ({ id, type: 'file', name: `${id}.txt`, ...extra });
  return [
    { what: 'body: broken JSON', body: '{"id": "fil-broken"', expected: /starts with "\{" but is not valid JSON/ },
    { what: 'body: no "id"', body: '{"itemId": "fil-0002"}', expected: /has no "id"/ },
    { what: 'body: "id" is a number', body: '{"id": 42}', expected: /"id" is a number, not a string/ },
    { what: 'id: empty', body: '{"id": ""}', expected: /the item id is empty/ },
    { what: 'id: blank bare body', body: '   \n', expected: /the item id is empty/ },
    { what: 'id: control character', body: JSON.stringify({ id: 'fil-\u0007-bell' }), expected: /control character \(U\+0007\)/ },
    { what: 'id: 1,025 characters', body: JSON.stringify({ id: 'x'.repeat(1025) }), expected: /1025 characters long; the limit is 1024/ },
    { what: 'id: lone surrogate', body: '{"id": "fil-\\ud800"}', expected: /lone surrogate/ },
    { what: 'id: ".." (not a path segment)', body: '{"id": ".."}', expected: /cannot be sent as a URL path segment/ },
    {
      what: 'provider: 400 for the id',
      body: '{"id": "bad-http-400"}',
      expected: /cannot serve this item as asked.*HTTP 400/,
      setup: (sim) => sim.addFault({ endpoint: 'items', itemId: 'bad-http-400', fault: { kind: 'status', status: 400 } }),
    },
    {
      what: 'provider: 403 for the id',
      body: 'bad-http-403',
      expected: /cannot serve this item as asked.*HTTP 403/,
      setup: (sim) => sim.addFault({ endpoint: 'items', itemId: 'bad-http-403', fault: { kind: 'status', status: 403 } }),
    },
    {
      what: 'provider: 200 that is not JSON',
      body: '{"id": "bad-not-json"}',
      expected: /not an item.*not JSON/,
      setup: (sim) =>
        sim.addFault({ endpoint: 'items', itemId: 'bad-not-json', fault: { kind: 'body', rawBody: '<html>maintenance</html>', contentType: 'text/html' } }),
    },
    {
      what: 'item: no revision',
      body: '{"id": "bad-no-revision"}',
      expected: new RegExp(`no value at the revision field "${field}"`),
      setup: (sim) => sim.setItem(itemWithout('bad-no-revision', {})),
    },
    {
      what: 'item: names another id',
      body: '  bad-other-id  ',
      expected: /answered with another item/,
      setup: (sim) => sim.setItem(withRevision(itemWithout('someone-else', {}), revisionField, 3), 'bad-other-id'),
    },
    {
      what: 'item: unknown type',
      body: '{"id": "bad-type"}',
      expected: /has type "symlink"/,
      setup: (sim) => sim.setItem({ ...withRevision(itemWithout('bad-type', {}), revisionField, 1), type: 'symlink' } as unknown as SimulatorItem),
    },
  ];
}

function withRevision(item: SimulatorItem, revisionField: string, revision: number): SimulatorItem {
  const copy = structuredClone(item) as Record<string, unknown>;
  const keys = revisionField.split('.');
  let holder = copy;
  for (const key of keys.slice(0, -1)) {
    if (typeof holder[key] !== 'object' || holder[key] === null) holder[key] = {};
    holder = holder[key] as Record<string, unknown>;
  }
  holder[keys[keys.length - 1]!] = revision;
  return copy as SimulatorItem;
}

// ---- provider faults ------------------------------------------------------------------------------

/** Rules with effective shares: the simulator tries rules in order, each with its own draw. */
function addFaults(sim: ProviderSimulator, endpoint: FaultRule['endpoint'], shares: Array<[number, Fault]>): void {
  let left = 1;
  for (const [share, fault] of shares) {
    if (share <= 0) continue;
    const probability = Math.min(1, share / left);
    sim.addFault({ endpoint, probability, fault });
    left -= share;
  }
}

function providerFaults(o: SoakOptions): Array<[number, Fault]> {
  const t = o.transientRate;
  const r = o.rateLimitRate;
  return [
    [t * 0.3, { kind: 'status', status: 500 }],
    [t * 0.15, { kind: 'status', status: 502 }],
    [t * 0.25, { kind: 'status', status: 503 }],
    [t * 0.1, { kind: 'status', status: 504 }],
    [t * 0.05, { kind: 'status', status: 408 }],
    [t * 0.15, { kind: 'drop' }],
    [r * 0.4, { kind: 'status', status: 429, headers: { 'Retry-After': '2' } }],
    [r * 0.3, { kind: 'status', status: 429, headers: { 'Retry-After': '30' } }],
    // An HTTP date: fixed when the run starts, ten minutes ahead, so it stays in the future while the run lasts.
    [r * 0.1, { kind: 'status', status: 429, headers: { 'Retry-After': new Date(Date.now() + 600_000).toUTCString() } }],
    [r * 0.2, { kind: 'status', status: 429 }],
    [o.slowRate, { kind: 'delay', ms: o.slowMs }],
    [o.hangRate, { kind: 'hang' }],
  ];
}

// ---- the change feed ------------------------------------------------------------------------------

export type ChangeKind = 'bump' | 'delete' | 'create' | 'resurrect';

/**
 * The kinds of the change-feed events, drawn up front so that a seed always gives the same mix:
 * 70% revision bumps, 15% deletions, 15% creations (half of them, when an item is deleted,
 * re-creating it with a newer revision). From 4 events on, every kind occurs at least once.
 */
export function changePlan(count: number, seed: number): ChangeKind[] {
  const random = mulberry32((seed ^ 0xc4a76e) >>> 0);
  const plan: ChangeKind[] = [];
  let deleted = 0;
  for (let i = 0; i < count; i += 1) {
    const roll = random();
    if (roll < 0.7) plan.push('bump');
    else if (roll < 0.85) {
      plan.push('delete');
      deleted += 1;
    } else if (deleted > 0 && random() < 0.5) {
      plan.push('resurrect');
      deleted -= 1;
    } else plan.push('create');
  }
  if (count >= 4) {
    const ensure = (kind: ChangeKind, at: number): void => {
      if (!plan.includes(kind)) plan[at] = kind;
    };
    ensure('delete', Math.floor(count / 4));
    ensure('create', Math.floor(count / 2));
    ensure('resurrect', Math.floor((3 * count) / 4));
  }
  // A re-creation needs a deleted item at that point; make any that has none a creation.
  deleted = 0;
  for (let i = 0; i < plan.length; i += 1) {
    if (plan[i] === 'delete') deleted += 1;
    else if (plan[i] === 'resurrect') {
      if (deleted > 0) deleted -= 1;
      else plan[i] = 'create';
    }
  }
  return plan;
}

// ---- the run ----------------------------------------------------------------------------------------

const TABLE_NAME = 'content-sync-items';
const CREDENTIALS_SECRET_ID = 'content-sync/provider-credentials';
const ACCESS_TOKEN_SECRET_ID = 'content-sync/provider-access-token';

interface Instance {
  index: number;
  handler: SyncHandler;
  busy: boolean;
  invocations: number;
}

export async function runSoak(input: Partial<SoakOptions> = {}): Promise<SoakReport> {
  const o: SoakOptions = { ...SOAK_DEFAULTS, ...input };
  const progress = o.progress;
  const startedAt = new Date();
  const t0 = Date.now();
  const rng = mulberry32(o.seed);

  // Provider: the tree, the bad items and faults (specific rules first: the first match wins).
  const tree = generateItemTree({ count: o.ids, seed: o.seed, revisionField: o.revisionField });
  const sim = await ProviderSimulator.start({
    latencyMs: o.latencyMs,
    rotateRefreshToken: true,
    revisionField: o.revisionField,
    items: tree,
    seed: o.seed,
  });
  const bad = badMessages(o.revisionField);
  for (const message of bad) message.setup?.(sim);
  addFaults(sim, 'items', providerFaults(o));
  addFaults(sim, 'token', [[o.tokenFailureRate, { kind: 'status', status: 503 }]]);

  // Every token the provider issues, for the search of the output.
  const tokens = new Set<string>([sim.refreshToken]);
  const issue = sim.issueAccessToken.bind(sim);
  sim.issueAccessToken = () => {
    const token = issue();
    tokens.add(token);
    return token;
  };

  const capture = new OutputCapture();
  const say = (line: string): void => {
    if (progress) capture.released(() => progress(line));
  };

  const clients: Array<{ destroy(): void }> = [];
  let dynalite: Dynalite | undefined;
  try {
    dynalite = await startDynalite(o.dynalite);
    await createItemsTable(dynalite.endpoint, TABLE_NAME);

    const secrets = new FakeSecrets({ getFailureRate: o.secretsFailureRate, random: mulberry32(o.seed ^ 0x5ec2e75) });
    secrets.set(CREDENTIALS_SECRET_ID, JSON.stringify({ clientId: sim.clientId, refreshToken: sim.refreshToken }));
    secrets.set(ACCESS_TOKEN_SECRET_ID, JSON.stringify({ accessToken: '', refreshedAt: '' }));

    const queue = new QueueModel({
      name: 'content-sync-sync-queue',
      deadLetterQueueName: 'content-sync-dead-letters',
      maxReceiveCount: o.maxReceiveCount,
      visibilityTimeoutSeconds: o.visibilityTimeoutSeconds,
      msPerSecond: o.msPerSecond,
      random: mulberry32(o.seed ^ 0x5a5),
      deadLetterSendFailureRate: o.deadLetterSendFailureRate,
      visibilityFailureRate: o.visibilityFailureRate,
    });
    const sqsCalls: SqsCalls = {};
    const meter = new DynamoMeter();

    const syncEnv = {
      PROVIDER_BASE_URL: sim.baseUrl,
      ACCESS_TOKEN_SECRET_ID,
      ITEMS_TABLE_NAME: TABLE_NAME,
      REVISION_FIELD: o.revisionField,
      DEAD_LETTER_QUEUE_URL: queue.deadLetterQueueUrl,
      PROVIDER_TIMEOUT_MS: String(o.providerTimeoutMs),
    };
    const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms * o.backoffScale)));

    capture.start();
    const instances: Instance[] = [];
    for (let index = 0; index < o.instances; index += 1) {
      const dynamodb = instrumentDynamo(dynamoClient(dynalite.endpoint), meter, {
        random: mulberry32(o.seed * 7919 + index),
        throttleRate: o.throttleRate,
        unprocessedRate: o.unprocessedRate,
        lostAckRate: o.lostAckRate,
      });
      const sqs = attachFakeSqs(new SQSClient({ region: AWS_REGION, credentials: AWS_CREDENTIALS }), queue, sqsCalls);
      const secretsClient = secrets.attach(new SecretsManagerClient({ region: AWS_REGION, credentials: AWS_CREDENTIALS }));
      clients.push(dynamodb, sqs, secretsClient);
      const handler = createSyncHandler({
        config: loadSyncConfig(syncEnv),
        dynamodb,
        sqs,
        secrets: secretsClient,
        random: mulberry32(o.seed * 104_729 + index),
        sleep,
      });
      instances.push({ index, handler, busy: false, invocations: 0 });
    }

    const refresherSecrets = secrets.attach(new SecretsManagerClient({ region: AWS_REGION, credentials: AWS_CREDENTIALS }));
    clients.push(refresherSecrets);
    const refresher = createRefresherHandler({
      config: loadRefresherConfig({ PROVIDER_BASE_URL: sim.baseUrl, CREDENTIALS_SECRET_ID, ACCESS_TOKEN_SECRET_ID }),
      secrets: refresherSecrets,
    });
    const tokenStats = { rotations: 0, refresherFailures: 0, revocations: 0 };
    /** Runs the refresher until it succeeds (the scheduler would run it again; here at once). */
    const refresh = async (trigger: string): Promise<void> => {
      for (let attempt = 1; ; attempt += 1) {
        try {
          await refresher({ trigger });
          tokens.add(sim.refreshToken);
          return;
        } catch {
          tokenStats.refresherFailures += 1;
          if (attempt >= 50) throw new Error('the token refresher failed 50 times in a row');
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
      }
    };
    await refresh('deploy');

    // Provider request tally (the simulator's list is emptied as it goes: long runs).
    const provider = {
      itemRequests: 0,
      tokenRequests: 0,
      byStatus: {} as Record<string, number>,
      tokenByStatus: {} as Record<string, number>,
      serverErrors: 0,
      rateLimited: 0,
      unauthorized: 0,
      dropped: 0,
      slow: 0,
      hung: 0,
    };
    const tally = (final: boolean): void => {
      const keep = [];
      for (const request of sim.requests) {
        const over = request.status !== 0 || request.fault === 'drop' || request.fault === 'hang' || final;
        if (!over) {
          keep.push(request);
          continue;
        }
        const status = request.status === 0 ? (request.fault ?? 'unanswered') : String(request.status);
        if (request.endpoint === 'token') {
          provider.tokenRequests += 1;
          provider.tokenByStatus[status] = (provider.tokenByStatus[status] ?? 0) + 1;
          continue;
        }
        provider.itemRequests += 1;
        provider.byStatus[status] = (provider.byStatus[status] ?? 0) + 1;
        if (request.status >= 500) provider.serverErrors += 1;
        if (request.status === 429) provider.rateLimited += 1;
        if (request.status === 401) provider.unauthorized += 1;
        if (request.fault === 'drop') provider.dropped += 1;
        if (request.fault === 'delay') provider.slow += 1;
        if (request.fault === 'hang') provider.hung += 1;
      }
      sim.requests.length = 0;
      sim.requests.push(...keep);
    };

    // ---- messages ----
    const badByMessageId = new Map<string, BadMessage>();
    const goodIds = new Set<string>();
    const initialMessageIds = new Set<string>();
    const deliveredInitial = new Set<string>();
    const itemIdOfMessage = new Map<string, string>();
    const inFlightByMessage = new Map<string, number>();
    const inFlightItems = new Map<string, number>();
    let changeNotifications = 0;
    let concurrentDuplicates = 0;

    // `rng` draws the initial feed (the same for a seed); `runRng` what happens at run time.
    const runRng = mulberry32((o.seed ^ 0x7a11c0de) >>> 0);
    const runPick = <T>(list: readonly T[]): T => list[Math.floor(runRng() * list.length)]!;
    const bodyFor = (id: string, random: () => number): string => {
      const roll = random();
      if (roll < 0.08) return id;
      if (roll < 0.1) return `  ${id}\n`;
      return JSON.stringify({ id });
    };
    /** At-least-once: a second copy, mostly a few batches later (often in another instance at the same time). */
    const maybeDuplicate = (copy: MessageCopy, random: () => number): void => {
      if (random() >= o.duplicateRate) return;
      if (random() < 0.7) queue.duplicate(copy, 1 + Math.floor(random() * o.batchSize * o.instances));
      else queue.duplicate(copy, Math.floor(random() * 100), 1 + Math.floor(random() * 60));
    };
    const sendGood = (id: string, initial: boolean): void => {
      const random = initial ? rng : runRng;
      goodIds.add(id);
      const copy = queue.send(bodyFor(id, random));
      itemIdOfMessage.set(copy.messageId, id);
      if (initial) initialMessageIds.add(copy.messageId);
      else changeNotifications += 1;
      maybeDuplicate(copy, random);
    };

    // Initial feed: every id once, shuffled, with the bad messages at random places.
    const order = tree.map((item) => item.id);
    for (let i = order.length - 1; i > 0; i -= 1) {
      const j = Math.floor(rng() * (i + 1));
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    const badAt = new Map<number, BadMessage[]>();
    for (const message of bad) {
      const at = Math.floor(rng() * order.length);
      badAt.set(at, [...(badAt.get(at) ?? []), message]);
    }
    order.forEach((id, position) => {
      for (const message of badAt.get(position) ?? []) {
        const copy = queue.send(message.body);
        badByMessageId.set(copy.messageId, message);
        initialMessageIds.add(copy.messageId);
        maybeDuplicate(copy, rng);
      }
      sendGood(id, true);
    });

    // ---- the change feed ----
    const liveIds: string[] = tree.map((item) => item.id);
    const liveIndex = new Map(liveIds.map((id, index) => [id, index]));
    const deletedItems = new Map<string, SimulatorItem>();
    const feed = { bumped: 0, bumpedWhileInFlight: 0, deleted: 0, created: 0, resurrected: 0 };
    const mutationsPlanned = Math.round(o.ids * o.mutationRate);
    let mutationsDone = 0;
    let created = 0;
    let lastFeedEventAt = Date.now();

    const removeLive = (id: string): void => {
      const index = liveIndex.get(id);
      if (index === undefined) return;
      const last = liveIds.pop()!;
      if (last !== id) {
        liveIds[index] = last;
        liveIndex.set(last, index);
      }
      liveIndex.delete(id);
    };
    const addLive = (id: string): void => {
      if (liveIndex.has(id)) return;
      liveIndex.set(id, liveIds.length);
      liveIds.push(id);
    };
    const plan = changePlan(mutationsPlanned, o.seed);
    const mutate = (kind: ChangeKind): void => {
      if (kind === 'resurrect' && deletedItems.size === 0) kind = 'create';
      if ((kind === 'bump' || kind === 'delete') && liveIds.length < 10) kind = 'create';
      if (kind === 'bump') {
        const inFlight = [...inFlightItems.keys()].filter((id) => liveIndex.has(id));
        const whileInFlight = inFlight.length > 0 && runRng() < 0.5;
        const id = whileInFlight ? runPick(inFlight) : runPick(liveIds);
        sim.bumpRevision(id);
        feed.bumped += 1;
        if (whileInFlight) feed.bumpedWhileInFlight += 1;
        sendGood(id, false);
      } else if (kind === 'delete') {
        const id = runPick(liveIds);
        deletedItems.set(id, sim.getItem(id)!);
        sim.deleteItem(id);
        removeLive(id);
        feed.deleted += 1;
        sendGood(id, false);
      } else if (kind === 'resurrect') {
        const id = runPick([...deletedItems.keys()]);
        sim.setItem(deletedItems.get(id)!);
        sim.bumpRevision(id); // a revision never goes back: the item returns with a newer one
        deletedItems.delete(id);
        addLive(id);
        feed.resurrected += 1;
        sendGood(id, false);
      } else {
        created += 1;
        const template = sim.getItem(runPick(liveIds))!;
        const id = `new-${o.seed}-${String(created).padStart(5, '0')}`;
        sim.setItem(withRevision({ ...template, id, name: `created while syncing ${created}` }, o.revisionField, 1));
        addLive(id);
        feed.created += 1;
        sendGood(id, false);
      }
      lastFeedEventAt = Date.now();
    };

    // Rotations at fixed points of the first delivery of the initial messages.
    const rotationAt = Array.from({ length: o.rotations }, (_, k) => (0.9 * (k + 0.5)) / Math.max(1, o.rotations));
    let rotationsStarted = 0;
    let rotation: Promise<void> | undefined;
    const rotate = async (): Promise<void> => {
      sim.revokeAccessTokens();
      tokenStats.revocations += 1;
      await new Promise((resolve) => setTimeout(resolve, o.rotationGapMs));
      await refresh('schedule');
      tokenStats.rotations += 1;
      lastFeedEventAt = Date.now();
    };

    const feedTick = (): void => {
      const done = deliveredInitial.size / Math.max(1, initialMessageIds.size);
      const target = Math.min(mutationsPlanned, Math.round(mutationsPlanned * Math.min(1, done / 0.8)));
      while (mutationsDone < target) {
        mutate(plan[mutationsDone]!);
        mutationsDone += 1;
      }
      if (!rotation && rotationsStarted < o.rotations && done >= rotationAt[rotationsStarted]!) {
        rotationsStarted += 1;
        rotation = rotate().finally(() => {
          rotation = undefined;
        });
      }
    };
    const feedDone = (): boolean => mutationsDone >= mutationsPlanned && rotationsStarted >= o.rotations && !rotation;

    // ---- the event source mapping: batches to idle instances ----
    let wake: (() => void) | undefined;
    const notify = (): void => {
      const resolve = wake;
      wake = undefined;
      resolve?.();
    };
    let invocations = 0;
    let handlerErrors = 0;
    const answers: string[] = [];

    const toRecord = (copy: MessageCopy): SQSRecord => ({
      messageId: copy.messageId,
      receiptHandle: copy.receiptHandle!,
      body: copy.body,
      attributes: {
        ApproximateReceiveCount: String(copy.receiveCount),
        SentTimestamp: String(copy.sentAt),
        SenderId: 'AIDASOAKSENDER',
        ApproximateFirstReceiveTimestamp: String(copy.firstReceivedAt ?? Date.now()),
      },
      messageAttributes: {},
      md5OfBody: '',
      eventSource: 'aws:sqs',
      eventSourceARN: queue.arn,
      awsRegion: AWS_REGION,
    });

    const invoke = async (instance: Instance, batch: MessageCopy[]): Promise<void> => {
      instance.busy = true;
      instance.invocations += 1;
      invocations += 1;
      for (const copy of batch) {
        if (initialMessageIds.has(copy.messageId)) deliveredInitial.add(copy.messageId);
        const running = inFlightByMessage.get(copy.messageId) ?? 0;
        if (running > 0) concurrentDuplicates += 1;
        inFlightByMessage.set(copy.messageId, running + 1);
        const itemId = itemIdOfMessage.get(copy.messageId);
        if (itemId !== undefined) inFlightItems.set(itemId, (inFlightItems.get(itemId) ?? 0) + 1);
      }
      const event: SQSEvent = { Records: batch.map(toRecord) };
      const started = Date.now();
      const context = lambdaContext(instance.index, instance.invocations, () => o.invocationTimeoutMs - (Date.now() - started));
      let failed: Set<string>;
      try {
        const answer = await instance.handler(event, context);
        answers.push(JSON.stringify(answer));
        const inBatch = new Set(batch.map((copy) => copy.messageId));
        const identifiers = (answer?.batchItemFailures ?? []).map((failure) => failure.itemIdentifier);
        if (identifiers.some((id) => !id || !inBatch.has(id))) {
          // Lambda treats an unknown identifier as a failure of the whole batch.
          handlerErrors += 1;
          failed = inBatch;
        } else {
          failed = new Set(identifiers);
        }
      } catch {
        handlerErrors += 1;
        failed = new Set(batch.map((copy) => copy.messageId));
      }
      for (const copy of batch) {
        queue.settle(copy, !failed.has(copy.messageId));
        const running = (inFlightByMessage.get(copy.messageId) ?? 1) - 1;
        if (running > 0) inFlightByMessage.set(copy.messageId, running);
        else inFlightByMessage.delete(copy.messageId);
        const itemId = itemIdOfMessage.get(copy.messageId);
        if (itemId !== undefined) {
          const items = (inFlightItems.get(itemId) ?? 1) - 1;
          if (items > 0) inFlightItems.set(itemId, items);
          else inFlightItems.delete(itemId);
        }
      }
      instance.busy = false;
      tally(false);
      notify();
    };

    say(
      `soak: ${o.ids} ids + ${bad.length} bad messages, ${o.instances} instances, batch ${o.batchSize}, seed ${o.seed}; ` +
        `SQS time scaled to ${o.msPerSecond} ms per second (visibility ${o.visibilityTimeoutSeconds} s = ${queue.scaled(o.visibilityTimeoutSeconds)} ms)`,
    );
    let lastProgress = Date.now();
    const running = new Set<Promise<void>>();
    let timedOut = false;
    for (;;) {
      feedTick();
      for (const instance of instances) {
        if (instance.busy) continue;
        const batch = queue.receive(o.batchSize);
        if (batch.length === 0) break;
        const call = invoke(instance, batch);
        running.add(call);
        void call.finally(() => running.delete(call));
      }
      if (running.size === 0 && queue.outstanding === 0 && feedDone()) break;
      if (Date.now() - t0 > o.maxDurationMs) {
        timedOut = true;
        break;
      }
      if (Date.now() - lastProgress >= 5_000) {
        lastProgress = Date.now();
        say(
          `  ${((Date.now() - t0) / 1000).toFixed(0).padStart(4)} s: ${deliveredInitial.size}/${initialMessageIds.size} first deliveries, ` +
            `${queue.outstanding} messages outstanding, ${invocations} invocations, ${mutationsDone}/${mutationsPlanned} changes, ` +
            `${tokenStats.rotations}/${o.rotations} rotations`,
        );
      }
      const idle = instances.some((instance) => !instance.busy);
      const nextVisible = queue.nextVisibleAt();
      const waitMs = idle && nextVisible !== undefined ? Math.max(1, Math.min(50, nextVisible - Date.now())) : 50;
      await new Promise<void>((resolve) => {
        wake = resolve;
        setTimeout(resolve, waitMs);
      });
      wake = undefined;
    }
    await Promise.allSettled([...running]);
    if (rotation) await rotation;
    const quiescentAt = Date.now();
    tally(false);
    await sim.close();
    tally(true);
    capture.stop();
    say(`  quiescent after ${((quiescentAt - t0) / 1000).toFixed(1)} s; checking`);

    // ---- checks ----
    const check = dynamoClient(dynalite.endpoint);
    clients.push(check);
    const rows = new Map<string, Row>();
    let startKey: Row | undefined;
    do {
      const page = await check.send(new ScanCommand({ TableName: TABLE_NAME, ConsistentRead: true, ExclusiveStartKey: startKey }));
      for (const row of page.Items ?? []) rows.set(row['id']!.S!, row);
      startKey = page.LastEvaluatedKey;
    } while (startKey);

    const state = checkState(goodIds, (id) => sim.getItem(id), rows, o.revisionField);
    const writes = checkWrites(meter.writes);
    const dead = queue.deadLetters;
    const deadCheck = checkDeadLetters(dead, badByMessageId);

    // Tokens: every token issued or stored, searched in the output, the dead letters and the answers.
    const output = capture.text();
    for (const token of tokensInSecrets(secrets.history.map((entry) => entry.value))) tokens.add(token);
    const tokensInOutput = countTokens(tokens, [output, ...dead.map((entry) => `${entry.body}\n${JSON.stringify(entry.attributes)}`), ...answers]);

    const handlerMetrics = sumEmfMetrics(output);
    if (o.logFile) {
      mkdirSync(dirname(o.logFile), { recursive: true });
      writeFileSync(o.logFile, output);
    }

    const figures: SoakFigures = {
      itemsLost: state.itemsLost,
      itemsStale: state.itemsStale,
      contentMismatches: state.contentMismatches,
      unexpectedRows: state.unexpectedRows,
      excessWrites: writes.excessWrites,
      deadLetteredExpected: deadCheck.expected,
      badMessages: deadCheck.bad,
      deadLetteredUnexpected: deadCheck.unexpected,
      deadLetteredWrongReason: deadCheck.wrongReason,
      deadLettersMissing: deadCheck.missing,
      tokensInOutput,
      messagesLeft: queue.outstanding,
      handlerErrors,
      deliveredBeforeRetryAfter: queue.stats.deliveredBeforeRetryAfter,
    };
    const problems: string[] = [];
    if (timedOut) problems.push(`the queue did not drain within ${o.maxDurationMs} ms`);
    const expectZero: Array<[keyof SoakFigures, string]> = [
      ['itemsLost', 'items lost'],
      ['itemsStale', 'items stale'],
      ['contentMismatches', 'rows whose item differs from the provider'],
      ['unexpectedRows', 'rows for ids never sent as good messages'],
      ['excessWrites', 'writes minus real changes'],
      ['deadLetteredUnexpected', 'unexpected dead letters'],
      ['deadLetteredWrongReason', 'bad messages dead-lettered for the wrong reason'],
      ['deadLettersMissing', 'bad messages never dead-lettered'],
      ['tokensInOutput', 'tokens in output'],
      ['messagesLeft', 'messages left in the queue'],
      ['handlerErrors', 'invocations that failed as a whole'],
      ['deliveredBeforeRetryAfter', 'records delivered before their Retry-After'],
    ];
    for (const [key, label] of expectZero) {
      if (figures[key] !== 0) problems.push(`${label}: ${figures[key]} (expected 0)`);
    }
    if (figures.deadLetteredExpected !== figures.badMessages) {
      problems.push(`bad messages dead-lettered with their reason: ${figures.deadLetteredExpected} of ${figures.badMessages}`);
    }
    problems.push(...[...state.details, ...writes.details, ...deadCheck.details].map((line) => `  ${line}`));

    const tombstones = [...rows.values()].filter((row) => row['deleted']?.BOOL === true).length;
    const { progress: _progress, ...reportedOptions } = o;
    return {
      ok: problems.length === 0,
      problems,
      options: reportedOptions,
      startedAt: startedAt.toISOString(),
      durationMs: quiescentAt - t0,
      drainMs: quiescentAt - lastFeedEventAt,
      figures,
      deadLetters: deadCheck.byReason,
      activity: {
        items: { initial: tree.length, atEnd: liveIds.length, deletedAtEnd: deletedItems.size, rowsAtEnd: rows.size, tombstones },
        messages: {
          initial: initialMessageIds.size,
          bad: badByMessageId.size,
          changeNotifications,
          sent: queue.stats.sent,
          duplicatesInjected: queue.stats.duplicatesInjected,
          concurrentDuplicates,
          deliveries: queue.stats.receives,
          redeliveries: queue.stats.redeliveries,
          redriven: queue.stats.redriven,
          invocations,
          postponed: queue.stats.visibilityChanges,
          visibilityChangeFailuresInjected: queue.stats.visibilityChangeFailuresInjected,
          deadLetterSendFailuresInjected: queue.stats.deadLetterSendFailuresInjected,
        },
        changeFeed: feed,
        tokens: { ...tokenStats, issued: tokens.size },
        provider,
        dynamodb: {
          requests: { ...meter.requests },
          conditionalFailures: { ...meter.conditionalFailures },
          writes: meter.writes.length,
          distinctStates: writes.distinctStates,
          throttlesInjected: meter.injected.throttled,
          unprocessedResponsesInjected: meter.injected.unprocessedResponses,
          unprocessedKeysInjected: meter.injected.unprocessedKeys,
          lostAcksInjected: meter.injected.lostAcks,
        },
        secrets: {
          getSecretValue: secrets.calls.GetSecretValue,
          putSecretValue: secrets.calls.PutSecretValue,
          failuresInjected: secrets.calls.injectedFailures,
        },
        sqs: { ...sqsCalls },
        handlerMetrics,
        outputBytes: output.length,
      },
      ...(o.logFile ? { logFile: o.logFile } : {}),
    };
  } finally {
    capture.stop();
    for (const client of clients) client.destroy();
    await sim.close();
    await dynalite?.close();
  }
}

function lambdaContext(instance: number, invocation: number, remaining: () => number): Context {
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName: 'content-sync-item-sync',
    functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:eu-west-1:000000000000:function:content-sync-item-sync',
    memoryLimitInMB: '512',
    awsRequestId: `soak-${instance}-${invocation}`,
    logGroupName: '/aws/lambda/content-sync-item-sync',
    logStreamName: `soak/instance-${instance}`,
    getRemainingTimeInMillis: () => Math.max(0, remaining()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

/** Sums every metric of the EMF lines (`_aws` objects) in the output. */
export function sumEmfMetrics(output: string): Record<string, number> {
  const sums: Record<string, number> = {};
  for (const line of output.split('\n')) {
    if (!line.includes('"_aws"')) continue;
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(line) as Record<string, unknown>;
    } catch {
      continue;
    }
    const aws = parsed['_aws'] as { CloudWatchMetrics?: Array<{ Metrics?: Array<{ Name: string }> }> } | undefined;
    for (const directive of aws?.CloudWatchMetrics ?? []) {
      for (const metric of directive.Metrics ?? []) {
        const value = parsed[metric.Name];
        const total = Array.isArray(value) ? value.reduce((sum: number, v) => sum + Number(v), 0) : Number(value);
        if (Number.isFinite(total)) sums[metric.Name] = (sums[metric.Name] ?? 0) + total;
      }
    }
  }
  return sums;
}

// ---- printing ----------------------------------------------------------------------------------------

export function formatSoakReport(report: SoakReport): string {
  const f = report.figures;
  const a = report.activity;
  const o = report.options;
  const lines: string[] = [];
  lines.push(
    `Chaos soak — ${n(o.ids)} ids, seed ${o.seed}, ${o.instances} instances × batch ${o.batchSize}, provider latency ${o.latencyMs} ms — ` +
      `${(report.durationMs / 1000).toFixed(1)} s (drain after the last change ${(report.drainMs / 1000).toFixed(1)} s)`,
  );
  lines.push(
    `SQS time is scaled: 1 s = ${o.msPerSecond} ms (visibility ${o.visibilityTimeoutSeconds} s; 429s carry Retry-After 2 s, 30 s, an HTTP date ~600 s ahead, or none); the handlers' own backoff sleeps × ${o.backoffScale}; the SDK's retry backoff and the provider run in real time`,
  );
  lines.push('');
  const rows: Array<[string, string, string]> = [
    ['items lost', n(f.itemsLost), '0'],
    ['items stale after quiescence (revision or tombstone)', n(f.itemsStale), '0'],
    ['rows whose item differs from the provider', n(f.contentMismatches), '0'],
    ['rows for ids never sent as good messages', n(f.unexpectedRows), '0'],
    ['writes minus real changes', n(f.excessWrites), '0'],
    ['dead-lettered: deliberately bad, right reason', `${n(f.deadLetteredExpected)} of ${n(f.badMessages)}`, `${n(f.badMessages)} of ${n(f.badMessages)}`],
    ['dead-lettered: anything else', n(f.deadLetteredUnexpected), '0'],
    ['dead-lettered: bad, wrong reason / missing', `${n(f.deadLetteredWrongReason)} / ${n(f.deadLettersMissing)}`, '0 / 0'],
    ['tokens in output', n(f.tokensInOutput), '0'],
    ['messages left in the queue', n(f.messagesLeft), '0'],
    ['invocations failed as a whole', n(f.handlerErrors), '0'],
    ['records delivered before their Retry-After', n(f.deliveredBeforeRetryAfter), '0'],
  ];
  lines.push(table(['check', 'value', 'expected', ''], rows.map(([label, value, expected]) => [label, value, expected, value === expected ? 'ok' : 'FAIL'])));
  lines.push('');
  lines.push('Dead letters by reason:');
  for (const entry of report.deadLetters) {
    const reason = entry.reason.length > 110 ? `${entry.reason.slice(0, 110)}…` : entry.reason;
    lines.push(`  ${String(entry.entries).padStart(3)} × [${entry.what}] ${reason}`);
  }
  lines.push('');
  const p = a.provider;
  const d = a.dynamodb;
  const m = a.messages;
  lines.push('Faults injected and met:');
  lines.push(
    `  provider: ${n(p.itemRequests)} item requests — ${n(p.serverErrors)} 5xx, ${n(p.byStatus['408'] ?? 0)} 408, ${n(p.dropped)} dropped, ` +
      `${n(p.rateLimited)} 429, ${n(p.slow)} slow (${o.slowMs} ms), ${n(p.hung)} hung (time-out ${o.providerTimeoutMs} ms), ${n(p.unauthorized)} 401; ` +
      `${n(p.tokenRequests)} token requests (${n(p.tokenByStatus['503'] ?? 0)} answered 503)`,
  );
  lines.push(
    `  tokens: ${a.tokens.rotations} rotations (all access tokens revoked ${o.rotationGapMs} ms before each), ${a.tokens.refresherFailures} refresher run(s) failed and were retried, ${a.tokens.issued} tokens issued`,
  );
  lines.push(
    `  change feed: ${n(a.changeFeed.bumped)} revisions bumped (${n(a.changeFeed.bumpedWhileInFlight)} while the item was in flight), ` +
      `${n(a.changeFeed.deleted)} deleted, ${n(a.changeFeed.created)} created, ${n(a.changeFeed.resurrected)} re-created`,
  );
  lines.push(
    `  SQS: ${n(m.sent)} messages (${n(m.initial)} initial incl. ${m.bad} bad, ${n(m.changeNotifications)} change notifications), ` +
      `${n(m.duplicatesInjected)} duplicate copies (${n(m.concurrentDuplicates)} delivered while another copy was in flight), ` +
      `${n(m.deliveries)} deliveries in ${n(m.invocations)} invocations, ${n(m.redeliveries)} redeliveries, ${n(m.postponed)} postponed by Retry-After, ` +
      `${n(m.redriven)} redriven; injected: ${m.deadLetterSendFailuresInjected} dead-letter send failures, ${m.visibilityChangeFailuresInjected} visibility-change failures`,
  );
  lines.push(
    `  DynamoDB: ${Object.entries(d.requests).map(([op, count]) => `${n(count)} ${op}`).join(', ')}; ` +
      `${n(d.throttlesInjected)} throttled, ${n(d.unprocessedResponsesInjected)} BatchGetItem answers with ${n(d.unprocessedKeysInjected)} unprocessed keys, ` +
      `${n(d.lostAcksInjected)} write acknowledgements lost; ${n(d.writes)} writes, ` +
      `${Object.entries(d.conditionalFailures).map(([op, count]) => `${n(count)} ${op}`).join(', ') || 'no'} conditional failures`,
  );
  lines.push(
    `  Secrets Manager: ${n(a.secrets.getSecretValue)} GetSecretValue (${a.secrets.failuresInjected} failed, injected; ` +
      `${((a.secrets.getSecretValue * 1000) / Math.max(1, m.deliveries)).toFixed(1)} per 1,000 deliveries, refresher included), ${n(a.secrets.putSecretValue)} PutSecretValue`,
  );
  const hm = a.handlerMetrics;
  lines.push(
    `  handlers' metrics: ${Object.entries(hm).map(([name, value]) => `${name} ${n(value)}`).join(', ')}`,
  );
  lines.push(
    `  end state: ${n(a.items.atEnd)} items at the provider, ${n(a.items.deletedAtEnd)} deleted; ${n(a.items.rowsAtEnd)} rows (${n(a.items.tombstones)} tombstones); ${n(a.outputBytes)} bytes of output searched`,
  );
  lines.push('');
  lines.push(report.ok ? 'RESULT: ok — every figure as expected' : `RESULT: FAILED\n${report.problems.map((p) => `  ${p}`).join('\n')}`);
  return lines.join('\n');
}
