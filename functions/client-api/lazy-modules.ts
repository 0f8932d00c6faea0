/**
 * Modules the client API imports only when it needs them (`import()` of these paths, relative to
 * this folder), bundled on their own next to index.mjs (infra/constructs/content-sync-function.ts,
 * `lazyModules`): the S3 client and its URL signer, for an item held in the items bucket. No imports
 * here: the CDK app reads this list.
 */
export const OBJECT_LINKS_MODULE = './adapters/s3-object-links.js';

export const CLIENT_API_LAZY_MODULES: readonly string[] = [OBJECT_LINKS_MODULE];
