/**
 * cdk-nag AwsSolutions: no unacknowledged finding in either stack (default and non-default
 * context), every acknowledgement carries a reason and is actually needed, and the app-level
 * plugin fails the synth on a new finding.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Validations } from 'aws-cdk-lib';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { buildApp } from './helpers.js';

interface Acknowledgement {
  path: string;
  id: string;
  reason: unknown;
}

function acknowledgements(root: IConstruct): Acknowledgement[] {
  const found: Acknowledgement[] = [];
  for (const construct of root.node.findAll()) {
    for (const entry of construct.node.metadata) {
      if (entry.type !== Validations.ACKNOWLEDGED_RULES_METADATA_KEY) continue;
      for (const [id, reason] of Object.entries(entry.data as Record<string, unknown>)) {
        // aws-cdk-lib stores rule ids with an `Annotation::` prefix (cdk-nag strips it too).
        found.push({ path: construct.node.path, id: id.replace(/^annotation::/i, ''), reason });
      }
    }
  }
  return found;
}

function violations(overrides: Record<string, unknown> = {}) {
  const built = buildApp(overrides);
  return [built.stateful, built.stateless].flatMap((stack) => {
    const report = new AwsSolutionsChecks(built.app).validateScope(stack);
    return report.violations.flatMap((v) => v.violatingResources.map((r) => ({ rule: v.ruleName, path: r.constructPath ?? '', severity: v.severity })));
  });
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('cdk-nag AwsSolutions', () => {
  it.each([
    ['defaults', {}],
    ['every option set', { alarmEmail: 'ops@example.com', syncBatchSize: '500', syncMaxConcurrency: '50', tokenRefreshMinutes: '5', revisionField: 'meta.rev', providerRequestsPerSecond: '50', freshnessHours: '12', usersReservedPercent: '30', paceScope: 'connection', tracing: 'true', syncMemorySize: '1024' }],
    ['reconciliation off', { freshnessHours: '0' }],
  ])('no unacknowledged findings (%s)', (_name, overrides) => {
    expect(violations(overrides)).toEqual([]);
  });

  it('every acknowledgement carries a reason, and the list is the reviewed one', () => {
    const built = buildApp();
    const found = acknowledgements(built.app);
    for (const ack of found) {
      expect(typeof ack.reason, `${ack.path} ${ack.id}`).toBe('string');
      expect((ack.reason as string).trim().length, `${ack.path} ${ack.id}`).toBeGreaterThan(30);
    }
    expect(found.map((ack) => `${ack.path} ${ack.id.replace(/<[^>]+>/, '<function>')}`).sort()).toEqual(
      [
        'ContentSyncStateful/ChangeEventsFailureQueue AwsSolutions-SQS3',
        'ContentSyncStateless/ChangeEvents/Function AwsSolutions-L1',
        'ContentSyncStateless/ChangeEvents/Role AwsSolutions-IAM5[Resource::*]',
        // The changes writer (infra/changes-writer): its failure queue is an end of the line (no DLQ);
        // its runtime; its stream event source's dynamodb:ListStreams (no resource-level permission).
        'ContentSyncStateful/ChangesWriterFailureQueue AwsSolutions-SQS3',
        'ContentSyncStateless/ChangesWriter/Function AwsSolutions-L1',
        'ContentSyncStateless/ChangesWriter/Role AwsSolutions-IAM5[Resource::*]',
        // The items bucket (infra/storage/items-bucket.ts): no server access logs; the sync's grant on items/* only.
        'ContentSyncStateful/ItemsBucket AwsSolutions-S1',
        'ContentSyncStateless/ItemSync/Role AwsSolutions-IAM5[Resource::ContentSyncStateful:ItemsBucketArn/items/*]',
        'ContentSyncStateless/ItemSync/Function AwsSolutions-L1',
        'ContentSyncStateless/Reconciler/Function AwsSolutions-L1',
        'ContentSyncStateless/ReconcileScheduleRole AwsSolutions-IAM5[Resource::<function>:*]',
        'ContentSyncStateless/TokenRefreshScheduleRole AwsSolutions-IAM5[Resource::<function>:*]',
        'ContentSyncStateless/TokenRefresher/Function AwsSolutions-L1',
        // The client API (infra/client-api): its runtime; its GetObject on items/* only (presigned URLs).
        'ContentSyncStateless/ClientApi/Function AwsSolutions-L1',
        'ContentSyncStateless/ClientApi/Role AwsSolutions-IAM5[Resource::ContentSyncStateful:ItemsBucketArn/items/*]',
        // The eraser (infra/connection-eraser): its runtime; its DeleteObject on items/* only.
        'ContentSyncStateless/ConnectionEraser/Function AwsSolutions-L1',
        'ContentSyncStateless/ConnectionEraser/Role AwsSolutions-IAM5[Resource::ContentSyncStateful:ItemsBucketArn/items/*]',
      ].sort(),
    );
  });

  it('every acknowledgement covers a real finding, and every finding is acknowledged', () => {
    const acks = acknowledgements(buildApp().app);
    vi.spyOn(Validations.prototype, 'acknowledge').mockImplementation(() => undefined);
    const raw = violations();
    expect(raw.length).toBeGreaterThan(0);
    for (const ack of acks) {
      const covered = raw.filter((v) => v.rule === ack.id && v.path.startsWith(`${ack.path}/`));
      expect(covered.length, `${ack.path} ${ack.id} covers nothing`).toBeGreaterThan(0);
    }
    for (const v of raw) {
      expect(acks.some((ack) => v.rule === ack.id && v.path.startsWith(`${ack.path}/`)), `${v.path} ${v.rule}`).toBe(true);
    }
  });

  it('the app runs the checks at synth: a new finding fails it', () => {
    const built = buildApp();
    new sqs.Queue(built.stateful, 'UncheckedQueue', { enforceSSL: false });
    expect(() => built.app.synth()).toThrow();
    const report = readFileSync(join(built.app.outdir, 'validation-report.json'), 'utf8');
    expect(report).toContain('AwsSolutions-SQS4');
    expect(report).toContain('ContentSyncStateful/UncheckedQueue/Resource');
    // Only the new queue is reported.
    expect(report.match(/"constructPath": "[^"]+"/g)?.every((path) => path.includes('UncheckedQueue'))).toBe(true);
  });

  it('the unmodified app synthesizes with the checks on', () => {
    const built = buildApp();
    expect(() => built.app.synth()).not.toThrow();
  });
});
