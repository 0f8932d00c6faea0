/**
 * What the ids users push cost: every request from the first send to the last record done (and,
 * for changed ids, to the last change event put), as the simulation's meter counted it, at the
 * public prices of reconcile-cost.ts, line by line and by AWS service. The users' sends (the
 * enqueue tool's SendMessageBatch), the sync queue's event source, the sync's containers on it (and
 * on the reconcile queue, when a users' batch moved a backlog's ids to the background lane), the
 * items table's stream, the changes writer on it (when it ran) and the change-events function with
 * its PutEvents. The token refresher's
 * schedule is left out, as in the pass's cost: it runs whatever is sent.
 */
import { PRICES } from '../cost/prices.js';
import type { CallCounts } from '../fakes/in-process-aws.js';
import type { SimMeter } from './meters.js';
import { dynamoCost, lambdaCost, logBytes, who, type CostLine, type CostOptions } from './reconcile-cost.js';

export type AwsService = 'DynamoDB' | 'DynamoDB Streams' | 'SQS' | 'Lambda' | 'X-Ray' | 'CloudWatch Logs' | 'EventBridge';

export const SERVICES: readonly AwsService[] = ['DynamoDB', 'DynamoDB Streams', 'SQS', 'Lambda', 'X-Ray', 'CloudWatch Logs', 'EventBridge'];

export interface PushCostLine extends CostLine {
  service: AwsService;
}

export interface PushCost {
  lines: PushCostLine[];
  byService: Record<AwsService, number>;
  total: number;
  /** The total for a million ids (counts scale with the ids). */
  perMillion: number;
  perMillionByService: Record<AwsService, number>;
}

type PushMeter = Pick<SimMeter, 'dynamo' | 'sqs' | 'eventSource' | 'lambda' | 'logs' | 'stream' | 'eventBridge'> & Partial<Pick<SimMeter, 'writerStream'>>;

/**
 * The cost of pushing `ids` ids: `sends` the users' SQS calls, `seconds` the measured time (for
 * X-Ray's one trace a second when traced), logs only when metered.
 */
export function pushCost(meter: PushMeter, sends: CallCounts, ids: number, seconds: number, options: CostOptions): PushCost {
  const { logsMetered, tracing } = options;
  const lines: PushCostLine[] = [];
  const sqs = (what: string, calls: number): void =>
    void lines.push({ service: 'SQS', what: `SQS ${what}`, requests: calls, units: `${calls} requests`, usd: (calls / 1e6) * PRICES.sqsRequestPerMillion });
  for (const [operation, calls] of Object.entries(sends)) sqs(`${operation} (users, the enqueue tool)`, calls);
  // The sync on the reconcile queue counts when it worked: the ids a users' batch moved to the background lane.
  const syncSources = meter.lambda.reconcile.invocations > 0 ? (['sync', 'reconcile'] as const) : (['sync'] as const);
  for (const source of syncSources) {
    const queue = source === 'sync' ? 'the sync queue' : 'the reconcile queue';
    const events = meter.eventSource[source];
    sqs(`ReceiveMessage (event source on ${queue}; ${events.emptyReceives} came back empty)`, events.receives);
    sqs(`DeleteMessageBatch (event source on ${queue})`, events.deleteBatches);
    for (const [operation, calls] of Object.entries(meter.sqs[source])) sqs(`${operation} (${who(source)})`, calls);
  }

  const streamSources = [...syncSources, 'changeEvents', ...(meter.lambda.changesWriter.invocations > 0 ? (['changesWriter'] as const) : [])] as const;
  for (const source of streamSources) {
    for (const [key, count] of Object.entries(meter.dynamo[source])) {
      const { table: _table, write: _write, ...line } = dynamoCost(key, count, who(source));
      lines.push({ service: 'DynamoDB', ...line });
    }
  }
  const stream = meter.stream;
  lines.push({
    service: 'DynamoDB Streams',
    what: `DynamoDB Streams GetRecords (change events' event source; ${stream.emptyGetRecords} came back empty; free when Lambda reads)`,
    requests: stream.getRecords,
    units: `${stream.records} records`,
    usd: 0,
  });
  if (meter.writerStream && meter.lambda.changesWriter.invocations > 0) {
    const writer = meter.writerStream;
    lines.push({
      service: 'DynamoDB Streams',
      what: `DynamoDB Streams GetRecords (changes writer's event source; ${writer.emptyGetRecords} came back empty; free when Lambda reads)`,
      requests: writer.getRecords,
      units: `${writer.records} records`,
      usd: 0,
    });
  }

  for (const source of streamSources) {
    const lambda = meter.lambda[source];
    if (source === 'changeEvents' && lambda.invocations === 0) continue;
    for (const line of lambdaCost(lambda, who(source), seconds, tracing)) lines.push({ service: line.what.startsWith('X-Ray') ? 'X-Ray' : 'Lambda', ...line });
  }
  const bridge = meter.eventBridge;
  lines.push({
    service: 'EventBridge',
    what: 'EventBridge PutEvents (change events)',
    requests: bridge.putEventsCalls,
    units: `${bridge.entries} entries, ${bridge.billedEvents} billed events`,
    usd: (bridge.billedEvents / 1e6) * PRICES.eventBridgeEventPerMillion,
  });
  if (logsMetered) {
    for (const source of streamSources) {
      if (source === 'changeEvents' && meter.lambda[source].invocations === 0) continue;
      const bytes = logBytes(meter, source);
      lines.push({ service: 'CloudWatch Logs', what: `CloudWatch Logs ingestion (${who(source)}: log lines, EMF metrics, Lambda's START/END/REPORT)`, requests: 0, units: `${round(bytes / 1e6, 1)} MB`, usd: (bytes / 2 ** 30) * PRICES.logsIngestedPerGb });
    }
  }

  const byService = Object.fromEntries(SERVICES.map((service) => [service, 0])) as Record<AwsService, number>;
  for (const line of lines) byService[line.service] += line.usd;
  const total = lines.reduce((sum, line) => sum + line.usd, 0);
  const scale = 1_000_000 / ids;
  const perMillionByService = Object.fromEntries(SERVICES.map((service) => [service, byService[service] * scale])) as Record<AwsService, number>;
  return { lines, byService, total, perMillion: total * scale, perMillionByService };
}

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
