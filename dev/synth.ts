/**
 * The content-sync app synthesized outside the CDK CLI, built exactly as infra/app.ts builds it
 * (cdk.json's context and feature flags, the cdk-nag plugin), with a placeholder provider address
 * and, unless asked, no bundling (`aws:cdk:bundling-stacks: []`: esbuild costs seconds a stack, and
 * no template depends on what the bundles hold). The tests (test/infra/helpers.ts) and the
 * development scripts (dev/cost/idle-cost.ts) take the context from here, so both synthesize what
 * `cdk synth` would.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { buildContentSyncApp } from '../infra/content-sync-app.js';

/** The `context` of cdk.json: defaults, cli-telemetry and the feature flags. */
export const CDK_JSON_CONTEXT: Record<string, unknown> = JSON.parse(readFileSync(new URL('../cdk.json', import.meta.url), 'utf8')).context;

/** The provider address a synthesis without one is given (cdk.json has none: it is the one required key). */
export const BASE_URL = 'https://example.com/api';

export interface BuildOptions {
  /** Real esbuild bundles (slow); default false. */
  bundle?: boolean;
}

/** Context for the app: cdk.json's, `baseUrl`, then `overrides` (an `undefined` value removes a key). */
export function contextFor(overrides: Record<string, unknown> = {}, options: BuildOptions = {}): Record<string, unknown> {
  const context: Record<string, unknown> = { ...CDK_JSON_CONTEXT, baseUrl: BASE_URL };
  if (!options.bundle) context['aws:cdk:bundling-stacks'] = [];
  for (const [key, value] of Object.entries(overrides)) {
    if (value === undefined) delete context[key];
    else context[key] = value;
  }
  return context;
}

/** A synthesized CloudFormation template, as far as a reader of its resources needs it. */
export interface CfnTemplate {
  Resources?: Record<string, { Type: string; Properties?: Record<string, unknown> }>;
}

/**
 * Both stacks' templates (stateful, then stateless) for cdk.json's context with `overrides`, without
 * bundling; the cloud assembly is written to a temporary folder and removed.
 */
export function synthesizeTemplates(overrides: Record<string, unknown> = {}): CfnTemplate[] {
  const outdir = mkdtempSync(join(tmpdir(), 'content-sync-synth-'));
  try {
    const app = new App({ context: contextFor(overrides), outdir });
    const { stateful, stateless } = buildContentSyncApp(app);
    const assembly = app.synth();
    return [stateful, stateless].map((stack) => assembly.getStackByName(stack.stackName).template as CfnTemplate);
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}
