/**
 * The reconciler's throughput: ids sent to the reconcile queue per second by ONE invocation of the
 * real handler (createReconcilerHandler, real adapters) making a whole pass, against DynamoDB Local and
 * the HTTP SQS emulator, each in a child process of its own (so that this process does the
 * invocation's work only, as a Lambda invocation would: its CPU time is measured). Its two halves
 * are measured alone too: the parallel Scan of every segment (pages of `pageSize` ids, projection
 * id) and the SendMessageBatch calls (10 ids each, `sendConcurrency` in flight). Its DynamoDB calls
 * take AWS's latency as dev/fakes/dynamo-latency.ts models it (`dynamoLatency` scales it).
 *
 * The items table is filled with `ids` rows of about `rowBytes` bytes (a Scan reads whole rows, so
 * their size sets the Scan's work). The emulator empties the queue every 200 ms, as the item sync
 * would, and the high-water mark is set above `ids`, so that the tick is bounded by its own speed
 * only. Not a test: it asserts nothing about time.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { BatchWriteItemCommand, DeleteItemCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDbItemIds } from '../../../functions/reconciler/adapters/dynamodb-item-ids.js';
import { RECONCILE_CURSOR_KEY } from '../../../functions/reconciler/adapters/dynamodb-cursor-store.js';
import { SqsReconcileQueue } from '../../../functions/reconciler/adapters/sqs-reconcile-queue.js';
import { DEFAULT_TUNING } from '../../../functions/reconciler/app.js';
import { DEFAULTS } from '../../../functions/shared/config.js';
import type { ItemKey } from '../../../functions/reconciler/ports.js';
import type { TickReport } from '../../../functions/reconciler/tick.js';
import { DEFAULT_CONNECTION } from '../../../functions/shared/connections/connection.js';
import { OutputCapture } from '../../fakes/capture-output.js';
import { dynamoLatency, withDynamoLatency } from '../../fakes/dynamo-latency.js';
import { startLocalDynamo, type LocalDynamoDb } from '../../fakes/local-dynamo.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION, withoutSdkLogger } from '../../fakes/local-aws.js';
import { systemConfig } from '../../system/config.js';
import { localDeployment, resourceNames } from '../../system/deployment.js';
import { buildReconciler, invocationContext } from '../../system/functions.js';
import { localNames } from '../../system/names.js';
import { round } from '../support/stats.js';

export interface ReconcilerBenchOptions {
  ids: number;
  segments: number;
  pageSize: number;
  sendConcurrency: number;
  rowBytes: number;
  /** Scales AWS's DynamoDB latency injected into the reconciler's calls (dev/fakes/dynamo-latency.ts): 0 turns it off. */
  dynamoLatency: number;
  progress?: (line: string) => void;
}

export const RECONCILER_BENCH_DEFAULTS: Omit<ReconcilerBenchOptions, 'progress'> = {
  ids: 100_000,
  segments: DEFAULTS.reconcileSegments,
  pageSize: DEFAULT_TUNING.pageSize,
  sendConcurrency: DEFAULT_TUNING.sendConcurrency,
  rowBytes: 400,
  dynamoLatency: 1,
};

/** `npm run bench:reconciler`'s command line, as parseArgs reads it (test/docs holds the docs to it). */
export const RECONCILER_BENCH_CLI_OPTIONS = {
  ids: { type: 'string' },
  segments: { type: 'string' },
  'page-size': { type: 'string' },
  'send-concurrency': { type: 'string' },
  'row-bytes': { type: 'string' },
  'dynamo-latency': { type: 'string' },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
} as const;

export interface Phase {
  name: string;
  ids: number;
  seconds: number;
  idsPerSecond: number;
  /** CPU time of this process during the phase (user + system), ms. */
  cpuMs: number;
}

export interface ReconcilerBenchReport {
  options: Omit<ReconcilerBenchOptions, 'progress'>;
  startedAt: string;
  seedSeconds: number;
  phases: Phase[];
  /** What one invocation needs to send for 100M ids in a day. */
  neededFor100MPerDay: number;
  /** The invocation's CPU cost, and the rate it allows on Lambda (CPU share in proportion to memory) at the deployed memory and at one vCPU. */
  lambdaEstimate: { cpuMsPer1000Ids: number; idsPerCpuSecond: number; deployedMemoryMb: number; atDeployedMemory: number; at1769Mb: number };
}

const NAMES = localNames('bench-reconcile');
const ITEMS = NAMES.itemsTable;
const CONTROL = NAMES.controlTable;

