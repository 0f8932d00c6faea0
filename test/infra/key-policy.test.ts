/**
 * AWS Control Tower's proactive control CT.KMS.PR.3 (a KMS key policy limits grant creation to AWS
 * services), written as assertions on the synthesized templates: every key-policy statement that
 * allows kms:CreateGrant (by name, by a wildcard such as `kms:*`, or by a NotAction that leaves it
 * out) carries `Bool: {kms:GrantIsForAWSResource: true}`, and every key policy holds the deny
 * statement the control's guard rule looks for. No role may create grants at all.
 */
import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as kms from 'aws-cdk-lib/aws-kms';
import { beforeAll, describe, expect, it } from 'vitest';
import { synthTemplates, type Templates } from './helpers.js';

type Statement = Record<string, unknown>;
type Resources = Record<string, { Type: string; Properties?: Record<string, any> }>;

const CREATE_GRANT = 'kms:CreateGrant';

function list(value: unknown): unknown[] {
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
}

/** Whether the IAM action pattern (`*` and `?` wildcards, any case) matches `action`. */
function actionMatches(pattern: unknown, action: string): boolean {
  if (typeof pattern !== 'string') return false;
  const regex = new RegExp(`^${pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.')}$`, 'i');
  return regex.test(action);
}

/** Whether an Allow statement allows kms:CreateGrant: by an Action pattern, or by a NotAction none of whose patterns is it. */
function allowsCreateGrant(statement: Statement): boolean {
  if (statement['Effect'] !== 'Allow') return false;
  if (statement['NotAction'] !== undefined) return !list(statement['NotAction']).some((pattern) => actionMatches(pattern, CREATE_GRANT));
  return list(statement['Action']).some((pattern) => actionMatches(pattern, CREATE_GRANT));
}

function limitsGrantsToAwsResources(statement: Statement): boolean {
  const bool = (statement['Condition'] as Record<string, Record<string, unknown>> | undefined)?.['Bool'];
  const value = bool?.['kms:GrantIsForAWSResource'];
  return value === true || value === 'true';
}

/**
 * The statement CT.KMS.PR.3's guard rule requires: deny kms:CreateGrant (that action alone) to every
 * principal on the key when `kms:GrantIsForAWSResource` and `aws:PrincipalIsAWSService` are both
 * `false` (BoolIfExists, with no other condition).
 */
function isControlTowerGrantDeny(statement: Statement): boolean {
  const principal = statement['Principal'];
  const condition = statement['Condition'] as Record<string, Record<string, unknown>> | undefined;
  const boolIfExists = condition?.['BoolIfExists'];
  return (
    statement['Effect'] === 'Deny' &&
    list(statement['Action']).length > 0 &&
    list(statement['Action']).every((action) => action === CREATE_GRANT) &&
    (principal === '*' || JSON.stringify(principal) === JSON.stringify({ AWS: '*' })) &&
    list(statement['Resource']).every((resource) => resource === '*') &&
    condition !== undefined &&
    Object.keys(condition).join() === 'BoolIfExists' &&
    boolIfExists !== undefined &&
    Object.keys(boolIfExists).sort().join() === 'aws:PrincipalIsAWSService,kms:GrantIsForAWSResource' &&
    boolIfExists['kms:GrantIsForAWSResource'] === 'false' &&
    boolIfExists['aws:PrincipalIsAWSService'] === 'false'
  );
}

/** What breaks CT.KMS.PR.3 in `template`, one line per key or statement at fault. */
function grantProblems(template: Template): string[] {
  const problems: string[] = [];
  for (const [id, key] of Object.entries(template.findResources('AWS::KMS::Key') as Resources)) {
    const statements = list(key.Properties?.['KeyPolicy']?.Statement) as Statement[];
    statements.forEach((statement, index) => {
      if (allowsCreateGrant(statement) && !limitsGrantsToAwsResources(statement)) {
        problems.push(`${id}: statement ${String(statement['Sid'] ?? index)} allows ${CREATE_GRANT} without Bool kms:GrantIsForAWSResource true`);
      }
    });
    if (!statements.some(isControlTowerGrantDeny)) problems.push(`${id}: no statement denies ${CREATE_GRANT} unless it is for an AWS service`);
  }
  return problems;
}

function keyPolicyTemplate(statements: Statement[]): Template {
  return Template.fromJSON({ Resources: { Key: { Type: 'AWS::KMS::Key', Properties: { KeyPolicy: { Version: '2012-10-17', Statement: statements } } } } });
}

