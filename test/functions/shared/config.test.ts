import { join, resolve } from 'node:path';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';
import {
  CHANGES_RETENTION_DAYS_RANGE,
  DEFAULTS,
  ENV,
  loadChangeEventsConfig,
  loadChangesConfig,
  loadChangesWriterConfig,
  loadReconcilerConfig,
  loadRefresherConfig,
  loadSyncConfig,
} from '../../../functions/shared/config.js';
import { ConfigError } from '../../../functions/shared/errors.js';
import { normalizeBaseUrl } from '../../../functions/shared/base-url.js';

const KEY_ARN = 'arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab';

const refresherEnv = {
  PROVIDER_BASE_URL: 'https://provider.example.com/api/v2/',
  CONNECTIONS_TABLE_NAME: 'connections',
  CONNECTIONS_KEY_ARN: KEY_ARN,
  CONTROL_TABLE_NAME: 'control',
};

const syncEnv = {
  PROVIDER_BASE_URL: 'https://provider.example.com/api/v2',
  CONNECTIONS_TABLE_NAME: 'connections',
  CONNECTIONS_KEY_ARN: KEY_ARN,
  ITEMS_TABLE_NAME: 'items',
  ITEMS_BUCKET_NAME: 'items-bucket',
  REVISION_FIELD: 'meta.rev',
  DEAD_LETTER_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/dlq',
  CONTROL_TABLE_NAME: 'control',
};

const reconcilerEnv = {
  ITEMS_TABLE_NAME: 'items',
  CONTROL_TABLE_NAME: 'control',
  RECONCILE_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/reconcile',
};

const changeEventsEnv = { EVENT_BUS_NAME: 'bus', CONNECTIONS_TABLE_NAME: 'connections' };

const changesWriterEnv = { CHANGES_TABLE_NAME: 'changes', CHANGES_RETENTION_DAYS: '35', CONNECTIONS_TABLE_NAME: 'connections' };

const ROOT = resolve(import.meta.dirname, '../../..');