export async function runReconcilerBench(input: Partial<ReconcilerBenchOptions> = {}): Promise<ReconcilerBenchReport> {
  const o: ReconcilerBenchOptions = { ...RECONCILER_BENCH_DEFAULTS, ...input };
  const startedAt = new Date().toISOString();
  const dynamo = await startLocalDynamo({ proxy: false });
  const emulator = await startEmulatorChild();
  // The reconciler's client takes AWS's latency; the table is filled without it (set-up, not measured).
  const client = withDynamoLatency(dynamo, dynamoLatency({ factor: o.dynamoLatency })).client();
  // As the reconciler's handler builds its client (functions/reconciler/handler.ts).
  const sqs = withoutSdkLogger(new SQSClient({ region: LOCAL_REGION, endpoint: emulator.endpoint, credentials: LOCAL_CREDENTIALS }));
  const phases: Phase[] = [];
  try {
    await dynamo.createItemsTable(ITEMS);
    await dynamo.createControlTable(CONTROL);
    o.progress?.(`  filling the items table: ${o.ids.toLocaleString('en-US')} rows of about ${o.rowBytes} bytes`);
    const seedStart = performance.now();
    await seed(dynamo, o.ids, o.rowBytes);
    const seedSeconds = round((performance.now() - seedStart) / 1000, 1);

    for (const measure of [() => scanAlone(client, o), () => sendAlone(sqs, emulator.queueUrl, o), () => oneInvocation(client, sqs, emulator.queueUrl, o)]) {
      phases.push(await measure());
      o.progress?.(line(phases.at(-1)!));
    }
    const invocation = phases.at(-1)!;
    const deployedMemoryMb = reconcilerOf(client, sqs, emulator.queueUrl, o).memoryMb;
    const { progress: _progress, ...options } = o;
    return {
      options,
      startedAt,
      seedSeconds,
      phases,
      neededFor100MPerDay: round(100_000_000 / 86_400, 0),
      lambdaEstimate: lambdaEstimate(invocation, deployedMemoryMb),
    };
  } finally {
    sqs.destroy();
    client.destroy();
    await emulator.close();
    await dynamo.close();
  }
}

/**
 * What the invocation's CPU time says of Lambda: a function gets one vCPU at 1,769 MB and a share in
 * proportion below (AWS Lambda documentation), so at `memoryMb` the CPU-bound rate is the rate at
 * one full core times memoryMb / 1,769. An upper bound on the CPU cost: this machine's core may be
 * slower or faster than Lambda's, and network round trips (not CPU) are overlapped by the calls in flight.
 */
function lambdaEstimate(invocation: Phase, deployedMemoryMb: number): ReconcilerBenchReport['lambdaEstimate'] {
  const idsPerCpuSecond = invocation.ids / (invocation.cpuMs / 1000);
  return {
    cpuMsPer1000Ids: round((invocation.cpuMs / invocation.ids) * 1000, 1),
    idsPerCpuSecond: round(idsPerCpuSecond, 0),
    deployedMemoryMb,
    atDeployedMemory: round((idsPerCpuSecond * deployedMemoryMb) / 1769, 0),
    at1769Mb: round(idsPerCpuSecond, 0),
  };
}

/**
 * The reconciler as deployed (dev/system: its environment from the deployment of cdk.json, with
 * `segments` as RECONCILE_SEGMENTS) but for a bench's whole pass in one invocation: a high-water
 * mark above the table (beyond what its variable allows: the tick is bounded by its own speed, not
 * by the backlog) and a tick budget of 15 minutes.
 */
function reconcilerOf(client: ReturnType<LocalDynamoDb['client']>, sqs: SQSClient, queueUrl: string, o: ReconcilerBenchOptions) {
  const config = systemConfig();
  const deployment = localDeployment(config, resourceNames(NAMES, { syncDeadLetterQueueUrl: '', reconcileQueueUrl: queueUrl, connectionsKeyArn: '' }), { reconcileSegments: o.segments });
  if (!deployment.reconciler) throw new Error('cdk.json deploys no reconciler (freshnessHours 0)');
  return buildReconciler(deployment.reconciler, {
    dynamodb: client,
    sqs,
    tuning: { pageSize: o.pageSize, sendConcurrency: o.sendConcurrency, tickBudgetMs: TICK_BUDGET_MS },
    beyondEnvironment: { highWater: o.ids * 10 },
  });
}

/** A whole pass in one invocation: its budget, and the time-out it runs under. */
const TICK_BUDGET_MS = 15 * 60_000;
const INVOCATION_TIMEOUT_MS = 16 * 60_000;

/** The emulator in a child process (emulator-child.ts), its queue emptied every 200 ms there. */
async function startEmulatorChild(): Promise<{ endpoint: string; queueUrl: string; close(): Promise<void> }> {
  const script = fileURLToPath(new URL('./emulator-child.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
  });
  const ready = await new Promise<{ endpoint: string; queueUrl: string }>((resolve, reject) => {
    let text = '';
    child.stdout.on('data', (chunk: Buffer) => {
      text += chunk.toString('utf8');
      const newline = text.indexOf('\n');
      if (newline >= 0) resolve(JSON.parse(text.slice(0, newline)) as { endpoint: string; queueUrl: string });
    });
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`the emulator child exited early (code ${code})`)));
  });
  return {
    ...ready,
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.stdin.end();
      }),
  };
}

function line(phase: Phase): string {
  return `  ${phase.name}: ${phase.ids.toLocaleString('en-US')} ids in ${phase.seconds} s = ${phase.idsPerSecond.toLocaleString('en-US')} ids/s (CPU ${phase.cpuMs} ms)`;
}

