/**
 * The idle cost (dev/cost/: idle-cost.ts, idle-lines.ts, idle-runs.ts) against the synthesized
 * templates (bundling skipped), the real handlers and docs/cost.md: every count is the templates'
 * own, every resource type of the templates is priced or named free when idle, the total is the
 * lines' sum; an idle run of the token refresher and of the reconciler, with the deployed
 * configuration, makes the calls, publishes the metrics and writes the bytes the assumptions say;
 * docs/cost.md holds the table and the total as the script computes them, the total in one place.
 */
import { Writable } from 'node:stream';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { KMSClient } from '@aws-sdk/client-kms';
import { SQSClient } from '@aws-sdk/client-sqs';
import { Match, type Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { idleTable } from '../../../dev/cost/idle-cost.js';
import { FREE_WHEN_IDLE, formatTotal, idleCost, idleTotal, PRICED_TYPES, type IdleLine } from '../../../dev/cost/idle-lines.js';
import { IDLE_ASSUMPTIONS, IDLE_RUNS, type IdleCalls } from '../../../dev/cost/idle-runs.js';
import { IDLE_PRICES_AS_OF, PRICES, PRICES_AS_OF, PRICES_REGION } from '../../../dev/cost/prices.js';
import { emfDimensionSets } from '../../../dev/fakes/emf.js';
import { createContext } from '../../../dev/fakes/lambda.js';
import { LAMBDA_PLATFORM_LOG_BYTES } from '../../../dev/sim/reconcile-cost.js';
import { LAMBDA_LONG_POLL_SECONDS } from '../../../dev/system/event-sources.js';
import { streamObservability } from '../../../dev/system/observability.js';
import { createReconcilerHandler } from '../../../functions/reconciler/app.js';
import type { Cursor, CursorStore, ItemIds, ReconcileQueue } from '../../../functions/reconciler/ports.js';
import type { ConnectionStore } from '../../../functions/shared/connections/ports.js';
import { loadReconcilerConfig, loadRefresherConfig } from '../../../functions/shared/config.js';
import { RECONCILER_SERVICE, REFRESHER_SERVICE } from '../../../functions/shared/metric-names.js';
import { createRefresherHandler } from '../../../functions/token-refresher/app.js';
import { RECONCILER_MEMORY_MB, REFRESHER_MEMORY_MB, scheduleDeployment } from '../../../infra/deployment.js';
import { CDK_JSON_CONTEXT, BASE_URL, readContext, synthTemplates } from '../../infra/helpers.js';
import { page, section } from '../../docs/markdown.js';

const IDLE_SECTION = 'Idle: a deployment with no traffic';

const synthesized = synthTemplates();
const templates: Template[] = [synthesized.statefulTemplate, synthesized.statelessTemplate];
const lines = idleCost(templates.map((template) => template.toJSON()));

type Resources = Record<string, { Type: string; Properties?: Record<string, any> }>;

function found(type: string, props?: unknown): Resources {
  return Object.assign({}, ...templates.map((template) => template.findResources(type, props))) as Resources;
}

function count(type: string, props?: unknown): number {
  return Object.keys(found(type, props)).length;
}

function lineOf(service: string, what: string): IdleLine {
  const matching = lines.filter((line) => line.service === service && line.what.startsWith(what));
  if (matching.length !== 1) throw new Error(`expected one ${service} line starting "${what}", found ${matching.length}`);
  return matching[0]!;
}

describe('the idle cost, from the templates', () => {
  const minutes = IDLE_ASSUMPTIONS.days * 24 * 60;
  const schedule = scheduleDeployment(readContext({ ...CDK_JSON_CONTEXT, baseUrl: BASE_URL }));
  const refresherRuns = minutes / schedule.refresherEveryMinutes;
  const reconcilerRuns = minutes / schedule.reconciler!.everyMinutes;

  it('counts what the templates hold: alarms, dashboards, keys, schedules, tables, queues, the mappings on queues', () => {
    expect(lineOf('CloudWatch', 'metric alarms').resources).toBe(count('AWS::CloudWatch::Alarm'));
    expect(lineOf('CloudWatch', 'metric alarms').quantity).toBe(count('AWS::CloudWatch::Alarm'));
    expect(lineOf('CloudWatch', 'dashboard').resources).toBe(count('AWS::CloudWatch::Dashboard'));
    expect(lineOf('KMS', 'customer managed key').resources).toBe(count('AWS::KMS::Key'));
    expect(lineOf('EventBridge Scheduler', 'invocations').resources).toBe(count('AWS::Scheduler::Schedule'));
    expect(lineOf('DynamoDB', 'reads').resources).toBe(count('AWS::DynamoDB::Table'));
    expect(lineOf('SQS', 'requests').resources).toBe(count('AWS::SQS::Queue'));
    const onQueues = found('AWS::Lambda::EventSourceMapping', { Properties: { StartingPosition: Match.absent() } });
    expect(lineOf('SQS', 'empty receives').resources).toBe(Object.keys(onQueues).length);
    // Five pollers a mapping: Lambda goes down to two only on a mapping without a maximum concurrency.
    for (const mapping of Object.values(onQueues)) expect(mapping.Properties?.['ScalingConfig']?.['MaximumConcurrency']).toBeGreaterThan(0);
    expect(IDLE_ASSUMPTIONS.longPollSeconds).toBe(LAMBDA_LONG_POLL_SECONDS);
  });

  it('runs the schedules at the deployment’s rates, with the functions’ memory', () => {
    expect(lineOf('EventBridge Scheduler', 'invocations').quantity).toBe(refresherRuns + reconcilerRuns);
    expect(lineOf('Lambda', 'requests').quantity).toBe(refresherRuns + reconcilerRuns);
    const seconds = IDLE_ASSUMPTIONS.billedMsPerRun / 1000;
    expect(lineOf('Lambda', 'duration').quantity).toBeCloseTo(seconds * (refresherRuns * (REFRESHER_MEMORY_MB / 1024) + reconcilerRuns * (RECONCILER_MEMORY_MB / 1024)), 9);
    expect(lineOf('CloudWatch', 'custom metrics').resources).toBe(count('AWS::Scheduler::Schedule'));
  });

  it('prices every resource type of the templates, or names it free when idle with a reason', () => {
    const types = new Set(templates.flatMap((template) => Object.values(template.toJSON().Resources as Resources).map((resource) => resource.Type)));
    for (const type of types) {
      const priced = PRICED_TYPES.includes(type) && lines.some((line) => line.type === type);
      const free = FREE_WHEN_IDLE[type] !== undefined && FREE_WHEN_IDLE[type]!.length > 0;
      expect(priced || free, `${type}: priced by a line or free when idle`).toBe(true);
      expect(priced && free, `${type}: priced and free at once`).toBe(false);
    }
    expect(() => idleCost([{ Resources: { Thing: { Type: 'AWS::New::Thing' } } }])).toThrow(/AWS::New::Thing/);
  });

  it('totals the lines, each its quantity at its price', () => {
    for (const line of lines) expect(line.usd).toBe((line.quantity / line.perUnits) * line.price);
    expect(idleTotal(lines)).toBe(lines.reduce((total, line) => total + line.usd, 0));
    expect(idleTable(lines).split('\n').at(-1)).toBe(`| **total** | | | | | **${formatTotal(idleTotal(lines)).slice(1)}** |`);
    const doubled = idleCost(
      templates.map((template) => template.toJSON()),
      Object.fromEntries(Object.entries(PRICES).map(([name, value]) => [name, value * 2])) as unknown as typeof PRICES,
    );
    expect(idleTotal(doubled)).toBeCloseTo(2 * idleTotal(lines), 9);
  });
});

// ---- the idle runs, as the real handlers make them ----------------------------------------------

const ACCOUNT = '123456789012';

/** The function's environment as deployed, its CloudFormation references replaced by names of their shape. */
function deployedEnvironment(service: string): { env: Record<string, string>; memoryMb: number; timeoutMs: number; name: string } {
  const [id, fn] = Object.entries(found('AWS::Lambda::Function')).find(([, resource]) => resource.Properties?.['Environment']?.['Variables']?.['POWERTOOLS_SERVICE_NAME'] === service)!;
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(fn.Properties!['Environment']['Variables'] as Record<string, unknown>)) {
    if (typeof value === 'string') env[key] = value;
    else if (key.endsWith('_QUEUE_URL')) env[key] = `https://sqs.${PRICES_REGION}.amazonaws.com/${ACCOUNT}/ContentSyncStateful-Queue-AbCdEfGhIjKl`;
    else if (key.endsWith('_KEY_ARN')) env[key] = `arn:aws:kms:${PRICES_REGION}:${ACCOUNT}:key/00000000-0000-4000-8000-000000000000`;
    else env[key] = `ContentSyncStateful-${key}-AbCdEfGhIjKl`;
  }
  // A function's name as CloudFormation makes it: the stack, the logical id cut short, a suffix.
  return { env, memoryMb: fn.Properties!['MemorySize'], timeoutMs: fn.Properties!['Timeout'] * 1000, name: `ContentSyncStateless-${id.slice(0, 30)}-AbCdEfGhIjKl` };
}

