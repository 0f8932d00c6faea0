/**
 * What a deployment costs a month with no traffic: no connection, no id sent, an empty items table.
 * Computed from both stacks' synthesized templates (cdk.json's context, with any `-c key=value`
 * on top) at the prices of dev/cost/prices.ts, for a 30-day month, line by line: what AWS bills by
 * the month (alarms, the dashboard, the KMS key), what the schedules run even so (the token
 * refresher's and the reconciler's idle runs: invocations, duration, logs, metrics, requests), and
 * Lambda's empty long polls of the queues its event sources read. Every resource type of the
 * templates is either priced here or named free when idle, with why (FREE_WHEN_IDLE): a type that
 * is neither stops the script until it is considered. docs/cost.md quotes the table and the total.
 *
 *   npx tsx dev/cost/idle-cost.ts [-c key=value ...]
 */
import { DEFAULTS, ENV } from '../../functions/shared/config.js';
import { RECONCILER_METRIC_NAMES, RECONCILER_SERVICE, REFRESHER_METRIC_NAMES, REFRESHER_SERVICE } from '../../functions/shared/metric-names.js';
import { runWhenMain } from '../../tools/cli-main.js';
import { LAMBDA_PLATFORM_LOG_BYTES } from '../sim/reconcile-cost.js';
import { synthesizeTemplates, type CfnTemplate } from '../synth.js';
import { IDLE_PRICES_AS_OF, PRICES, PRICES_AS_OF, PRICES_REGION, type Prices } from './prices.js';

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

/** The resource types that cost nothing when nothing happens, and why. */
export const FREE_WHEN_IDLE: Readonly<Record<string, string>> = {
  'AWS::S3::Bucket': 'billed by the GB stored and the request: empty, and no request',
  'AWS::S3::BucketPolicy': 'no charge',
  'AWS::SQS::QueuePolicy': 'no charge',
  'AWS::Events::EventBus': 'a custom bus is free; events are billed as they are put: none',
  'AWS::IAM::Role': 'no charge',
  'AWS::IAM::Policy': 'no charge',
  'AWS::Lambda::Permission': 'no charge',
  'AWS::ApiGatewayV2::Api': 'billed by the request: none',
  'AWS::ApiGatewayV2::Integration': "no charge (the API's requests)",
  'AWS::ApiGatewayV2::Route': "no charge (the API's requests)",
  'AWS::ApiGatewayV2::Stage': "no charge (the API's requests)",
  'AWS::SNS::Topic': 'billed by the publish and the delivery: an alarm publishes only when it fires',
  'AWS::SNS::Subscription': "no charge (the topic's deliveries)",
  'AWS::SNS::TopicPolicy': 'no charge',
};

/** The resource types priced by a line (a line says which one it counts). */
export const PRICED_TYPES: readonly string[] = [
  'AWS::CloudWatch::Alarm',
  'AWS::CloudWatch::Dashboard',
  'AWS::Lambda::Function',
  'AWS::Logs::LogGroup',
  'AWS::KMS::Key',
  'AWS::Scheduler::Schedule',
  'AWS::DynamoDB::Table',
  'AWS::Lambda::EventSourceMapping',
  'AWS::SQS::Queue',
];

/** One priced line: `quantity` of `unit` in the month at `price` USD per `perUnits` of them. */
export interface IdleLine {
  /** The AWS service billing it. */
  service: string;
  what: string;
  /** The resource type counted. */
  type: string;
  /** How many resources of `type` the line prices. */
  resources: number;
  quantity: number;
  /** The quantity's unit, e.g. `requests`, `GB-s`. */
  unit: string;
  /** USD, the PRICES entry. */
  price: number;
  /** The price is for this many units... */
  perUnits: number;
  /** ...named so, e.g. `million requests`. */
  per: string;
  usd: number;
}

type Resource = { Type: string; Properties?: Record<string, unknown> };

interface ScheduledFunction {
  service: string;
  run: IdleRun;
  runs: number;
  memoryMb: number;
  traced: boolean;
  retentionDays: number;
  pass: (IdlePass & { passes: number }) | undefined;
}

