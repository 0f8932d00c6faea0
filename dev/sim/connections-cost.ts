/**
 * What connections cost, from a simulation's meter (meters.ts) over one day at the prices of
 * reconcile-cost.ts: the connections table's DynamoDB requests by caller (the item sync's reads of
 * a connection, its leases and refresh results; the token refresher's Scan, leases and results),
 * the token refresher's Lambda invocations and GB-seconds, their X-Ray traces, EventBridge Scheduler
 * invocations and log ingestion. `idleMonthlyCost` turns a day of idle connections into what one
 * idle connection costs a month at any number of connections: what scales with the connections
 * (their refreshes, their share of every Scan, their Lambda time, their row's storage and backups)
 * per connection, and what does not (the refresher's invocations, the schedule, the KMS key and its
 * requests) shared.
 */
import { PRICES } from '../cost/prices.js';
import type { CallCounts } from '../fakes/in-process-aws.js';
import type { DynamoCount, EventSourceCount, EventSourceName, InvocationCount, LogCount, MeterSource } from './meters.js';
import { dynamoCost, HOURS_PER_MONTH, who, type CostLine } from './reconcile-cost.js';

/** Metered usage over a while: a day's, a crawl's (the difference of two meter snapshots; a SimMeter's shape). */
export interface Usage {
  dynamo: Record<MeterSource, Record<string, DynamoCount>>;
  lambda: Record<MeterSource, InvocationCount>;
  logs: Record<MeterSource, Record<string, LogCount>>;
  sqs: Record<MeterSource, CallCounts>;
  eventSource: Record<EventSourceName, EventSourceCount>;
}

/** The meter as it is now (a copy). */
export function snapshot(meter: Usage): Usage {
  return structuredClone({ dynamo: meter.dynamo, lambda: meter.lambda, logs: meter.logs, sqs: meter.sqs, eventSource: meter.eventSource });
}

/** `later` minus `earlier`, count by count. */
export function usageBetween(earlier: Usage, later: Usage): Usage {
  const out = structuredClone(later);
  for (const source of Object.keys(out.dynamo) as MeterSource[]) {
    for (const [key, count] of Object.entries(out.dynamo[source])) {
      const before = earlier.dynamo[source][key];
      if (!before) continue;
      count.requests -= before.requests;
      count.capacityUnits -= before.capacityUnits;
      count.conditionFailures -= before.conditionFailures;
      if (count.transactions && before.transactions) {
        count.transactions.cancelled -= before.transactions.cancelled;
        count.transactions.cancelledUnits -= before.transactions.cancelledUnits;
        count.transactions.replays -= before.transactions.replays;
        count.transactions.replayReadUnits -= before.transactions.replayReadUnits;
      }
    }
    out.lambda[source].invocations -= earlier.lambda[source].invocations;
    out.lambda[source].durationMs -= earlier.lambda[source].durationMs;
    for (const [message, count] of Object.entries(out.logs[source])) {
      const before = earlier.logs[source][message];
      if (!before) continue;
      count.lines -= before.lines;
      count.bytes -= before.bytes;
    }
    for (const operation of Object.keys(out.sqs[source])) out.sqs[source][operation]! -= earlier.sqs[source][operation] ?? 0;
  }
  for (const source of Object.keys(out.eventSource) as EventSourceName[]) {
    const events = out.eventSource[source];
    const before = earlier.eventSource[source];
    events.receives -= before.receives;
    events.emptyReceives -= before.emptyReceives;
    events.deleteBatches -= before.deleteBatches;
  }
  return out;
}

/**
 * What the item sync's work on the users' queue costs that day: its SQS calls (sends of waiting
 * records, dead letters), the event source's receives and deletes, its invocations and GB-seconds,
 * its requests to the connections table. On an idle day, that is what a failing connection's
 * waiting ids cost: they come back every CONNECTION_WAIT_SECONDS and are sent again.
 */
