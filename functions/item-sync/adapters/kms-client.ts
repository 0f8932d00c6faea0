/**
 * The item sync's KMS client, in a module of its own (functions/item-sync/lazy-modules.ts): the
 * handler imports it when it first opens a connection's token, so the KMS client is not part of
 * the cold start's index.mjs.
 */
import { KMSClient } from '@aws-sdk/client-kms';

export function createKmsClient(): KMSClient {
  return new KMSClient({});
}