/** The month's lines for the deployment of `templates` (both stacks'), at `prices`. */
export function idleCost(templates: readonly CfnTemplate[], prices: Prices = PRICES): IdleLine[] {
  const all = templates.map((template) => Object.entries(template.Resources ?? {}));
  const resources = all.flat().map(([, resource]) => resource);
  const unconsidered = [...new Set(resources.map((resource) => resource.Type))].filter((type) => !PRICED_TYPES.includes(type) && !(type in FREE_WHEN_IDLE));
  if (unconsidered.length > 0) {
    throw new Error(`resource types neither priced nor free when idle: ${unconsidered.join(', ')} (dev/cost/idle-cost.ts: add a line, or a reason to FREE_WHEN_IDLE)`);
  }
  const ofType = (type: string): Resource[] => resources.filter((resource) => resource.Type === type);
  const { days } = IDLE_ASSUMPTIONS;
  const minutes = days * 24 * 60;
  const scheduled = all.flatMap((entries) => scheduledFunctions(new Map(entries), minutes));
  const line = (fields: Omit<IdleLine, 'usd'>): IdleLine => ({ ...fields, usd: (fields.quantity / fields.perUnits) * fields.price });
  const sum = (f: (fn: ScheduledFunction) => number): number => scheduled.reduce((total, fn) => total + f(fn), 0);
  const units = (kind: 'readUnits' | 'writeUnits' | 'sqsRequests' | 'kmsRequests'): number =>
    sum((fn) => fn.runs * unitsOf(fn.run.calls, kind) + (fn.pass ? fn.pass.passes * unitsOf(fn.pass.calls, kind) : 0));
  const services = scheduled.map((fn) => fn.service).join(', ');
  const lines: IdleLine[] = [];

  const alarms = ofType('AWS::CloudWatch::Alarm');
  lines.push(
    line({
      service: 'CloudWatch',
      what: 'metric alarms, standard resolution (an alarm metric each)',
      type: 'AWS::CloudWatch::Alarm',
      resources: alarms.length,
      quantity: alarms.reduce((total, alarm) => total + alarmMetrics(alarm), 0),
      unit: 'alarm metric-months',
      price: prices.cloudWatchAlarmMetricPerMonth,
      perUnits: 1,
      per: 'alarm metric-month',
    }),
  );
  const dashboards = ofType('AWS::CloudWatch::Dashboard').length;
  lines.push(
    line({
      service: 'CloudWatch',
      what: "dashboard (the account's 3 free ones taken by other work)",
      type: 'AWS::CloudWatch::Dashboard',
      resources: dashboards,
      quantity: dashboards,
      unit: 'dashboard-months',
      price: prices.cloudWatchDashboardPerMonth,
      perUnits: 1,
      per: 'dashboard-month',
    }),
  );
  const metricNames = sum((fn) => fn.run.metrics.length);
  const passMetrics = sum((fn) => (fn.pass ? fn.pass.metrics.length : 0));
  lines.push(
    line({
      service: 'CloudWatch',
      what: `custom metrics the idle runs publish (${metricNames} every run, ${passMetrics} once a pass, billed for the hours they are published in)`,
      type: 'AWS::Lambda::Function',
      resources: scheduled.length,
      quantity: sum((fn) => fn.run.metrics.length * Math.min(1, fn.runs / (days * 24)) + (fn.pass ? fn.pass.metrics.length * Math.min(1, fn.pass.passes / (days * 24)) : 0)),
      unit: 'metric-months',
      price: prices.cloudWatchMetricPerMonth,
      perUnits: 1,
      per: 'metric-month',
    }),
  );
  const ingested = sum(logBytesOf) / 2 ** 30;
  lines.push(
    line({
      service: 'CloudWatch Logs',
      what: `ingestion: the idle runs' lines and metrics, and Lambda's START, END and REPORT (${services})`,
      type: 'AWS::Logs::LogGroup',
      resources: scheduled.length,
      quantity: ingested,
      unit: 'GB',
      price: prices.logsIngestedPerGb,
      perUnits: 1,
      per: 'GB',
    }),
  );
  const stored = (sum((fn) => (logBytesOf(fn) * fn.retentionDays) / days) * IDLE_ASSUMPTIONS.storedPerIngestedByte) / 2 ** 30;
  lines.push(
    line({
      service: 'CloudWatch Logs',
      what: "storage: the retention's days of those logs, uncompressed (an upper bound)",
      type: 'AWS::Logs::LogGroup',
      resources: scheduled.length,
      quantity: stored,
      unit: 'GB-months',
      price: prices.logsStoredPerGbMonth,
      perUnits: 1,
      per: 'GB-month',
    }),
  );
  const keys = ofType('AWS::KMS::Key').length;
  lines.push(
    line({
      service: 'KMS',
      what: 'customer managed key (its first year: each of the first two yearly rotations adds $1 a month)',
      type: 'AWS::KMS::Key',
      resources: keys,
      quantity: keys,
      unit: 'key-months',
      price: prices.kmsKeyPerMonth,
      perUnits: 1,
      per: 'key-month',
    }),
  );
  lines.push(
    line({
      service: 'KMS',
      what: "requests: DynamoDB's Decrypt of the connections table's key, about one a refresher run",
      type: 'AWS::KMS::Key',
      resources: keys,
      quantity: units('kmsRequests'),
      unit: 'requests',
      price: prices.kmsRequestPer10k,
      perUnits: 10_000,
      per: '10,000 requests',
    }),
  );
  const schedules = ofType('AWS::Scheduler::Schedule').length;
  const runs = sum((fn) => fn.runs);
  lines.push(
    line({
      service: 'EventBridge Scheduler',
      what: `invocations (${scheduled.map((fn) => `${fn.service} ${fn.runs.toLocaleString('en-US')}`).join(', ')})`,
      type: 'AWS::Scheduler::Schedule',
      resources: schedules,
      quantity: runs,
      unit: 'invocations',
      price: prices.schedulerInvocationPerMillion,
      perUnits: 1e6,
      per: 'million invocations',
    }),
  );
  lines.push(
    line({
      service: 'Lambda',
      what: `requests: the scheduled functions' idle runs (${services})`,
      type: 'AWS::Lambda::Function',
      resources: scheduled.length,
      quantity: runs,
      unit: 'requests',
      price: prices.lambdaRequestPerMillion,
      perUnits: 1e6,
      per: 'million requests',
    }),
  );
  lines.push(
    line({
      service: 'Lambda',
      what: `duration: ${IDLE_ASSUMPTIONS.billedMsPerRun} ms a run (${scheduled.map((fn) => `${fn.service} ${fn.memoryMb} MB`).join(', ')}), Arm`,
      type: 'AWS::Lambda::Function',
      resources: scheduled.length,
      quantity: sum((fn) => fn.runs * (IDLE_ASSUMPTIONS.billedMsPerRun / 1000) * (fn.memoryMb / 1024)),
      unit: 'GB-s',
      price: prices.lambdaArmGbSecond,
      perUnits: 1,
      per: 'GB-s',
    }),
  );
  const traced = scheduled.filter((fn) => fn.traced);
  if (traced.length > 0) {
    lines.push(
      line({
        service: 'X-Ray',
        what: 'traces: every idle run (the first request of its second, always sampled)',
        type: 'AWS::Lambda::Function',
        resources: traced.length,
        quantity: traced.reduce((total, fn) => total + fn.runs, 0),
        unit: 'traces',
        price: prices.xrayTracePerMillion,
        perUnits: 1e6,
        per: 'million traces',
      }),
    );
  }
  const tables = ofType('AWS::DynamoDB::Table').length;
  lines.push(
    line({
      service: 'DynamoDB',
      what: "reads: the refresher's Scan a run, the reconciler's cursor a tick, a pass's empty Scan pages (storage of empty tables: nothing)",
      type: 'AWS::DynamoDB::Table',
      resources: tables,
      quantity: units('readUnits'),
      unit: 'read request units',
      price: prices.dynamoReadRequestUnitPerMillion,
      perUnits: 1e6,
      per: 'million read request units',
    }),
  );
  lines.push(
    line({
      service: 'DynamoDB',
      what: "writes: a pass's cursor (started, each segment advanced, ended)",
      type: 'AWS::DynamoDB::Table',
      resources: tables,
      quantity: units('writeUnits'),
      unit: 'write request units',
      price: prices.dynamoWriteRequestUnitPerMillion,
      perUnits: 1e6,
      per: 'million write request units',
    }),
  );
  const queueMappings = ofType('AWS::Lambda::EventSourceMapping').filter(readsQueue);
  const { pollersPerQueueMapping, longPollSeconds } = IDLE_ASSUMPTIONS;
  lines.push(
    line({
      service: 'SQS',
      what: `empty receives: ${pollersPerQueueMapping} pollers a mapping on a queue, a ${longPollSeconds} s long poll each (the mappings on streams read for free)`,
      type: 'AWS::Lambda::EventSourceMapping',
      resources: queueMappings.length,
      quantity: queueMappings.length * pollersPerQueueMapping * ((minutes * 60) / longPollSeconds),
      unit: 'requests',
      price: prices.sqsRequestPerMillion,
      perUnits: 1e6,
      per: 'million requests',
    }),
  );
  lines.push(
    line({
      service: 'SQS',
      what: "requests: the reconciler's GetQueueAttributes of the reconcile queue, once a pass (SQS charges nothing a queue)",
      type: 'AWS::SQS::Queue',
      resources: ofType('AWS::SQS::Queue').length,
      quantity: units('sqsRequests'),
      unit: 'requests',
      price: prices.sqsRequestPerMillion,
      perUnits: 1e6,
      per: 'million requests',
    }),
  );
  return lines;
}