export function syncQueueCost(usage: Usage, table: string): { lines: CostLine[]; total: number } {
  const lines: CostLine[] = [];
  for (const [key, count] of Object.entries(usage.dynamo.sync)) {
    if (!key.endsWith(` ${table}`) || count.requests === 0) continue;
    const { table: _table, write: _write, ...line } = dynamoCost(key, count, 'item sync');
    lines.push(line);
  }
  for (const [operation, calls] of Object.entries(usage.sqs.sync)) {
    if (calls > 0) lines.push({ what: `SQS ${operation} (item sync)`, requests: calls, units: `${calls} requests`, usd: (calls / 1e6) * PRICES.sqsRequestPerMillion });
  }
  // The event source's empty long polls are the queue's, whatever waits in it: left out.
  const events = usage.eventSource.sync;
  for (const [what, calls] of [
    ['ReceiveMessage with messages', events.receives - events.emptyReceives],
    ['DeleteMessageBatch', events.deleteBatches],
  ] as const) {
    lines.push({ what: `SQS ${what} (event source)`, requests: calls, units: `${calls} requests`, usd: (calls / 1e6) * PRICES.sqsRequestPerMillion });
  }
  const lambda = usage.lambda.sync;
  const gbSeconds = (lambda.durationMs / 1000) * (lambda.memoryMb / 1024);
  lines.push({
    what: `Lambda item sync (${lambda.memoryMb} MB, Arm)`,
    requests: lambda.invocations,
    units: `${round(gbSeconds, 1)} GB-s`,
    usd: (lambda.invocations / 1e6) * PRICES.lambdaRequestPerMillion + gbSeconds * PRICES.lambdaArmGbSecond,
  });
  return { lines, total: lines.reduce((sum, line) => sum + line.usd, 0) };
}

/** Who uses the connections table: the item sync (users' event source) and the token refresher. */
const CALLERS: readonly MeterSource[] = ['sync', 'refresher'];

/** A cost line, marked as scaling with the number of connections or not. */
export interface ConnectionCostLine extends CostLine {
  /** `per-connection`: grows with the connections (requests, units, GB-s, bytes); `shared`: one per deployment. */
  scales: 'per-connection' | 'shared';
}

/**
 * The day's connections-table requests by caller and operation (`GetItem connections (sync on the
 * sync queue)` → requests), and the token refresher's on the control table (its token pace).
 */
export function tableRequests(usage: Usage, table: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const source of CALLERS) {
    for (const [key, count] of Object.entries(usage.dynamo[source])) {
      if ((source === 'refresher' || key.endsWith(` ${table}`)) && count.requests > 0) out[`${key} (${who(source)})`] = count.requests;
    }
  }
  return out;
}

/**
 * What the day's usage costs, line by line: the connections table (both callers), the token
 * refresher's draws on the token pace (its control-table requests: the item sync's there are
 * mostly its item pace's, not the connections'), and the token refresher's invocations.
 */
export function dayCost(usage: Usage, table: string): { lines: ConnectionCostLine[]; total: number } {
  const lines: ConnectionCostLine[] = [];
  for (const source of CALLERS) {
    for (const [key, count] of Object.entries(usage.dynamo[source])) {
      if ((source !== 'refresher' && !key.endsWith(` ${table}`)) || count.requests === 0) continue;
      const { table: _table, write: _write, ...line } = dynamoCost(key, count, who(source));
      lines.push({ ...line, scales: 'per-connection' });
    }
  }
  const lambda = usage.lambda.refresher;
  const gbSeconds = (lambda.durationMs / 1000) * (lambda.memoryMb / 1024);
  lines.push(
    {
      what: `Lambda token refresher invocations (${lambda.memoryMb} MB, Arm)`,
      requests: lambda.invocations,
      units: `${lambda.invocations} invocations`,
      usd: (lambda.invocations / 1e6) * PRICES.lambdaRequestPerMillion,
      scales: 'shared',
    },
    {
      what: 'Lambda token refresher duration',
      requests: 0,
      units: `${round(gbSeconds, 3)} GB-s`,
      usd: gbSeconds * PRICES.lambdaArmGbSecond,
      scales: 'per-connection',
    },
    {
      // Each run is the first request of its second: X-Ray's default sampling records it.
      what: 'X-Ray traces of the token refresher (default sampling: every run)',
      requests: lambda.invocations,
      units: `${lambda.invocations} traces`,
      usd: (lambda.invocations / 1e6) * PRICES.xrayTracePerMillion,
      scales: 'shared',
    },
    {
      what: 'EventBridge Scheduler (token refresher runs)',
      requests: lambda.invocations,
      units: `${lambda.invocations} invocations`,
      usd: (lambda.invocations / 1e6) * PRICES.schedulerInvocationPerMillion,
      scales: 'shared',
    },
  );
  // The run's own line and its EMF metrics are one per run; a refresh's line is one per connection refreshed.
  let sharedBytes = 0;
  let perConnectionBytes = 0;
  for (const [message, count] of Object.entries(usage.logs.refresher)) {
    if (message === 'EMF metrics' || message === 'token refresher run') sharedBytes += count.bytes;
    else perConnectionBytes += count.bytes;
  }
  for (const [bytes, scales, which] of [
    [sharedBytes, 'shared', 'one line and one EMF document a run'],
    [perConnectionBytes, 'per-connection', 'a line a refresh'],
  ] as const) {
    if (bytes === 0) continue;
    lines.push({
      what: `CloudWatch Logs ingestion (token refresher: ${which})`,
      requests: 0,
      units: `${round(bytes / 1e3, 1)} KB`,
      usd: (bytes / 2 ** 30) * PRICES.logsIngestedPerGb,
      scales,
    });
  }
  return { lines, total: lines.reduce((sum, line) => sum + line.usd, 0) };
}

