/**
 * What a reconciliation pass costs: the requests the sweep made (the reconciler and the sync's
 * containers on the reconcile queue), as the simulation's meter counted them, at the prices of
 * dev/cost/prices.ts.
 */
import { PRICES } from '../cost/prices.js';
import type { InvocationCount, MeterSource, SimMeter, DynamoCount } from './meters.js';

/** Hours in a month as AWS prices a month (730 h: 30.4 days). */
export const HOURS_PER_MONTH = 730;

/**
 * Lambda's own lines of each invocation in its log group (START, END and REPORT, in the text
 * format: about 75 + 50 + 155 bytes), ingested with the function's lines.
 */
export const LAMBDA_PLATFORM_LOG_BYTES = 280;

/** X-Ray's default sampling: the first request each second and 5% of the others. */
const XRAY_RESERVOIR_PER_SECOND = 1;
const XRAY_FIXED_RATE = 0.05;

const READS = new Set(['GetItem', 'BatchGetItem', 'Scan', 'Query']);
const WRITES = new Set(['PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem']);

export interface CostLine {
  what: string;
  requests: number;
  units: string;
  usd: number;
}

export interface CostOptions {
  /** The log lines were counted (the simulation's meterLogs): their ingestion is priced, with Lambda's own lines. */
  logsMetered: boolean;
  /** The deployment's X-Ray tracing (the context key `tracing`): traces are priced only when it is on. */
  tracing: boolean;
}

/** The cost of the sweep (the reconciler and the sync's containers on the reconcile queue) at PRICES. */
export function passCost(
  meter: Pick<SimMeter, 'dynamo' | 'sqs' | 'eventSource' | 'lambda' | 'logs'>,
  passSeconds: number,
  options: CostOptions & { itemsTable: string },
): { lines: CostLine[]; total: number; changedWrites: number } {
  const { logsMetered, tracing, itemsTable } = options;
  const lines: CostLine[] = [];
  const sweep: MeterSource[] = ['reconciler', 'reconcile'];
  let changedWrites = 0;
  for (const source of sweep) {
    for (const [key, count] of Object.entries(meter.dynamo[source]) as Array<[string, DynamoCount]>) {
      const line = dynamoCost(key, count, who(source));
      lines.push(line);
      if (source === 'reconcile' && line.table === itemsTable && line.write) changedWrites += line.usd;
    }
  }
  for (const source of sweep) {
    for (const [operation, calls] of Object.entries(meter.sqs[source])) {
      lines.push({ what: `SQS ${operation} (${who(source)})`, requests: calls, units: `${calls} requests`, usd: (calls / 1e6) * PRICES.sqsRequestPerMillion });
    }
  }
  const events = meter.eventSource.reconcile;
  for (const [what, calls] of [
    ['ReceiveMessage', events.receives],
    ['DeleteMessageBatch', events.deleteBatches],
  ] as const) {
    lines.push({ what: `SQS ${what} (event source on the reconcile queue)`, requests: calls, units: `${calls} requests`, usd: (calls / 1e6) * PRICES.sqsRequestPerMillion });
  }
  for (const source of sweep) lines.push(...lambdaCost(meter.lambda[source], who(source), passSeconds, tracing));
  lines.push({
    what: 'EventBridge Scheduler (reconciler ticks)',
    requests: meter.lambda.reconciler.invocations,
    units: `${meter.lambda.reconciler.invocations} invocations`,
    usd: (meter.lambda.reconciler.invocations / 1e6) * PRICES.schedulerInvocationPerMillion,
  });
  if (logsMetered) {
    const bytes = sweep.reduce((sum, source) => sum + logBytes(meter, source), 0);
    lines.push({ what: "CloudWatch Logs ingestion (log lines, EMF metrics and Lambda's START/END/REPORT of both)", requests: 0, units: `${round(bytes / 1e6, 1)} MB`, usd: (bytes / 2 ** 30) * PRICES.logsIngestedPerGb });
  }
  return { lines, total: lines.reduce((sum, line) => sum + line.usd, 0), changedWrites };
}

