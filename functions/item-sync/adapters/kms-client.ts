/**
 * The item sync's KMS client and commands, in a module of its own (functions/item-sync/lazy-modules.ts):
 * the handler imports it when it first opens a connection's token, so neither the KMS client nor
 * its commands are part of the cold start's index.mjs.
 */
import { kmsApi } from '../../shared/adapters/kms-api.js';
import type { KmsApi } from '../../shared/adapters/kms-data-keys.js';

export function createKmsApi(): KmsApi {
  return kmsApi();
}
