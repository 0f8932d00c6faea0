/**
 * What the token refresher costs, from a simulation's meter (meters.ts) at the prices of
 * reconcile-cost.ts: its DynamoDB requests on every table it uses (the connections table's Scan,
 * leases and results; the token pace's row in the control table), its Lambda invocations and
 * GB-seconds, their X-Ray traces (each run is the first request of its second: sampled), its
 * EventBridge Scheduler invocations, its log ingestion (its lines and EMF metrics), and the KMS
 * requests DynamoDB makes on the connections table's key for it (about one a run:
 * connections-cost.ts). The provider's getToken calls are no AWS charge.
 */
import { PRICES } from '../cost/prices.js';
import { KMS_REQUESTS_PER_REFRESHER_RUN } from './connections-cost.js';
import type { SimMeter } from './meters.js';
import { dynamoCost, type CostLine } from './reconcile-cost.js';

export function refresherCost(meter: SimMeter, connectionsTable: string): { lines: CostLine[]; total: number } {
  const lines: CostLine[] = [];
  for (const [key, count] of Object.entries(meter.dynamo.refresher)) {
    if (count.requests === 0) continue;
    const { table: _table, write: _write, ...line } = dynamoCost(key, count, 'token refresher');
    lines.push(line);
  }
  const lambda = meter.lambda.refresher;
  const gbSeconds = (lambda.durationMs / 1000) * (lambda.memoryMb / 1024);
  const runs = lambda.invocations;
  lines.push(
    { what: `Lambda token refresher invocations (${lambda.memoryMb} MB, Arm)`, requests: runs, units: `${runs} invocations`, usd: (runs / 1e6) * PRICES.lambdaRequestPerMillion },
    { what: 'Lambda token refresher duration', requests: 0, units: `${round(gbSeconds, 1)} GB-s`, usd: gbSeconds * PRICES.lambdaArmGbSecond },
    { what: 'X-Ray traces of the token refresher (every run sampled)', requests: runs, units: `${runs} traces`, usd: (runs / 1e6) * PRICES.xrayTracePerMillion },
    { what: 'EventBridge Scheduler (token refresher runs)', requests: runs, units: `${runs} invocations`, usd: (runs / 1e6) * PRICES.schedulerInvocationPerMillion },
    {
      what: `KMS requests on the ${connectionsTable} table's key (about one a run)`,
      requests: runs * KMS_REQUESTS_PER_REFRESHER_RUN,
      units: `${runs * KMS_REQUESTS_PER_REFRESHER_RUN} requests`,
      usd: ((runs * KMS_REQUESTS_PER_REFRESHER_RUN) / 10_000) * PRICES.kmsRequestPer10k,
    },
  );
  const logs = Object.values(meter.logs.refresher);
  if (logs.length > 0) {
    const bytes = logs.reduce((total, count) => total + count.bytes, 0);
    const count = logs.reduce((total, entry) => total + entry.lines, 0);
    lines.push({ what: 'CloudWatch Logs ingestion (token refresher: its lines and EMF metrics)', requests: 0, units: `${count.toLocaleString('en-US')} lines, ${round(bytes / 1e6, 1)} MB`, usd: (bytes / 2 ** 30) * PRICES.logsIngestedPerGb });
  }
  return { lines, total: lines.reduce((sum, line) => sum + line.usd, 0) };
}

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
