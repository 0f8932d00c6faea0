/**
 * Two deployments in one account and region (the context key `stage`): the default app and the app
 * with stage=staging have different stack names, the staging stateless stack imports from the
 * staging stateful stack only, and no physical name is the same in both: every property whose name
 * ends in `Name` that CloudFormation would take as it is written (resolved as it would be in one
 * account and region, `AWS::StackName` to each stack's name), and every export name. Nor do they
 * share the functions' metrics: a stage's functions publish them with the dimension `stage` too, and its
 * alarms and dashboard select it; without a stage, `service` alone, as before stages existed.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { STACK_NAMES } from '../../infra/content-sync-app.js';
import { stackNames } from '../../functions/shared/stage.js';
import { synthTemplates, type Templates } from './helpers.js';

/**
 * Properties ending in `Name` that name no resource of the account: a table's key attributes, an
 * inline policy's name (unique within its role only, and the roles' names are generated), a
 * topic's display name, an alarm's metric and its dimensions' names, an API stage's name (unique
 * within its API only: `$default`, the stage at the root of each client API's own URL).
 */
const NOT_RESOURCE_NAMES = new Set(['AttributeName', 'PolicyName', 'DisplayName', 'MetricName', 'StageName']);

/** The same in both apps: one account and region. */
const PSEUDO = { 'AWS::AccountId': '123456789012', 'AWS::Region': 'eu-west-1', 'AWS::Partition': 'aws', 'AWS::URLSuffix': 'amazonaws.com' } as Record<string, string>;

/**
 * `value` as CloudFormation would resolve it in `stackName`, when it is fixed by the template (text,
 * pseudo parameters, joins of those); undefined when it refers to something CloudFormation names
 * (Ref or GetAtt of a resource, an import).
 */
function fixedValue(value: unknown, stackName: string): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value !== 'object' || value === null) return undefined;
  const ref = (value as { Ref?: unknown }).Ref;
  if (ref === 'AWS::StackName') return stackName;
  if (typeof ref === 'string') return PSEUDO[ref];
  const join = (value as { 'Fn::Join'?: [string, unknown[]] })['Fn::Join'];
  if (join) {
    const parts = join[1].map((part) => fixedValue(part, stackName));
    return parts.every((part) => part !== undefined) ? parts.join(join[0]) : undefined;
  }
  return undefined;
}

/** Every physical name the template fixes: `<where>` → the name. */
function physicalNames(template: Record<string, any>, stackName: string): Map<string, string> {
  const names = new Map<string, string>();
  const walk = (value: unknown, path: string, parentKey: string): void => {
    if (Array.isArray(value)) {
      value.forEach((item, index) => walk(item, `${path}[${index}]`, parentKey));
      return;
    }
    if (typeof value !== 'object' || value === null) return;
    for (const [key, inner] of Object.entries(value)) {
      const named = key.endsWith('Name') && !NOT_RESOURCE_NAMES.has(key) && !(key === 'Name' && parentKey === 'Dimensions');
      const fixed = named ? fixedValue(inner, stackName) : undefined;
      if (fixed !== undefined) names.set(`${path}.${key}`, fixed);
      walk(inner, `${path}.${key}`, key);
    }
  };
  for (const [id, resource] of Object.entries(template['Resources'] as Record<string, { Properties?: unknown }>)) {
    walk(resource.Properties, `${stackName}/${id}`, '');
  }
  for (const [id, output] of Object.entries((template['Outputs'] ?? {}) as Record<string, { Export?: { Name: unknown } }>)) {
    const exported = output.Export === undefined ? undefined : fixedValue(output.Export.Name, stackName);
    if (exported !== undefined) names.set(`${stackName}/Outputs/${id}.Export.Name`, exported);
  }
  return names;
}

