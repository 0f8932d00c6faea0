/**
 * The changes table in the local system, as the stacks deploy it: the storage creates it with the
 * stateful stack's key schema (infra/storage/changes-table.ts; no time to live: DynamoDB Local has none),
 * and the local changes writer, client API and eraser get its name (the writer alone
 * changesRetentionDays) from infra/deployment.ts, read by the functions' own loaders; the item sync
 * writes rows only.
 */
import { DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import { inProcessAws } from '../../../dev/system/aws.js';
import { localNames } from '../../../dev/system/names.js';
import { startStorage } from '../../../dev/system/storage.js';
import { buildSystem } from '../../../dev/system/system.js';
import { loadApiConfig, loadEraserConfig } from '../../../functions/shared/client-config.js';
import { ENV, loadChangesWriterConfig } from '../../../functions/shared/config.js';
import { CHANGES_TABLE_PARTITION_KEY, CHANGES_TABLE_SORT_KEY } from '../../../infra/storage/changes-table.js';

describe('the changes table in the local system', () => {
  it('is created with the stack\'s key schema, on demand, and named to the changes writer, the client API and the eraser as deployed', async () => {
    const names = localNames('changes-wiring');
    const storage = await startStorage(names);
    const system = buildSystem({ names, aws: inProcessAws(), storage });
    const client = storage.dynamo.client();
    try {
      expect(names.changesTable).toBe('changes-wiring-changes');
      const { Table: table } = await client.send(new DescribeTableCommand({ TableName: names.changesTable }));
      expect(table?.KeySchema).toEqual([
        { AttributeName: CHANGES_TABLE_PARTITION_KEY, KeyType: 'HASH' },
        { AttributeName: CHANGES_TABLE_SORT_KEY, KeyType: 'RANGE' },
      ]);
      expect(table?.AttributeDefinitions).toEqual([
        { AttributeName: CHANGES_TABLE_PARTITION_KEY, AttributeType: 'S' },
        { AttributeName: CHANGES_TABLE_SORT_KEY, AttributeType: 'N' },
      ]);
      expect(table?.BillingModeSummary?.BillingMode).toBe('PAY_PER_REQUEST');
      expect(table?.GlobalSecondaryIndexes).toBeUndefined();
      expect(table?.LocalSecondaryIndexes).toBeUndefined();
      expect(table?.StreamSpecification).toBeUndefined();
      // Started again on the same storage (a local run that restarts): the table is kept.
      await storage.dynamo.createChangesTable(names.changesTable);

      // cdk.json's changesRetentionDays (35), as the stacks give it.
      const { deployment } = system;
      expect(system.config.changesRetentionDays).toBe(35);
      expect(loadChangesWriterConfig(deployment.changesWriter.environment)).toMatchObject({
        changesTableName: names.changesTable,
        changesRetentionDays: 35,
        connectionsTableName: names.connectionsTable,
      });
      expect(loadApiConfig(deployment.api.environment).changesTableName).toBe(names.changesTable);
      expect(deployment.api.environment).not.toHaveProperty(ENV.changesRetentionDays);
      expect(loadEraserConfig(deployment.eraser.environment).changesTableName).toBe(names.changesTable);
      expect(deployment.eraser.environment).not.toHaveProperty(ENV.changesRetentionDays);
      for (const fn of [deployment.refresher, deployment.sync, deployment.changeEvents, deployment.reconciler!]) {
        expect(fn.environment).not.toHaveProperty(ENV.changesTableName);
        expect(fn.environment).not.toHaveProperty(ENV.changesRetentionDays);
      }
    } finally {
      client.destroy();
      await system.close();
    }
  });

  it('follows a scenario\'s changesRetentionDays, as a deployment follows the context key', async () => {
    const names = localNames('changes-retention');
    const storage = await startStorage(names, { noBucket: true });
    const system = buildSystem({ names, context: { changesRetentionDays: 7 }, aws: inProcessAws(), storage });
    try {
      expect(loadChangesWriterConfig(system.deployment.changesWriter.environment).changesRetentionDays).toBe(7);
      expect(system.deployment.api.environment).not.toHaveProperty(ENV.changesRetentionDays);
    } finally {
      await system.close();
    }
  });
});