/** The month's total, USD. */
export function idleTotal(lines: readonly IdleLine[]): number {
  return lines.reduce((total, line) => total + line.usd, 0);
}

/** The total as docs/cost.md states it: dollars and cents. */
export function formatTotal(total: number): string {
  return `$${total.toFixed(2)}`;
}

/** The lines and the total as a Markdown table (what docs/cost.md holds). */
export function idleTable(lines: readonly IdleLine[]): string {
  const rows = lines.map((line) =>
    [line.service, line.what, String(line.resources), `${quantity(line.quantity)} ${line.quantity === 1 ? singular(line.unit) : line.unit}`, `${price(line.price)} per ${line.per}`, line.usd.toFixed(4)].join(' | '),
  );
  return [
    '| service | what | resources | a month | price (USD) | USD |',
    '|---|---|---:|---:|---|---:|',
    ...rows.map((row) => `| ${row} |`),
    `| **total** | | | | | **${formatTotal(idleTotal(lines)).slice(1)}** |`,
  ].join('\n');
}

/** A quantity as the table shows it: whole numbers grouped, small ones to four significant digits. */
function quantity(value: number): string {
  if (Number.isInteger(value)) return value.toLocaleString('en-US');
  if (value >= 100) return Math.round(value).toLocaleString('en-US');
  return Number(value.toPrecision(4)).toString();
}