function errorOf(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('loadRefresherConfig', () => {
  it('reads the contract variables and normalises the base URL', () => {
    expect(loadRefresherConfig(refresherEnv)).toEqual({
      provider: {
        baseUrl: 'https://provider.example.com/api/v2',
        timeoutMs: DEFAULTS.timeoutMs,
        maxResponseBytes: DEFAULTS.maxResponseBytes,
      },
      connectionsTableName: 'connections',
      connectionsKeyArn: KEY_ARN,
      controlTableName: 'control',
      tokenRefreshMinutes: 30,
      tokenRequestsPerSecond: 10,
      refreshConcurrency: 10,
      idleRefreshHours: 24,
    });
  });

  it('takes its tunables from the environment, naming a bad one', () => {
    expect(
      loadRefresherConfig({ ...refresherEnv, TOKEN_REFRESH_MINUTES: '15', REFRESH_CONCURRENCY: '25', IDLE_REFRESH_HOURS: '12', TOKEN_REQUESTS_PER_SECOND: '1000' }),
    ).toMatchObject({ tokenRefreshMinutes: 15, refreshConcurrency: 25, idleRefreshHours: 12, tokenRequestsPerSecond: 1000 });
    expect(loadRefresherConfig({ ...refresherEnv, TOKEN_REQUESTS_PER_SECOND: '1' }).tokenRequestsPerSecond).toBe(1);
    for (const [key, value] of [
      ['TOKEN_REFRESH_MINUTES', '0'],
      ['TOKEN_REFRESH_MINUTES', '1441'],
      ['REFRESH_CONCURRENCY', '101'],
      ['IDLE_REFRESH_HOURS', '25'],
      ['TOKEN_REQUESTS_PER_SECOND', '0'],
      ['TOKEN_REQUESTS_PER_SECOND', '1001'],
      ['TOKEN_REQUESTS_PER_SECOND', '2.5'],
      ['TOKEN_REQUESTS_PER_SECOND', 'ten'],
    ] as const) {
      const error = errorOf(() => loadRefresherConfig({ ...refresherEnv, [key]: value }));
      expect(error.key).toBe(key);
      expect(error.message.startsWith(`${key}: must be a whole number from `)).toBe(true);
    }
  });

  it.each(['PROVIDER_BASE_URL', 'CONNECTIONS_TABLE_NAME', 'CONTROL_TABLE_NAME'])(
    'names %s when it is missing or blank',
    (key) => {
      expect(errorOf(() => loadRefresherConfig({ ...refresherEnv, [key]: undefined })).key).toBe(key);
      const blank = errorOf(() => loadRefresherConfig({ ...refresherEnv, [key]: '  ' }));
      expect(blank.message).toBe(`${key}: is required but not set`);
    },
  );
});

describe('CONNECTIONS_KEY_ARN', () => {
  it('is required, and must be a KMS key ARN: the error names the variable', () => {
    const { CONNECTIONS_KEY_ARN: _key, ...without } = refresherEnv;
    expect(errorOf(() => loadRefresherConfig(without)).message).toBe('CONNECTIONS_KEY_ARN: is required but not set');
    expect(errorOf(() => loadSyncConfig({ ...syncEnv, CONNECTIONS_KEY_ARN: 'alias/tokens' })).message).toBe(
      'CONNECTIONS_KEY_ARN: must be a KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>), got "alias/tokens"',
    );
    expect(loadRefresherConfig({ ...refresherEnv, CONNECTIONS_KEY_ARN: 'arn:aws:kms:eu-west-1:123456789012:alias/content-sync' }).connectionsKeyArn).toBe(
      'arn:aws:kms:eu-west-1:123456789012:alias/content-sync',
    );
  });
});

describe('loadSyncConfig', () => {
  it('reads the contract variables with documented tunable defaults', () => {
    expect(loadSyncConfig(syncEnv)).toEqual({
      // The largest item stored: 16 MiB (larger than a row allows: those go to the items bucket).
      provider: { baseUrl: syncEnv.PROVIDER_BASE_URL, timeoutMs: 10_000, maxResponseBytes: 16 * 1024 * 1024 },
      connectionsTableName: 'connections',
      connectionsKeyArn: KEY_ARN,
      tokenRefreshMinutes: 30,
      tokenRequestsPerSecond: 10,
      logLevel: 'INFO',
      paceScope: 'client',
      connectionWaitSeconds: 300,
      itemsTableName: 'items',
      itemsBucketName: 'items-bucket',
      revisionField: 'meta.rev',
      deadLetterQueueUrl: syncEnv.DEAD_LETTER_QUEUE_URL,
      fetchConcurrency: 50,
      tokenCacheSeconds: 60,
      fetchAttempts: 3,
      rateLimitMinDelaySeconds: 60,
      controlTableName: 'control',
      providerRequestsPerSecond: undefined,
      paceFallbackRate: 1,
      postponeMaxSeconds: 30,
      usersReservedPercent: 20,
      s3Endpoint: undefined,
      // CHILDREN_PATH unset: discovery off.
      discovery: undefined,
    });
  });

  it.each([
    'PROVIDER_BASE_URL',
    'CONNECTIONS_TABLE_NAME',
    'ITEMS_TABLE_NAME',
    'ITEMS_BUCKET_NAME',
    'REVISION_FIELD',
    'DEAD_LETTER_QUEUE_URL',
    'CONTROL_TABLE_NAME',
  ])(
    'names %s when it is missing: no default hides it',
    (key) => {
      expect(errorOf(() => loadSyncConfig({ ...syncEnv, [key]: undefined })).message).toBe(
        `${key}: is required but not set`,
      );
    },
  );

  it('needs no changes-table variable, and ignores them when set: the changes writer writes the feed, from the items stream', () => {
    // syncEnv sets neither CHANGES_TABLE_NAME nor CHANGES_RETENTION_DAYS (the test above reads it whole).
    expect(Object.keys(syncEnv).filter((key) => key.startsWith('CHANGES_'))).toEqual([]);
    // Set, even to values the changes writer refuses, they change nothing and fail nothing.
    const withChanges = loadSyncConfig({ ...syncEnv, CHANGES_TABLE_NAME: 'changes', CHANGES_RETENTION_DAYS: '0' });
    expect(withChanges).toEqual(loadSyncConfig(syncEnv));
    expect(withChanges).not.toHaveProperty('changesTableName');
    expect(withChanges).not.toHaveProperty('changesRetentionDays');
  });

  it.each([
    ['REVISION_FIELD', 'meta..rev'],
    ['REVISION_FIELD', 'has space'],
    ['DEAD_LETTER_QUEUE_URL', 'not a url'],
    ['PROVIDER_BASE_URL', 'http://provider.example.com'],
    ['PROVIDER_BASE_URL', 'ftp://provider.example.com'],
    ['SYNC_FETCH_CONCURRENCY', '0'],
    ['SYNC_FETCH_CONCURRENCY', 'ten'],
    ['PROVIDER_TIMEOUT_MS', '12.5'],
    ['ACCESS_TOKEN_CACHE_SECONDS', '-1'],
    ['SYNC_FETCH_ATTEMPTS', '11'],
    ['SYNC_RATE_LIMIT_MIN_DELAY_SECONDS', '43201'],
    ['PROVIDER_REQUESTS_PER_SECOND', '0'],
    ['PROVIDER_REQUESTS_PER_SECOND', '2.5'],
    ['PACE_FALLBACK_REQUESTS_PER_SECOND', '0'],
    ['SYNC_POSTPONE_MAX_SECONDS', '14'],
    ['SYNC_POSTPONE_MAX_SECONDS', '901'],
    ['PROVIDER_USERS_RESERVED_PERCENT', '91'],
    ['PROVIDER_USERS_RESERVED_PERCENT', '-1'],
    ['PROVIDER_USERS_RESERVED_PERCENT', '20.5'],
    ['PROVIDER_USERS_RESERVED_PERCENT', 'abc'],
    ['PACE_SCOPE', 'account'],
    ['PACE_SCOPE', 'CLIENT'],
    ['POWERTOOLS_LOG_LEVEL', 'TRACE'],
    ['POWERTOOLS_LOG_LEVEL', 'loud'],
    ['CONNECTION_WAIT_SECONDS', '0'],
    ['CONNECTION_WAIT_SECONDS', '901'],
    ['TOKEN_REQUESTS_PER_SECOND', '0'],
    ['TOKEN_REQUESTS_PER_SECOND', '1001'],
  ])('rejects %s=%s naming the variable', (key, value) => {
    const error = errorOf(() => loadSyncConfig({ ...syncEnv, [key]: value }));
    expect(error.key).toBe(key);
    expect(error.message.startsWith(`${key}: `)).toBe(true);
  });

  it('takes the tunables from the environment', () => {
    const config = loadSyncConfig({
      ...syncEnv,
      SYNC_FETCH_CONCURRENCY: '4',
      PROVIDER_TIMEOUT_MS: '2500',
      ACCESS_TOKEN_CACHE_SECONDS: '0',
      SYNC_FETCH_ATTEMPTS: '5',
      PROVIDER_MAX_RESPONSE_BYTES: '2048',
      SYNC_RATE_LIMIT_MIN_DELAY_SECONDS: '5',
      PROVIDER_REQUESTS_PER_SECOND: '200',
      PACE_FALLBACK_REQUESTS_PER_SECOND: '3',
      SYNC_POSTPONE_MAX_SECONDS: '300',
      PROVIDER_USERS_RESERVED_PERCENT: '35',
      PACE_SCOPE: 'connection',
      CONNECTION_WAIT_SECONDS: '20',
      POWERTOOLS_LOG_LEVEL: 'debug',
    });
    expect(config).toMatchObject({
      logLevel: 'DEBUG',
      paceScope: 'connection',
      connectionWaitSeconds: 20,
      providerRequestsPerSecond: 200,
      paceFallbackRate: 3,
      postponeMaxSeconds: 300,
      usersReservedPercent: 35,
      fetchConcurrency: 4,
      tokenCacheSeconds: 0,
      fetchAttempts: 5,
      rateLimitMinDelaySeconds: 5,
      provider: { timeoutMs: 2500, maxResponseBytes: 2048 },
    });
  });
});

describe('loadSyncConfig: discovery (CHILDREN_PATH and the variables beside it)', () => {
  const reconcile = 'https://sqs.eu-west-1.amazonaws.com/123456789012/reconcile';

  it('CHILDREN_PATH with RECONCILE_QUEUE_URL turns it on; CHILD_ID_PATH defaults to id', () => {
    expect(loadSyncConfig({ ...syncEnv, CHILDREN_PATH: 'children', RECONCILE_QUEUE_URL: reconcile }).discovery).toEqual({
      childrenPath: 'children',
      childIdPath: 'id',
      queueUrl: reconcile,
    });
  });

  it('reads all four paths, trimmed', () => {
    const config = loadSyncConfig({
      ...syncEnv,
      CHILDREN_PATH: ' item_collection.entries ',
      CHILD_ID_PATH: 'meta.id',
      CHILD_REVISION_PATH: 'etag',
      CHILDREN_TOTAL_PATH: 'item_collection.total_count',
      RECONCILE_QUEUE_URL: reconcile,
    });
    expect(config.discovery).toEqual({
      childrenPath: 'item_collection.entries',
      childIdPath: 'meta.id',
      childRevisionPath: 'etag',
      childrenTotalPath: 'item_collection.total_count',
      queueUrl: reconcile,
    });
  });

  it('a blank CHILDREN_PATH is unset: off, and RECONCILE_QUEUE_URL is not needed', () => {
    expect(loadSyncConfig({ ...syncEnv, CHILDREN_PATH: ' ' }).discovery).toBeUndefined();
  });

  it('on without RECONCILE_QUEUE_URL, or with a bad one: an error naming it', () => {
    expect(errorOf(() => loadSyncConfig({ ...syncEnv, CHILDREN_PATH: 'children' })).message).toBe('RECONCILE_QUEUE_URL: is required but not set');
    expect(errorOf(() => loadSyncConfig({ ...syncEnv, CHILDREN_PATH: 'children', RECONCILE_QUEUE_URL: 'queue' })).key).toBe('RECONCILE_QUEUE_URL');
  });

  it.each([
    ['CHILDREN_PATH', 'a..b'],
    ['CHILD_ID_PATH', '.id'],
    ['CHILD_REVISION_PATH', 'e tag'],
    ['CHILDREN_TOTAL_PATH', 'total.'],
  ])('%s=%j is not a dot path: an error naming it', (key, value) => {
    const error = errorOf(() => loadSyncConfig({ ...syncEnv, CHILDREN_PATH: 'children', RECONCILE_QUEUE_URL: reconcile, [key]: value }));
    expect(error.key).toBe(key);
    expect(error.message).toBe(`${key}: must be a dot path such as "revision" or "meta.rev", got "${value}"`);
  });

  it.each(['CHILD_ID_PATH', 'CHILD_REVISION_PATH', 'CHILDREN_TOTAL_PATH'])('%s without CHILDREN_PATH would do nothing: an error naming it', (key) => {
    const error = errorOf(() => loadSyncConfig({ ...syncEnv, RECONCILE_QUEUE_URL: reconcile, [key]: 'x' }));
    expect(error.key).toBe(key);
    expect(error.message).toBe(`${key}: is set but CHILDREN_PATH is not: without it discovery is off and this does nothing`);
  });
});

describe('CHANGES_TABLE_NAME and CHANGES_RETENTION_DAYS (the changes table; the changes writer)', () => {
  it('are the variables ENV names; the range is 1 to 3650 days', () => {
    expect([ENV.changesTableName, ENV.changesRetentionDays]).toEqual(['CHANGES_TABLE_NAME', 'CHANGES_RETENTION_DAYS']);
    expect(CHANGES_RETENTION_DAYS_RANGE).toEqual({ min: 1, max: 3650 });
  });

  it('the changes writer reads the changes table, the connections table and the stage', () => {
    expect(loadChangesWriterConfig(changesWriterEnv)).toEqual({
      changesTableName: 'changes',
      changesRetentionDays: 35,
      connectionsTableName: 'connections',
      stage: undefined,
    });
    expect(loadChangesWriterConfig({ ...changesWriterEnv, CONTENT_SYNC_STAGE: ' staging ' }).stage).toBe('staging');
  });

  it.each([
    ['1', 1],
    [' 90 ', 90],
    ['3650', 3650],
  ])('CHANGES_RETENTION_DAYS %j is %i days', (value, days) => {
    expect(loadChangesWriterConfig({ ...changesWriterEnv, CHANGES_TABLE_NAME: ' changes ', CHANGES_RETENTION_DAYS: value })).toMatchObject({
      changesTableName: 'changes',
      changesRetentionDays: days,
    });
    expect(loadChangesConfig({ CHANGES_TABLE_NAME: ' changes ', CHANGES_RETENTION_DAYS: value })).toEqual({ changesTableName: 'changes', changesRetentionDays: days });
  });

  it.each([
    ['CHANGES_TABLE_NAME', undefined, 'CHANGES_TABLE_NAME: is required but not set'],
    ['CHANGES_TABLE_NAME', '  ', 'CHANGES_TABLE_NAME: is required but not set'],
    // Required: the stacks always set it; no default hides a deployment that lost it.
    ['CHANGES_RETENTION_DAYS', undefined, 'CHANGES_RETENTION_DAYS: is required but not set'],
    ['CHANGES_RETENTION_DAYS', '', 'CHANGES_RETENTION_DAYS: is required but not set'],
    ['CHANGES_RETENTION_DAYS', '0', 'CHANGES_RETENTION_DAYS: must be a whole number from 1 to 3650, got 0'],
    ['CHANGES_RETENTION_DAYS', '3651', 'CHANGES_RETENTION_DAYS: must be a whole number from 1 to 3650, got 3651'],
    ['CHANGES_RETENTION_DAYS', '1.5', 'CHANGES_RETENTION_DAYS: must be a whole number from 1 to 3650, got "1.5"'],
    ['CHANGES_RETENTION_DAYS', 'x', 'CHANGES_RETENTION_DAYS: must be a whole number from 1 to 3650, got "x"'],
    ['CHANGES_RETENTION_DAYS', '-1', 'CHANGES_RETENTION_DAYS: must be a whole number from 1 to 3650, got "-1"'],
    // The changes writer skips the changes of a connection being erased: it reads the connections table.
    ['CONNECTIONS_TABLE_NAME', undefined, 'CONNECTIONS_TABLE_NAME: is required but not set'],
    ['CONNECTIONS_TABLE_NAME', ' ', 'CONNECTIONS_TABLE_NAME: is required but not set'],
  ])('%s %j fails the changes writer\'s start naming the variable', (key, value, message) => {
    const error = errorOf(() => loadChangesWriterConfig({ ...changesWriterEnv, [key]: value }));
    expect(error.key).toBe(key);
    expect(error.message).toBe(message);
  });
});

describe('loadChangeEventsConfig', () => {
  it('reads the bus and the connections table, naming a missing one', () => {
    expect(loadChangeEventsConfig({ EVENT_BUS_NAME: 'bus', CONNECTIONS_TABLE_NAME: 'connections' })).toEqual({
      eventBusName: 'bus',
      connectionsTableName: 'connections',
    });
    expect(errorOf(() => loadChangeEventsConfig({ EVENT_BUS_NAME: 'bus' })).message).toBe('CONNECTIONS_TABLE_NAME: is required but not set');
  });
});

describe('PROVIDER_USERS_RESERVED_PERCENT (share of the pace kept for users’ ids)', () => {
  it('defaults to 20 when unset or blank', () => {
    expect(DEFAULTS.usersReservedPercent).toBe(20);
    expect(loadSyncConfig(syncEnv).usersReservedPercent).toBe(20);
    expect(loadSyncConfig({ ...syncEnv, PROVIDER_USERS_RESERVED_PERCENT: ' ' }).usersReservedPercent).toBe(20);
  });

  it.each([
    ['0', 0],
    ['50', 50],
    [' 90 ', 90],
  ])('%j is %i', (value, expected) => {
    expect(loadSyncConfig({ ...syncEnv, PROVIDER_USERS_RESERVED_PERCENT: value }).usersReservedPercent).toBe(expected);
  });

  it.each([
    ['95', 'PROVIDER_USERS_RESERVED_PERCENT: must be a whole number from 0 to 90, got 95'],
    ['abc', 'PROVIDER_USERS_RESERVED_PERCENT: must be a whole number from 0 to 90, got "abc"'],
  ])('rejects %j naming the variable', (value, message) => {
    const error = errorOf(() => loadSyncConfig({ ...syncEnv, PROVIDER_USERS_RESERVED_PERCENT: value }));
    expect(error.key).toBe('PROVIDER_USERS_RESERVED_PERCENT');
    expect(error.message).toBe(message);
  });
});

describe('CONTENT_SYNC_STAGE (the deployment’s stage, read by every function)', () => {
  const loaders = {
    refresher: () => loadRefresherConfig(refresherEnv),
    sync: () => loadSyncConfig(syncEnv),
    reconciler: () => loadReconcilerConfig(reconcilerEnv),
    'change events': () => loadChangeEventsConfig(changeEventsEnv),
    'changes writer': () => loadChangesWriterConfig(changesWriterEnv),
  };
  const withStage = (value: string | undefined) => ({
    refresher: () => loadRefresherConfig({ ...refresherEnv, CONTENT_SYNC_STAGE: value }),
    sync: () => loadSyncConfig({ ...syncEnv, CONTENT_SYNC_STAGE: value }),
    reconciler: () => loadReconcilerConfig({ ...reconcilerEnv, CONTENT_SYNC_STAGE: value }),
    'change events': () => loadChangeEventsConfig({ ...changeEventsEnv, CONTENT_SYNC_STAGE: value }),
    'changes writer': () => loadChangesWriterConfig({ ...changesWriterEnv, CONTENT_SYNC_STAGE: value }),
  });

  it('is the variable ENV names', () => {
    expect(ENV.stage).toBe('CONTENT_SYNC_STAGE');
  });

  it.each(Object.keys(loaders))('%s: none when unset or blank; the stage, trimmed, when set', (name) => {
    const key = name as keyof typeof loaders;
    expect(loaders[key]().stage).toBeUndefined();
    expect(withStage('  ')[key]().stage).toBeUndefined();
    expect(withStage('staging')[key]().stage).toBe('staging');
    expect(withStage(' eu-2 ')[key]().stage).toBe('eu-2');
    expect(withStage('a'.repeat(20))[key]().stage).toBe('a'.repeat(20));
  });

  it.each([['Staging'], ['prod_eu'], ['x'.repeat(21)], ['a.b'], ['stage one'], ['café']])(
    'rejects %j in every function, naming the variable, the context key’s rule and the value',
    (value) => {
      for (const load of Object.values(withStage(value))) {
        const error = errorOf(load);
        expect(error.key).toBe('CONTENT_SYNC_STAGE');
        expect(error.message).toBe(
          `CONTENT_SYNC_STAGE: must be 1 to 20 of a-z 0-9 - (it names the stacks ContentSyncStateful-<stage> and ContentSyncStateless-<stage>), got "${value}"`,
        );
      }
    },
  );

  it('takes the stage rule from functions/shared/stage.ts, loading no infra file and not the CDK', async () => {
    const result = await build({
      entryPoints: [join(ROOT, 'functions/shared/config.ts')],
      bundle: true,
      write: false,
      metafile: true,
      platform: 'node',
      format: 'esm',
      packages: 'external',
      logLevel: 'silent',
      absWorkingDir: ROOT,
    });
    const output = Object.values(result.metafile.outputs)[0]!;
    expect(Object.keys(result.metafile.inputs).filter((file) => file.startsWith('infra/'))).toEqual([]);
    const packages = output.imports.filter((i) => i.external).map((i) => i.path);
    expect(packages.filter((name) => /^(aws-cdk-lib|constructs|cdk-nag)(\/|$)/.test(name))).toEqual([]);
  });
});

describe('normalizeBaseUrl', () => {
  it.each([
    ['https://host.example/api/v2/', 'https://host.example/api/v2'],
    ['https://host.example', 'https://host.example'],
    ['http://127.0.0.1:8080/api', 'http://127.0.0.1:8080/api'],
    ['http://localhost:3000', 'http://localhost:3000'],
    ['http://[::1]:3000/x', 'http://[::1]:3000/x'],
  ])('accepts %s', (input, expected) => {
    expect(normalizeBaseUrl(input)).toBe(expected);
  });

  it.each([
    ['http://example.com/api', /plain http:\/\/ is accepted only for loopback/],
    ['http://10.0.0.1/api', /loopback/],
    ['https://user:pw@host.example', /user name or password/],
    ['https://host.example/api?x=1', /query string/],
    ['host.example/api', /not an absolute URL/],
    ['ws://host.example', /protocol ws: is not supported/],
  ])('rejects %s', (input, message) => {
    expect(() => normalizeBaseUrl(input)).toThrow(message);
  });

  it('takes the S3 endpoint the SDK would (AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL), naming the variable; none when configured endpoints are ignored', () => {
    expect(loadSyncConfig(syncEnv).s3Endpoint).toBeUndefined();
    expect(loadSyncConfig({ ...syncEnv, AWS_ENDPOINT_URL: 'http://localhost:4566' }).s3Endpoint).toEqual({
      url: 'http://localhost:4566',
      variable: 'AWS_ENDPOINT_URL',
    });
    const both = { ...syncEnv, AWS_ENDPOINT_URL: 'http://localhost:4566', AWS_ENDPOINT_URL_S3: ' http://127.0.0.1:9000 ' };
    expect(loadSyncConfig(both).s3Endpoint).toEqual({ url: 'http://127.0.0.1:9000', variable: 'AWS_ENDPOINT_URL_S3' });
    expect(loadSyncConfig({ ...both, AWS_ENDPOINT_URL_S3: ' ' }).s3Endpoint).toEqual({ url: 'http://localhost:4566', variable: 'AWS_ENDPOINT_URL' });
    expect(loadSyncConfig({ ...both, AWS_IGNORE_CONFIGURED_ENDPOINT_URLS: 'true' }).s3Endpoint).toBeUndefined();
    expect(loadSyncConfig({ ...both, AWS_IGNORE_CONFIGURED_ENDPOINT_URLS: 'false' }).s3Endpoint?.variable).toBe('AWS_ENDPOINT_URL_S3');
  });

  it.each([
    ['AWS_ENDPOINT_URL_S3', 'localhost:4566'],
    ['AWS_ENDPOINT_URL_S3', 'ftp://localhost:21'],
    ['AWS_ENDPOINT_URL', 'not a url'],
  ])('rejects %s=%s naming the variable', (key, value) => {
    const error = errorOf(() => loadSyncConfig({ ...syncEnv, [key]: value }));
    expect(error.key).toBe(key);
    expect(error.message).toBe(`${key}: must be an http(s) URL, got "${value}"`);
  });
});