/**
 * The real logger and metrics of `service` writing to one stream; `take` gives what was written since
 * the last take: its bytes as ingested (each line and its line break) and its text.
 */
function observed(service: string) {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer | string, _encoding, callback) {
      text += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
      callback();
    },
  });
  const take = (): { bytes: number; emf: string } => {
    const taken = text;
    text = '';
    const bytes = taken
      .split('\n')
      .filter((line) => line !== '')
      .reduce((total, line) => total + Buffer.byteLength(line) + 1, 0);
    return { bytes, emf: taken };
  };
  return { ...streamObservability(service, stream), take };
}

function metricNames(emf: string): string[] {
  return emf
    .split('\n')
    .filter((line) => line.includes('"_aws"'))
    .flatMap((line) => (JSON.parse(line)._aws.CloudWatchMetrics as Array<{ Metrics: Array<{ Name: string }> }>).flatMap((d) => d.Metrics.map((m) => m.Name)))
    .sort();
}

function withoutDecrypt(calls: IdleCalls): IdleCalls {
  const { Decrypt: _decrypt, ...rest } = calls;
  return rest;
}

describe('an idle run, with the real handlers', () => {
  it('the token refresher: one Scan of the empty table, its metrics, about its bytes', async () => {
    const deployed = deployedEnvironment(REFRESHER_SERVICE);
    const calls: IdleCalls = {};
    const store = new Proxy({} as ConnectionStore, {
      get: (_target, name) => {
        if (name === 'list') {
          return async function* list() {
            calls.Scan = (calls.Scan ?? 0) + 1;
          };
        }
        if (name === 'then') return undefined;
        return () => {
          throw new Error(`an idle run calls the store's ${String(name)}`);
        };
      },
    });
    const seen = observed(REFRESHER_SERVICE);
    const handler = createRefresherHandler({
      config: loadRefresherConfig(deployed.env),
      dynamodb: new DynamoDBClient({ region: PRICES_REGION }),
      kms: new KMSClient({ region: PRICES_REGION }),
      store,
      tokenPaceStoreFor: () => {
        throw new Error('an idle run takes no slot of a token pace');
      },
      logger: seen.logger,
      metrics: seen.metrics,
    });
    const run = IDLE_RUNS[REFRESHER_SERVICE]!;
    for (let i = 0; i < 2; i += 1) {
      for (const key of Object.keys(calls)) delete calls[key as keyof IdleCalls];
      await handler({ trigger: 'schedule' }, createContext(deployed.name, PRICES_REGION, deployed.timeoutMs, { memoryMb: deployed.memoryMb, accountId: ACCOUNT }));
      const { bytes, emf } = seen.take();
      expect(calls).toEqual(withoutDecrypt(run.calls));
      expect(metricNames(emf)).toEqual([...run.metrics].sort());
      expect(emfDimensionSets(emf)).toEqual([`ContentSync: service=${REFRESHER_SERVICE}`]);
      expect(Math.abs(bytes - run.logBytes) / run.logBytes, `${bytes} bytes written, ${run.logBytes} assumed`).toBeLessThan(0.05);
    }
  });

  it('the reconciler: a pass over the empty table, then idle ticks; their calls, metrics and bytes', async () => {
    const deployed = deployedEnvironment(RECONCILER_SERVICE);
    const calls: IdleCalls = {};
    const call = (name: keyof IdleCalls): void => {
      calls[name] = (calls[name] ?? 0) + 1;
    };
    let row: Cursor | undefined;
    const cursor: CursorStore = {
      read: async () => (call('GetItem'), row === undefined ? undefined : structuredClone(row)),
      startPass: async (next) => (call('PutItem'), (row = structuredClone(next)), 'written'),
      advance: async (_pass, segment, next) => (call('UpdateItem'), (row!.segments[segment] = structuredClone(next)), 'written'),
      endPass: async (_pass, endedAt) => (call('UpdateItem'), (row!.endedAt = endedAt), 'written'),
    };
    const ids: ItemIds = {
      page: async () => (call('Scan'), { keys: [] }),
      approximateCount: async () => (call('DescribeTable'), 0),
    };
    const queue: ReconcileQueue = {
      backlog: async () => (call('GetQueueAttributes'), 0),
      send: async () => {
        throw new Error('an idle tick sends nothing');
      },
    };
    const seen = observed(RECONCILER_SERVICE);
    const handler = createReconcilerHandler({
      config: loadReconcilerConfig(deployed.env),
      dynamodb: new DynamoDBClient({ region: PRICES_REGION }),
      sqs: new SQSClient({ region: PRICES_REGION }),
      ports: { cursor, ids, queue },
      logger: seen.logger,
      metrics: seen.metrics,
    });
    const tick = async (): Promise<{ calls: IdleCalls; bytes: number; emf: string }> => {
      for (const key of Object.keys(calls)) delete calls[key as keyof IdleCalls];
      await handler({ trigger: 'schedule', worker: 0, workers: 1 }, createContext(deployed.name, PRICES_REGION, deployed.timeoutMs, { memoryMb: deployed.memoryMb, accountId: ACCOUNT }));
      return { calls: { ...calls }, ...seen.take() };
    };
    const run = IDLE_RUNS[RECONCILER_SERVICE]!;
    const pass = run.pass!(deployed.env);
    const first = await tick();
    const idle = await tick();
    expect((await tick()).calls).toEqual(idle.calls);

    expect(idle.calls).toEqual(run.calls);
    const extra = Object.fromEntries(Object.entries(first.calls).map(([name, n]) => [name, n - (idle.calls[name as keyof IdleCalls] ?? 0)]).filter(([, n]) => n !== 0));
    expect(extra).toEqual(pass.calls);
    expect(pass.everyHours).toBe(Number(deployed.env['FRESHNESS_HOURS']));

    expect(metricNames(idle.emf)).toEqual([...run.metrics].sort());
    expect(metricNames(first.emf)).toEqual([...run.metrics, ...pass.metrics].sort());
    expect(emfDimensionSets(idle.emf + first.emf)).toEqual([`ContentSync: service=${RECONCILER_SERVICE}`]);

    expect(Math.abs(idle.bytes - run.logBytes) / run.logBytes, `${idle.bytes} bytes written a tick, ${run.logBytes} assumed`).toBeLessThan(0.05);
    const passBytes = first.bytes - idle.bytes;
    expect(Math.abs(passBytes - pass.logBytes) / pass.logBytes, `${passBytes} bytes more for a pass, ${pass.logBytes} assumed`).toBeLessThan(0.1);
  });
});

