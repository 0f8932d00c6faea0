/**
 * Modules the item sync imports only when it needs them (`import()` of these paths, relative to
 * this folder): its Lambda bundle leaves each out of index.mjs and bundles it on its own next to
 * it (infra/constructs/content-sync-function.ts, `lazyModules`), so that the cold start does not
 * load code most invocations never run. The S3 client alone weighs more than 150 KB minified and
 * is needed only for items too large for a row. No imports here: the CDK app reads this list.
 */
export const S3_ITEM_OBJECT_STORE_MODULE = './adapters/s3-item-object-store.js';

/** The KMS client and its two commands open a connection's tokens: needed once per connection and container, after the cold start's first read. */
export const KMS_CLIENT_MODULE = './adapters/kms-client.js';

export const ITEM_SYNC_LAZY_MODULES: readonly string[] = [S3_ITEM_OBJECT_STORE_MODULE, KMS_CLIENT_MODULE];
