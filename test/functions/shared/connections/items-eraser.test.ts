/**
 * The items eraser's object sweep never deletes a key a one-account deployment wrote for `default`
 * (`items/<SHA-256 of the id>/<revision>/<file>`), even for a connection whose id is such a hash:
 * the exact S3 commands, on a mocked client.
 */
import { createHash } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DeleteObjectsCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { AwsItemsEraser, isOneAccountKey } from '../../../../functions/shared/adapters/items-eraser.js';

const hex = (text: string): string => createHash('sha256').update(text).digest('hex');

describe('isOneAccountKey', () => {
  const hashed = hex('fil-0001');
  it('is a two-part key under a 64-hex connection only', () => {
    expect(isOneAccountKey(hashed, `items/${hashed}/3/${hex('body')}.json`)).toBe(true);
    expect(isOneAccountKey(hashed, `items/${hashed}/${hex('id')}/3/${hex('body')}-0123456789abcdef.json`)).toBe(false);
    expect(isOneAccountKey('acme', 'items/acme/3/x.json')).toBe(false);
    expect(isOneAccountKey(hashed.toUpperCase(), `items/${hashed.toUpperCase()}/3/x.json`)).toBe(false);
  });
});

describe('AwsItemsEraser.deleteObjects', () => {
  const s3 = new S3Client({ region: 'eu-west-1' });
  const mock = mockClient(s3);
  beforeEach(() => mock.reset());

  it("deletes a hash-named connection's own objects and leaves default's one-account objects under the same prefix", async () => {
    const connection = hex('fil-0001');
    const own = `items/${connection}/${hex('doc-1')}/7/${hex('body')}-0123456789abcdef.json`;
    const legacy = `items/${connection}/7/${hex('old body')}.json`;
    mock.on(ListObjectsV2Command).resolves({ Contents: [{ Key: own }, { Key: legacy }], IsTruncated: false });
    mock.on(DeleteObjectsCommand).resolves({});
    const eraser = new AwsItemsEraser({ dynamodb: new DynamoDBClient({ region: 'eu-west-1' }), s3, itemsTable: 'items', itemsBucket: 'bucket', changesTable: 'changes', sleep: async () => undefined });

    expect(await eraser.deleteObjects(connection, { stop: () => false })).toEqual({ deleted: 1, complete: true });
    expect(mock.commandCalls(ListObjectsV2Command).map((call) => call.args[0].input)).toEqual([{ Bucket: 'bucket', Prefix: `items/${connection}/`, ContinuationToken: undefined }]);
    expect(mock.commandCalls(DeleteObjectsCommand).map((call) => call.args[0].input)).toEqual([{ Bucket: 'bucket', Delete: { Objects: [{ Key: own }], Quiet: true } }]);
  });
});
