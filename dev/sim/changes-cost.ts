/**
 * What the changes scenario's million changes cost (changes-scenario.ts), at the public prices of
 * reconcile-cost.ts, by AWS service:
 *
 * - written: the whole write path as push-cost.ts prices it (users' sends, the event sources, the
 *   sync's containers and their DynamoDB requests, the items table's stream, the change-events
 *   function and EventBridge), and in it the feed's own share: everything the changes writer costs
 *   (its DynamoDB requests, the change rows, the heads, the connections' rows it reads, its
 *   invocations and GB-seconds, their logs and traces when counted);
 * - read: the consumer's calls of the client API: API Gateway HTTP API requests, the API function's
 *   invocations and GB-seconds at its deployed memory, its DynamoDB reads (the connection's row,
 *   the head, the Query of the changes), its log lines when counted;
 * - kept: the change rows' storage, DynamoDB standard table class, and their continuous backups
 *   (the changes table has point-in-time recovery), a month.
 */
import { PRICES } from '../cost/prices.js';
import type { CallCounts } from '../fakes/in-process-aws.js';
import type { ApiCalls } from './changes-consumer.js';
import type { DynamoCount, LogCount, SimMeter } from './meters.js';
import { pushCost, type PushCost } from './push-cost.js';
import { dynamoCost, LAMBDA_PLATFORM_LOG_BYTES, lambdaCost, logBytes, who, type CostLine, type CostOptions } from './reconcile-cost.js';

/** DynamoDB's storage overhead of an item (bytes), added to its attributes' size. */
export const ITEM_STORAGE_OVERHEAD_BYTES = 100;

export interface ReadCost {
  lines: Array<CostLine & { service: 'API Gateway' | 'Lambda' | 'DynamoDB' | 'CloudWatch Logs' }>;
  byService: Record<'API Gateway' | 'Lambda' | 'DynamoDB' | 'CloudWatch Logs', number>;
  total: number;
}

export interface FeedShare {
  lines: CostLine[];
  total: number;
}

/** The write path, priced as push-cost.ts prices it; per million changes by scaling from `changes`. */
export function writeCost(meter: SimMeter, sends: CallCounts, changes: number, seconds: number, options: CostOptions): PushCost {
  return pushCost(meter, sends, changes, seconds, options);
}

/**
 * The feed's share of the writes: what the changes writer costs (its DynamoDB requests on the
 * changes table and the connections table, its invocations and GB-seconds, its logs when counted,
 * its traces when traced), and anything the sync still sends to the changes table (nothing, by design).
 */
export function feedShare(meter: SimMeter, changesTable: string, seconds: number, options: CostOptions): FeedShare {
  const lines: CostLine[] = [];
  for (const [key, count] of Object.entries(meter.dynamo.changesWriter)) {
    const { table: _table, write: _write, ...line } = dynamoCost(key, count, who('changesWriter'));
    lines.push(line);
  }
  for (const source of ['sync', 'reconcile'] as const) {
    for (const [key, count] of Object.entries(meter.dynamo[source])) {
      if (key.split(' ')[1] !== changesTable) continue;
      const { table: _table, write: _write, ...line } = dynamoCost(key, count, who(source));
      lines.push(line);
    }
  }
  if (meter.lambda.changesWriter.invocations > 0) lines.push(...lambdaCost(meter.lambda.changesWriter, who('changesWriter'), seconds, options.tracing));
  if (options.logsMetered) {
    const bytes = logBytes(meter, 'changesWriter');
    lines.push({ what: `CloudWatch Logs ingestion (${who('changesWriter')})`, requests: 0, units: `${round(bytes / 1e6, 1)} MB`, usd: (bytes / 2 ** 30) * PRICES.logsIngestedPerGb });
  }
  return { lines, total: lines.reduce((sum, line) => sum + line.usd, 0) };
}

/** The consumer's reads: API Gateway, the API function, its DynamoDB reads, its logs (when counted). */
export function readCost(calls: ApiCalls, dynamo: Record<string, DynamoCount>, logs?: Record<string, LogCount>): ReadCost {
  const lines: ReadCost['lines'] = [];
  lines.push({
    service: 'API Gateway',
    what: 'API Gateway HTTP API requests (GET /connections/{c}/changes)',
    requests: calls.invocations,
    units: `${calls.invocations} requests`,
    usd: (calls.invocations / 1e6) * PRICES.apiGatewayHttpRequestPerMillion,
  });
  const gbSeconds = (calls.durationMs / 1000) * (calls.memoryMb / 1024);
  lines.push({
    service: 'Lambda',
    what: `Lambda client API (${calls.memoryMb} MB, Arm)`,
    requests: calls.invocations,
    units: `${round(gbSeconds, 1)} GB-s`,
    usd: (calls.invocations / 1e6) * PRICES.lambdaRequestPerMillion + gbSeconds * PRICES.lambdaArmGbSecond,
  });
  for (const [key, count] of Object.entries(dynamo)) {
    const { table: _table, write: _write, ...line } = dynamoCost(key, count, 'client API');
    lines.push({ service: 'DynamoDB', ...line });
  }
  if (logs) {
    const bytes = Object.values(logs).reduce((sum, count) => sum + count.bytes, 0) + calls.invocations * LAMBDA_PLATFORM_LOG_BYTES;
    lines.push({
      service: 'CloudWatch Logs',
      what: "CloudWatch Logs ingestion (client API: its line a request, Lambda's START/END/REPORT)",
      requests: 0,
      units: `${round(bytes / 1e6, 1)} MB`,
      usd: (bytes / 2 ** 30) * PRICES.logsIngestedPerGb,
    });
  }
  const byService = { 'API Gateway': 0, Lambda: 0, DynamoDB: 0, 'CloudWatch Logs': 0 };
  for (const line of lines) byService[line.service] += line.usd;
  return { lines, byService, total: lines.reduce((sum, line) => sum + line.usd, 0) };
}

export interface StorageCost {
  /** A change row's size as DynamoDB bills its storage (its attributes and the item overhead), bytes. */
  rowBytes: number;
  /** A million changes kept a month: table storage, continuous backups. */
  perMillionMonth: { storage: number; backups: number };
  /** A million changes a day, each kept `retentionDays`: the rows held at any time, and their monthly cost. */
  steady: { rows: number; gb: number; storage: number; backups: number };
}

/** The change rows' storage, from their average size as written. */
export function storageCost(averageRowBytes: number, retentionDays: number): StorageCost {
  const rowBytes = averageRowBytes + ITEM_STORAGE_OVERHEAD_BYTES;
  const gbPerMillion = (rowBytes * 1e6) / 2 ** 30;
  const rows = 1e6 * retentionDays;
  const gb = (rowBytes * rows) / 2 ** 30;
  return {
    rowBytes,
    perMillionMonth: { storage: gbPerMillion * PRICES.dynamoStoragePerGbMonth, backups: gbPerMillion * PRICES.dynamoPitrPerGbMonth },
    steady: { rows, gb, storage: gb * PRICES.dynamoStoragePerGbMonth, backups: gb * PRICES.dynamoPitrPerGbMonth },
  };
}

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
