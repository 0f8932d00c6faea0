/**
 * Context validation at synth: defaults, accepted forms, and every error naming its key, both
 * through readContentSyncConfig and through the app (what `cdk synth` runs).
 */
import { describe, expect, it } from 'vitest';
import { CHANGES_RETENTION_DAYS_RANGE, DEFAULTS, LOG_LEVELS, PACE_SCOPES } from '../../functions/shared/config.js';
import { NUMBER_RULES, syncTimeoutSeconds } from '../../infra/context.js';
import { buildApp, CDK_JSON_CONTEXT, contextErrorFor as errorFor, readContext as read } from './helpers.js';


const base = { baseUrl: 'https://example.com/api' };

describe('context defaults', () => {
  it('uses the contract defaults when only baseUrl is given', () => {
    expect(read(base)).toEqual({
      baseUrl: 'https://example.com/api',
      tokenRefreshMinutes: 30,
      revisionField: 'revision',
      syncBatchSize: 100,
      syncMaxConcurrency: 2,
      syncMemorySize: 256,
      tracing: false,
      alarmEmail: undefined,
      providerRequestsPerSecond: undefined,
      freshnessHours: 24,
      usersReservedPercent: 20,
      paceScope: 'client',
      logLevel: 'INFO',
      // One deployment per account and region: stacks ContentSyncStateful and ContentSyncStateless.
      stage: undefined,
      logRetentionDays: 30,
      // Five weeks of each connection's changes feed.
      changesRetentionDays: 35,
      // Discovery off (test/infra/discovery.test.ts).
      discovery: undefined,
      syncTimeoutSeconds: 60,
    });
  });

  it('cdk.json states the same defaults and keeps the CLI quiet', () => {
    expect(CDK_JSON_CONTEXT).toMatchObject({
      tokenRefreshMinutes: 30,
      revisionField: 'revision',
      syncBatchSize: 100,
      syncMaxConcurrency: 2,
      syncMemorySize: 256,
      tracing: false,
      freshnessHours: 24,
      usersReservedPercent: 20,
      paceScope: 'client',
      logLevel: 'INFO',
      logRetentionDays: 30,
      changesRetentionDays: 35,
      'cli-telemetry': false,
    });
    expect(CDK_JSON_CONTEXT).not.toHaveProperty('baseUrl');
    // Without a stage, the stacks keep their names: no value in cdk.json.
    expect(CDK_JSON_CONTEXT).not.toHaveProperty('stage');
    // Unset means "the pace finds the provider's limit itself": no value in cdk.json.
    expect(CDK_JSON_CONTEXT).not.toHaveProperty('providerRequestsPerSecond');
    expect(read({ ...CDK_JSON_CONTEXT, ...base })).toEqual(read(base));
  });

  it('normalizes baseUrl with the run-time rule (no trailing slash, path prefix kept)', () => {
    expect(read({ baseUrl: 'https://Example.com/api/v2/' }).baseUrl).toBe('https://example.com/api/v2');
  });

  it('accepts numbers from cdk.json (numbers) and from -c (strings), and an e-mail', () => {
    const config = read({ ...base, tokenRefreshMinutes: '15', syncBatchSize: 100, syncMaxConcurrency: ' 2 ', revisionField: 'meta.rev', alarmEmail: 'ops@example.com' });
    expect(config).toMatchObject({ tokenRefreshMinutes: 15, syncBatchSize: 100, syncMaxConcurrency: 2, revisionField: 'meta.rev', alarmEmail: 'ops@example.com' });
  });

  it.each([
    [true, true],
    [false, false],
    ['true', true],
    [' false ', false],
    ['', false],
  ])('tracing %j is %j', (value, expected) => {
    expect(read({ ...base, tracing: value }).tracing).toBe(expected);
  });

  it.each(['yes', '1', 'TRUE', 0])('tracing %j is an error naming the key', (value) => {
    expect(() => read({ ...base, tracing: value })).toThrow(/^tracing: must be true or false/);
  });

  it.each([
    [128, 128],
    ['1769', 1769],
    [10_240, 10_240],
  ])('syncMemorySize %j is %j MB', (value, expected) => {
    expect(read({ ...base, syncMemorySize: value }).syncMemorySize).toBe(expected);
  });

  it.each(['127', '10241', '256.5', 'big'])('syncMemorySize %j is an error naming the key', (value) => {
    expect(() => read({ ...base, syncMemorySize: value })).toThrow(/^syncMemorySize: must be a whole number from 128 to 10240/);
  });

  it('treats blank values as unset', () => {
    expect(read({ ...base, alarmEmail: '', syncBatchSize: ' ', revisionField: '' })).toMatchObject({
      alarmEmail: undefined,
      syncBatchSize: 100,
      revisionField: 'revision',
    });
    expect(read({ ...base, providerRequestsPerSecond: '  ' }).providerRequestsPerSecond).toBeUndefined();
    expect(read({ ...base, providerRequestsPerSecond: null }).providerRequestsPerSecond).toBeUndefined();
  });

  it.each([
    [1, 1],
    ['50', 50],
    [' 250 ', 250],
    [100_000, 100_000],
    ['100000', 100_000],
  ])('providerRequestsPerSecond %j (cdk.json number or -c string) is %i', (value, expected) => {
    expect(read({ ...base, providerRequestsPerSecond: value }).providerRequestsPerSecond).toBe(expected);
  });

  it.each([
    [0, 0],
    ['35', 35],
    [' 90 ', 90],
  ])('usersReservedPercent %j (cdk.json number or -c string) is %i', (value, expected) => {
    expect(read({ ...base, usersReservedPercent: value }).usersReservedPercent).toBe(expected);
  });

  it.each([
    ['client', 'client'],
    ['connection', 'connection'],
    [' connection ', 'connection'],
    ['', 'client'],
    [null, 'client'],
  ])('paceScope %j is %s', (value, expected) => {
    expect(read({ ...base, paceScope: value }).paceScope).toBe(expected);
  });

  it.each([
    ['DEBUG', 'DEBUG'],
    ['INFO', 'INFO'],
    ['WARN', 'WARN'],
    ['ERROR', 'ERROR'],
    [' debug ', 'DEBUG'],
    ['', 'INFO'],
    [null, 'INFO'],
  ])('logLevel %j is %s', (value, expected) => {
    expect(read({ ...base, logLevel: value }).logLevel).toBe(expected);
  });

  it('logLevel takes the run-time default and the run-time choices', () => {
    expect(read(base).logLevel).toBe(DEFAULTS.logLevel);
    expect(LOG_LEVELS).toEqual(['DEBUG', 'INFO', 'WARN', 'ERROR']);
  });

  it('paceScope takes the run-time default and the run-time choices', () => {
    expect(read(base).paceScope).toBe(DEFAULTS.paceScope);
    expect(PACE_SCOPES).toEqual(['client', 'connection']);
  });

  it('accepts plain http:// only for loopback hosts (local runs)', () => {
    expect(read({ baseUrl: 'http://127.0.0.1:8080/api' }).baseUrl).toBe('http://127.0.0.1:8080/api');
    expect(read({ baseUrl: 'http://localhost:3000' }).baseUrl).toBe('http://localhost:3000');
  });

  it('derives the sync time-out from the batch size (60 s minimum, 900 s cap)', () => {
    expect(syncTimeoutSeconds(1)).toBe(60);
    expect(syncTimeoutSeconds(10)).toBe(60);
    expect(syncTimeoutSeconds(100)).toBe(60);
    expect(syncTimeoutSeconds(101)).toBe(66);
    expect(syncTimeoutSeconds(1000)).toBe(600);
    expect(syncTimeoutSeconds(10_000)).toBe(900);
  });
});

