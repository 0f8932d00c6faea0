/**
 * The items bucket (infra/storage/items-bucket.ts): retained, SSE-S3, TLS only, every public access blocked,
 * ACLs off, versioned with deleted versions expired, no physical name; its ARN exported under a
 * fixed name; the item sync's grant (put and delete under items/ only), the client API's (read
 * under items/), the eraser's (list under items/, delete under items/) and ITEMS_BUCKET_NAME; the
 * lazy module of the item sync's bundle.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { ENV } from '../../functions/shared/config.js';
import { ITEM_OBJECT_PREFIX } from '../../functions/item-sync/item-writer.js';
import { ITEM_SYNC_LAZY_MODULES } from '../../functions/item-sync/lazy-modules.js';
import { lazyModuleCommands } from '../../infra/constructs/content-sync-function.js';
import { ITEM_OBJECTS_PREFIX, NONCURRENT_DAYS, itemsBucketArnExport } from '../../infra/storage/items-bucket.js';
import { importOf, logicalId, resource, roleStatements, synthTemplates, type Templates } from './helpers.js';

let t: Templates;
let bucketId: string;
beforeAll(() => {
  t = synthTemplates();
  bucketId = logicalId(t.statefulTemplate, 'AWS::S3::Bucket', 'ItemsBucket');
});

describe('items bucket', () => {
  it('one bucket: SSE-S3, public access blocked, ACLs off, versioned, deleted versions expired after 30 days, retained, no name', () => {
    t.statefulTemplate.resourceCountIs('AWS::S3::Bucket', 1);
    const bucket = resource(t.statefulTemplate, 'AWS::S3::Bucket', 'ItemsBucket');
    expect(NONCURRENT_DAYS).toBe(30);
    expect(bucket.Properties).toEqual({
      BucketEncryption: { ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }] },
      PublicAccessBlockConfiguration: { BlockPublicAcls: true, BlockPublicPolicy: true, IgnorePublicAcls: true, RestrictPublicBuckets: true },
      OwnershipControls: { Rules: [{ ObjectOwnership: 'BucketOwnerEnforced' }] },
      VersioningConfiguration: { Status: 'Enabled' },
      LifecycleConfiguration: {
        Rules: [
          {
            Id: 'ExpireDeletedItemObjects',
            Status: 'Enabled',
            NoncurrentVersionExpiration: { NoncurrentDays: 30 },
            ExpiredObjectDeleteMarker: true,
            AbortIncompleteMultipartUpload: { DaysAfterInitiation: 1 },
          },
        ],
      },
    });
    // No rule expires current objects: a live item's object stays as long as its row points to it.
    expect(JSON.stringify(bucket.Properties)).not.toMatch(/"ExpirationInDays"|"ExpirationDate"/);
    expect(bucket.DeletionPolicy).toBe('Retain');
    expect(bucket.UpdateReplacePolicy).toBe('Retain');
  });

  it('refuses every request without TLS (bucket policy)', () => {
    const policy = resource(t.statefulTemplate, 'AWS::S3::BucketPolicy', 'ItemsBucketPolicy');
    expect(policy.Properties).toEqual({
      Bucket: { Ref: bucketId },
      PolicyDocument: {
        Version: '2012-10-17',
        Statement: [
          {
            Effect: 'Deny',
            Principal: { AWS: '*' },
            Action: 's3:*',
            Condition: { Bool: { 'aws:SecureTransport': 'false' } },
            Resource: [{ 'Fn::GetAtt': [bucketId, 'Arn'] }, { 'Fn::Join': ['', [{ 'Fn::GetAtt': [bucketId, 'Arn'] }, '/*']] }],
          },
        ],
      },
    });
  });

  it('outputs its name; exports its ARN under a fixed name (the grant acknowledged by its text uses it)', () => {
    const outputs = t.statefulTemplate.toJSON().Outputs as Record<string, { Value: unknown; Export?: { Name: string } }>;
    expect(outputs['ItemsBucketName']!.Value).toEqual({ Ref: bucketId });
    expect(itemsBucketArnExport('ContentSyncStateful')).toBe('ContentSyncStateful:ItemsBucketArn');
    expect(outputs['ExportContentSyncStatefulItemsBucketArn']).toEqual({
      Value: { 'Fn::GetAtt': [bucketId, 'Arn'] },
      Export: { Name: 'ContentSyncStateful:ItemsBucketArn' },
    });
  });
});

describe('the item sync and the bucket', () => {
  it('ITEMS_BUCKET_NAME is the bucket name; the grant is PutObject and DeleteObject under items/ (the prefix of every object key)', () => {
    expect(ITEM_OBJECTS_PREFIX).toBe(ITEM_OBJECT_PREFIX);
    const fn = resource(t.statelessTemplate, 'AWS::Lambda::Function', 'ItemSyncFunction');
    expect(fn.Properties['Environment'].Variables[ENV.itemsBucketName]).toEqual(importOf(t.statefulTemplate, { Ref: bucketId }));
    const statements = roleStatements(t.statelessTemplate, logicalId(t.statelessTemplate, 'AWS::IAM::Role', 'ItemSyncRole')) as Array<{ Action: unknown; Resource: unknown }>;
    const s3Statements = statements.filter((statement) => JSON.stringify(statement.Action).includes('s3:'));
    expect(s3Statements).toEqual([
      {
        Sid: 'ItemObjects',
        Effect: 'Allow',
        Action: ['s3:PutObject', 's3:DeleteObject'],
        Resource: { 'Fn::Join': ['', [{ 'Fn::ImportValue': 'ContentSyncStateful:ItemsBucketArn' }, '/items/*']] },
      },
    ]);
    // Three roles name the bucket: the item sync's, the client API's and the eraser's (below); no resource policy does.
    const naming = Object.entries(t.statelessTemplate.toJSON().Resources as Record<string, { Type: string; Properties: unknown }>)
      .filter(([, body]) => JSON.stringify(body.Properties).includes('ItemsBucketArn'))
      .map(([id, body]) => `${body.Type} ${id.replace(/[0-9A-F]{8}$/, '')}`);
    expect(naming.sort()).toEqual(
      ['AWS::IAM::Policy ClientApiRoleDefaultPolicy', 'AWS::IAM::Policy ConnectionEraserRoleDefaultPolicy', 'AWS::IAM::Policy ItemSyncRoleDefaultPolicy'].sort(),
    );
    const text = JSON.stringify(t.statelessTemplate.toJSON().Resources);
    expect(text.split('ItemsBucketArn').length - 1).toBe(4);
  });

  it('the client API: ITEMS_BUCKET_NAME, and GetObject under items/ only (the presigned URL of an item held there)', () => {
    const fn = resource(t.statelessTemplate, 'AWS::Lambda::Function', 'ClientApiFunction');
    expect(fn.Properties['Environment'].Variables[ENV.itemsBucketName]).toEqual(importOf(t.statefulTemplate, { Ref: bucketId }));
    const statements = roleStatements(t.statelessTemplate, logicalId(t.statelessTemplate, 'AWS::IAM::Role', 'ClientApiRole')) as Array<{ Action: unknown }>;
    expect(statements.filter((statement) => JSON.stringify(statement.Action).includes('s3:'))).toEqual([
      {
        Sid: 'ReadItemObjects',
        Effect: 'Allow',
        Action: 's3:GetObject',
        Resource: { 'Fn::Join': ['', [{ 'Fn::ImportValue': 'ContentSyncStateful:ItemsBucketArn' }, '/items/*']] },
      },
    ]);
  });

  it('the eraser: ITEMS_BUCKET_NAME, ListBucket of keys under items/ only, DeleteObject under items/ only (no version-specific delete)', () => {
    const fn = resource(t.statelessTemplate, 'AWS::Lambda::Function', 'ConnectionEraserFunction');
    expect(fn.Properties['Environment'].Variables[ENV.itemsBucketName]).toEqual(importOf(t.statefulTemplate, { Ref: bucketId }));
    const statements = roleStatements(t.statelessTemplate, logicalId(t.statelessTemplate, 'AWS::IAM::Role', 'ConnectionEraserRole')) as Array<{ Action: unknown }>;
    expect(statements.filter((statement) => JSON.stringify(statement.Action).includes('s3:'))).toEqual([
      {
        Sid: 'ListItemObjects',
        Effect: 'Allow',
        Action: 's3:ListBucket',
        Resource: { 'Fn::ImportValue': 'ContentSyncStateful:ItemsBucketArn' },
        Condition: { StringLike: { 's3:prefix': 'items/*' } },
      },
      {
        Sid: 'EraseItemObjects',
        Effect: 'Allow',
        Action: 's3:DeleteObject',
        Resource: { 'Fn::Join': ['', [{ 'Fn::ImportValue': 'ContentSyncStateful:ItemsBucketArn' }, '/items/*']] },
      },
    ]);
  });

  it('the lazy module is bundled by esbuild with the function bundle\'s options, next to index.mjs, as an ES module', () => {
    // The S3 client and the KMS client (the changes are no longer the item sync's: the changes writer numbers them).
    expect(ITEM_SYNC_LAZY_MODULES).toEqual(['./adapters/s3-item-object-store.js', './adapters/kms-client.js']);
    const [mkdir, typeModule, esbuild] = lazyModuleCommands('/repo', '/out', 'functions/item-sync', './adapters/s3-item-object-store.js');
    expect(mkdir).toBe("mkdir -p '/out/adapters'");
    expect(typeModule).toBe(`printf '%s' '{"type":"module"}' > '/out/adapters/package.json'`);
    expect(esbuild).toContain("'/repo/node_modules/.bin/esbuild' '--bundle' '/repo/functions/item-sync/adapters/s3-item-object-store.ts'");
    for (const arg of ['--target=node22', '--platform=node', '--format=esm', '--outfile=/out/adapters/s3-item-object-store.js', '--minify', '--sourcemap', '--sources-content=false', '--main-fields=module,main']) {
      expect(esbuild).toContain(`'${arg}'`);
    }
    expect(esbuild).toContain("'--external:@aws-sdk/credential-provider-sso'");
    // The banner's quotes survive the shell.
    expect(esbuild).toContain(`'--banner:js=import { createRequire as __contentSyncCreateRequire } from '\\''node:module'\\''; `);
    expect(() => lazyModuleCommands('/repo', '/out', 'functions/item-sync', '../outside.js')).toThrow(/expected a path like/);
  });
});
