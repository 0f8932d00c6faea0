/**
 * The one in-process synth with real esbuild bundles: every function's asset exists in the cloud
 * assembly as minified ESM with a source map and the AWS SDK inside (but for the credential sources
 * Lambda never loads, imported lazily), under the 400 KB goal, and each loads in Node and exports
 * `handler` (which proves the createRequire banner and the bundling of every dependency). The item
 * sync's S3 client is a module of its own next to its index.mjs, loaded when needed: checked too.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { runProcess } from '../../dev/fakes/loopback.js';
import { ENV } from '../../functions/shared/config.js';
import { ITEM_SYNC_LAZY_MODULES, KMS_CLIENT_MODULE, S3_ITEM_OBJECT_STORE_MODULE } from '../../functions/item-sync/lazy-modules.js';
import { LAMBDA_UNUSED_CREDENTIAL_SOURCES } from '../../infra/constructs/content-sync-function.js';
import { buildApp, resource, ROOT } from './helpers.js';
import { Template } from 'aws-cdk-lib/assertions';

const bundles: Record<string, string> = {};

/** Each bundle, and an AWS API name its bundled SDK client holds. */
const SDK_CALLS: Record<string, string> = {
  TokenRefresherFunction: 'DynamoDB_20120810',
  ItemSyncFunction: 'DynamoDB_20120810',
  ChangeEventsFunction: 'PutEvents',
  // Its one client: the changes and connections tables.
  ChangesWriterFunction: 'DynamoDB_20120810',
  ReconcilerFunction: 'SendMessageBatch',
  ClientApiFunction: 'GenerateDataKey',
  ConnectionEraserFunction: 'BatchWriteItem',
};

beforeAll(() => {
  const built = buildApp({}, { bundle: true });
  const template = Template.fromStack(built.stateless);
  const assembly = built.app.synth();
  for (const prefix of Object.keys(SDK_CALLS)) {
    const key = resource(template, 'AWS::Lambda::Function', prefix).Properties['Code'].S3Key as string;
    bundles[prefix] = join(assembly.directory, `asset.${key.replace(/\.zip$/, '')}`);
  }
});

const ENVIRONMENT: Record<string, string> = {
  [ENV.baseUrl]: 'https://example.com/api',
  [ENV.connectionsTableName]: 'connections-table',
  [ENV.connectionsKeyArn]: 'arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab',
  [ENV.tokenRefreshMinutes]: '30',
  [ENV.paceScope]: 'client',
  [ENV.itemsTableName]: 'items-table',
  [ENV.itemsBucketName]: 'items-bucket',
  [ENV.changesTableName]: 'changes-table',
  [ENV.changesRetentionDays]: '35',
  [ENV.revisionField]: 'revision',
  [ENV.deadLetterQueueUrl]: 'https://sqs.eu-west-1.amazonaws.com/123456789012/dlq',
  [ENV.controlTableName]: 'control-table',
  [ENV.reconcileQueueUrl]: 'https://sqs.eu-west-1.amazonaws.com/123456789012/reconcile',
  [ENV.eventBusName]: 'arn:aws:events:eu-west-1:123456789012:event-bus/change-events',
  [ENV.syncQueueUrl]: 'https://sqs.eu-west-1.amazonaws.com/123456789012/sync',
  [ENV.eraseQueueUrl]: 'https://sqs.eu-west-1.amazonaws.com/123456789012/erase',
  [ENV.freshnessHours]: '24',
  [ENV.eraseSettleSeconds]: '150',
};

/**
 * Runs `script` as an ES module in a new Node process with only the contract environment, to its
 * end however long that takes (the test run's hang guard is the only limit).
 */
function loadInNode(script: string) {
  return runProcess(process.execPath, ['--enable-source-maps', '--input-type=module', '-e', script], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, AWS_REGION: 'eu-west-1', AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', ...ENVIRONMENT },
  });
}