// ---- docs/cost.md ---------------------------------------------------------------------------------

describe('docs/cost.md', () => {
  const text = page('docs/cost.md');
  const idle = section(text, IDLE_SECTION);
  const total = formatTotal(idleTotal(lines)).slice(1);

  it('holds the table the script prints, and its command, prices’ dates and region', () => {
    expect(idle).toContain(idleTable(lines));
    expect(text.slice(text.indexOf(`## ${IDLE_SECTION}`))).toContain('```bash\nnpm run cost:idle\n```');
    for (const stated of [PRICES_AS_OF, IDLE_PRICES_AS_OF, PRICES_REGION]) expect(idle).toContain(stated);
  });

  it('states the assumptions the script makes', () => {
    const flatIdle = idle.replace(/\s+/g, ' ');
    const reconciler = IDLE_RUNS[RECONCILER_SERVICE]!;
    const stated = [
      `${IDLE_ASSUMPTIONS.billedMsPerRun} ms billed a run`,
      `${IDLE_RUNS[REFRESHER_SERVICE]!.logBytes.toLocaleString('en-US')} bytes a refresher run`,
      `${reconciler.logBytes.toLocaleString('en-US')} a reconciler tick`,
      `${reconciler.pass!({}).logBytes.toLocaleString('en-US')} more in the tick that starts and ends a pass`,
      `(${LAMBDA_PLATFORM_LOG_BYTES} bytes an invocation`,
      `long poll of ${IDLE_ASSUMPTIONS.longPollSeconds} s`,
      `a month of ${IDLE_ASSUMPTIONS.days} days`,
    ];
    for (const phrase of stated) expect(flatIdle).toContain(phrase);
    expect(flatIdle).toContain(`${['zero', 'one', 'two', 'three', 'four', 'five'][IDLE_ASSUMPTIONS.pollersPerQueueMapping]} pollers a mapping on a queue`);
  });

  it('states the total in one place', () => {
    expect(text.match(new RegExp(`(?<![\\d.])${total.replace('.', '\\.')}(?![\\d])`, 'g'))).toHaveLength(1);
  });

  it("is what the README quotes, linking to it", () => {
    const readme = section(page('README.md'), 'What it costs').replace(/\s+/g, ' ');
    expect(readme).toContain(`**$${total} a month idle**`);
    expect(readme).toContain('(docs/cost.md#idle-a-deployment-with-no-traffic)');
  });
});
