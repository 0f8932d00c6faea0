/**
 * The KMS API the data keys use (kms-data-keys.ts KmsApi): a client and the SDK's two commands.
 * The functions that seal or open tokens at every run import it; the item sync only from its
 * lazily loaded KMS module (functions/item-sync/adapters/kms-client.ts).
 */
import { DecryptCommand, GenerateDataKeyCommand, KMSClient } from '@aws-sdk/client-kms';
import type { KmsApi } from './kms-data-keys.js';
import { withoutSdkLogger } from './sdk-client.js';

export function kmsApi(client: KMSClient = withoutSdkLogger(new KMSClient({}))): KmsApi {
  return { client, DecryptCommand, GenerateDataKeyCommand };
}