/** A price with at least two decimals (0.10, 3.00) and all it has (0.0000133334). */
function price(value: number): string {
  const decimals = (String(value).split('.')[1] ?? '').length;
  return value.toFixed(Math.max(2, decimals));
}

/** `key-months` of one: `key-month`. */
function singular(unit: string): string {
  return unit.endsWith('-months') ? unit.slice(0, -1) : unit;
}

/** Bytes a scheduled function's idle runs log in the month, Lambda's own lines included. */
function logBytesOf(fn: ScheduledFunction): number {
  return fn.runs * (fn.run.logBytes + LAMBDA_PLATFORM_LOG_BYTES) + (fn.pass ? fn.pass.passes * fn.pass.logBytes : 0);
}

function unitsOf(calls: IdleCalls, kind: 'readUnits' | 'writeUnits' | 'sqsRequests' | 'kmsRequests'): number {
  return Object.entries(calls).reduce((total, [call, count]) => total + (count ?? 0) * ((CALL_UNITS[call as IdleCall] as Partial<Record<typeof kind, number>>)[kind] ?? 0), 0);
}

/**
 * Alarm metrics of one alarm: one for an alarm on a metric, one per metric of a metric-math alarm.
 * A high-resolution or anomaly-detection alarm (priced otherwise) is not considered: it throws.
 */
function alarmMetrics(alarm: Resource): number {
  const properties = alarm.Properties ?? {};
  const period = properties['Period'];
  if (properties['ThresholdMetricId'] !== undefined || (typeof period === 'number' && period < 60)) {
    throw new Error(`an anomaly-detection or high-resolution alarm is not priced (dev/cost/idle-cost.ts): ${JSON.stringify(properties)}`);
  }
  const metrics = properties['Metrics'] as Array<{ MetricStat?: unknown }> | undefined;
  return metrics === undefined ? 1 : metrics.filter((metric) => metric.MetricStat !== undefined).length;
}

