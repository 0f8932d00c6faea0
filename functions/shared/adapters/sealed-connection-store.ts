/**
 * The connections table as every function and the CLI use it: the DynamoDB adapter
 * (dynamodb-connection-store.ts) with each token sealed under the operator's KMS key
 * (CONNECTIONS_KEY_ARN: kms-data-keys.ts, functions/shared/connections/sealing.ts). Built once per
 * container, so the opened tokens' cache lives as long as the container.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { TokenSealer } from '../connections/sealing.js';
import { DynamoDbConnectionStore } from './dynamodb-connection-store.js';
import { KmsDataKeys, type KmsClientSource } from './kms-data-keys.js';

export interface SealedStoreDeps {
  dynamodb: DynamoDBClient;
  kms: KmsClientSource;
  config: { connectionsTableName: string; connectionsKeyArn: string };
  /** What names the table in errors (default CONNECTIONS_TABLE_NAME). */
  setting?: string;
}

export function sealedConnectionStore(deps: SealedStoreDeps): DynamoDbConnectionStore {
  const sealer = new TokenSealer(new KmsDataKeys(deps.kms, deps.config.connectionsKeyArn));
  return new DynamoDbConnectionStore(deps.dynamodb, deps.config.connectionsTableName, { sealer, ...(deps.setting !== undefined ? { setting: deps.setting } : {}) });
}
