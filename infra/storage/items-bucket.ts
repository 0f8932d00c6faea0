/**
 * The items bucket: where the item sync stores an item too large for a DynamoDB row (its row holds
 * `itemObject` {key, size, sha256} instead of `item`; functions/item-sync/item-writer.ts).
 *
 * - Retained with the stack's other data; no physical name (CloudFormation generates it).
 * - S3-managed encryption (SSE-S3), TLS only (enforceSSL), every public access blocked, ACLs off
 *   (bucket owner enforced).
 * - Versioning on, with noncurrent versions expired after NONCURRENT_DAYS. The sync never writes a
 *   key twice (every write chooses a key of its own), so versioning keeps nothing extra for live
 *   objects; what it does is turn every delete into a delete marker: an object deleted by mistake
 *   (a bug, a race nobody foresaw) can be restored for NONCURRENT_DAYS days, then its bytes go. The
 *   delete markers left alone after that are removed too, and a multipart upload that never
 *   finished is aborted after a day (the sync uploads in one PutObject; this is hygiene).
 * - No lifecycle rule removes current objects: an object no row points to (left behind by a crash
 *   between the object and the row write, or a failed delete; the sync logs each one with its key,
 *   "item object left in the bucket") is found by comparing the bucket's keys under `items/` with
 *   the table's `itemObject` keys, and deleted by the operator. Nothing but that comparison can
 *   tell it from a live object, so no age-based rule may delete it.
 * - No server access logs (cdk-nag S1 acknowledged): the item sync writes and deletes here, the
 *   eraser deletes a removed connection's objects, the client API reads them (presigned URLs); each
 *   logs what it does; CloudTrail data events are the operator's choice when object-level audit is
 *   required.
 *
 * The functions' grants on it (below) name its ARN by the stateful stack's named export, each on
 * `items/*` only.
 */
import { Duration, Fn, RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as s3 from 'aws-cdk-lib/aws-s3';
import type { Construct } from 'constructs';

/** Days a deleted or replaced object version stays restorable. */
export const NONCURRENT_DAYS = 30;

/** The prefix of every item object (functions/item-sync/item-writer.ts ITEM_OBJECT_PREFIX); the sync may write and delete only there. */
export const ITEM_OBJECTS_PREFIX = 'items/';

/**
 * The name of the stateful stack's export of the bucket's ARN. Named (not the automatic
 * cross-stack export) so that the one finding of the sync's grant, its `items/*` resource, can be
 * acknowledged by its exact text.
 */
export function itemsBucketArnExport(statefulStackName: string): string {
  return `${statefulStackName}:ItemsBucketArn`;
}

export function addItemsBucket(scope: Construct): s3.Bucket {
  const bucket = new s3.Bucket(scope, 'ItemsBucket', {
    encryption: s3.BucketEncryption.S3_MANAGED,
    enforceSSL: true,
    blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
    objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
    versioned: true,
    lifecycleRules: [
      {
        id: 'ExpireDeletedItemObjects',
        noncurrentVersionExpiration: Duration.days(NONCURRENT_DAYS),
        expiredObjectDeleteMarker: true,
        abortIncompleteMultipartUploadAfter: Duration.days(1),
      },
    ],
    removalPolicy: RemovalPolicy.RETAIN,
  });
  const stack = Stack.of(scope);
  stack.exportValue(bucket.bucketArn, { name: itemsBucketArnExport(stack.stackName) });
  Validations.of(bucket).acknowledge({
    id: 'AwsSolutions-S1',
    reason:
      'Only the item sync writes objects here (and deletes them), the eraser deletes a removed connection\'s, the client API reads them; each logs the objects it writes or deletes. CloudTrail S3 data events are the operator\'s choice when object-level audit is required.',
  });
  return bucket;
}

/** The bucket's ARN as the stateless stack names it: the stateful stack's named export. */
export function itemsBucketArnImport(bucket: s3.IBucket): string {
  return Fn.importValue(itemsBucketArnExport(Stack.of(bucket).stackName));
}

/**
 * One statement on the item objects (`items/*`) of the bucket for `role`, and its one cdk-nag
 * finding, the resource's wildcard by nature (an object ARN pattern), acknowledged for exactly that
 * resource with `reason`.
 */
function grantOnItemObjects(role: iam.Role, bucket: s3.IBucket, sid: string, actions: readonly string[], reason: string): void {
  const arnExport = itemsBucketArnExport(Stack.of(bucket).stackName);
  role.addToPolicy(new iam.PolicyStatement({ sid, actions: [...actions], resources: [`${itemsBucketArnImport(bucket)}/${ITEM_OBJECTS_PREFIX}*`] }));
  Validations.of(role).acknowledge({ id: `AwsSolutions-IAM5[Resource::${arnExport}/${ITEM_OBJECTS_PREFIX}*]`, reason });
}

/**
 * The item sync's grant: put and delete objects under items/ in the bucket, nothing else on it (no
 * list, no version-specific delete); read them too (`read`) only with discovery on, which reads a
 * large folder's previous copy to find the children that left its list (docs/discovery.md).
 */
export function grantItemObjects(role: iam.Role, bucket: s3.IBucket, options: { read?: boolean } = {}): void {
  grantOnItemObjects(
    role,
    bucket,
    'ItemObjects',
    ['s3:PutObject', 's3:DeleteObject', ...(options.read === true ? ['s3:GetObject'] : [])],
    'Item objects have keys of their own per write (items/<id hash>/<revision>/<sha256>-<random>.json): the grant is PutObject and DeleteObject on the items/ prefix of the items bucket only.',
  );
}

/** The client API's grant: read item objects (it answers an item held here with a presigned GET URL). */
export function grantReadItemObjects(role: iam.Role, bucket: s3.IBucket): void {
  grantOnItemObjects(
    role,
    bucket,
    'ReadItemObjects',
    ['s3:GetObject'],
    'The client API presigns GET URLs for the item objects its rows name, whatever their key under items/: the grant is GetObject on the items/ prefix of the items bucket only.',
  );
}

/**
 * The eraser's grant: list the bucket under items/ only (ListBucket with the `s3:prefix` condition)
 * and delete objects there (DeleteObjects is authorised per object by s3:DeleteObject). No
 * version-specific delete: the versions an erase leaves noncurrent expire after NONCURRENT_DAYS.
 */
export function grantEraseItemObjects(role: iam.Role, bucket: s3.IBucket): void {
  role.addToPolicy(
    new iam.PolicyStatement({
      sid: 'ListItemObjects',
      actions: ['s3:ListBucket'],
      resources: [itemsBucketArnImport(bucket)],
      conditions: { StringLike: { 's3:prefix': `${ITEM_OBJECTS_PREFIX}*` } },
    }),
  );
  grantOnItemObjects(
    role,
    bucket,
    'EraseItemObjects',
    ['s3:DeleteObject'],
    'The eraser deletes a removed connection\'s item objects, whose keys are its rows\' own or under items/<connection>/: the grant is DeleteObject on the items/ prefix of the items bucket only.',
  );
}
