/**
 * The AWS prices every cost in this repository is computed at, in one place: the simulations'
 * (dev/sim/*-cost.ts, dev/sim/reconcile-report.ts) and a deployment's with no traffic
 * (dev/cost/idle-cost.ts).
 *
 * AWS's public on-demand list prices, in USD, for US East (N. Virginia), `us-east-1`, Lambda on Arm
 * (the functions' architecture). The entries up to `apiGatewayHttpRequestPerMillion` are the prices
 * as of 2026-11-25, the date docs/cost.md first priced with them (git log of docs/cost.md; they were
 * recorded in dev/sim/reconcile-cost.ts from 2026-11-24 to 2026-11-27, and no value has changed
 * since); the CloudWatch alarm, dashboard and metric and the CloudWatch Logs storage entries were
 * added on 2026-12-08, for the idle deployment. Sources: aws.amazon.com/dynamodb/pricing/on-demand/, /sqs/pricing/, /lambda/pricing/,
 * /cloudwatch/pricing/, /xray/pricing/, /eventbridge/pricing/, /kms/pricing/, /api-gateway/pricing/.
 * Another region, or a price AWS has changed since: edit it here, and every figure follows.
 *
 * Free tiers are left out everywhere: every figure is what the usage adds to an account whose free
 * tiers other work already uses (among them CloudWatch's 10 alarm metrics, 10 custom metrics and 3
 * dashboards, CloudWatch Logs' 5 GB, Lambda's 1 million requests and 400,000 GB-s, SQS's 1 million
 * requests, EventBridge Scheduler's 14 million invocations, KMS's 20,000 requests, DynamoDB's 25 GB
 * of storage, each a month).
 */

/** The date the older entries of PRICES are as of (see the header; the idle deployment's entries: IDLE_PRICES_AS_OF). */
export const PRICES_AS_OF = '2026-11-25';
/** The date the CloudWatch alarm, dashboard and metric and the Logs storage entries were added. */
export const IDLE_PRICES_AS_OF = '2026-12-08';
/** The region PRICES are AWS's list prices of. */
export const PRICES_REGION = 'us-east-1';

export const PRICES = {
  /** DynamoDB on demand, standard table class: USD per million read request units. */
  dynamoReadRequestUnitPerMillion: 0.125,
  /** DynamoDB on demand, standard table class: USD per million write request units. */
  dynamoWriteRequestUnitPerMillion: 0.625,
  /** SQS standard queue: USD per million requests (each 64 KB of payload is one request). */
  sqsRequestPerMillion: 0.4,
  /** Lambda: USD per million requests (invocations). */
  lambdaRequestPerMillion: 0.2,
  /** Lambda on Arm: USD per GB-second of duration. */
  lambdaArmGbSecond: 0.0000133334,
  /** CloudWatch Logs, standard class: USD per GB ingested (2^30 bytes). */
  logsIngestedPerGb: 0.5,
  /** X-Ray: USD per million traces recorded. */
  xrayTracePerMillion: 5,
  /** EventBridge Scheduler: USD per million invocations (after the free 14 million a month, left out). */
  schedulerInvocationPerMillion: 1,
  /**
   * EventBridge custom events put: USD per million (each 64 KB chunk of an entry is one event;
   * DynamoDB Streams' reads by a Lambda event source are free).
   */
  eventBridgeEventPerMillion: 1,
  /** DynamoDB standard table storage: USD per GB-month. */
  dynamoStoragePerGbMonth: 0.25,
  /** DynamoDB continuous backups (point-in-time recovery): USD per GB-month. */
  dynamoPitrPerGbMonth: 0.2,
  /** KMS customer managed key: USD per key-month (each of its first two yearly rotations adds $1 a month). */
  kmsKeyPerMonth: 1,
  /** KMS symmetric requests (Decrypt, GenerateDataKey, ...): USD per 10,000 requests. */
  kmsRequestPer10k: 0.03,
  /** API Gateway HTTP API: USD per million requests (the first 300 million a month). */
  apiGatewayHttpRequestPerMillion: 1,
  /**
   * CloudWatch standard-resolution metric alarm: USD per alarm metric-month (an alarm on one metric
   * is one alarm metric; prorated by the hour).
   */
  cloudWatchAlarmMetricPerMonth: 0.1,
  /** CloudWatch dashboard: USD per dashboard-month (beyond the account's 3 free ones, left out). */
  cloudWatchDashboardPerMonth: 3,
  /**
   * CloudWatch custom metric (one metric name with one set of dimension values): USD per
   * metric-month, the first 10,000 metrics, prorated by the hours it is published in.
   */
  cloudWatchMetricPerMonth: 0.3,
  /** CloudWatch Logs storage (archived): USD per GB-month (2^30 bytes). */
  logsStoredPerGbMonth: 0.03,
} as const;

/** A price list of PRICES' shape (a test may price at other values). */
export type Prices = { readonly [K in keyof typeof PRICES]: number };
