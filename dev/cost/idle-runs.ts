/**
 * What an idle run of each scheduled function does, in one place: the calls it makes (and what
 * each call is charged, CALL_UNITS), the metrics it publishes, the bytes it logs, the reconciler's
 * passes (IDLE_RUNS), and the assumptions the idle cost rests on (IDLE_ASSUMPTIONS). Priced by
 * idle-lines.ts; the command is idle-cost.ts.
 */
import { DEFAULTS, ENV } from '../../functions/shared/config.js';
import { RECONCILER_METRIC_NAMES, RECONCILER_SERVICE, REFRESHER_METRIC_NAMES, REFRESHER_SERVICE } from '../../functions/shared/metric-names.js';

/** The requests an idle run makes, by the API call (DynamoDB's, SQS's, and KMS's on DynamoDB's behalf). */
export type IdleCall = keyof typeof CALL_UNITS;
export type IdleCalls = Partial<Record<IdleCall, number>>;

/**
 * What each call is charged, in request units or requests. DynamoDB: a read of a row under 4 KB
 * strongly consistent is one read unit; a Scan page of an empty table eventually consistent is the
 * least a read is charged, half a unit; a write of a row under 1 KB is one write unit (the reconcile
 * cursor with its 8 segments is well under); DescribeTable is the control plane, free.
 */
export const CALL_UNITS = {
  Scan: { readUnits: 0.5 },
  GetItem: { readUnits: 1 },
  PutItem: { writeUnits: 1 },
  UpdateItem: { writeUnits: 1 },
  DescribeTable: {},
  GetQueueAttributes: { sqsRequests: 1 },
  /** DynamoDB's own Decrypt of the connections table's key under the connections key: about one a refresher run (docs/connections.md, Cost). */
  Decrypt: { kmsRequests: 1 },
} as const satisfies Record<string, Partial<Record<'readUnits' | 'writeUnits' | 'sqsRequests' | 'kmsRequests', number>>>;

/** A pass of the reconciler over an empty table: what it adds to the idle tick it happens in. */
export interface IdlePass {
  /** Hours between two passes' starts (freshnessHours). */
  everyHours: number;
  calls: IdleCalls;
  /** Metrics only the pass's last tick publishes. */
  metrics: readonly string[];
  /** Bytes of log lines beyond an idle tick's (`reconciliation pass started`, and the end's in the tick's line and metrics). */
  logBytes: number;
}

/** One scheduled function's idle run, by its service (POWERTOOLS_SERVICE_NAME). */
export interface IdleRun {
  calls: IdleCalls;
  /** The metrics every run publishes (zeros included), one dimension set each. */
  metrics: readonly string[];
  /** Bytes of the run's own log lines (its line and its EMF metrics), Lambda's own lines left out. */
  logBytes: number;
  /** The passes, from the function's environment (the reconciler's). */
  pass?: (environment: Readonly<Record<string, unknown>>) => IdlePass;
}

/**
 * The assumptions of the idle cost, in one place. The log bytes of a run are those the real
 * handlers wrote in an idle run with the real Powertools logger and metrics and a Lambda context
 * (measured 2026-12-08; test/dev/cost/idle-cost.test.ts holds them to within 5%), the calls those
 * its ports received (held by the same test).
 */
export const IDLE_ASSUMPTIONS = {
  /** The month priced (the month-billed resources are billed by the month whatever its length). */
  days: 30,
  /**
   * Billed duration of one idle run, ms. None is measured in Lambda: a warm run makes one or two
   * DynamoDB calls of a few ms each (4 to 10 ms in the harness's latency model,
   * dev/fakes/dynamo-latency.ts) and writes two lines; 100 ms is rounded up generously. A cold start's
   * initialization (billed since August 2025) is left out: every refresher run cold, at 1 s, would
   * add about $0.03 a month.
   */
  billedMsPerRun: 100,
  /**
   * Lambda's pollers on a queue an event source mapping reads, while the queue is empty: "when
   * traffic is low, Lambda scales back the processing to five concurrent batches, and can optimize
   * to as few as 2 [...]; this optimization is not available when you enable the maximum concurrency
   * setting" (the Lambda developer guide, "Configuring scaling behavior for SQS event source
   * mappings"). Every mapping here sets a maximum concurrency: five.
   */
  pollersPerQueueMapping: 5,
  /** Each poller's empty long poll, seconds: ReceiveMessage's WaitTimeSeconds of 20, the most SQS allows (dev/system/event-sources.ts LAMBDA_LONG_POLL_SECONDS). */
  longPollSeconds: 20,
  /**
   * Bytes CloudWatch Logs stores for each byte ingested: 1, the uncompressed bytes (an upper bound:
   * AWS stores them compressed), priced at steady state (`RetentionInDays` days of the idle runs'
   * logs kept).
   */
  storedPerIngestedByte: 1,
} as const;

/** The idle run of each scheduled function, by service. */
export const IDLE_RUNS: Readonly<Record<string, IdleRun>> = {
  // A Scan of the empty connections table (and DynamoDB's Decrypt of its table key), its run line and metrics.
  [REFRESHER_SERVICE]: {
    calls: { Scan: 1, Decrypt: 1 },
    metrics: Object.values(REFRESHER_METRIC_NAMES),
    logBytes: 1_390,
  },
  // Once the pass over the empty table has ended: a strongly consistent GetItem of the cursor and a
  // DescribeTable (the item count), its tick line and metrics.
  [RECONCILER_SERVICE]: {
    calls: { GetItem: 1, DescribeTable: 1 },
    metrics: [
      RECONCILER_METRIC_NAMES.enqueued,
      RECONCILER_METRIC_NAMES.pass,
      RECONCILER_METRIC_NAMES.passAge,
      RECONCILER_METRIC_NAMES.idsKnown,
      RECONCILER_METRIC_NAMES.projectedPass,
    ],
    logBytes: 1_110,
    pass: (environment) => {
      const segments = Number(environment[ENV.reconcileSegments] ?? DEFAULTS.reconcileSegments);
      return {
        everyHours: Number(environment[ENV.freshnessHours] ?? DEFAULTS.freshnessHours),
        // The cursor written (the pass started), the queue's backlog read, each segment's empty
        // Scan page and its advance, the cursor read again and the pass ended.
        calls: { GetItem: 1, PutItem: 1, GetQueueAttributes: 1, Scan: segments, UpdateItem: segments + 1 },
        metrics: [RECONCILER_METRIC_NAMES.passLength],
        logBytes: 570,
      };
    },
  },
};