/** Every name the template imports (Fn::ImportValue). */
function importedNames(template: Record<string, any>): string[] {
  const found = new Set<string>();
  const walk = (value: unknown): void => {
    if (Array.isArray(value)) value.forEach(walk);
    else if (typeof value === 'object' && value !== null) {
      for (const [key, inner] of Object.entries(value)) {
        if (key === 'Fn::ImportValue' && typeof inner === 'string') found.add(inner);
        walk(inner);
      }
    }
  };
  walk(template);
  return [...found];
}

interface Deployment {
  t: Templates;
  names: Map<string, string>;
}

function deployment(context: Record<string, unknown>): Deployment {
  const t = synthTemplates(context);
  return {
    t,
    names: new Map([
      ...physicalNames(t.statefulTemplate.toJSON(), t.stateful.stackName),
      ...physicalNames(t.statelessTemplate.toJSON(), t.stateless.stackName),
    ]),
  };
}

describe('stack names from the stage', () => {
  it('without a stage, ContentSyncStateful and ContentSyncStateless; with one, each ends in -<stage>', () => {
    expect(stackNames(undefined)).toEqual({ stateful: 'ContentSyncStateful', stateless: 'ContentSyncStateless' });
    expect(STACK_NAMES).toEqual(stackNames(undefined));
    expect(stackNames('staging')).toEqual({ stateful: 'ContentSyncStateful-staging', stateless: 'ContentSyncStateless-staging' });
  });
});

