/**
 * Discovery in the stacks (docs/discovery.md): the four context keys validated at synth (dot
 * paths, each error naming its key; the keys beside childrenPath refused without it), the item
 * sync's environment with discovery on (the paths and RECONCILE_QUEUE_URL) and off (none of them),
 * its grants (SendMessage on the reconcile queue; GetObject on the items bucket's objects only
 * with discovery on), cdk-nag clean with discovery on, and infra/deployment.ts's environment as
 * the stacks use it.
 */
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import { ENV } from '../../functions/shared/config.js';
import { CONTEXT_KEYS } from '../../infra/context.js';
import { syncDeployment, type ResourceNames } from '../../infra/deployment.js';
import { buildApp, importOf, logicalId, resource, roleStatements, synthTemplates, type Templates, contextErrorFor as errorFor, readContext as read } from './helpers.js';

const base = { baseUrl: 'https://example.com/api' };


const BOX = {
  childrenPath: 'item_collection.entries',
  childIdPath: 'id',
  childRevisionPath: 'etag',
  childrenTotalPath: 'item_collection.total_count',
};

describe('the discovery context keys', () => {
  it('are the contract names', () => {
    expect([CONTEXT_KEYS.childrenPath, CONTEXT_KEYS.childIdPath, CONTEXT_KEYS.childRevisionPath, CONTEXT_KEYS.childrenTotalPath]).toEqual([
      'childrenPath',
      'childIdPath',
      'childRevisionPath',
      'childrenTotalPath',
    ]);
  });

  it('absent childrenPath: discovery off', () => {
    expect(read(base).discovery).toBeUndefined();
    expect(read({ ...base, childrenPath: '  ' }).discovery).toBeUndefined();
  });

  it('childrenPath alone: childIdPath defaults to id, no revision, no total', () => {
    expect(read({ ...base, childrenPath: 'children' }).discovery).toEqual({
      childrenPath: 'children',
      childIdPath: 'id',
      childRevisionPath: undefined,
      childrenTotalPath: undefined,
    });
  });

  it('all four keys, trimmed', () => {
    expect(read({ ...base, ...BOX, childIdPath: ' meta.id ' }).discovery).toEqual({ ...BOX, childIdPath: 'meta.id' });
  });

  it.each([
    ['childrenPath', 'item_collection..entries'],
    ['childrenPath', '.entries'],
    ['childIdPath', 'id.'],
    ['childRevisionPath', 'has space'],
    ['childrenTotalPath', 'a..b'],
  ])('%s %j is not a dot path: the error names the key', (key, value) => {
    expect(errorFor({ ...base, childrenPath: 'children', [key]: value }, key)).toBe(
      `${key}: must be a dot path such as "revision" or "meta.rev", got "${value}"`,
    );
  });

  it.each([['childIdPath'], ['childRevisionPath'], ['childrenTotalPath']])('%s without childrenPath would do nothing: an error naming it', (key) => {
    expect(errorFor({ ...base, [key]: 'x' }, key)).toBe(`${key}: is given without childrenPath: without it discovery is off and this key does nothing`);
  });

  it('a non-scalar value is refused naming the key', () => {
    expect(errorFor({ ...base, childrenPath: ['a'] }, 'childrenPath')).toMatch(/must be a single value/);
  });

  it('the app fails the build naming the key', () => {
    expect(() => buildApp({ childRevisionPath: 'etag' })).toThrow(/^childRevisionPath: /);
    expect(() => buildApp({ childrenPath: 'a b' })).toThrow(/^childrenPath: must be a dot path/);
  });
});

