/**
 * The local system turns discovery on through the same context as the stacks (dev/system/config.ts
 * → infra/context.ts → infra/deployment.ts): the sync container's environment carries the paths
 * and the local reconcile queue's URL, and the function's own loader reads them.
 */
import { describe, expect, it } from 'vitest';
import { inProcessAws } from '../../../dev/system/aws.js';
import { systemConfig } from '../../../dev/system/config.js';
import { localDeployment, resourceNames } from '../../../dev/system/deployment.js';
import { localNames } from '../../../dev/system/names.js';
import { startStorage } from '../../../dev/system/storage.js';
import { buildSystem } from '../../../dev/system/system.js';
import { loadSyncConfig } from '../../../functions/shared/config.js';

const queues = { syncDeadLetterQueueUrl: 'http://127.0.0.1:1/queue/sync-dlq', reconcileQueueUrl: 'http://127.0.0.1:1/queue/reconcile', connectionsKeyArn: 'arn:aws:kms:eu-west-1:000000000000:key/00000000-0000-4000-8000-000000000000' };

describe('discovery in the local system', () => {
  it('a scenario\'s context override turns it on, the reconcile queue given to the sync as deployed', () => {
    const config = systemConfig({ childrenPath: 'children', childRevisionPath: 'revision', childrenTotalPath: 'total' });
    const sync = localDeployment(config, resourceNames(localNames('t'), queues)).sync;
    expect(loadSyncConfig(sync.environment).discovery).toEqual({
      childrenPath: 'children',
      childIdPath: 'id',
      childRevisionPath: 'revision',
      childrenTotalPath: 'total',
      queueUrl: queues.reconcileQueueUrl,
    });
  });

  it('off by default (cdk.json holds no childrenPath)', () => {
    const sync = localDeployment(systemConfig(), resourceNames(localNames('t'), queues)).sync;
    expect(loadSyncConfig(sync.environment).discovery).toBeUndefined();
  });
});

describe('the local system built with discovery on', () => {
  it('has the reconcile queue even with freshnessHours 0 (as deployed), and gives the sync its URL', async () => {
    const names = localNames('discovery-wiring');
    const storage = await startStorage(names, { noBucket: true });
    const aws = inProcessAws();
    const on = buildSystem({ names, context: { freshnessHours: 0, childrenPath: 'children' }, aws, storage });
    try {
      expect(on.queues.reconcile).toBeDefined();
      expect(on.deployment.reconciler).toBeUndefined();
      expect(loadSyncConfig(on.deployment.sync.environment).discovery?.queueUrl).toBe(on.queues.reconcile!.url);
      const off = buildSystem({ names: localNames('discovery-off'), context: { freshnessHours: 0 }, aws: inProcessAws(), storage });
      expect(off.queues.reconcile).toBeUndefined();
      await off.aws.close();
    } finally {
      await on.close();
    }
  });
});
