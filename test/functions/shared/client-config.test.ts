/**
 * The client API's and the eraser's loaders (functions/shared/client-config.ts): the changes table
 * they are given (the client API: its name and retention; the eraser: its name), each variable
 * required and named by the error when missing or malformed.
 */
import { describe, expect, it } from 'vitest';
import { loadApiConfig, loadEraserConfig } from '../../../functions/shared/client-config.js';
import { ConfigError } from '../../../functions/shared/errors.js';

const KEY_ARN = 'arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab';
const QUEUE = 'https://sqs.eu-west-1.amazonaws.com/123456789012';

const apiEnv = {
  CONNECTIONS_TABLE_NAME: 'connections',
  CONNECTIONS_KEY_ARN: KEY_ARN,
  ITEMS_TABLE_NAME: 'items',
  ITEMS_BUCKET_NAME: 'items-bucket',
  CHANGES_TABLE_NAME: 'changes',
  CONTROL_TABLE_NAME: 'control',
  SYNC_QUEUE_URL: `${QUEUE}/sync`,
  RECONCILE_QUEUE_URL: `${QUEUE}/reconcile`,
  ERASE_QUEUE_URL: `${QUEUE}/erase`,
  ERASE_SETTLE_SECONDS: '150',
};

const eraserEnv = {
  CONNECTIONS_TABLE_NAME: 'connections',
  ITEMS_TABLE_NAME: 'items',
  ITEMS_BUCKET_NAME: 'items-bucket',
  CHANGES_TABLE_NAME: 'changes',
  ERASE_QUEUE_URL: `${QUEUE}/erase`,
};

function errorOf(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('loadApiConfig', () => {
  it('reads every variable the stack sets, the changes table among them', () => {
    expect(loadApiConfig(apiEnv)).toEqual({
      connectionsTableName: 'connections',
      connectionsKeyArn: KEY_ARN,
      itemsTableName: 'items',
      itemsBucketName: 'items-bucket',
      changesTableName: 'changes',
      controlTableName: 'control',
      syncQueueUrl: `${QUEUE}/sync`,
      reconcileQueueUrl: `${QUEUE}/reconcile`,
      eraseQueueUrl: `${QUEUE}/erase`,
      freshnessHours: 24,
      eraseSettleSeconds: 150,
      s3Endpoint: undefined,
      stage: undefined,
    });
    // The feed reads each change's own expiry: the retention is the item sync's alone.
    expect(loadApiConfig({ ...apiEnv, CHANGES_RETENTION_DAYS: 'ignored' })).not.toHaveProperty('changesRetentionDays');
  });

  it.each([
    ['CHANGES_TABLE_NAME', undefined, 'CHANGES_TABLE_NAME: is required but not set'],
    ['CHANGES_TABLE_NAME', ' ', 'CHANGES_TABLE_NAME: is required but not set'],
    // ERASE_SETTLE_SECONDS, required in the same way.
    ['ERASE_SETTLE_SECONDS', undefined, 'ERASE_SETTLE_SECONDS: is required but not set'],
    ['ERASE_SETTLE_SECONDS', '4601', 'ERASE_SETTLE_SECONDS: must be a whole number from 0 to 4600, got 4601'],
  ])('%s %j fails the start naming the variable', (key, value, message) => {
    const error = errorOf(() => loadApiConfig({ ...apiEnv, [key]: value }));
    expect(error.key).toBe(key);
    expect(error.message).toBe(message);
  });
});

describe('loadEraserConfig', () => {
  it('reads the changes table\'s name (not its retention: the eraser deletes every row of a connection)', () => {
    expect(loadEraserConfig(eraserEnv)).toEqual({
      connectionsTableName: 'connections',
      itemsTableName: 'items',
      itemsBucketName: 'items-bucket',
      changesTableName: 'changes',
      eraseQueueUrl: `${QUEUE}/erase`,
      stage: undefined,
    });
    expect(loadEraserConfig({ ...eraserEnv, CHANGES_RETENTION_DAYS: 'ignored' }).changesTableName).toBe('changes');
  });

  it.each([undefined, '', '  '])('CHANGES_TABLE_NAME %j fails the start naming the variable', (value) => {
    const error = errorOf(() => loadEraserConfig({ ...eraserEnv, CHANGES_TABLE_NAME: value }));
    expect(error.key).toBe('CHANGES_TABLE_NAME');
    expect(error.message).toBe('CHANGES_TABLE_NAME: is required but not set');
  });
});
