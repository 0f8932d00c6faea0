/**
 * The stateless stack's operations: the alarm topic (TLS only, the e-mail subscription), every
 * alarm on it (the dead-letter queue, the sync queue's age, the item sync's and the refresher's
 * errors, a connection failing, the provider breaker), and the dashboard (every sync, pace,
 * refresher and connection metric; the provider pace's row; the refresher's row beside the alarm
 * status). The change events', the changes writer's and reconciliation's own:
 * test/infra/change-events.test.ts, test/infra/changes-writer.test.ts and test/infra/reconciler.test.ts.
 */
import { Match } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { dashboardBody, importOf, logicalId, resource, synthTemplates, type Templates } from './helpers.js';

/** The published metric names (docs/operations.md, "Logs and metrics"): written out, so a rename in the code fails here. */
const ITEM_SYNC_METRICS = [
  'ItemsFetched',
  'ItemsCreated',
  'ItemsUpdated',
  'ItemsUnchanged',
  'ItemsDeleted',
  'RecordsRetried',
  'RecordsDeadLettered',
  'RecordsPostponed',
  'ProviderRateLimited',
];
const PACE_METRICS = ['ProviderPace', 'BreakerOpen', 'BreakerOpenSeconds', 'PaceFallback'];
const REFRESHER_METRICS = ['TokenRefreshed', 'RefreshTokenRotated', 'TokenRefreshFailed', 'TokenRefreshRefused'];
const CONNECTION_METRICS = ['ConnectionsActive', 'ConnectionsPaused', 'ConnectionsFailing'];

let t: Templates;
/** Logical ids in the stateless template. */
const ids: Record<string, string> = {};

beforeAll(() => {
  t = synthTemplates();
  const s = t.statelessTemplate;
  ids.refresher = logicalId(s, 'AWS::Lambda::Function', 'TokenRefresherFunction');
  ids.sync = logicalId(s, 'AWS::Lambda::Function', 'ItemSyncFunction');
  ids.topic = logicalId(s, 'AWS::SNS::Topic', 'AlarmTopic');
});

