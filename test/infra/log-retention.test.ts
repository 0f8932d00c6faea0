/**
 * The context key `logRetentionDays` in the templates: every log group the stacks create keeps its
 * logs that many days (30 unless given), the client API's access logs among them, and every
 * function writes to a log group of the stacks (none to one Lambda would create itself, which would
 * keep its logs forever). The values the key
 * accepts are the ones aws-cdk-lib (and CloudWatch Logs) know.
 */
import type { Template } from 'aws-cdk-lib/assertions';
import * as logs from 'aws-cdk-lib/aws-logs';
import { beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LOG_RETENTION_DAYS, LOG_RETENTION_DAYS } from '../../infra/context.js';
import { CDK_JSON_CONTEXT, synthTemplates } from './helpers.js';

type Resources = Record<string, { Type: string; Properties?: Record<string, any> }>;

describe('the retentions logRetentionDays accepts', () => {
  it('are RetentionDays of aws-cdk-lib but INFINITE (no retention); 30 unless given, in cdk.json too', () => {
    const cdk = Object.values(logs.RetentionDays).filter((days): days is number => typeof days === 'number' && days !== logs.RetentionDays.INFINITE);
    expect([...LOG_RETENTION_DAYS].sort((a, b) => a - b)).toEqual(cdk.sort((a, b) => a - b));
    expect(DEFAULT_LOG_RETENTION_DAYS).toBe(30);
    expect(CDK_JSON_CONTEXT['logRetentionDays']).toBe(DEFAULT_LOG_RETENTION_DAYS);
  });
});

describe.each([
  ['by default', {}, 30],
  ['logRetentionDays 365, every optional part on', { logRetentionDays: '365', alarmEmail: 'ops@example.com', childrenPath: 'children', tracing: true }, 365],
  ['logRetentionDays 1 (a number, as in cdk.json), no reconciler', { logRetentionDays: 1, freshnessHours: 0 }, 1],
])('log groups %s', (_name, context, days) => {
  let templates: Template[];
  beforeAll(() => {
    const t = synthTemplates(context);
    templates = [t.statefulTemplate, t.statelessTemplate];
  });
  const all = (type: string): Resources => Object.assign({}, ...templates.map((template) => template.findResources(type)));

  it(`every log group keeps its logs ${days} days`, () => {
    const groups = Object.values(all('AWS::Logs::LogGroup'));
    expect(groups.length).toBeGreaterThan(0);
    expect(groups.map((group) => group.Properties)).toEqual(groups.map(() => ({ RetentionInDays: days })));
    // No log group is made any other way (a custom resource setting a retention, a log group of a log group).
    for (const template of templates) {
      const types = new Set(Object.values(template.toJSON().Resources as Resources).map((resource) => resource.Type));
      expect([...types].filter((type) => /Log/.test(type) && type !== 'AWS::Logs::LogGroup')).toEqual([]);
    }
  });

  it('every function writes to a log group of its own among them', () => {
    const groups = Object.keys(all('AWS::Logs::LogGroup'));
    const functions = Object.values(all('AWS::Lambda::Function'));
    // The token refresher, the item sync, the change-events function, the changes writer, the client
    // API, the eraser and, unless freshnessHours is 0, the reconciler.
    expect(functions.length).toBe('freshnessHours' in context ? 6 : 7);
    const used = functions.map((fn) => (fn.Properties?.['LoggingConfig'] as { LogGroup?: { Ref?: string } } | undefined)?.LogGroup?.Ref);
    expect(new Set(used).size).toBe(functions.length);
    expect(used.every((ref) => ref !== undefined && groups.includes(ref))).toBe(true);
    // One more: the client API's access logs (its stage's destination).
    const accessLogs = groups.filter((id) => !used.includes(id));
    expect(accessLogs.map((id) => id.replace(/[0-9A-F]{8}$/, ''))).toEqual(['ApiAccessLogs']);
    expect(groups).toHaveLength(functions.length + 1);
  });
});