describe('the item sync environment (infra/deployment.ts)', () => {
  const names: ResourceNames = {
    itemsTableName: 'items',
    itemsBucketName: 'bucket',
    controlTableName: 'control',
    changesTableName: 'changes',
    deadLetterQueueUrl: 'https://sqs.example/dlq',
    reconcileQueueUrl: 'https://sqs.example/reconcile',
    connectionsTableName: 'connections',
    eventBusName: 'bus',
    connectionsKeyArn: 'arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab',
    syncQueueUrl: 'https://sqs.example/sync',
    eraseQueueUrl: 'https://sqs.example/erase',
  };

  it('discovery off: none of its variables; RECONCILE_QUEUE_URL all the same (the background lane of a backlog)', () => {
    const environment = syncDeployment(read(base), names).environment;
    for (const name of [ENV.childrenPath, ENV.childIdPath, ENV.childRevisionPath, ENV.childrenTotalPath]) {
      expect(environment).not.toHaveProperty(name);
    }
    expect(environment).toMatchObject({ RECONCILE_QUEUE_URL: 'https://sqs.example/reconcile' });
    // The local system without a reconcile queue passes no URL: the variable is left unset.
    expect(syncDeployment(read(base), { ...names, reconcileQueueUrl: '' }).environment).not.toHaveProperty(ENV.reconcileQueueUrl);
  });

  it('discovery on: the paths given (CHILD_ID_PATH always) and the reconcile queue', () => {
    expect(syncDeployment(read({ ...base, childrenPath: 'children' }), names).environment).toMatchObject({
      CHILDREN_PATH: 'children',
      CHILD_ID_PATH: 'id',
      RECONCILE_QUEUE_URL: 'https://sqs.example/reconcile',
    });
    const only = syncDeployment(read({ ...base, childrenPath: 'children' }), names).environment;
    expect(only).not.toHaveProperty('CHILD_REVISION_PATH');
    expect(only).not.toHaveProperty('CHILDREN_TOTAL_PATH');
    expect(syncDeployment(read({ ...base, ...BOX }), names).environment).toMatchObject({
      CHILDREN_PATH: 'item_collection.entries',
      CHILD_ID_PATH: 'id',
      CHILD_REVISION_PATH: 'etag',
      CHILDREN_TOTAL_PATH: 'item_collection.total_count',
      RECONCILE_QUEUE_URL: 'https://sqs.example/reconcile',
    });
  });
});

describe('the stacks with discovery on', () => {
  let on: Templates;
  const imports: Record<string, { 'Fn::ImportValue': string }> = {};
  beforeAll(() => {
    // freshnessHours 0: the reconcile queue, where the children go, exists in every deployment.
    on = synthTemplates({ ...BOX, freshnessHours: '0' });
    const f = on.statefulTemplate;
    const queue = logicalId(f, 'AWS::SQS::Queue', 'ReconcileQueue');
    imports.queueArn = importOf(f, { 'Fn::GetAtt': [queue, 'Arn'] });
    imports.queueUrl = importOf(f, { Ref: queue });
  });

  const syncVariables = (t: Templates) => resource(t.statelessTemplate, 'AWS::Lambda::Function', 'ItemSyncFunction').Properties['Environment'].Variables as Record<string, unknown>;
  const syncStatements = (t: Templates) =>
    roleStatements(t.statelessTemplate, logicalId(t.statelessTemplate, 'AWS::IAM::Role', 'ItemSyncRole')) as Array<{ Sid?: string; Action: unknown; Resource: unknown }>;

  it('the item sync (the consumer of both the sync queue and the reconcile queue) gets the paths and the reconcile queue URL', () => {
    expect(syncVariables(on)).toMatchObject({
      [ENV.childrenPath]: 'item_collection.entries',
      [ENV.childIdPath]: 'id',
      [ENV.childRevisionPath]: 'etag',
      [ENV.childrenTotalPath]: 'item_collection.total_count',
      [ENV.reconcileQueueUrl]: imports.queueUrl,
    });
    // No reconciler (freshnessHours 0), and no other function (the refresher, the change events, the
    // changes writer, the client API, the eraser) is given the variables.
    on.statelessTemplate.resourceCountIs('AWS::Lambda::Function', 6);
    const others = Object.entries(on.statelessTemplate.findResources('AWS::Lambda::Function')).filter(([id]) => !id.startsWith('ItemSyncFunction'));
    for (const [, fn] of others) expect(JSON.stringify(fn)).not.toContain(ENV.childrenPath);
  });

  it('the item sync may send to the reconcile queue (SendMessage on it only) and read item objects under items/ (GetObject, with discovery on only)', () => {
    const statements = syncStatements(on);
    expect(statements).toContainEqual({ Sid: 'RequeueReconcile', Effect: 'Allow', Action: 'sqs:SendMessage', Resource: imports.queueArn });
    const objects = { 'Fn::Join': ['', [{ 'Fn::ImportValue': 'ContentSyncStateful:ItemsBucketArn' }, '/items/*']] };
    expect(statements.filter((statement) => JSON.stringify(statement.Action).includes('s3:'))).toEqual([
      { Sid: 'ItemObjects', Effect: 'Allow', Action: ['s3:PutObject', 's3:DeleteObject', 's3:GetObject'], Resource: objects },
    ]);
    // Discovery off, the grant is PutObject and DeleteObject only, and the environment holds none of
    // the variables: test/infra/items-bucket.test.ts and test/infra/stateless-stack.test.ts.
  });

  it('cdk-nag AwsSolutions: no unacknowledged finding (the grant\'s items/* resource is the one already acknowledged)', () => {
    const findings = [on.stateful, on.stateless].flatMap((stack) =>
      new AwsSolutionsChecks(on.app).validateScope(stack).violations.flatMap((v) => v.violatingResources.map((r) => `${v.ruleName} ${r.constructPath ?? ''}`)),
    );
    expect(findings).toEqual([]);
  });
});