/** A function's invocations and GB-seconds at PRICES; and, when traced, its X-Ray traces. */
export function lambdaCost(lambda: InvocationCount, who: string, seconds: number, tracing: boolean): CostLine[] {
  const gbSeconds = (lambda.durationMs / 1000) * (lambda.memoryMb / 1024);
  const lines: CostLine[] = [
    {
      what: `Lambda ${who} (${lambda.memoryMb} MB, Arm)`,
      requests: lambda.invocations,
      units: `${round(gbSeconds, 1)} GB-s`,
      usd: (lambda.invocations / 1e6) * PRICES.lambdaRequestPerMillion + gbSeconds * PRICES.lambdaArmGbSecond,
    },
  ];
  if (tracing) {
    const traced = xrayTraced(lambda.invocations, seconds);
    lines.push({ what: `X-Ray traces ${who} (default sampling, estimated)`, requests: Math.round(traced), units: `${Math.round(traced)} traces`, usd: (traced / 1e6) * PRICES.xrayTracePerMillion });
  }
  return lines;
}

/** The bytes a source's logs ingest: its lines as the meter counted them, and Lambda's own lines of each invocation. */
export function logBytes(meter: Pick<SimMeter, 'logs' | 'lambda'>, source: MeterSource): number {
  const lines = Object.values(meter.logs[source]).reduce((total, count) => total + count.bytes, 0);
  return lines + meter.lambda[source].invocations * LAMBDA_PLATFORM_LOG_BYTES;
}

/** Traces X-Ray records of `invocations` over `seconds` at the default sampling (estimated: spread evenly). */
export function xrayTraced(invocations: number, seconds: number): number {
  const reservoir = Math.min(invocations, XRAY_RESERVOIR_PER_SECOND * seconds);
  return reservoir + XRAY_FIXED_RATE * Math.max(0, invocations - reservoir);
}

/**
 * One DynamoDB count (`<Operation> <table>`) at PRICES: its read or write request units as DynamoDB Local
 * computed them (a conditional write refused is charged as a write: at least one unit); a
 * TransactWriteItems its committed write units on the table, its cancelled attempts' prepare units
 * (meters.ts TransactionCount: a condition refused there is in them) and its replays' read units;
 * other operations (DescribeTable) take no request units.
 */
export function dynamoCost(key: string, count: DynamoCount, who: string): CostLine & { table: string; write: boolean } {
  const [operation = '', table = ''] = key.split(' ');
  const read = READS.has(operation);
  const transaction = operation === 'TransactWriteItems';
  const write = WRITES.has(operation) || transaction;
  const what = `DynamoDB ${key} (${who})`;
  if (!read && !write) return { what, requests: count.requests, units: 'no request units', usd: 0, table, write };
  if (transaction) {
    const { cancelled = 0, cancelledUnits = 0, replays = 0, replayReadUnits = 0 } = count.transactions ?? {};
    const writeUnits = count.capacityUnits + cancelledUnits;
    const usd = (writeUnits / 1e6) * PRICES.dynamoWriteRequestUnitPerMillion + (replayReadUnits / 1e6) * PRICES.dynamoReadRequestUnitPerMillion;
    const refused = count.conditionFailures > 0 ? `, ${count.conditionFailures.toLocaleString('en-US')} of them by a condition on this table` : '';
    const parts = [`${round(count.capacityUnits, 1)} committed`, ...(cancelled > 0 ? [`${round(cancelledUnits, 1)} for ${cancelled.toLocaleString('en-US')} cancelled${refused}`] : [])];
    const replayed = replays > 0 ? ` + ${round(replayReadUnits, 1)} RRU (${replays.toLocaleString('en-US')} replays of a lost answer)` : '';
    return { what, requests: count.requests, units: `${round(writeUnits, 1)} WRU (${parts.join(' + ')})${replayed}`, usd, table, write };
  }
  const units = count.capacityUnits + (write ? count.conditionFailures : 0);
  const usd = (units / 1e6) * (read ? PRICES.dynamoReadRequestUnitPerMillion : PRICES.dynamoWriteRequestUnitPerMillion);
  const refused = write && count.conditionFailures > 0 ? ` (${count.conditionFailures.toLocaleString('en-US')} refused by their condition)` : '';
  return { what, requests: count.requests, units: `${round(units, 1)} ${read ? 'RRU' : 'WRU'}${refused}`, usd, table, write };
}

export function who(source: MeterSource): string {
  switch (source) {
    case 'reconciler':
      return 'reconciler';
    case 'refresher':
      return 'token refresher';
    case 'reconcile':
      return 'sync on the reconcile queue';
    case 'sync':
      return 'sync on the sync queue';
    case 'changeEvents':
      return 'change events';
    case 'changesWriter':
      return 'changes writer';
  }
}

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