const ACCOUNT = { AWS: 'arn:aws:iam::123456789012:root' };
const DENY = {
  Effect: 'Deny',
  Action: CREATE_GRANT,
  Principal: { AWS: '*' },
  Resource: '*',
  Condition: { BoolIfExists: { 'kms:GrantIsForAWSResource': 'false', 'aws:PrincipalIsAWSService': 'false' } },
};

describe('the check itself', () => {
  it('fails CDK\'s default key policy (kms:* to the account, no deny)', () => {
    const stack = new Stack(new App(), 'Probe');
    new kms.Key(stack, 'Key');
    expect(grantProblems(Template.fromStack(stack))).toEqual([
      expect.stringMatching(/^Key\w+: statement 0 allows kms:CreateGrant without Bool kms:GrantIsForAWSResource true$/),
      expect.stringMatching(/^Key\w+: no statement denies kms:CreateGrant unless it is for an AWS service$/),
    ]);
  });

  it.each([
    ['the action by name', { Action: CREATE_GRANT }],
    ['kms:*', { Action: ['kms:Decrypt', 'kms:*'] }],
    ['*', { Action: '*' }],
    ['kms:Create*, any case', { Action: 'KMS:create*' }],
    ['a NotAction that leaves it out', { NotAction: ['kms:Decrypt'] }],
    ['the condition on another key', { Action: CREATE_GRANT, Condition: { Bool: { 'aws:SecureTransport': true } } }],
  ])('finds an Allow of kms:CreateGrant without the condition: %s', (_what, part) => {
    const statement = { Sid: 'Probe', Effect: 'Allow', Principal: ACCOUNT, Resource: '*', ...part };
    expect(grantProblems(keyPolicyTemplate([statement, DENY]))).toEqual(['Key: statement Probe allows kms:CreateGrant without Bool kms:GrantIsForAWSResource true']);
  });

  it('accepts an Allow with the condition, an Allow that does not reach CreateGrant, and a NotAction that names it', () => {
    const statements = [
      { Effect: 'Allow', Principal: ACCOUNT, Resource: '*', Action: 'kms:*', Condition: { Bool: { 'kms:GrantIsForAWSResource': 'true' } } },
      { Effect: 'Allow', Principal: ACCOUNT, Resource: '*', Action: ['kms:Decrypt', 'kms:Create*Key', 'kms:CreateAlias'] },
      { Effect: 'Allow', Principal: ACCOUNT, Resource: '*', NotAction: 'kms:Create*' },
      DENY,
    ];
    expect(grantProblems(keyPolicyTemplate(statements))).toEqual([]);
  });

  it.each([
    ['Allow', { Effect: 'Allow' }],
    ['one principal', { Principal: ACCOUNT }],
    ['more actions', { Action: [CREATE_GRANT, 'kms:Decrypt'] }],
    ['Bool, not BoolIfExists', { Condition: { Bool: { 'kms:GrantIsForAWSResource': 'false', 'aws:PrincipalIsAWSService': 'false' } } }],
    ['one condition key', { Condition: { BoolIfExists: { 'kms:GrantIsForAWSResource': 'false' } } }],
  ])('wants Control Tower\'s deny exactly: not with %s', (_what, part) => {
    expect(grantProblems(keyPolicyTemplate([{ ...DENY, ...part }]))).toContain('Key: no statement denies kms:CreateGrant unless it is for an AWS service');
  });
});

describe.each([
  ['the default deployment', {}],
  ['a stage with every option on', { stage: 'staging', alarmEmail: 'ops@example.com', childrenPath: 'children', tracing: true }],
])('%s', (_name, context) => {
  let t: Templates;
  beforeAll(() => {
    t = synthTemplates(context);
  });

  it('every KMS key policy passes CT.KMS.PR.3 (the connections key is the one key)', () => {
    expect(Object.keys(t.statefulTemplate.findResources('AWS::KMS::Key'))).toEqual([expect.stringMatching(/^ConnectionsKey/)]);
    t.statelessTemplate.resourceCountIs('AWS::KMS::Key', 0);
    expect([...grantProblems(t.statefulTemplate), ...grantProblems(t.statelessTemplate)]).toEqual([]);
  });

  it('no role may create grants: no identity policy allows kms:CreateGrant', () => {
    const statements = [t.statefulTemplate, t.statelessTemplate].flatMap((template) =>
      Object.values(template.findResources('AWS::IAM::Policy') as Resources).flatMap((policy) => list(policy.Properties?.['PolicyDocument']?.Statement) as Statement[]),
    );
    // The functions' and the schedules' roles, the connections key's statements among them.
    expect(statements.filter((statement) => list(statement['Action']).includes('kms:Decrypt')).length).toBeGreaterThan(0);
    expect(statements.filter(allowsCreateGrant)).toEqual([]);
  });
});
