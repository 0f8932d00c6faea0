/**
 * Builds the content-sync app exactly as infra/app.ts does (same cdk.json context and feature
 * flags, same cdk-nag plugin: the context of dev/synth.ts), with test context on top. Bundling is
 * skipped unless asked for: the assets are not under test in most files and esbuild costs seconds
 * per stack.
 */
import { mkdirSync, mkdtempSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { expect } from 'vitest';
import { ConfigError } from '../../functions/shared/errors.js';
import { buildContentSyncApp, type ContentSyncApp } from '../../infra/content-sync-app.js';
import { readContentSyncConfig, type ContentSyncConfig } from '../../infra/context.js';
import { SYNTH_DIR } from '../support/shared-modules.js';
import { contextFor, type BuildOptions } from '../../dev/synth.js';

export const ROOT = resolve(import.meta.dirname, '../..');
export { BASE_URL, CDK_JSON_CONTEXT, contextFor, type BuildOptions } from '../../dev/synth.js';

export interface SynthOptions extends BuildOptions {
  /**
   * Synthesize anew even when this file already has the templates of this context: for a test that
   * changes what the stacks are built from (a mocked module).
   */
  fresh?: boolean;
}

export interface BuiltApp extends ContentSyncApp {
  app: App;
}

export function buildApp(overrides: Record<string, unknown> = {}, options: BuildOptions = {}): BuiltApp {
  mkdirSync(SYNTH_DIR, { recursive: true });
  const app = new App({ context: contextFor(overrides, options), outdir: mkdtempSync(join(SYNTH_DIR, 'cdk.out-')) });
  return { app, ...buildContentSyncApp(app) };
}

export interface Templates extends BuiltApp {
  stateful: BuiltApp['stateful'];
  stateless: BuiltApp['stateless'];
  statefulTemplate: Template;
  statelessTemplate: Template;
}

/**
 * The templates synthesized so far, by context. The files that synthesize share their modules
 * (test/support/shared-modules.ts), so each context is synthesized once a worker, for all of them.
 */
const synthesized = new Map<string, Templates>();

/**
 * Builds the app and synthesizes both templates (the cdk-nag plugin runs as in `cdk synth`), once
 * per context and worker: every caller with the same context gets the same templates and app,
 * to read, never to change (buildApp gives an app of its own to change).
 */
export function synthTemplates(overrides: Record<string, unknown> = {}, options: SynthOptions = {}): Templates {
  const key = JSON.stringify(Object.entries(contextFor(overrides, options)).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  const known = options.fresh ? undefined : synthesized.get(key);
  if (known) return known;
  const built = buildApp(overrides, options);
  const templates = {
    ...built,
    statefulTemplate: Template.fromStack(built.stateful),
    statelessTemplate: Template.fromStack(built.stateless),
  };
  if (!options.fresh) synthesized.set(key, templates);
  return templates;
}

type Resources = Record<string, { Type: string; Properties?: Record<string, unknown>; DependsOn?: string[]; DeletionPolicy?: string; UpdateReplacePolicy?: string }>;

/** The one resource of `type` whose logical id starts with `prefix` (fails loudly otherwise). */
export function resource(template: Template, type: string, prefix: string): { id: string; Properties: Record<string, any>; DependsOn?: string[]; DeletionPolicy?: string; UpdateReplacePolicy?: string } {
  const found = Object.entries(template.findResources(type) as Resources).filter(([id]) => id.startsWith(prefix));
  if (found.length !== 1) {
    throw new Error(`expected one ${type} whose logical id starts with ${prefix}, found ${found.map(([id]) => id).join(', ') || 'none'}`);
  }
  const [id, body] = found[0]!;
  return { id, Properties: body.Properties ?? {}, DependsOn: body.DependsOn, DeletionPolicy: body.DeletionPolicy, UpdateReplacePolicy: body.UpdateReplacePolicy };
}

export function logicalId(template: Template, type: string, prefix: string): string {
  return resource(template, type, prefix).id;
}

/**
 * How the stateless stack refers to a value the stateful stack exports: `{ "Fn::ImportValue": name }`
 * for the export whose value is `value` (e.g. `{ Ref: <table> }`).
 */
export function importOf(statefulTemplate: Template, value: unknown): { 'Fn::ImportValue': string } {
  const outputs = statefulTemplate.toJSON().Outputs as Record<string, { Value: unknown; Export?: { Name: string } }>;
  const match = Object.values(outputs).filter((output) => output.Export && JSON.stringify(output.Value) === JSON.stringify(value));
  if (match.length !== 1) throw new Error(`expected one export of ${JSON.stringify(value)}, found ${match.length}`);
  return { 'Fn::ImportValue': match[0]!.Export!.Name };
}

/** The statements of the identity policy attached to the role with logical id `roleId`. */
export function roleStatements(template: Template, roleId: string): unknown[] {
  const policies = Object.values(template.findResources('AWS::IAM::Policy') as Resources).filter((policy) =>
    JSON.stringify(policy.Properties?.['Roles']) === JSON.stringify([{ Ref: roleId }]),
  );
  if (policies.length !== 1) throw new Error(`expected one policy for role ${roleId}, found ${policies.length}`);
  return (policies[0]!.Properties!['PolicyDocument'] as { Statement: unknown[] }).Statement;
}

/** `Fn::GetAtt` of the ARN of the resource with logical id `id`. */
export function fnArn(id: string): { 'Fn::GetAtt': [string, 'Arn'] } {
  return { 'Fn::GetAtt': [id, 'Arn'] };
}

/**
 * Expects the role `roleId` to be assumed by EventBridge Scheduler (on this account's behalf only)
 * and to allow invoking the function `functionId` (and its versions) only.
 */
export function expectSchedulerInvokeRole(template: Template, roleId: string, functionId: string): void {
  const role = resource(template, 'AWS::IAM::Role', roleId);
  expect(role.Properties['AssumeRolePolicyDocument']).toEqual({
    Statement: [
      {
        Action: 'sts:AssumeRole',
        Effect: 'Allow',
        Principal: { Service: 'scheduler.amazonaws.com' },
        Condition: { StringEquals: { 'aws:SourceAccount': { Ref: 'AWS::AccountId' } } },
      },
    ],
    Version: '2012-10-17',
  });
  expect(roleStatements(template, roleId)).toEqual([
    { Effect: 'Allow', Action: 'lambda:InvokeFunction', Resource: [fnArn(functionId), { 'Fn::Join': ['', [fnArn(functionId), ':*']] }] },
  ]);
}

/** The configuration read from `context` as `cdk synth` reads it (infra/context.ts). */
export function readContext(context: Record<string, unknown>): ContentSyncConfig {
  return readContentSyncConfig({ tryGetContext: (key) => context[key] });
}

/** The error `context` fails with, checked to be a ConfigError for `key` whose message starts with it. */
export function contextErrorFor(context: Record<string, unknown>, key: string): string {
  let caught: unknown;
  try {
    readContext(context);
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(ConfigError);
  expect((caught as ConfigError).key).toBe(key);
  expect((caught as ConfigError).message.startsWith(`${key}: `)).toBe(true);
  return (caught as ConfigError).message;
}

/** The dashboard body's parts: its Fn::Join list, or the body itself when it holds no token. */
export function dashboardParts(template: Template): unknown[] {
  const dashboard = Object.values(template.findResources('AWS::CloudWatch::Dashboard'))[0]!;
  const body = dashboard.Properties.DashboardBody;
  return typeof body === 'string' ? [body] : (body['Fn::Join'] as [string, unknown[]])[1];
}

/** The dashboard body with every token replaced by `TOKEN`, as JSON text. */
export function dashboardBody(template: Template): string {
  return dashboardParts(template)
    .map((part) => (typeof part === 'string' ? part : 'TOKEN'))
    .join('');
}
