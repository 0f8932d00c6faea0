/**
 * The deployed bundles, built as the CDK construct builds them, and their cold import time.
 *
 * infra/constructs/content-sync-function.ts gives NodejsFunction these bundling options, which
 * aws-cdk-lib turns into `esbuild --bundle <entry> --target=node22 --platform=node --format=esm
 * --outfile=index.mjs --minify --sourcemap --sources-content=false --banner:js=<ESM_REQUIRE_BANNER>
 * --main-fields=module,main --external:<each of LAMBDA_UNUSED_CREDENTIAL_SOURCES>` (the SDK is bundled
 * but for the credential sources Lambda never loads). The same options are given to esbuild's JS API
 * here; the banner and the externals are imported from the construct so they cannot drift. A
 * function's lazy modules (the item sync's S3 client: ITEM_SYNC_LAZY_MODULES) are left out of its
 * index.mjs and bundled on their own next to it, as the construct does; their sizes are reported
 * (the cold import does not load them).
 *
 * Cold import: a fresh `node` process (NODE_OPTIONS=--enable-source-maps, as the construct sets)
 * with the function's deployed environment (infra/deployment.ts) imports the bundle; the time of the import() itself is measured
 * inside the child (module parse, evaluation, configuration, SDK client construction), plus the
 * child's whole wall time. The machine's Node.js runs it (Lambda runs Node.js 22).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { ITEM_SYNC_LAZY_MODULES } from '../../../functions/item-sync/lazy-modules.js';
import { functionDeployments, type ResourceNames } from '../../../infra/deployment.js';
import { systemConfig } from '../../system/config.js';
import { REPO_ROOT } from './machine.js';
import { summarize, type Summary } from './stats.js';

interface BundleSpec {
  name: string;
  /** Entry relative to the repository root. */
  entry: string;
  /** Environment the module needs to load (its configuration is read at import). */
  env: Record<string, string>;
  /** Modules it imports only when needed, as written in its entry's folder (the construct's lazyModules). */
  lazyModules?: readonly string[];
}

/** Where a deployment's resources would be (the environments name them; nothing is reached). */
const EXAMPLE_RESOURCES: ResourceNames = {
  itemsTableName: 'content-sync-items',
  itemsBucketName: 'content-sync-items-bucket',
  controlTableName: 'content-sync-control',
  changesTableName: 'content-sync-changes',
  deadLetterQueueUrl: 'https://sqs.eu-west-1.amazonaws.com/000000000000/content-sync-dead-letters',
  reconcileQueueUrl: 'https://sqs.eu-west-1.amazonaws.com/000000000000/content-sync-reconcile',
  connectionsTableName: 'content-sync-connections',
  eventBusName: 'arn:aws:events:eu-west-1:000000000000:event-bus/content-sync-change-events',
  connectionsKeyArn: 'arn:aws:kms:eu-west-1:000000000000:key/00000000-0000-4000-8000-000000000000',
  syncQueueUrl: 'https://sqs.eu-west-1.amazonaws.com/000000000000/content-sync-sync',
  eraseQueueUrl: 'https://sqs.eu-west-1.amazonaws.com/000000000000/content-sync-erase',
};

/** Each function's environment as the stacks deploy it (infra/deployment.ts) for cdk.json's context and a provider. */
function bundles(): BundleSpec[] {
  const deployed = functionDeployments(systemConfig({ baseUrl: 'https://provider.example.com/api/v2' }), EXAMPLE_RESOURCES);
  if (!deployed.reconciler) throw new Error('cdk.json deploys no reconciler (freshnessHours 0)');
  const withService = (environment: Readonly<Record<string, string>>, service: string): Record<string, string> => ({
    ...environment,
    POWERTOOLS_SERVICE_NAME: service,
  });
  return [
    { name: 'token-refresher', entry: 'functions/token-refresher/handler.ts', env: withService(deployed.refresher.environment, 'token-refresher') },
    {
      name: 'item-sync',
      entry: 'functions/item-sync/handler.ts',
      env: withService(deployed.sync.environment, 'item-sync'),
      lazyModules: ITEM_SYNC_LAZY_MODULES,
    },
    { name: 'change-events', entry: 'functions/change-events/handler.ts', env: withService(deployed.changeEvents.environment, 'change-events') },
    { name: 'reconciler', entry: 'functions/reconciler/handler.ts', env: withService(deployed.reconciler.environment, 'reconciler') },
  ];
}

export interface BundleResult {
  name: string;
  entry: string;
  file: string;
  bytes: number;
  sourceMapBytes: number;
  /** Each lazy module bundled next to index.mjs, and its size. */
  lazyModules: Array<{ module: string; bytes: number }>;
  /** import() of the bundle inside a fresh process, ms. */
  importMs: Summary;
  /** The fresh process from spawn to exit (Node.js start-up + import), ms. */
  processMs: Summary;
}