describe.each(Object.keys(SDK_CALLS))('%s bundle', (prefix) => {
  it('is a minified ESM index.mjs with a linked source map', () => {
    const dir = bundles[prefix]!;
    const code = readFileSync(join(dir, 'index.mjs'), 'utf8');
    expect(existsSync(join(dir, 'index.mjs.map'))).toBe(true);
    expect(code.trimEnd().endsWith('//# sourceMappingURL=index.mjs.map')).toBe(true);
    expect(code.startsWith("import { createRequire as __contentSyncCreateRequire } from 'node:module';")).toBe(true);
    // Minified: few, long lines.
    expect(code.split('\n').length).toBeLessThan(200);
    expect(statSync(join(dir, 'index.mjs')).size).toBeLessThan(3 * 1024 * 1024);
    // The AWS SDK and Powertools are bundled, not imported from the runtime (error texts may still name packages).
    const external = /(?:^|[;}\s])import\s*(?:[\w$*{},\s]+from\s*)?["'](@aws-sdk|@aws-lambda-powertools)\/|__require\(["'](@aws-sdk|@aws-lambda-powertools)\//m;
    expect(external.exec(code)?.[0]).toBeUndefined();
    expect(code).toContain(SDK_CALLS[prefix]!);
  });

  it('leaves out only the credential sources Lambda never uses, as dynamic imports, and stays under 400 KB', () => {
    const code = readFileSync(join(bundles[prefix]!, 'index.mjs'), 'utf8');
    const packages = /["']((?:@aws-sdk|@smithy|@aws-lambda-powertools)\/[^"']+)/.source;
    const dynamic = [...code.matchAll(new RegExp(`import\\(\\s*${packages}["']\\s*\\)`, 'g'))].map((match) => match[1]!);
    expect(dynamic.length).toBeGreaterThan(0);
    for (const name of dynamic) {
      expect(LAMBDA_UNUSED_CREDENTIAL_SOURCES.some((source) => name === source || name.startsWith(`${source}/`)), name).toBe(true);
    }
    // A static import of one of them would fail at load (they are not in the bundle).
    const staticImport = new RegExp(`(?:from|import)\\s*${packages}["']|require\\(\\s*${packages}`);
    // The SDK's multi-region signer (EventBridge, S3) quotes both forms in error messages (install
    // signature-v4-crt or signature-v4a): text, not code.
    const signerAdvice = /\[require\((["'])@aws-sdk\/signature-v4(?:-crt|a)\1\);\] or an ESM equivalent such as \[import (["'])@aws-sdk\/signature-v4(?:-crt|a)\2;\]/g;
    expect(staticImport.exec(code.replace(signerAdvice, ''))?.[0]).toBeUndefined();
    expect(statSync(join(bundles[prefix]!, 'index.mjs')).size).toBeLessThan(400_000);
  });

  it('loads in Node with the contract environment and exports handler', async () => {
    const url = pathToFileURL(join(bundles[prefix]!, 'index.mjs')).href;
    const result = await loadInNode(`const m = await import(${JSON.stringify(url)}); console.log(typeof m.handler);`);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout.trim()).toBe('function');
  });
});

describe('the item sync lazy module (its S3 client, loaded when the first item too large for a row comes)', () => {
  const dir = () => bundles['ItemSyncFunction']!;
  const chunk = () => join(dir(), S3_ITEM_OBJECT_STORE_MODULE);

  it('is left out of index.mjs, which imports it by its path when needed and holds no S3 client', () => {
    expect(ITEM_SYNC_LAZY_MODULES).toEqual(['./adapters/s3-item-object-store.js', KMS_CLIENT_MODULE]);
    const code = readFileSync(join(dir(), 'index.mjs'), 'utf8');
    expect(code).toContain(`import("${S3_ITEM_OBJECT_STORE_MODULE}")`);
    expect(code).not.toContain('com.amazonaws.s3');
    expect(code).not.toContain('PutObject');
  });

  it('its KMS client and commands are a module of its own too, loaded when a token is first opened', () => {
    const code = readFileSync(join(dir(), 'index.mjs'), 'utf8');
    expect(code).toContain(`import("${KMS_CLIENT_MODULE}")`);
    // The KMS API's namespace, in its client's and its commands' schemas: none of them in index.mjs.
    expect(code).not.toContain('com.amazonaws.kms');
    const kms = readFileSync(join(dir(), KMS_CLIENT_MODULE), 'utf8');
    expect(kms).toContain('createKmsApi');
    expect(kms).toContain('com.amazonaws.kms');
    expect(statSync(join(dir(), KMS_CLIENT_MODULE)).size).toBeLessThan(400_000);
  });

  it('is a minified ES module next to it (with a source map and the banner), the SDK inside but for the credential sources, under 400 KB', () => {
    const code = readFileSync(chunk(), 'utf8');
    expect(JSON.parse(readFileSync(join(dirname(chunk()), 'package.json'), 'utf8'))).toEqual({ type: 'module' });
    expect(existsSync(`${chunk()}.map`)).toBe(true);
    expect(code.startsWith("import { createRequire as __contentSyncCreateRequire } from 'node:module';")).toBe(true);
    expect(code.split('\n').length).toBeLessThan(200);
    expect(code).toContain('com.amazonaws.s3');
    const packages = /["']((?:@aws-sdk|@smithy|@aws-lambda-powertools)\/[^"']+)/.source;
    for (const match of code.matchAll(new RegExp(`import\\(\\s*${packages}["']\\s*\\)`, 'g'))) {
      expect(LAMBDA_UNUSED_CREDENTIAL_SOURCES.some((source) => match[1] === source || match[1]!.startsWith(`${source}/`)), match[1]).toBe(true);
    }
    const signerAdvice = /\[require\((["'])@aws-sdk\/signature-v4(?:-crt|a)\1\);\] or an ESM equivalent such as \[import (["'])@aws-sdk\/signature-v4(?:-crt|a)\2;\]/g;
    const staticImport = new RegExp(`(?:from|import)\\s*${packages}["']|require\\(\\s*${packages}`);
    expect(staticImport.exec(code.replace(signerAdvice, ''))?.[0]).toBeUndefined();
    expect(statSync(chunk()).size).toBeLessThan(400_000);
  });

  it('loads in Node after index.mjs and makes the items bucket store', async () => {
    const script = [
      `const m = await import(${JSON.stringify(pathToFileURL(join(dir(), 'index.mjs')).href)});`,
      `const s = await import(${JSON.stringify(pathToFileURL(chunk()).href)});`,
      "const store = s.createS3ItemObjectStore('items-bucket');",
      'console.log(typeof m.handler, store.bucketName, typeof store.put, typeof store.delete);',
    ].join(' ');
    const result = await loadInNode(script);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout.trim()).toBe('function items-bucket function function');
  });
});
