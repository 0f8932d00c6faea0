/**
 * The reconciler's handler (functions/reconciler/app.ts) over fakes of its ports, and its
 * configuration: the schedule's input, the tick's deadline from the invocation's remaining time,
 * the metrics of each tick (namespace ContentSync, service reconciler) and loadReconcilerConfig.
 */
import { describe, expect, it } from 'vitest';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import { captureOutput, jsonLines } from '../../../dev/fakes/capture-output.js';
import { emfDimensionSets } from '../../../dev/fakes/emf.js';
import { createContext } from '../../../dev/fakes/lambda.js';
import { createReconcilerHandler, DEFAULT_TUNING, workerOf, type ReconcilerHandlerDeps } from '../../../functions/reconciler/app.js';
import { DEFAULTS, ENV, loadReconcilerConfig, type ReconcilerConfig } from '../../../functions/shared/config.js';
import { ConfigError } from '../../../functions/shared/errors.js';
import { RECONCILER_METRIC_NAMES, RECONCILER_SERVICE } from '../../../functions/shared/metric-names.js';
import { idList, T0, world, type World } from './fakes.js';

const CONFIG: ReconcilerConfig = {
  itemsTableName: 'items',
  controlTableName: 'control',
  reconcileQueueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/reconcile',
  freshnessHours: 24,
  segments: 2,
  highWater: 20_000,
};

function handlerFor(w: World, overrides: Partial<ReconcilerHandlerDeps> = {}) {
  return createReconcilerHandler({
    config: CONFIG,
    dynamodb: new DynamoDBClient({ region: 'eu-west-1' }),
    sqs: new SQSClient({ region: 'eu-west-1' }),
    clock: w.clock,
    sleep: w.deps.sleep,
    ports: { cursor: w.cursor, ids: w.ids, queue: w.queue },
    tuning: { pageSize: 10 },
    ...overrides,
  });
}

/** The EMF documents in the output. */
function emf(output: string): Array<Record<string, unknown>> {
  return jsonLines(output).filter((line): line is Record<string, unknown> => typeof line === 'object' && '_aws' in line);
}

describe('the reconciler handler', () => {
  it('runs a tick and publishes IdsEnqueued, PassNumber, PassAgeSeconds, IdsKnown, ProjectedPassSeconds and PassLengthSeconds', async () => {
    const w = world(idList(35));
    const { result, error, output } = await captureOutput(() => handlerFor(w)({ trigger: 'schedule', worker: 0, workers: 1 }, createContext('reconciler')));
    expect(error).toBeUndefined();
    expect(result).toMatchObject({ state: 'ended', pass: 1, enqueued: 35 });
    const [document] = emf(output);
    expect(document).toMatchObject({
      service: RECONCILER_SERVICE,
      IdsEnqueued: 35,
      PassNumber: 1,
      PassAgeSeconds: 0,
      IdsKnown: 35,
      ProjectedPassSeconds: 0,
      PassLengthSeconds: 0,
      _aws: {
        CloudWatchMetrics: [
          {
            Namespace: 'ContentSync',
            Dimensions: [['service']],
            Metrics: expect.arrayContaining([
              { Name: 'IdsEnqueued', Unit: 'Count' },
              { Name: 'PassNumber', Unit: 'Count' },
              { Name: 'PassAgeSeconds', Unit: 'Seconds' },
              { Name: 'IdsKnown', Unit: 'Count' },
              { Name: 'ProjectedPassSeconds', Unit: 'Seconds' },
              { Name: 'PassLengthSeconds', Unit: 'Seconds' },
            ]),
          },
        ],
      },
    });
    expect(RECONCILER_METRIC_NAMES).toEqual({
      enqueued: 'IdsEnqueued',
      pass: 'PassNumber',
      passAge: 'PassAgeSeconds',
      projectedPass: 'ProjectedPassSeconds',
      idsKnown: 'IdsKnown',
      passLength: 'PassLengthSeconds',
    });
    const done = jsonLines(output).find((line) => typeof line === 'object' && line['message'] === 'tick done');
    expect(done).toMatchObject({ state: 'ended', pass: 1, enqueued: 35, worker: 0, workers: 1 });
  });

  it('publishes with the dimension service alone, and with the stage beside it when the configuration has one', async () => {
    const tick = (config: ReconcilerConfig) => captureOutput(() => handlerFor(world(idList(5)), { config })({}, createContext('reconciler')));
    expect(emfDimensionSets((await tick(CONFIG)).output)).toEqual(['ContentSync: service=reconciler']);
    expect(emfDimensionSets((await tick({ ...CONFIG, stage: 'staging' })).output)).toEqual(['ContentSync: service=reconciler, stage=staging']);
  });

  it('publishes no projection during the warm-up and no pass length while the pass runs', async () => {
    const w = world(idList(100));
    const { output } = await captureOutput(() => handlerFor(w, { config: { ...CONFIG, highWater: 20 } })({}, createContext('reconciler')));
    const [document] = emf(output);
    expect(document).toMatchObject({ IdsEnqueued: 20, PassNumber: 1 });
    expect(document).not.toHaveProperty('ProjectedPassSeconds');
    expect(document).not.toHaveProperty('PassLengthSeconds');
  });

  it('stops taking pages at the earlier of 50 s and the remaining time less 5 s', async () => {
    expect(DEFAULT_TUNING).toMatchObject({ tickBudgetMs: 50_000, safetyMarginMs: 5_000, tickIntervalMs: 60_000, refillWaitMs: 5_000, pageSize: 1_000 });
    const slow = (remainingMs: number) => {
      const w = world(idList(500));
      w.ids.beforePage = () => w.clock.advance(1_000); // each page takes a second
      return { w, run: () => captureOutput(() => handlerFor(w, { config: { ...CONFIG, segments: 1 } })(undefined, createContext('reconciler', 'eu-west-1', remainingMs, { remainingMs: () => remainingMs }))) };
    };
    const long = slow(900_000);
    await long.run();
    expect(long.w.ids.pages).toHaveLength(50);
    const short = slow(20_000);
    await short.run();
    expect(short.w.ids.pages).toHaveLength(15);
    expect(short.w.clock.ms).toBe(T0 + 15_000);
  });

  it('a tick that fails fails the invocation, logged without a stack', async () => {
    const w = world(idList(30));
    w.ids.failNext = Object.assign(new Error('Requested resource not found'), { name: 'ResourceNotFoundException' });
    const { error, output } = await captureOutput(() => handlerFor(w)(undefined, createContext('reconciler')));
    expect((error as Error).name).toBe('ResourceNotFoundException');
    const line = jsonLines(output).find((entry) => typeof entry === 'object' && entry['level'] === 'ERROR') as Record<string, unknown>;
    expect(line).toMatchObject({ message: 'tick failed; the next tick resumes from the cursor', error: { name: 'ResourceNotFoundException', message: 'Requested resource not found' } });
  });

  it('takes worker and workers from the schedule input (worker 0 of 1 without)', () => {
    expect(workerOf(undefined)).toEqual({ worker: 0, workers: 1 });
    expect(workerOf(null)).toEqual({ worker: 0, workers: 1 });
    expect(workerOf({ trigger: 'schedule' })).toEqual({ worker: 0, workers: 1 });
    expect(workerOf({ worker: 2, workers: 3 })).toEqual({ worker: 2, workers: 3 });
    for (const event of [{ worker: 3, workers: 3 }, { worker: -1 }, { workers: 0 }, { worker: 0.5, workers: 2 }, { worker: '1' as unknown as number, workers: 2 }]) {
      expect(() => workerOf(event)).toThrow(RangeError);
    }
  });
});