describe('operations', () => {
  it('alarm topic enforces TLS; no subscription without alarmEmail', () => {
    t.statelessTemplate.resourceCountIs('AWS::SNS::Topic', 1);
    t.statelessTemplate.hasResourceProperties('AWS::SNS::TopicPolicy', {
      Topics: [{ Ref: ids.topic }],
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({ Effect: 'Deny', Action: 'sns:Publish', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
        ]),
      },
    });
    t.statelessTemplate.resourceCountIs('AWS::SNS::Subscription', 0);
  });

  it('alarmEmail subscribes that address', () => {
    const other = synthTemplates({ alarmEmail: 'ops@example.com' });
    other.statelessTemplate.resourceCountIs('AWS::SNS::Subscription', 1);
    other.statelessTemplate.hasResourceProperties('AWS::SNS::Subscription', {
      Protocol: 'email',
      Endpoint: 'ops@example.com',
      TopicArn: { Ref: logicalId(other.statelessTemplate, 'AWS::SNS::Topic', 'AlarmTopic') },
    });
  });

  const actions = () => ({ AlarmActions: [{ Ref: ids.topic }], OKActions: [{ Ref: ids.topic }] });
  const queueName = (prefix: string) =>
    importOf(t.statefulTemplate, { 'Fn::GetAtt': [logicalId(t.statefulTemplate, 'AWS::SQS::Queue', prefix), 'QueueName'] });

  it('sixteen alarms (three for the refresher, two for the change events, three for the changes writer, three for reconciliation, one for the eraser), each notifying the topic on alarm and on recovery', () => {
    t.statelessTemplate.resourceCountIs('AWS::CloudWatch::Alarm', 16);
    for (const alarm of Object.values(t.statelessTemplate.findResources('AWS::CloudWatch::Alarm'))) {
      expect(alarm.Properties).toMatchObject(actions());
      expect(alarm.Properties.AlarmName).toBeUndefined();
    }
  });

  it('dead-letter queue depth ≥ 1', () => {
    t.statelessTemplate.hasResourceProperties('AWS::CloudWatch::Alarm', {
      ...actions(),
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Dimensions: [{ Name: 'QueueName', Value: queueName('DeadLetterQueue') }],
      Statistic: 'Maximum',
      Period: 300,
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      EvaluationPeriods: 1,
      TreatMissingData: 'notBreaching',
    });
  });

  it('age of the oldest sync message ≥ 1 h', () => {
    t.statelessTemplate.hasResourceProperties('AWS::CloudWatch::Alarm', {
      ...actions(),
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateAgeOfOldestMessage',
      Dimensions: [{ Name: 'QueueName', Value: queueName('SyncQueue') }],
      Statistic: 'Maximum',
      Threshold: 3600,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      EvaluationPeriods: 1,
    });
  });

  it('item sync Errors ≥ 1 in 5 minutes', () => {
    t.statelessTemplate.hasResourceProperties('AWS::CloudWatch::Alarm', {
      ...actions(),
      Namespace: 'AWS/Lambda',
      MetricName: 'Errors',
      Dimensions: [{ Name: 'FunctionName', Value: { Ref: ids.sync } }],
      Statistic: 'Sum',
      Period: 300,
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      EvaluationPeriods: 1,
    });
  });

  it('token refresher Errors ≥ 1 in two runs in a row (5 minutes apart): a run fails only when it cannot read the connections table', () => {
    const alarm = resource(t.statelessTemplate, 'AWS::CloudWatch::Alarm', 'TokenRefresherErrorsAlarm');
    expect(alarm.Properties).toMatchObject({
      ...actions(),
      Namespace: 'AWS/Lambda',
      MetricName: 'Errors',
      Dimensions: [{ Name: 'FunctionName', Value: { Ref: ids.refresher } }],
      Statistic: 'Sum',
      Period: 300,
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      EvaluationPeriods: 2,
      DatapointsToAlarm: 2,
      TreatMissingData: 'notBreaching',
    });
    const description = alarm.Properties['AlarmDescription'] as string;
    expect(description).toMatch(/two runs in a row/);
    expect(description).toMatch(/fails only when it cannot read the connections table/);
    expect(description).toMatch(/ConnectionsFailingAlarm/);
    expect(description).not.toMatch(/secret|credentials set/i);
    expect(description.length).toBeLessThanOrEqual(1024);
  });

  it('the connections key disabled or pending deletion: ConnectionsKeyUnavailable (service token-refresher) Maximum ≥ 1 over one run interval, one alarm for the key', () => {
    const alarm = resource(t.statelessTemplate, 'AWS::CloudWatch::Alarm', 'ConnectionsKeyUnavailableAlarm');
    expect(alarm.Properties).toEqual({
      ...actions(),
      AlarmDescription: alarm.Properties['AlarmDescription'],
      Namespace: 'ContentSync',
      MetricName: 'ConnectionsKeyUnavailable',
      Dimensions: [{ Name: 'service', Value: 'token-refresher' }],
      Statistic: 'Maximum',
      Period: 300,
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      EvaluationPeriods: 1,
      TreatMissingData: 'notBreaching',
    });
    const description = alarm.Properties['AlarmDescription'] as string;
    expect(description).toMatch(/disabled or pending deletion/);
    expect(description).toMatch(/no connection turns failing/);
    expect(description).toContain('ConnectionsKeyArn');
    expect(description.length).toBeLessThanOrEqual(1024);
  });

  it('a connection failing: ConnectionsFailing (service token-refresher) Maximum ≥ 1 over one run interval', () => {
    const alarm = resource(t.statelessTemplate, 'AWS::CloudWatch::Alarm', 'ConnectionsFailingAlarm');
    expect(alarm.Properties).toEqual({
      ...actions(),
      AlarmDescription: alarm.Properties['AlarmDescription'],
      Namespace: 'ContentSync',
      MetricName: 'ConnectionsFailing',
      Dimensions: [{ Name: 'service', Value: 'token-refresher' }],
      Statistic: 'Maximum',
      Period: 300,
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      EvaluationPeriods: 1,
      TreatMissingData: 'notBreaching',
    });
    // What it means and what to do: the operator CLI's list, add (new credentials) or remove.
    const description = alarm.Properties['AlarmDescription'] as string;
    expect(description).toMatch(/refused its refresh token/);
    expect(description).toContain('npm run connections -- list');
    expect(description).toContain('npm run connections -- add <id> --client-id <client id>');
    expect(description).toContain('npm run connections -- remove <id>');
    expect(description.length).toBeLessThanOrEqual(1024);
  });

  it.each([
    [2, 120],
    [5, 300],
    ['1440', 300],
  ])('tokenRefreshMinutes=%s: the ConnectionsFailing alarm\'s period is one run interval (%i s)', (minutes, seconds) => {
    const other = synthTemplates({ tokenRefreshMinutes: minutes });
    const alarm = resource(other.statelessTemplate, 'AWS::CloudWatch::Alarm', 'ConnectionsFailingAlarm');
    expect(alarm.Properties['Period']).toBe(seconds);
    expect(alarm.Properties['EvaluationPeriods']).toBe(1);
  });

  it('provider breaker open ≥ 30 min (BreakerOpenSeconds Maximum over 5 min, one datapoint)', () => {
    const alarm = resource(t.statelessTemplate, 'AWS::CloudWatch::Alarm', 'ProviderBreakerOpenAlarm');
    expect(alarm.Properties).toEqual({
      ...actions(),
      AlarmDescription: alarm.Properties['AlarmDescription'],
      Namespace: 'ContentSync',
      MetricName: 'BreakerOpenSeconds',
      Dimensions: [{ Name: 'service', Value: 'item-sync' }],
      Statistic: 'Maximum',
      Period: 300,
      Threshold: 1800,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      EvaluationPeriods: 1,
      TreatMissingData: 'notBreaching',
    });
    // What it means and what to do: the provider is down; a refused token stops its connection only.
    const description = alarm.Properties['AlarmDescription'] as string;
    expect(description).toMatch(/breaker has been open for 30 min or more/);
    expect(description).toMatch(/provider is down/);
    expect(description).toMatch(/a refused token never opens the breaker: it stops only its own connection, see ConnectionsFailingAlarm/);
    expect(description.length).toBeLessThanOrEqual(1024);
  });

  it('token refresher alarm at a tokenRefreshMinutes over 12 h: still two runs of 5 minutes', () => {
    const other = synthTemplates({ tokenRefreshMinutes: 1000 });
    const refresherId = logicalId(other.statelessTemplate, 'AWS::Lambda::Function', 'TokenRefresherFunction');
    other.statelessTemplate.hasResourceProperties('AWS::CloudWatch::Alarm', {
      MetricName: 'Errors',
      Dimensions: [{ Name: 'FunctionName', Value: { Ref: refresherId } }],
      Period: 300,
      EvaluationPeriods: 2,
      DatapointsToAlarm: 2,
    });
  });

  it('dashboard shows every sync and refresher metric (namespace ContentSync, dimension service)', () => {
    t.statelessTemplate.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
    const body = dashboardBody(t.statelessTemplate);
    const widgets = JSON.parse(body).widgets as Array<{ type: string; properties: { title?: string; metrics?: unknown[][] } }>;
    const metrics = widgets.flatMap((w) => w.properties.metrics ?? []).map((m) => m.filter((part) => typeof part === 'string'));
    for (const name of ITEM_SYNC_METRICS) {
      expect(metrics).toContainEqual(expect.arrayContaining(['ContentSync', name, 'service', 'item-sync']));
    }
    for (const name of PACE_METRICS) {
      expect(metrics).toContainEqual(expect.arrayContaining(['ContentSync', name, 'service', 'item-sync']));
    }
    for (const name of [...REFRESHER_METRICS, ...CONNECTION_METRICS]) {
      expect(metrics).toContainEqual(expect.arrayContaining(['ContentSync', name, 'service', 'token-refresher']));
    }
    for (const name of ['ApproximateNumberOfMessagesVisible', 'ApproximateAgeOfOldestMessage', 'Invocations', 'Errors', 'Throttles', 'Duration', 'ConcurrentExecutions']) {
      expect(metrics.some((m) => m.includes(name)), name).toBe(true);
    }
    expect(widgets.some((w) => w.type === 'alarm')).toBe(true);
  });

  it('dashboard: a row for the provider pace (rate and 429s, postponed records, breaker and fallback)', () => {
    type Widget = { type: string; width: number; y: number; properties: { title?: string; metrics?: unknown[][]; yAxis?: unknown } };
    const widgets = JSON.parse(dashboardBody(t.statelessTemplate)).widgets as Widget[];
    /** Each metric of the widget titled `title` as `name stat [right]`, all of namespace ContentSync, service item-sync. */
    const shown = (title: string) => {
      const widget = widgets.find((w) => w.properties.title === title);
      expect(widget, title).toBeDefined();
      return widget!.properties.metrics!.map((m) => {
        expect(m.slice(0, 4), JSON.stringify(m)).toEqual(['ContentSync', m[1], 'service', 'item-sync']);
        const options = (m[4] ?? {}) as { stat?: string; yAxis?: string };
        return [m[1], options.stat ?? 'Average', options.yAxis ?? 'left'].join(' ');
      });
    };
    expect(shown('Provider pace (requests/s) and 429s')).toEqual([
      'ProviderPace Average left',
      'ProviderPace Minimum left',
      'ProviderRateLimited Sum right',
    ]);
    expect(shown('Records postponed (waiting for the pace or an outage)')).toEqual(['RecordsPostponed Sum left']);
    expect(shown('Breaker and fallback pace')).toEqual(['BreakerOpen Maximum left', 'PaceFallback Maximum left', 'BreakerOpenSeconds Maximum right']);
    const row = widgets.filter((w) => w.properties.title === 'Provider pace (requests/s) and 429s' || w.properties.title?.startsWith('Records postponed') || w.properties.title === 'Breaker and fallback pace');
    expect(new Set(row.map((w) => w.y)).size).toBe(1);
    expect(row.reduce((sum, w) => sum + w.width, 0)).toBe(24);
    // The alarm status widget lists every alarm, the breaker's included.
    const status = widgets.find((w) => w.type === 'alarm') as unknown as { properties: { alarms: unknown[] } };
    expect(status.properties.alarms).toHaveLength(16);
  });

  it('dashboard: the refresher\'s counters and the connections by status beside the alarm status, one row', () => {
    type Widget = { type: string; width: number; y: number; properties: { title?: string; metrics?: unknown[][]; period?: number } };
    const widgets = JSON.parse(dashboardBody(t.statelessTemplate)).widgets as Widget[];
    const titled = (title: string) => {
      const widget = widgets.find((w) => w.properties.title === title);
      expect(widget, title).toBeDefined();
      return widget!;
    };
    /** Each ContentSync metric of a widget as `name stat`. */
    const shown = (widget: Widget) =>
      widget.properties.metrics!
        .filter((m) => m[0] === 'ContentSync')
        .map((m) => {
          expect(m.slice(2, 4)).toEqual(['service', 'token-refresher']);
          return `${m[1]} ${((m[4] ?? {}) as { stat?: string }).stat ?? 'Average'}`;
        });
    const refresher = titled('Token refresher');
    expect(shown(refresher)).toEqual(REFRESHER_METRICS.map((name) => `${name} Sum`));
    const connections = titled('Connections by status');
    expect(shown(connections)).toEqual(CONNECTION_METRICS.map((name) => `${name} Maximum`));
    // Counted once per run: one point per run interval (300 s, the dashboard's default period, which CDK leaves out).
    for (const m of connections.properties.metrics!) expect((m[4] as { period?: number }).period ?? connections.properties.period ?? 300).toBe(300);
    const status = widgets.find((w) => w.type === 'alarm')!;
    const row = [refresher, connections, status];
    expect(new Set(row.map((w) => w.y)).size).toBe(1);
    expect(row.reduce((sum, w) => sum + w.width, 0)).toBe(24);
  });
});