describe('context errors name the key', () => {
  it('baseUrl missing or blank', () => {
    expect(errorFor({}, 'baseUrl')).toMatch(/^baseUrl: is required/);
    expect(errorFor({ baseUrl: '  ' }, 'baseUrl')).toMatch(/^baseUrl: is required/);
  });

  it('baseUrl with plain http:// to a public host', () => {
    expect(errorFor({ baseUrl: 'http://example.com/api' }, 'baseUrl')).toMatch(/plain http:\/\/ is accepted only for loopback hosts/);
  });

  it('baseUrl that is not an absolute https URL, or carries a query or credentials', () => {
    errorFor({ baseUrl: 'example.com' }, 'baseUrl');
    errorFor({ baseUrl: 'ftp://example.com' }, 'baseUrl');
    errorFor({ baseUrl: 'https://example.com/api?x=1' }, 'baseUrl');
    errorFor({ baseUrl: 'https://user:pw@example.com' }, 'baseUrl');
  });

  it.each([
    ['tokenRefreshMinutes', 0],
    ['tokenRefreshMinutes', 1441],
    ['tokenRefreshMinutes', '1.5'],
    ['tokenRefreshMinutes', 'abc'],
    ['tokenRefreshMinutes', -5],
    ['syncBatchSize', 0],
    ['syncBatchSize', 10_001],
    ['syncBatchSize', '10x'],
    ['syncMaxConcurrency', 1],
    ['syncMaxConcurrency', 1001],
    ['syncMaxConcurrency', 2.5],
    ['providerRequestsPerSecond', 0],
    ['providerRequestsPerSecond', '0'],
    ['providerRequestsPerSecond', 100_001],
    ['providerRequestsPerSecond', 'abc'],
    ['providerRequestsPerSecond', '12abc'],
    ['providerRequestsPerSecond', 2.5],
    ['providerRequestsPerSecond', '-1'],
    ['providerRequestsPerSecond', 'true'],
    ['freshnessHours', -1],
    ['freshnessHours', 8761],
    ['freshnessHours', 'abc'],
    ['freshnessHours', '24h'],
    ['freshnessHours', 1.5],
    ['usersReservedPercent', -1],
    ['usersReservedPercent', 91],
    ['usersReservedPercent', '95'],
    ['usersReservedPercent', 'abc'],
    ['usersReservedPercent', '20%'],
    ['usersReservedPercent', 0.2],
  ])('%s = %j is out of range', (key, value) => {
    expect(errorFor({ ...base, [key]: value }, key)).toMatch(/must be a whole number from \d+ to \d+/);
  });

  it.each([['meta..rev'], ['.rev'], ['rev.'], ['has space']])('revisionField %j is not a dot path', (value) => {
    expect(errorFor({ ...base, revisionField: value }, 'revisionField')).toMatch(/must be a dot path/);
  });

  it.each([['not-an-email'], ['ops@localhost'], ['a b@example.com'], ['ops@@example.com']])('alarmEmail %j is not an e-mail address', (value) => {
    expect(errorFor({ ...base, alarmEmail: value }, 'alarmEmail')).toMatch(/must be an e-mail address/);
  });

  it('non-scalar values are rejected', () => {
    errorFor({ ...base, syncBatchSize: [10] }, 'syncBatchSize');
    errorFor({ ...base, providerRequestsPerSecond: { rate: 5 } }, 'providerRequestsPerSecond');
    errorFor({ ...base, providerRequestsPerSecond: true }, 'providerRequestsPerSecond');
  });

  it('usersReservedPercent: the message gives the range and the value', () => {
    expect(errorFor({ ...base, usersReservedPercent: '95' }, 'usersReservedPercent')).toBe(
      'usersReservedPercent: must be a whole number from 0 to 90, got "95"',
    );
    expect(errorFor({ ...base, usersReservedPercent: 'abc' }, 'usersReservedPercent')).toBe(
      'usersReservedPercent: must be a whole number from 0 to 90, got "abc"',
    );
  });

  it.each([['Client'], ['account'], ['connections'], [1], ['client,connection']])('paceScope %j is not client or connection', (value) => {
    expect(errorFor({ ...base, paceScope: value }, 'paceScope')).toBe(`paceScope: must be one of client, connection, got "${value}"`);
  });

  it.each([['TRACE'], ['verbose'], ['CRITICAL'], [1], ['INFO,DEBUG']])('logLevel %j is not one of the four levels', (value) => {
    expect(errorFor({ ...base, logLevel: value }, 'logLevel')).toBe(`logLevel: must be one of DEBUG, INFO, WARN, ERROR, got "${value}"`);
  });

  it('logLevel: a non-scalar value is rejected naming the key', () => {
    errorFor({ ...base, logLevel: ['DEBUG'] }, 'logLevel');
  });

  it('paceScope: a non-scalar value is rejected naming the key', () => {
    errorFor({ ...base, paceScope: ['client'] }, 'paceScope');
  });

  it('providerRequestsPerSecond: the message gives the range and the value', () => {
    expect(errorFor({ ...base, providerRequestsPerSecond: 'abc' }, 'providerRequestsPerSecond')).toBe(
      'providerRequestsPerSecond: must be a whole number from 1 to 100000, got "abc"',
    );
  });
});