describe('the default deployment and the stage staging, side by side in one account and region', () => {
  let main: Deployment;
  let staging: Deployment;
  beforeAll(() => {
    // Every optional part on in both, so that every resource is compared.
    const options = { alarmEmail: 'ops@example.com', childrenPath: 'children', tracing: true };
    main = deployment(options);
    staging = deployment({ ...options, stage: 'staging' });
  });

  it('have different stack names, and each stateless stack imports from its own stateful stack only', () => {
    expect([main.t.stateful.stackName, main.t.stateless.stackName]).toEqual(['ContentSyncStateful', 'ContentSyncStateless']);
    expect([staging.t.stateful.stackName, staging.t.stateless.stackName]).toEqual(['ContentSyncStateful-staging', 'ContentSyncStateless-staging']);
    for (const [one, prefix] of [
      [main, 'ContentSyncStateful:'],
      [staging, 'ContentSyncStateful-staging:'],
    ] as const) {
      const imported = importedNames(one.t.statelessTemplate.toJSON());
      expect(imported.length).toBeGreaterThan(0);
      expect(imported.filter((name) => !name.startsWith(prefix))).toEqual([]);
    }
  });

  it('find the names they fix: the change-event bus and the client API (from the stack names) and the exports', () => {
    const busName = (one: Deployment) => [...one.names].filter(([where]) => /\/ChangeEventBus\w+\.Name$/.test(where)).map(([, name]) => name);
    expect(busName(main)).toEqual(['ContentSyncStateful-change-events']);
    expect(busName(staging)).toEqual(['ContentSyncStateful-staging-change-events']);
    const apiName = (one: Deployment) => [...one.names].filter(([where]) => /\/Api[0-9A-F]{8}\.Name$/.test(where)).map(([, name]) => name);
    expect(apiName(main)).toEqual(['ContentSyncStateless-client-api']);
    expect(apiName(staging)).toEqual(['ContentSyncStateless-staging-client-api']);
    expect([...main.names.values()]).toContain('ContentSyncStateful:ItemsBucketArn');
    expect([...staging.names.values()]).toContain('ContentSyncStateful-staging:ItemsBucketArn');
    expect([...staging.names.values()].filter((name) => name.startsWith('ContentSyncStateful-staging:ExportsOutput')).length).toBeGreaterThan(5);
  });

  it('share no physical name', () => {
    const mainNames = new Set(main.names.values());
    const shared = [...staging.names].filter(([, name]) => mainNames.has(name));
    expect(shared).toEqual([]);
  });

  it('give the stage to every function of the stage as CONTENT_SYNC_STAGE, and none without one', () => {
    const stages = (one: Deployment) =>
      Object.values(one.t.statelessTemplate.findResources('AWS::Lambda::Function')).map((fn) => fn.Properties.Environment.Variables['CONTENT_SYNC_STAGE']);
    // Seven functions: the refresher, the item sync, the reconciler, the change events, the changes writer, the client API, the eraser.
    expect(stages(main)).toEqual(Array.from({ length: 7 }, () => undefined));
    expect(stages(staging)).toEqual(Array.from({ length: 7 }, () => 'staging'));
  });

  it('select the functions’ metrics by service alone without a stage, by service and stage with one: every alarm', () => {
    const metricAlarms = (one: Deployment) =>
      Object.fromEntries(
        Object.entries(one.t.statelessTemplate.findResources('AWS::CloudWatch::Alarm'))
          .filter(([, alarm]) => alarm.Properties.Namespace === 'ContentSync')
          .map(([id, alarm]) => [id.replace(/[0-9A-F]{8}$/, ''), alarm.Properties.Dimensions]),
      );
    const service = (value: string) => ({ Name: 'service', Value: value });
    const stage = { Name: 'stage', Value: 'staging' };
    expect(metricAlarms(main)).toEqual({
      ConnectionsFailingAlarm: [service('token-refresher')],
      ConnectionsKeyUnavailableAlarm: [service('token-refresher')],
      ProviderBreakerOpenAlarm: [service('item-sync')],
      ReconcileProjectedPassAlarm: [service('reconciler')],
      ChangeEventsPublishFailedAlarm: [service('change-events')],
      ChangesUnreadableAlarm: [service('changes-writer')],
    });
    expect(metricAlarms(staging)).toEqual({
      ConnectionsFailingAlarm: [service('token-refresher'), stage],
      ConnectionsKeyUnavailableAlarm: [service('token-refresher'), stage],
      ProviderBreakerOpenAlarm: [service('item-sync'), stage],
      ReconcileProjectedPassAlarm: [service('reconciler'), stage],
      ChangeEventsPublishFailedAlarm: [service('change-events'), stage],
      ChangesUnreadableAlarm: [service('changes-writer'), stage],
    });
  });

  it('… and every dashboard graph', () => {
    /** The dimensions of every ContentSync metric of the dashboard, as `name=value ...`, and how many such metrics. */
    const graphs = (one: Deployment) => {
      const dashboard = Object.values(one.t.statelessTemplate.findResources('AWS::CloudWatch::Dashboard'))[0]!;
      const body = (dashboard.Properties.DashboardBody['Fn::Join'][1] as unknown[]).map((part) => (typeof part === 'string' ? part : 'TOKEN')).join('');
      const metrics = (JSON.parse(body).widgets as Array<{ properties: { metrics?: unknown[][] } }>)
        .flatMap((widget) => widget.properties.metrics ?? [])
        .filter((metric) => metric[0] === 'ContentSync');
      // [namespace, metric name, dimension name, value, name, value..., options]
      const dimensions = metrics.map((metric) => {
        const parts = metric.slice(2).filter((part): part is string => typeof part === 'string');
        const pairs: string[] = [];
        for (let i = 0; i < parts.length; i += 2) pairs.push(`${parts[i]}=${parts[i + 1]}`);
        return pairs.join(' ');
      });
      return { count: metrics.length, dimensions: [...new Set(dimensions)] };
    };
    const services = ['item-sync', 'token-refresher', 'reconciler', 'change-events', 'changes-writer'];
    const unstaged = graphs(main);
    const staged = graphs(staging);
    expect(unstaged.dimensions).toEqual(services.map((service) => `service=${service}`));
    expect(staged.dimensions).toEqual(services.map((service) => `service=${service} stage=staging`));
    expect(staged.count).toBe(unstaged.count);
    expect(unstaged.count).toBeGreaterThan(20);
  });
});
