/**
 * The soak's knobs and their defaults (`npm run soak` takes a few of them from the command line).
 * What the stacks deploy comes from the deployment of cdk.json (dev/system): instances, batch size,
 * the function's time-out, the queue's visibility time-out and maxReceiveCount.
 */
import { workQueueDeployment } from '../../../infra/deployment.js';
import { systemConfig } from '../../system/config.js';

const DEPLOYED = systemConfig();
const DEPLOYED_QUEUE = workQueueDeployment(DEPLOYED);

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
  /** Scales AWS's DynamoDB latency injected into every call and the pace row's (dev/fakes/dynamo-latency.ts): 0 turns it off. */
  dynamoLatency: number;
  /** Dot path of the revision in an item (REVISION_FIELD). */
  revisionField: string;
  /** SQS redrive policy; default the deployed one. */
  maxReceiveCount: number;
  /** SQS visibility time-out, in (scaled) seconds; default the deployed one. */
  visibilityTimeoutSeconds: number;
  /** Real milliseconds per SQS second (visibility time-outs, Retry-After delays). */
  msPerSecond: number;
  /** Lambda time-out of one invocation, real ms (the handler's deadline comes from it); default the deployed one. */
  invocationTimeoutMs: number;
  /** Scale applied to the handler's own backoff sleeps (fetch re-tries, unprocessed keys). */
  backoffScale: number;
  /** Share of sent messages delivered twice. */
  duplicateRate: number;
  /** Change-feed events per id (bumps, deletes, creations) during the run. */
  mutationRate: number;
  /** Token rotations during the run: access tokens revoked, then two refresher runs at once. */
  rotations: number;
  /** Real ms between revoking the access tokens and the refreshers' runs (the 401 window). */
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
  /**
   * Share of the containers' reads of the connections table (GetItem) refused with DynamoDB
   * throttling above the SDK's retries (the connections' access layer sees it); the first read
   * of the run always is.
   */
  connectionsFailureRate: number;
  /** Share of the tree's files too large for a DynamoDB row (stored whole in the items bucket); at least 3 such files. */
  largeItemShare: number;
  /** Share of revision bumps that make an item cross the row limit (a large one shrinks, a small one grows). */
  resizeShare: number;
  /** Share of the handlers' S3 PutObject and DeleteObject calls that fail (injected, above the SDK's retries). */
  s3FailureRate: number;
  /** SQS faults on the handler's calls. */
  deadLetterSendFailureRate: number;
  visibilityFailureRate: number;
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
  instances: DEPLOYED.syncMaxConcurrency,
  batchSize: DEPLOYED.syncBatchSize,
  latencyMs: 2,
  dynamoLatency: 1,
  revisionField: 'revision',
  maxReceiveCount: DEPLOYED_QUEUE.maxReceiveCount,
  visibilityTimeoutSeconds: DEPLOYED_QUEUE.visibilityTimeoutSeconds,
  msPerSecond: 1,
  invocationTimeoutMs: DEPLOYED.syncTimeoutSeconds * 1000,
  backoffScale: 0.1,
  duplicateRate: 0.05,
  mutationRate: 0.1,
  rotations: 8,
  rotationGapMs: 30,
  transientRate: 0.2,
  rateLimitRate: 0.002,
  slowRate: 0.03,
  slowMs: 150,
  hangRate: 0.001,
  providerTimeoutMs: 1_000,
  tokenFailureRate: 0.1,
  throttleRate: 0.1,
  unprocessedRate: 0.1,
  lostAckRate: 0.01,
  connectionsFailureRate: 0.05,
  largeItemShare: 0.01,
  resizeShare: 0.2,
  s3FailureRate: 0.05,
  deadLetterSendFailureRate: 0.3,
  visibilityFailureRate: 0.1,
  maxDurationMs: 20 * 60_000,
};

/** `npm run soak`'s command line, as parseArgs reads it (test/docs holds the docs to it). */
export const SOAK_CLI_OPTIONS = {
  ids: { type: 'string' },
  seed: { type: 'string' },
  instances: { type: 'string' },
  latency: { type: 'string' },
  'dynamo-latency': { type: 'string' },
  'batch-size': { type: 'string' },
  rotations: { type: 'string' },
  'max-receive-count': { type: 'string' },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
} as const;