describe('the app validates the context once, before creating anything', () => {
  it('a missing baseUrl fails the build naming baseUrl', () => {
    expect(() => buildApp({ baseUrl: undefined })).toThrow(/^baseUrl: is required/);
  });

  it('a context key the app does not read fails the build naming it and the nearest key; CDK\'s own keys pass', () => {
    expect(() => buildApp({ changesRetentionDay: '90' })).toThrow(
      /^changesRetentionDay: is not a context key of this app \(did you mean changesRetentionDays\? the keys: docs\/configuration\.md, "Deploy time \(CDK context\)"\)$/,
    );
    expect(() => buildApp({ freshnesshours: 12 })).toThrow(/^freshnesshours: is not a context key of this app \(did you mean freshnessHours\? /);
    expect(() => buildApp({ somethingElse: 'x' })).toThrow(/^somethingElse: is not a context key of this app \(the keys: /);
    // cdk.json's feature flags and cli-telemetry, the CLI's aws:cdk:… keys, cached lookups.
    expect(() =>
      buildApp({
        'acknowledged-issue-numbers': [32775],
        'aws:cdk:enable-path-metadata': true,
        'availability-zones:account=123456789012:region=eu-west-1': ['eu-west-1a'],
        '@aws-cdk/core:newStyleStackSynthesis': true,
      }),
    ).not.toThrow();
  });

  it('a plain-http public baseUrl fails the build naming baseUrl', () => {
    expect(() => buildApp({ baseUrl: 'http://example.com' })).toThrow(/^baseUrl: plain http/);
  });

  it('a bad logLevel fails the build naming logLevel', () => {
    expect(() => buildApp({ logLevel: 'LOUD' })).toThrow(/^logLevel: must be one of DEBUG, INFO, WARN, ERROR, got "LOUD"/);
  });

  it('an out-of-range number fails the build naming the key', () => {
    expect(() => buildApp({ syncMaxConcurrency: '1' })).toThrow(/^syncMaxConcurrency: must be a whole number from 2 to 1000/);
    expect(() => buildApp({ tokenRefreshMinutes: 0 })).toThrow(/^tokenRefreshMinutes: /);
    expect(() => buildApp({ syncBatchSize: 20_000 })).toThrow(/^syncBatchSize: /);
  });

  it('a bad providerRequestsPerSecond fails the build naming providerRequestsPerSecond', () => {
    expect(() => buildApp({ providerRequestsPerSecond: 'abc' })).toThrow(/^providerRequestsPerSecond: must be a whole number from 1 to 100000/);
    expect(() => buildApp({ providerRequestsPerSecond: '0' })).toThrow(/^providerRequestsPerSecond: /);
  });

  it('a valid providerRequestsPerSecond builds', () => {
    expect(buildApp({ providerRequestsPerSecond: '50' }).config.providerRequestsPerSecond).toBe(50);
  });

  it('a bad usersReservedPercent fails the build naming usersReservedPercent', () => {
    expect(() => buildApp({ usersReservedPercent: '95' })).toThrow(/^usersReservedPercent: must be a whole number from 0 to 90, got "95"/);
    expect(() => buildApp({ usersReservedPercent: 'abc' })).toThrow(/^usersReservedPercent: must be a whole number from 0 to 90, got "abc"/);
  });

  it('usersReservedPercent: 20 unless given', () => {
    expect(buildApp({ usersReservedPercent: undefined }).config.usersReservedPercent).toBe(20);
    expect(buildApp({ usersReservedPercent: '40' }).config.usersReservedPercent).toBe(40);
  });

  it('a bad paceScope fails the build naming paceScope; a good one builds', () => {
    expect(() => buildApp({ paceScope: 'account' })).toThrow(/^paceScope: must be one of client, connection, got "account"/);
    expect(buildApp({ paceScope: 'connection' }).config.paceScope).toBe('connection');
    expect(buildApp({ paceScope: undefined }).config.paceScope).toBe('client');
  });

  it('a bad alarmEmail fails the build naming alarmEmail', () => {
    expect(() => buildApp({ alarmEmail: 'nobody' })).toThrow(/^alarmEmail: /);
  });

  it('a loopback http baseUrl builds', () => {
    expect(buildApp({ baseUrl: 'http://127.0.0.1:9000' }).config.baseUrl).toBe('http://127.0.0.1:9000');
  });
});

describe('changesRetentionDays', () => {
  it('ranges as CHANGES_RETENTION_DAYS does (1 to 3650 days), 35 unless given', () => {
    expect(NUMBER_RULES.changesRetentionDays).toEqual({ ...CHANGES_RETENTION_DAYS_RANGE, fallback: 35 });
    expect(CHANGES_RETENTION_DAYS_RANGE).toEqual({ min: 1, max: 3650 });
    expect(read(base).changesRetentionDays).toBe(35);
    expect(buildApp({ changesRetentionDays: undefined }).config.changesRetentionDays).toBe(35);
  });

  it.each([
    [1, 1],
    ['7', 7],
    [' 90 ', 90],
    [3650, 3650],
    ['3650', 3650],
    ['', 35],
    [null, 35],
  ])('changesRetentionDays %j (cdk.json number or -c string) is %j', (value, expected) => {
    expect(read({ ...base, changesRetentionDays: value }).changesRetentionDays).toBe(expected);
  });

  it.each([[0], ['0'], [3651], ['3651'], ['x'], [1.5], ['1.5'], [-1], ['35d']])('changesRetentionDays %j is an error naming the key', (value) => {
    expect(errorFor({ ...base, changesRetentionDays: value }, 'changesRetentionDays')).toBe(
      `changesRetentionDays: must be a whole number from 1 to 3650, got "${value}"`,
    );
  });

  it('changesRetentionDays: a non-scalar value is rejected naming the key', () => {
    expect(errorFor({ ...base, changesRetentionDays: [35] }, 'changesRetentionDays')).toMatch(/must be a single value/);
    expect(errorFor({ ...base, changesRetentionDays: true }, 'changesRetentionDays')).toMatch(/must be a single value/);
  });

  it('a bad changesRetentionDays fails the build naming the key', () => {
    expect(() => buildApp({ changesRetentionDays: '0' })).toThrow(/^changesRetentionDays: must be a whole number from 1 to 3650, got "0"/);
    expect(() => buildApp({ changesRetentionDays: 'x' })).toThrow(/^changesRetentionDays: /);
  });
});

describe('stage and logRetentionDays', () => {
  it.each([
    ['staging', 'staging'],
    [' prod-eu-1 ', 'prod-eu-1'],
    ['a', 'a'],
    ['x'.repeat(20), 'x'.repeat(20)],
    [7, '7'],
    ['', undefined],
    [null, undefined],
  ])('stage %j is %j', (value, expected) => {
    expect(read({ ...base, stage: value }).stage).toBe(expected);
  });

  it.each([['Staging'], ['prod_eu'], ['x'.repeat(21)], ['a.b'], ['stage one'], ['café']])('stage %j is an error naming the key, the rule and the value', (value) => {
    expect(errorFor({ ...base, stage: value }, 'stage')).toBe(
      `stage: must be 1 to 20 of a-z 0-9 - (it names the stacks ContentSyncStateful-<stage> and ContentSyncStateless-<stage>), got "${value}"`,
    );
  });

  it('stage: a non-scalar value is rejected naming the key', () => {
    errorFor({ ...base, stage: ['staging'] }, 'stage');
  });

  it.each([
    [1, 1],
    ['7', 7],
    [' 365 ', 365],
    [3653, 3653],
    ['', 30],
    [null, 30],
  ])('logRetentionDays %j is %j', (value, expected) => {
    expect(read({ ...base, logRetentionDays: value }).logRetentionDays).toBe(expected);
  });

  it.each([[0], ['31'], [9999], ['abc'], ['30d'], [-1], [30.5], ['1e1']])('logRetentionDays %j is not a retention CloudWatch Logs allows', (value) => {
    expect(errorFor({ ...base, logRetentionDays: value }, 'logRetentionDays')).toBe(
      `logRetentionDays: must be one of the retentions CloudWatch Logs allows (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653 days), got "${value}"`,
    );
  });

  it('a bad stage or logRetentionDays fails the build naming the key', () => {
    expect(() => buildApp({ stage: 'Prod' })).toThrow(/^stage: must be 1 to 20 of a-z 0-9 -/);
    expect(() => buildApp({ logRetentionDays: '31' })).toThrow(/^logRetentionDays: must be one of the retentions CloudWatch Logs allows/);
  });
});
