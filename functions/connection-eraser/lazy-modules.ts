/**
 * Modules the eraser imports only when it needs them (`import()` of these paths, relative to this
 * folder), bundled on their own next to index.mjs (infra/constructs/content-sync-function.ts,
 * `lazyModules`). No imports here: the CDK app reads this list.
 */
export const S3_CLIENT_MODULE = './adapters/s3-client.js';

export const ERASER_LAZY_MODULES: readonly string[] = [S3_CLIENT_MODULE];
