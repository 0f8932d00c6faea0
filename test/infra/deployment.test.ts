/**
 * The stacks build from infra/deployment.ts, the module the local system (dev/) builds from too:
 * every function's memory, time-out and environment, the work queues' (the erase queue's too)
 * visibility, retention and redrive, the event sources', the schedules' and the client API stage's
 * throttling numbers in the synthesized templates are the module's, for the default context and for contexts that move every number. And when the
 * module's numbers move, the templates follow: a stack that types a number of its own (even the
 * same one) fails here.
 */
import type { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import * as deployment from '../../infra/deployment.js';
import type * as Deployment from '../../infra/deployment.js';
import { MARGIN_BEYOND_TIMEOUT_MS } from '../../functions/token-refresher/app.js';
import { fnArn, importOf, logicalId, resource, synthTemplates, type Templates } from './helpers.js';

/** PROVIDER_TIMEOUT_MS's upper bound (functions/shared/config.ts). */
const MAX_PROVIDER_TIMEOUT_MS = 120_000;

/**
 * While `shifted.on`, every deployment function of the module answers numbers (and an environment)
 * of its own, different from the real ones: the stacks and this test read the same module, so the
 * templates must show the shifted numbers.
 */
const shifted = vi.hoisted(() => ({ on: false }));

vi.mock('../../infra/deployment.js', async (importOriginal) => {
  const real = await importOriginal<typeof Deployment>();
  type FunctionDeployment = Deployment.FunctionDeployment;
  const fn = (deployment: FunctionDeployment): FunctionDeployment =>
    shifted.on
      ? { memoryMb: deployment.memoryMb + 64, timeoutSeconds: deployment.timeoutSeconds + 1, tracing: !deployment.tracing, environment: { ...deployment.environment, DEPLOYMENT_PROBE: 'shifted' } }
      : deployment;
  const maybe = (deployment: FunctionDeployment | undefined) => deployment && fn(deployment);
  const down = (n: number) => (n > 1 ? n - 1 : n + 1);
  const queue = (queues: Deployment.WorkQueueDeployment): Deployment.WorkQueueDeployment =>
    shifted.on
      ? {
          visibilityTimeoutSeconds: queues.visibilityTimeoutSeconds + 7,
          retentionDays: queues.retentionDays + 1,
          maxReceiveCount: queues.maxReceiveCount + 1,
          deadLetterRetentionDays: queues.deadLetterRetentionDays - 1,
        }
      : queues;
  return {
    ...real,
    refresherDeployment: (...args: Parameters<typeof real.refresherDeployment>) => fn(real.refresherDeployment(...args)),
    syncDeployment: (...args: Parameters<typeof real.syncDeployment>) => fn(real.syncDeployment(...args)),
    reconcilerDeployment: (...args: Parameters<typeof real.reconcilerDeployment>) => maybe(real.reconcilerDeployment(...args)),
    changeEventsDeployment: (...args: Parameters<typeof real.changeEventsDeployment>) => fn(real.changeEventsDeployment(...args)),
    changesWriterDeployment: (...args: Parameters<typeof real.changesWriterDeployment>) => fn(real.changesWriterDeployment(...args)),
    apiDeployment: (...args: Parameters<typeof real.apiDeployment>) => fn(real.apiDeployment(...args)),
    eraserDeployment: (...args: Parameters<typeof real.eraserDeployment>) => fn(real.eraserDeployment(...args)),
    functionDeployments: (...args: Parameters<typeof real.functionDeployments>): Deployment.FunctionDeployments => {
      const deployments = real.functionDeployments(...args);
      return {
        refresher: fn(deployments.refresher),
        sync: fn(deployments.sync),
        reconciler: maybe(deployments.reconciler),
        changeEvents: fn(deployments.changeEvents),
        changesWriter: fn(deployments.changesWriter),
        api: fn(deployments.api),
        eraser: fn(deployments.eraser),
      };
    },
    workQueueDeployment: (...args: Parameters<typeof real.workQueueDeployment>): Deployment.WorkQueueDeployment => queue(real.workQueueDeployment(...args)),
    eraseQueueDeployment: (): Deployment.WorkQueueDeployment => queue(real.eraseQueueDeployment()),
    eraseEventSourceDeployment: (): Deployment.SqsEventSourceDeployment => {
      const source = real.eraseEventSourceDeployment();
      return shifted.on ? { ...source, batchSize: down(source.batchSize), maxConcurrency: source.maxConcurrency + 1 } : source;
    },
    apiStageDeployment: (): Deployment.ApiStageDeployment => {
      const stage = real.apiStageDeployment();
      return shifted.on ? { rateLimitPerSecond: stage.rateLimitPerSecond + 1, burstLimit: stage.burstLimit + 1 } : stage;
    },
    syncEventSourceDeployment: (...args: Parameters<typeof real.syncEventSourceDeployment>): Deployment.SqsEventSourceDeployment => {
      const source = real.syncEventSourceDeployment(...args);
      return shifted.on
        ? {
            ...source,
            batchSize: down(source.batchSize),
            maxBatchingWindowSeconds: source.maxBatchingWindowSeconds && source.maxBatchingWindowSeconds + 1,
            maxConcurrency: source.maxConcurrency + 1,
          }
        : source;
    },
    changeEventSourceDeployment: (): Deployment.StreamEventSourceDeployment => {
      const source = real.changeEventSourceDeployment();
      return shifted.on
        ? { ...source, batchSize: down(source.batchSize), parallelizationFactor: source.parallelizationFactor + 1, retryAttempts: down(source.retryAttempts!) }
        : source;
    },
    changesWriterEventSourceDeployment: (): Deployment.StreamEventSourceDeployment => {
      const source = real.changesWriterEventSourceDeployment();
      // Its real retries are none given (until the records leave the stream): shifted, a number.
      return shifted.on ? { ...source, batchSize: down(source.batchSize), parallelizationFactor: source.parallelizationFactor + 1, retryAttempts: 7 } : source;
    },
    scheduleDeployment: (...args: Parameters<typeof real.scheduleDeployment>): Deployment.ScheduleDeployment => {
      const schedule = real.scheduleDeployment(...args);
      return shifted.on
        ? {
            refresherEveryMinutes: down(schedule.refresherEveryMinutes),
            reconciler: schedule.reconciler && { everyMinutes: schedule.reconciler.everyMinutes + 1, workers: schedule.reconciler.workers + 1 },
          }
        : schedule;
    },
    scheduleDeliveryDeployment: (...args: Parameters<typeof real.scheduleDeliveryDeployment>): Deployment.ScheduleDeliveryDeployment => {
      const delivery = real.scheduleDeliveryDeployment(...args);
      const shift = (one: Deployment.ScheduleDelivery) => ({ maxEventAgeMinutes: down(one.maxEventAgeMinutes), retryAttempts: one.retryAttempts + 1 });
      return shifted.on ? { refresher: shift(delivery.refresher), reconciler: shift(delivery.reconciler) } : delivery;
    },
  };
});

/** The variables ContentSyncFunction adds to every function's contract variables. */
const CONSTRUCT_VARIABLES = ['POWERTOOLS_SERVICE_NAME', 'POWERTOOLS_LOG_LEVEL', 'NODE_OPTIONS'];

/** The stateful resources as the stateless template names them (imports of the stateful stack's exports). */
function resourceNames(t: Templates): Deployment.ResourceNames {
  const f = t.statefulTemplate;
  const exported = (value: unknown) => {
    try {
      return importOf(f, value);
    } catch {
      // Not used by the stateless stack (the reconcile queue's URL without a reconciler): no function may name it.
      return 'NOT EXPORTED';
    }
  };
  const ref = (type: string, prefix: string) => exported({ Ref: logicalId(f, type, prefix) });
  const arn = (type: string, prefix: string) => exported(fnArn(logicalId(f, type, prefix)));
  const names = {
    itemsTableName: ref('AWS::DynamoDB::Table', 'ItemsTable'),
    itemsBucketName: ref('AWS::S3::Bucket', 'ItemsBucket'),
    controlTableName: ref('AWS::DynamoDB::Table', 'ControlTable'),
    changesTableName: ref('AWS::DynamoDB::Table', 'ChangesTable'),
    deadLetterQueueUrl: ref('AWS::SQS::Queue', 'DeadLetterQueue'),
    reconcileQueueUrl: ref('AWS::SQS::Queue', 'ReconcileQueue'),
    connectionsTableName: ref('AWS::DynamoDB::Table', 'ConnectionsTable'),
    eventBusName: arn('AWS::Events::EventBus', 'ChangeEventBus'),
    connectionsKeyArn: arn('AWS::KMS::Key', 'ConnectionsKey'),
    syncQueueUrl: ref('AWS::SQS::Queue', 'SyncQueue'),
    eraseQueueUrl: ref('AWS::SQS::Queue', 'EraseQueue'),
  };
  // Tokens where the module has strings: compared as template values.
  return names as unknown as Deployment.ResourceNames;
}

function expectFunction(template: Template, prefix: string, expected: Deployment.FunctionDeployment): void {
  const fn = resource(template, 'AWS::Lambda::Function', prefix);
  expect(fn.Properties['MemorySize'], `${prefix} memory`).toBe(expected.memoryMb);
  expect(fn.Properties['Timeout'], `${prefix} time-out`).toBe(expected.timeoutSeconds);
  const variables = { ...(fn.Properties['Environment'].Variables as Record<string, unknown>) };
  for (const name of CONSTRUCT_VARIABLES) delete variables[name];
  expect(variables, `${prefix} environment`).toEqual(expected.environment);
}

/** Minutes of `rate(n unit)`, whichever unit CDK chose. */
function rateMinutes(expression: string): number {
  const match = /^rate\((\d+) (minute|hour|day)s?\)$/.exec(expression);
  if (!match) throw new Error(`not a rate expression: ${expression}`);
  return Number(match[1]) * { minute: 1, hour: 60, day: 1440 }[match[2] as 'minute' | 'hour' | 'day'];
}

/** Every number the stacks take from the module, held against it for the app `t` was synthesized with. */
function expectTemplatesFollowTheModule(t: Templates): void {
  const s = t.statelessTemplate;
  const f = t.statefulTemplate;
  const { config } = t;

  // Functions: memory, time-out, contract environment.
  const functions = deployment.functionDeployments(config, resourceNames(t));
  expectFunction(s, 'TokenRefresherFunction', functions.refresher);
  expectFunction(s, 'ItemSyncFunction', functions.sync);
  expectFunction(s, 'ChangeEventsFunction', functions.changeEvents);
  expectFunction(s, 'ChangesWriterFunction', functions.changesWriter);
  expectFunction(s, 'ClientApiFunction', functions.api);
  expectFunction(s, 'ConnectionEraserFunction', functions.eraser);
  if (functions.reconciler) expectFunction(s, 'ReconcilerFunction', functions.reconciler);
  else expect(Object.keys(s.findResources('AWS::Lambda::Function')).filter((id) => id.startsWith('Reconciler'))).toEqual([]);
  // No other function: nothing runs at deploy time.
  expect(Object.keys(s.findResources('AWS::Lambda::Function'))).toHaveLength(functions.reconciler ? 7 : 6);
  const refresherId = logicalId(s, 'AWS::Lambda::Function', 'TokenRefresherFunction');

  // Work queues (and the erase queue): visibility, retention, redrive; their dead-letter queues' retention.
  for (const [queuePrefix, deadLetterPrefix, queues] of [
    ['SyncQueue', 'DeadLetterQueue', deployment.workQueueDeployment(config)],
    ['ReconcileQueue', 'ReconcileDeadLetterQueue', deployment.workQueueDeployment(config)],
    ['EraseQueue', 'EraseDeadLetterQueue', deployment.eraseQueueDeployment()],
  ] as const) {
    const queue = resource(f, 'AWS::SQS::Queue', queuePrefix);
    const deadLetter = resource(f, 'AWS::SQS::Queue', deadLetterPrefix);
    expect(queue.Properties['VisibilityTimeout'], queuePrefix).toBe(queues.visibilityTimeoutSeconds);
    expect(queue.Properties['MessageRetentionPeriod'], queuePrefix).toBe(queues.retentionDays * 86_400);
    expect(queue.Properties['RedrivePolicy'], queuePrefix).toEqual({ deadLetterTargetArn: fnArn(deadLetter.id), maxReceiveCount: queues.maxReceiveCount });
    expect(deadLetter.Properties['MessageRetentionPeriod'], deadLetterPrefix).toBe(queues.deadLetterRetentionDays * 86_400);
  }

  // The item sync's event sources on both work queues.
  const sqsSource = deployment.syncEventSourceDeployment(config);
  const syncId = logicalId(s, 'AWS::Lambda::Function', 'ItemSyncFunction');
  for (const queuePrefix of ['SyncQueue', 'ReconcileQueue']) {
    const mapping = resource(s, 'AWS::Lambda::EventSourceMapping', `ItemSyncFunctionSqsEventSourceContentSyncStateful${queuePrefix}`);
    expect(mapping.Properties, queuePrefix).toEqual({
      EventSourceArn: importOf(f, fnArn(logicalId(f, 'AWS::SQS::Queue', queuePrefix))),
      FunctionName: { Ref: syncId },
      BatchSize: sqsSource.batchSize,
      ...(sqsSource.maxBatchingWindowSeconds === undefined ? {} : { MaximumBatchingWindowInSeconds: sqsSource.maxBatchingWindowSeconds }),
      FunctionResponseTypes: sqsSource.reportBatchItemFailures ? ['ReportBatchItemFailures'] : undefined,
      ScalingConfig: { MaximumConcurrency: sqsSource.maxConcurrency },
    });
  }

  // The eraser's event source on the erase queue.
  const eraseSource = deployment.eraseEventSourceDeployment();
  const erase = resource(s, 'AWS::Lambda::EventSourceMapping', 'ConnectionEraserFunctionSqsEventSourceContentSyncStatefulEraseQueue');
  expect(erase.Properties).toEqual({
    EventSourceArn: importOf(f, fnArn(logicalId(f, 'AWS::SQS::Queue', 'EraseQueue'))),
    FunctionName: { Ref: logicalId(s, 'AWS::Lambda::Function', 'ConnectionEraserFunction') },
    BatchSize: eraseSource.batchSize,
    ...(eraseSource.maxBatchingWindowSeconds === undefined ? {} : { MaximumBatchingWindowInSeconds: eraseSource.maxBatchingWindowSeconds }),
    FunctionResponseTypes: eraseSource.reportBatchItemFailures ? ['ReportBatchItemFailures'] : undefined,
    ScalingConfig: { MaximumConcurrency: eraseSource.maxConcurrency },
  });

  // The change-events function's event sources on the items table's stream and the connections table's.
  const streamSource = deployment.changeEventSourceDeployment();
  for (const prefix of ['ChangeEventsFunctionDynamoDBEventSourceContentSyncStatefulItemsTable', 'ChangeEventsFunctionDynamoDBEventSourceContentSyncStatelessConnectionsTableStream']) {
    const stream = resource(s, 'AWS::Lambda::EventSourceMapping', prefix);
    expect(stream.Properties, prefix).toMatchObject({
      StartingPosition: streamSource.startingPosition,
      BatchSize: streamSource.batchSize,
      ParallelizationFactor: streamSource.parallelizationFactor,
      BisectBatchOnFunctionError: streamSource.bisectBatchOnError,
      MaximumRetryAttempts: streamSource.retryAttempts,
      FunctionResponseTypes: streamSource.reportBatchItemFailures ? ['ReportBatchItemFailures'] : undefined,
    });
  }

  // The changes writer's event source on the items table's stream. No MaximumRetryAttempts when the
  // module gives none (retried until the records leave the stream): CloudFormation's default, -1.
  const writerSource = deployment.changesWriterEventSourceDeployment();
  const writer = resource(s, 'AWS::Lambda::EventSourceMapping', 'ChangesWriterFunctionDynamoDBEventSourceContentSyncStatefulItemsTable');
  expect(writer.Properties).toMatchObject({
    StartingPosition: writerSource.startingPosition,
    BatchSize: writerSource.batchSize,
    ParallelizationFactor: writerSource.parallelizationFactor,
    BisectBatchOnFunctionError: writerSource.bisectBatchOnError,
    FunctionResponseTypes: writerSource.reportBatchItemFailures ? ['ReportBatchItemFailures'] : undefined,
  });
  if (writerSource.retryAttempts === undefined) expect(writer.Properties).not.toHaveProperty('MaximumRetryAttempts');
  else expect(writer.Properties['MaximumRetryAttempts']).toBe(writerSource.retryAttempts);

  // The client API's stage: its throttling, the steady rate and the burst.
  const stage = deployment.apiStageDeployment();
  expect(resource(s, 'AWS::ApiGatewayV2::Stage', 'ApiStage').Properties['DefaultRouteSettings']).toEqual({
    ThrottlingRateLimit: stage.rateLimitPerSecond,
    ThrottlingBurstLimit: stage.burstLimit,
  });

  // The schedules: how often, how many, and how each invocation is delivered.
  const schedule = deployment.scheduleDeployment(config);
  const delivery = deployment.scheduleDeliveryDeployment(config);
  const schedules = Object.values(s.findResources('AWS::Scheduler::Schedule')) as Array<{ Properties: Record<string, any> }>;
  const targeting = (functionId: string) => schedules.filter((one) => JSON.stringify(one.Properties['Target'].Arn) === JSON.stringify(fnArn(functionId)));
  const refresherSchedules = targeting(refresherId);
  expect(refresherSchedules).toHaveLength(1);
  expect(rateMinutes(refresherSchedules[0]!.Properties['ScheduleExpression'])).toBe(schedule.refresherEveryMinutes);
  expect(refresherSchedules[0]!.Properties['Target'].RetryPolicy).toEqual({
    MaximumRetryAttempts: delivery.refresher.retryAttempts,
    MaximumEventAgeInSeconds: delivery.refresher.maxEventAgeMinutes * 60,
  });
  if (schedule.reconciler === undefined) {
    expect(schedules).toHaveLength(1);
    return;
  }
  const { everyMinutes, workers } = schedule.reconciler;
  const reconcilerSchedules = targeting(logicalId(s, 'AWS::Lambda::Function', 'ReconcilerFunction'));
  expect(reconcilerSchedules).toHaveLength(workers);
  expect(schedules).toHaveLength(1 + workers);
  expect(reconcilerSchedules.map((one) => JSON.parse(one.Properties['Target'].Input))).toEqual(
    Array.from({ length: workers }, (_, worker) => ({ trigger: 'schedule', worker, workers })),
  );
  for (const one of reconcilerSchedules) {
    expect(rateMinutes(one.Properties['ScheduleExpression'])).toBe(everyMinutes);
    expect(one.Properties['Target'].RetryPolicy).toEqual({
      MaximumRetryAttempts: delivery.reconciler.retryAttempts,
      MaximumEventAgeInSeconds: delivery.reconciler.maxEventAgeMinutes * 60,
    });
  }
}

/** The defaults; every number moved; reconciliation off with a batch large enough for a batching window. */
const CONTEXTS: Array<[string, Record<string, unknown>]> = [
  ['the default context', {}],
  [
    'every number moved',
    {
      tokenRefreshMinutes: 45,
      syncBatchSize: 100,
      syncMaxConcurrency: 7,
      providerRequestsPerSecond: 40,
      usersReservedPercent: 30,
      paceScope: 'connection',
      freshnessHours: 12,
      revisionField: 'meta.rev',
    },
  ],
  ['reconciliation off', { freshnessHours: 0, syncBatchSize: 25, tokenRefreshMinutes: '1440' }],
];

describe('the templates hold the deployment module', () => {
  it.each(CONTEXTS)('%s', (_, context) => {
    expectTemplatesFollowTheModule(synthTemplates(context));
  });
});

describe('the stacks read the module, never a number of their own', () => {
  let real: Templates;
  let moved: Templates;
  beforeAll(() => {
    real = synthTemplates();
    shifted.on = true;
    try {
      moved = synthTemplates({}, { fresh: true });
    } finally {
      shifted.on = false;
    }
  });

  it("the token refresher's time-out (300 s) holds its margin at the longest provider time-out, with room for many refreshes", () => {
    expect(resource(real.statelessTemplate, 'AWS::Lambda::Function', 'TokenRefresherFunction').Properties['Timeout']).toBe(300);
    const longestMarginMs = MAX_PROVIDER_TIMEOUT_MS + MARGIN_BEYOND_TIMEOUT_MS;
    expect(longestMarginMs).toBe(130_000);
    // More than half the run is left for refreshes even then.
    expect(deployment.REFRESHER_TIMEOUT_SECONDS * 1000 - longestMarginMs).toBeGreaterThan(deployment.REFRESHER_TIMEOUT_SECONDS * 500);
  });

  it('with every number of the module shifted, the templates show the shifted numbers', () => {
    shifted.on = true;
    try {
      expectTemplatesFollowTheModule(moved);
    } finally {
      shifted.on = false;
    }
  });

  it('the shift moves every number (it would hide nothing)', () => {
    const numbers = (t: Templates) => {
      const s = t.statelessTemplate;
      const f = t.statefulTemplate;
      const fn = (prefix: string) => resource(s, 'AWS::Lambda::Function', prefix).Properties;
      const queue = (prefix: string) => resource(f, 'AWS::SQS::Queue', prefix).Properties;
      const schedules = Object.values(s.findResources('AWS::Scheduler::Schedule')) as Array<{ Properties: Record<string, any> }>;
      return {
        functions: ['TokenRefresherFunction', 'ItemSyncFunction', 'ReconcilerFunction', 'ChangeEventsFunction', 'ChangesWriterFunction', 'ClientApiFunction', 'ConnectionEraserFunction'].map((prefix) => [
          fn(prefix)['MemorySize'],
          fn(prefix)['Timeout'],
          fn(prefix)['Environment'].Variables['DEPLOYMENT_PROBE'],
        ]),
        queues: ['SyncQueue', 'ReconcileQueue', 'EraseQueue', 'DeadLetterQueue', 'ReconcileDeadLetterQueue', 'EraseDeadLetterQueue'].map((prefix) => [
          queue(prefix)['VisibilityTimeout'],
          queue(prefix)['MessageRetentionPeriod'],
          queue(prefix)['RedrivePolicy']?.maxReceiveCount,
        ]),
        sources: Object.values(s.findResources('AWS::Lambda::EventSourceMapping')).map((mapping) => [
          mapping.Properties.BatchSize,
          mapping.Properties.ScalingConfig?.MaximumConcurrency,
          mapping.Properties.ParallelizationFactor,
          mapping.Properties.MaximumRetryAttempts,
        ]),
        schedules: schedules.map((one) => [one.Properties['ScheduleExpression'], one.Properties['Target'].RetryPolicy]),
        stage: Object.values(resource(s, 'AWS::ApiGatewayV2::Stage', 'ApiStage').Properties['DefaultRouteSettings'] as Record<string, number>),
      };
    };
    const before = numbers(real);
    const after = numbers(moved);
    for (const [i, [memory, timeout, probe]] of after.functions.entries()) {
      expect(memory).not.toBe(before.functions[i]![0]);
      expect(timeout).not.toBe(before.functions[i]![1]);
      expect([before.functions[i]![2], probe]).toEqual([undefined, 'shifted']);
    }
    for (const [i, numbersOfQueue] of after.queues.entries()) {
      expect(numbersOfQueue[1]).not.toBe(before.queues[i]![1]);
      // The three queues with a dead-letter queue: visibility and redrive moved too.
      if (i < 3) {
        expect(numbersOfQueue[0]).not.toBe(before.queues[i]![0]);
        expect(numbersOfQueue[2]).not.toBe(before.queues[i]![2]);
      }
    }
    expect(after.stage).toHaveLength(2);
    for (const [i, value] of after.stage.entries()) expect(value).not.toBe(before.stage[i]);
    // The item sync's two, the eraser's, the change-events function's two and the changes writer's.
    expect(after.sources).toHaveLength(6);
    for (const [i, source] of after.sources.entries()) {
      expect(source[0]).not.toBe(before.sources[i]![0]);
      const other = source[1] === undefined ? [source[2], source[3]] : [source[1]];
      const was = source[1] === undefined ? [before.sources[i]![2], before.sources[i]![3]] : [before.sources[i]![1]];
      for (const [j, value] of other.entries()) expect(value).not.toBe(was[j]);
    }
    // One more schedule (a second reconciler worker); every schedule's rate and delivery moved.
    expect(after.schedules).toHaveLength(before.schedules.length + 1);
    for (const [i, was] of before.schedules.entries()) {
      expect(after.schedules[i]![0]).not.toBe(was[0]);
      expect(after.schedules[i]![1]).not.toEqual(was[1]);
    }
  });
});