/** `count` rows as the sync writes them (live, every tenth a tombstone), BatchWriteItem 25 at a time, 8 in flight. */
async function seed(dynamo: LocalDynamoDb, count: number, rowBytes: number): Promise<void> {
  const client = dynamo.client();
  const padding = 'x'.repeat(Math.max(0, rowBytes - 120));
  const row = (index: number): Record<string, AttributeValue> => {
    const id = `fil-${String(index).padStart(9, '0')}`;
    return {
      connection: { S: DEFAULT_CONNECTION },
      id: { S: id },
      type: { S: 'file' },
      revision: { S: String(index) },
      item: { M: { id: { S: id }, revision: { N: String(index) }, name: { S: padding } } },
      syncedAt: { S: '2026-01-01T00:00:00.000Z' },
      ...(index % 10 === 3 ? { deleted: { BOOL: true } } : {}),
    };
  };
  let next = 0;
  const writer = async (): Promise<void> => {
    while (next < count) {
      const start = next;
      next = Math.min(count, next + 25);
      let requests = Array.from({ length: next - start }, (_, offset) => ({ PutRequest: { Item: row(start + offset) } }));
      while (requests.length > 0) {
        const output = await client.send(new BatchWriteItemCommand({ RequestItems: { [ITEMS]: requests } }));
        requests = (output.UnprocessedItems?.[ITEMS] ?? []) as typeof requests;
      }
    }
  };
  await Promise.all(Array.from({ length: 8 }, writer));
  client.destroy();
}

/** Every segment walked at once, page by page: the Scan half of a tick. */
async function scanAlone(client: ReturnType<LocalDynamoDb['client']>, o: ReconcilerBenchOptions): Promise<Phase> {
  const items = new DynamoDbItemIds(client, ITEMS);
  const start = clockStart();
  let total = 0;
  await Promise.all(
    Array.from({ length: o.segments }, async (_, segment) => {
      let after: ItemKey | undefined;
      do {
        const page = await items.page({ segment, totalSegments: o.segments, limit: o.pageSize, ...(after !== undefined ? { after } : {}) });
        total += page.keys.length;
        after = page.after;
      } while (after !== undefined);
    }),
  );
  return phase(`Scan alone (${o.segments} segments, pages of ${o.pageSize})`, total, start);
}

/** The ids in pages, each page's SendMessageBatch calls `sendConcurrency` at a time, `segments` pages at once: the send half. */
async function sendAlone(sqs: SQSClient, queueUrl: string, o: ReconcilerBenchOptions): Promise<Phase> {
  const queue = new SqsReconcileQueue(sqs, queueUrl, { concurrency: o.sendConcurrency });
  const start = clockStart();
  let next = 0;
  await Promise.all(
    Array.from({ length: o.segments }, async () => {
      while (next < o.ids) {
        const from = next;
        next = Math.min(o.ids, next + o.pageSize);
        await queue.send(Array.from({ length: next - from }, (_, offset) => ({ connection: DEFAULT_CONNECTION, id: `fil-${String(from + offset).padStart(9, '0')}` })), 1);
      }
    }),
  );
  return phase(`SendMessageBatch alone (${o.sendConcurrency} in flight per page, ${o.segments} pages at once)`, o.ids, start);
}

async function oneInvocation(client: ReturnType<LocalDynamoDb['client']>, sqs: SQSClient, queueUrl: string, o: ReconcilerBenchOptions): Promise<Phase> {
  const capture = new OutputCapture();
  const reconciler = reconcilerOf(client, sqs, queueUrl, o);
  await resetCursor(client);
  const start = clockStart();
  capture.start();
  let report: TickReport;
  try {
    report = await reconciler.handler({ trigger: 'bench' }, invocationContext(reconciler, LOCAL_REGION, { timeoutMs: INVOCATION_TIMEOUT_MS }));
  } finally {
    capture.stop();
  }
  if (report.state !== 'ended' || report.passIds !== o.ids) {
    throw new Error(`the tick did not send the whole table: ${JSON.stringify(report)}`);
  }
  return phase('one reconciler invocation (a whole pass)', report.enqueued, start);
}

async function resetCursor(client: ReturnType<LocalDynamoDb['client']>): Promise<void> {
  await client.send(new DeleteItemCommand({ TableName: CONTROL, Key: { pk: { S: RECONCILE_CURSOR_KEY } } }));
}

function clockStart(): { wall: number; cpu: NodeJS.CpuUsage } {
  return { wall: performance.now(), cpu: process.cpuUsage() };
}

function phase(name: string, ids: number, start: { wall: number; cpu: NodeJS.CpuUsage }): Phase {
  const seconds = (performance.now() - start.wall) / 1000;
  const cpu = process.cpuUsage(start.cpu);
  return { name, ids, seconds: round(seconds, 2), idsPerSecond: round(ids / seconds, 0), cpuMs: round((cpu.user + cpu.system) / 1000, 0) };
}