/**
 * KMS requests DynamoDB makes on the table's key: it refreshes the table key about once every 5
 * minutes per caller with active traffic (DynamoDB's encryption-at-rest page), so a refresher run
 * of a few seconds costs one Decrypt; the item sync's containers, while they sync, one each 5 minutes.
 */
export const KMS_REQUESTS_PER_REFRESHER_RUN = 1;

export interface IdleCost {
  connections: number;
  /** One idle connection's monthly cost, by line (USD), and in all. */
  lines: Array<{ what: string; usd: number }>;
  total: number;
}

/**
 * One idle connection's monthly cost at `connections` connections, from `day` (a day of `measured`
 * idle connections: the token refresher's work; an idle connection's items are not synced) and the
 * average connections-table row (`rowBytes`, DynamoDB's size of the item; storage adds 100 bytes of
 * index overhead a row).
 */
/**
 * An idle connection's month at `connections` connections, from an idle day of `measured`
 * connections; `sealing`: the KMS requests that day that sealed and opened tokens (by operation),
 * per connection.
 */
export function idleMonthlyCost(day: Usage, table: string, measured: number, rowBytes: number, connections: number, sealing: Record<string, number> = {}): IdleCost {
  const days = HOURS_PER_MONTH / 24;
  const refresherOnly: Usage = { ...day, dynamo: { ...day.dynamo, sync: {}, reconcile: {}, reconciler: {} } };
  const { lines } = dayCost(refresherOnly, table);
  const out: Array<{ what: string; usd: number }> = [];
  for (const line of lines) {
    const share = line.scales === 'per-connection' ? 1 / measured : 1 / connections;
    out.push({ what: `${line.what}: ${line.units} a day${line.scales === 'shared' ? ', shared' : ` for ${measured.toLocaleString('en-US')}`}`, usd: line.usd * share * days });
  }
  const gb = (rowBytes + 100) / 2 ** 30;
  out.push({ what: `DynamoDB storage: ${Math.round(rowBytes)} bytes a row + 100 of overhead`, usd: gb * PRICES.dynamoStoragePerGbMonth });
  out.push({ what: 'DynamoDB point-in-time recovery of that row', usd: gb * PRICES.dynamoPitrPerGbMonth });
  out.push({ what: "the connections table's KMS key ($1 a month), shared", usd: PRICES.kmsKeyPerMonth / connections });
  const runs = day.lambda.refresher.invocations * days;
  out.push({
    what: `KMS requests: ${Math.round(runs * KMS_REQUESTS_PER_REFRESHER_RUN)} a month (one per refresher run), shared`,
    usd: ((runs * KMS_REQUESTS_PER_REFRESHER_RUN) / 10_000) * (PRICES.kmsRequestPer10k / connections),
  });
  const sealingRequests = Object.values(sealing).reduce((sum, count) => sum + count, 0);
  const described = Object.entries(sealing).map(([operation, count]) => `${count} ${operation}`).join(', ') || 'none';
  out.push({
    what: `KMS requests of the sealed tokens: ${described} a day for ${measured.toLocaleString('en-US')}`,
    usd: (sealingRequests / measured) * days * (PRICES.kmsRequestPer10k / 10_000),
  });
  return { connections, lines: out, total: out.reduce((sum, line) => sum + line.usd, 0) };
}

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