/** The construct's ESM banner and external modules; read from the construct itself (importing it loads aws-cdk-lib). */
async function constructBundling(): Promise<ConstructBundling> {
  const construct = (await import('../../../infra/constructs/content-sync-function.js')) as {
    ESM_REQUIRE_BANNER?: string;
    LAMBDA_UNUSED_CREDENTIAL_SOURCES?: readonly string[];
  };
  if (typeof construct.ESM_REQUIRE_BANNER !== 'string' || !Array.isArray(construct.LAMBDA_UNUSED_CREDENTIAL_SOURCES)) {
    throw new Error(
      'infra/constructs/content-sync-function.ts no longer exports ESM_REQUIRE_BANNER and LAMBDA_UNUSED_CREDENTIAL_SOURCES: update dev/bench/support/bundles.ts',
    );
  }
  return { banner: construct.ESM_REQUIRE_BANNER, external: [...construct.LAMBDA_UNUSED_CREDENTIAL_SOURCES] };
}

interface ConstructBundling {
  banner: string;
  external: string[];
}

async function buildBundle(
  spec: BundleSpec,
  outDir: string,
  bundling: ConstructBundling,
): Promise<{ file: string; bytes: number; sourceMapBytes: number; lazyModules: Array<{ module: string; bytes: number }> }> {
  const dir = join(outDir, spec.name);
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'index.mjs');
  const lazy = spec.lazyModules ?? [];
  await bundle(join(REPO_ROOT, spec.entry), file, bundling, lazy);
  const lazyModules: Array<{ module: string; bytes: number }> = [];
  for (const module of lazy) {
    // As the construct builds it: its own bundle at that path next to index.mjs.
    const out = join(dir, module);
    await bundle(join(REPO_ROOT, dirname(spec.entry), module.replace(/\.js$/, '.ts')), out, bundling, []);
    lazyModules.push({ module, bytes: statSync(out).size });
  }
  return { file, bytes: statSync(file).size, sourceMapBytes: statSync(`${file}.map`).size, lazyModules };
}

async function bundle(entry: string, outfile: string, bundling: ConstructBundling, lazy: readonly string[]): Promise<void> {
  await build({
    entryPoints: [entry],
    absWorkingDir: REPO_ROOT,
    bundle: true,
    target: 'node22',
    platform: 'node',
    format: 'esm',
    outfile,
    minify: true,
    sourcemap: true,
    sourcesContent: false,
    external: [...bundling.external, ...lazy],
    banner: { js: bundling.banner },
    mainFields: ['module', 'main'],
    logLevel: 'silent',
  });
}

/** One cold import in a fresh process. */
async function coldImport(file: string, env: Record<string, string>): Promise<{ importMs: number; processMs: number }> {
  const script =
    'const t = performance.now(); ' +
    `const m = await import(${JSON.stringify(pathToFileURL(file).href)}); ` +
    'const ms = performance.now() - t; ' +
    "if (typeof m.handler !== 'function') throw new Error('no handler export'); " +
    'process.stdout.write(JSON.stringify({ importMs: ms }));';
  const started = performance.now();
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    env: {
      PATH: process.env['PATH'] ?? '',
      AWS_REGION: 'eu-west-1',
      AWS_ACCESS_KEY_ID: 'bench',
      AWS_SECRET_ACCESS_KEY: 'bench',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      POWERTOOLS_LOG_LEVEL: 'INFO',
      NODE_OPTIONS: '--enable-source-maps',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString('utf8')));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  const processMs = performance.now() - started;
  if (code !== 0) throw new Error(`cold import of ${file} failed (exit ${code}): ${err.slice(0, 500)}`);
  const { importMs } = JSON.parse(out) as { importMs: number };
  return { importMs, processMs };
}

export async function measureBundles(outDir: string, runs: number, progress?: (line: string) => void): Promise<BundleResult[]> {
  const bundling = await constructBundling();
  const results: BundleResult[] = [];
  for (const spec of bundles()) {
    const built = await buildBundle(spec, outDir, bundling);
    const imports: number[] = [];
    const processes: number[] = [];
    await coldImport(built.file, spec.env); // the first run also warms the file system cache
    for (let run = 0; run < runs; run += 1) {
      const { importMs, processMs } = await coldImport(built.file, spec.env);
      imports.push(importMs);
      processes.push(processMs);
    }
    const lazy = built.lazyModules.map((m) => `; ${m.module} ${m.bytes} bytes, loaded when needed`).join('');
    progress?.(`  bundle ${spec.name}: ${built.bytes} bytes${lazy}, cold import ${summarize(imports).median.toFixed(0)} ms`);
    results.push({ name: spec.name, entry: spec.entry, ...built, importMs: summarize(imports), processMs: summarize(processes) });
  }
  return results;
}