/** An event source mapping reads a queue when it has no StartingPosition (a stream's mapping needs one). */
function readsQueue(mapping: Resource): boolean {
  return mapping.Properties?.['StartingPosition'] === undefined;
}

/** Every schedule of one template, with the function it invokes and its idle run. */
function scheduledFunctions(resources: Map<string, Resource>, minutes: number): ScheduledFunction[] {
  return [...resources.values()]
    .filter((resource) => resource.Type === 'AWS::Scheduler::Schedule')
    .map((schedule) => {
      const properties = schedule.Properties ?? {};
      const everyMinutes = rateMinutes(String(properties['ScheduleExpression']));
      const target = (properties['Target'] as { Arn?: { 'Fn::GetAtt'?: [string, string] } } | undefined)?.Arn?.['Fn::GetAtt']?.[0];
      const fn = target === undefined ? undefined : resources.get(target);
      if (fn?.Type !== 'AWS::Lambda::Function') throw new Error(`a schedule whose target is not a function of its stack: ${JSON.stringify(properties['Target'])}`);
      const fnProperties = fn.Properties ?? {};
      const environment = (fnProperties['Environment'] as { Variables?: Record<string, unknown> } | undefined)?.Variables ?? {};
      const service = String(environment['POWERTOOLS_SERVICE_NAME']);
      const run = IDLE_RUNS[service];
      if (run === undefined) throw new Error(`the scheduled function of service ${service} has no idle run (dev/cost/idle-cost.ts IDLE_RUNS)`);
      const logGroupId = (fnProperties['LoggingConfig'] as { LogGroup?: { Ref?: string } } | undefined)?.LogGroup?.Ref;
      const retentionDays = logGroupId === undefined ? undefined : resources.get(logGroupId)?.Properties?.['RetentionInDays'];
      if (typeof retentionDays !== 'number') throw new Error(`the scheduled function of service ${service} has no log group with a retention in its stack`);
      const pass = run.pass?.(environment);
      return {
        service,
        run,
        runs: minutes / everyMinutes,
        memoryMb: Number(fnProperties['MemorySize']),
        traced: (fnProperties['TracingConfig'] as { Mode?: string } | undefined)?.Mode === 'Active',
        retentionDays,
        pass: pass === undefined || pass.everyHours <= 0 ? undefined : { ...pass, passes: minutes / 60 / pass.everyHours },
      };
    });
}

/** Minutes between two invocations of `rate(<n> minute[s]|hour[s]|day[s])`; any other expression throws. */
export function rateMinutes(expression: string): number {
  const match = /^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$/.exec(expression);
  if (!match) throw new Error(`a schedule expression not priced (dev/cost/idle-cost.ts): ${expression}`);
  const n = Number(match[1]);
  const unit = match[2]!;
  return unit.startsWith('minute') ? n : unit.startsWith('hour') ? n * 60 : n * 1440;
}

/** `-c key=value` (or `--context key=value`) pairs as context overrides. */
export function contextArgs(argv: readonly string[]): Record<string, string> {
  const overrides: Record<string, string> = {};
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i]!;
    if (arg !== '-c' && arg !== '--context') throw new Error(`unknown argument ${arg}: give context values as -c key=value`);
    const pair = argv[i + 1] ?? '';
    const at = pair.indexOf('=');
    if (at <= 0) throw new Error(`${arg} needs key=value, got "${pair}"`);
    overrides[pair.slice(0, at)] = pair.slice(at + 1);
    i += 1;
  }
  return overrides;
}

async function main(argv: string[]): Promise<number> {
  const overrides = contextArgs(argv);
  const lines = idleCost(synthesizeTemplates(overrides));
  const given = Object.entries(overrides).map(([key, value]) => `-c ${key}=${value}`).join(' ');
  process.stdout.write(
    [
      `A deployment with no traffic, a ${IDLE_ASSUMPTIONS.days}-day month (cdk.json's context${given ? `, ${given}` : ''}), ` +
        `at AWS's public ${PRICES_REGION} prices as of ${PRICES_AS_OF} (CloudWatch alarms, dashboard, metrics and Logs storage: ${IDLE_PRICES_AS_OF}), free tiers left out:`,
      '',
      idleTable(lines),
      '',
      `total: ${formatTotal(idleTotal(lines))} a month`,
      '',
    ].join('\n'),
  );
  return 0;
}

runWhenMain(import.meta.url, 'idle-cost', main);
