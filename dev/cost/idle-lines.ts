/**
 * The idle cost's priced lines: idleCost reads both stacks' synthesized templates and prices, line
 * by line, what AWS bills by the month (alarms, the dashboard, the KMS key), what the schedules run
 * even so (the idle runs of idle-runs.ts: invocations, duration, logs, metrics, requests), and
 * Lambda's empty long polls of the queues its event sources read. Every resource type of the
 * templates is either priced here (PRICED_TYPES) or named free when idle, with why (FREE_WHEN_IDLE):
 * a type that is neither throws until it is considered. Also the month's total (idleTotal,
 * formatTotal). The command that prints them is idle-cost.ts.
 */
import { LAMBDA_PLATFORM_LOG_BYTES } from '../sim/reconcile-cost.js';
import type { CfnTemplate } from '../synth.js';
import { CALL_UNITS, IDLE_ASSUMPTIONS, IDLE_RUNS, type IdleCall, type IdleCalls, type IdlePass, type IdleRun } from './idle-runs.js';
import { PRICES, type Prices } from './prices.js';

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
    throw new Error(`resource types neither priced nor free when idle: ${unconsidered.join(', ')} (dev/cost/idle-lines.ts: add a line, or a reason to FREE_WHEN_IDLE)`);
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
    throw new Error(`an anomaly-detection or high-resolution alarm is not priced (dev/cost/idle-lines.ts): ${JSON.stringify(properties)}`);
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
      if (run === undefined) throw new Error(`the scheduled function of service ${service} has no idle run (dev/cost/idle-runs.ts IDLE_RUNS)`);
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
  if (!match) throw new Error(`a schedule expression not priced (dev/cost/idle-lines.ts): ${expression}`);
  const n = Number(match[1]);
  const unit = match[2]!;
  return unit.startsWith('minute') ? n : unit.startsWith('hour') ? n * 60 : n * 1440;
}