describe('loadReconcilerConfig', () => {
  const env = {
    [ENV.itemsTableName]: 'items',
    [ENV.controlTableName]: 'control',
    [ENV.reconcileQueueUrl]: 'https://sqs.eu-west-1.amazonaws.com/123456789012/reconcile',
  };

  it('reads the variables, with the defaults FRESHNESS_HOURS 24, RECONCILE_SEGMENTS 8, RECONCILE_HIGH_WATER 20000', () => {
    expect([ENV.reconcileQueueUrl, ENV.freshnessHours, ENV.reconcileSegments, ENV.reconcileHighWater]).toEqual([
      'RECONCILE_QUEUE_URL',
      'FRESHNESS_HOURS',
      'RECONCILE_SEGMENTS',
      'RECONCILE_HIGH_WATER',
    ]);
    expect(loadReconcilerConfig(env)).toEqual({ ...CONFIG, segments: 8 });
    expect(DEFAULTS).toMatchObject({ freshnessHours: 24, reconcileSegments: 8, reconcileHighWater: 20_000 });
    expect(loadReconcilerConfig({ ...env, FRESHNESS_HOURS: '0', RECONCILE_SEGMENTS: '16', RECONCILE_HIGH_WATER: ' 500 ' })).toMatchObject({
      freshnessHours: 0,
      segments: 16,
      highWater: 500,
    });
  });

  it.each(['ITEMS_TABLE_NAME', 'CONTROL_TABLE_NAME', 'RECONCILE_QUEUE_URL'])('names %s when it is missing', (key) => {
    expect(() => loadReconcilerConfig({ ...env, [key]: undefined })).toThrow(new ConfigError(key, 'is required but not set'));
  });

  it.each([
    ['FRESHNESS_HOURS', '8761'],
    ['FRESHNESS_HOURS', 'abc'],
    ['FRESHNESS_HOURS', '1.5'],
    ['RECONCILE_SEGMENTS', '0'],
    ['RECONCILE_SEGMENTS', '101'],
    ['RECONCILE_HIGH_WATER', '9'],
    ['RECONCILE_HIGH_WATER', '100001'],
    ['RECONCILE_QUEUE_URL', 'not a url'],
  ])('names %s when it is %j', (key, value) => {
    let caught: unknown;
    try {
      loadReconcilerConfig({ ...env, [key]: value });
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    expect((caught as ConfigError).key).toBe(key);
    expect((caught as ConfigError).message.startsWith(`${key}: `)).toBe(true);
  });
});
