/**
 * Discovery's parts apart from the handler (docs/discovery.md): reading a folder's list
 * (discovery.ts), and the adapters it adds over mocked clients: the items table's stored copy
 * (DynamoDbItemStore.getItem), the items bucket's read (S3ItemObjectStore.get) and the reconcile
 * queue's sink (SqsBackgroundLane: the exact SendMessageBatch entries, chunks of 10, re-sends).
 */
import 'aws-sdk-client-mock-vitest/extend';
import { beforeEach, describe, expect, it } from 'vitest';
import { mockClient } from 'aws-sdk-client-mock';
import { BatchGetItemCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import { GetObjectCommand, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { DynamoDbItemStore } from '../../../functions/item-sync/adapters/dynamodb-item-store.js';
import { S3ItemObjectStore } from '../../../functions/item-sync/adapters/s3-item-object-store.js';
import { DISCOVERY_CALLS_IN_FLIGHT, SqsBackgroundLane } from '../../../functions/item-sync/adapters/sqs.js';
import { childrenThatLeft, childrenToCheck, readListing, type DiscoverySettings } from '../../../functions/item-sync/discovery.js';
import { TransientError } from '../../../functions/shared/errors.js';
import { parseJson } from '../../../functions/shared/json.js';

const sqs = mockClient(SQSClient);
const ddb = mockClient(DynamoDBClient);
const s3 = mockClient(S3Client);

beforeEach(() => {
  sqs.reset();
  ddb.reset();
  s3.reset();
});

const settings: DiscoverySettings = { childrenPath: 'list.entries', childIdPath: 'ref.id', childRevisionPath: 'ref.rev', childrenTotalPath: 'list.total' };

describe('reading a folder\'s list', () => {
  it('takes each id and revision at their dot paths, revisions as text (numbers exactly as written)', () => {
    const folder = parseJson(
      '{"id":"F","list":{"total":3,"entries":[{"ref":{"id":"a","rev":12345678901234567891}},{"ref":{"id":"b","rev":"r2"}},{"ref":{"id":"c"}}]}}',
    ) as Record<string, unknown>;
    expect(readListing(folder, 'F', settings)).toEqual({
      kind: 'listed',
      children: [{ id: 'a', revision: '12345678901234567891' }, { id: 'b', revision: 'r2' }, { id: 'c' }],
      skipped: [],
    });
  });

  it('a total larger than the entries (a number, or one beyond 2^53) marks the list truncated; one that is not a whole number is named', () => {
    const listing = (total: unknown) => readListing({ list: { total, entries: [{ ref: { id: 'a' } }, 'x'] } }, 'F', settings);
    expect(listing(3).truncated).toEqual({ listed: 2, total: 3 });
    expect(listing(2).truncated).toBeUndefined();
    expect(listing(parseJson('9007199254740993')).badTotal).toBe('the value at "list.total" is a number, not a whole number');
    expect(listing('3').badTotal).toBe('the value at "list.total" is a string, not a whole number');
    expect(listing(2.5).badTotal).toBe('the value at "list.total" is a number, not a whole number');
    expect(listing(undefined)).toEqual({ kind: 'listed', children: [{ id: 'a' }], skipped: [{ index: 1, why: 'the entry is a string, not an object' }] });
  });

  it('decides which children to check, and which left the list', () => {
    const stored = new Map([
      ['same', { revision: '1', deleted: false }],
      ['other', { revision: '1', deleted: false }],
      ['dead', { revision: '1', deleted: true }],
    ]);
    const children = [{ id: 'same', revision: '1' }, { id: 'other', revision: '2' }, { id: 'dead', revision: '1' }, { id: 'new' }];
    expect(childrenToCheck(children, stored, true)).toEqual(['other', 'dead', 'new']);
    expect(childrenToCheck(children, stored, false)).toEqual(['dead', 'new']);
    expect(childrenToCheck(children, undefined, false)).toEqual(['same', 'other', 'dead', 'new']);
    expect(childrenThatLeft([{ id: 'a' }, { id: 'b' }, { id: 'c' }], [{ id: 'c' }, { id: 'd' }])).toEqual(['a', 'b']);
  });
});

describe('DynamoDbItemStore.getItem', () => {
  const store = () => new DynamoDbItemStore(new DynamoDBClient({ region: 'eu-west-1' }), 'items', { sleep: async () => undefined });
  const key = { connection: 'acme', id: 'F' };

  it('reads the row strongly consistently with one BatchGetItem (no GetItem is granted): type, revision, the item inline', async () => {
    ddb.on(BatchGetItemCommand).resolves({
      Responses: {
        items: [
          {
            type: { S: 'folder' },
            revision: { S: '3' },
            item: { M: { id: { S: 'F' }, n: { N: '12345678901234567891' }, children: { L: [{ M: { id: { S: 'a' } } }] } } },
          },
        ],
      },
    });
    const row = await store().getItem(key);
    expect(row).toMatchObject({ type: 'folder', revision: '3', deleted: false, item: { id: 'F', children: [{ id: 'a' }] } });
    expect(String((row!.item as { n: unknown }).n)).toBe('12345678901234567891');
    expect(ddb).toReceiveCommandWith(BatchGetItemCommand, {
      RequestItems: {
        items: {
          Keys: [{ connection: { S: 'acme' }, id: { S: 'F' } }],
          ProjectionExpression: '#type, #revision, #deleted, #item, #itemObject, #childrenPending',
          ExpressionAttributeNames: {
            '#type': 'type',
            '#revision': 'revision',
            '#deleted': 'deleted',
            '#item': 'item',
            '#itemObject': 'itemObject',
            '#childrenPending': 'childrenPending',
          },
          ConsistentRead: true,
        },
      },
    });
  });

  it('a row holding itemObject answers its key; no row answers undefined; unprocessed or failing reads are TransientErrors', async () => {
    ddb.on(BatchGetItemCommand).resolves({
      Responses: { items: [{ type: { S: 'folder' }, revision: { S: '1' }, deleted: { BOOL: true }, itemObject: { M: { key: { S: 'items/k.json' } } } }] },
    });
    expect(await store().getItem(key)).toEqual({ type: 'folder', revision: '1', deleted: true, objectKey: 'items/k.json' });
    ddb.on(BatchGetItemCommand).resolves({ Responses: { items: [] } });
    expect(await store().getItem(key)).toBeUndefined();
    ddb.on(BatchGetItemCommand).resolves({ Responses: { items: [] }, UnprocessedKeys: { items: { Keys: [{ connection: { S: 'acme' }, id: { S: 'F' } }] } } });
    await expect(store().getItem(key)).rejects.toThrow(TransientError);
    ddb.on(BatchGetItemCommand).rejects(Object.assign(new Error('Rate exceeded'), { name: 'ProvisionedThroughputExceededException' }));
    await expect(store().getItem(key)).rejects.toThrow(new TransientError('DynamoDB BatchGetItem failed (ProvisionedThroughputExceededException: Rate exceeded)'));
  });
});

describe('S3ItemObjectStore.get', () => {
  const objects = () => new S3ItemObjectStore(new S3Client({ region: 'eu-west-1' }), 'bucket-1');

  it('reads the object by key; a missing key is undefined; any other failure a TransientError naming GetObject', async () => {
    const body = Buffer.from('{"id":"F"}');
    s3.on(GetObjectCommand).resolves({ Body: { transformToByteArray: async () => new Uint8Array(body) } } as never);
    expect(Buffer.from((await objects().get('items/F.json'))!).toString()).toBe('{"id":"F"}');
    expect(s3).toReceiveCommandExactlyOnceWith(GetObjectCommand, { Bucket: 'bucket-1', Key: 'items/F.json' });
    s3.on(GetObjectCommand).rejects(new S3ServiceException({ name: 'NoSuchKey', $fault: 'client', $metadata: {}, message: 'The specified key does not exist.' }));
    expect(await objects().get('items/gone.json')).toBeUndefined();
    s3.on(GetObjectCommand).rejects(new S3ServiceException({ name: 'AccessDenied', $fault: 'client', $metadata: {}, message: 'Access Denied' }));
    await expect(objects().get('items/F.json')).rejects.toThrow(new TransientError('S3 GetObject failed (AccessDenied: Access Denied)'));
  });
});

describe('SqsBackgroundLane', () => {
  const URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/reconcile';
  const sink = () => new SqsBackgroundLane(new SQSClient({ region: 'eu-west-1' }), URL, { sleep: async () => undefined });
  const ok = (input: { Entries: Array<{ Id: string }> }) => ({ Successful: input.Entries.map((entry) => ({ Id: entry.Id, MessageId: 'x', MD5OfMessageBody: 'x' })), Failed: [] });

  it('sends each id as a backfill is sent: {"connection","id"}, lane background, the connection as the group; 10 a call', async () => {
    sqs.on(SendMessageBatchCommand).callsFake(ok);
    const ids = Array.from({ length: 23 }, (_, index) => `c${index}`);
    expect(await sink().send('acme', ids)).toEqual([]);
    const calls = sqs.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input);
    expect(calls.map((input) => [input.QueueUrl, input.Entries!.length])).toEqual([
      [URL, 10],
      [URL, 10],
      [URL, 3],
    ]);
    expect(calls[2]!.Entries).toEqual(
      ['c20', 'c21', 'c22'].map((id, position) => ({
        Id: `m${position}`,
        MessageBody: JSON.stringify({ connection: 'acme', id }),
        MessageGroupId: 'acme',
        MessageAttributes: { lane: { DataType: 'String', StringValue: 'background' } },
      })),
    );
  });

  it('sends a large folder\'s children in parallel calls, at most DISCOVERY_CALLS_IN_FLIGHT at once, each id once', async () => {
    let inFlight = 0;
    let most = 0;
    const release: Array<() => void> = [];
    sqs.on(SendMessageBatchCommand).callsFake(async (input: { Entries: Array<{ Id: string }> }) => {
      inFlight += 1;
      most = Math.max(most, inFlight);
      // Each call answers only once the test lets it: the calls in flight together are counted, not timed.
      await new Promise<void>((resolve) => release.push(resolve));
      inFlight -= 1;
      return ok(input);
    });
    const ids = Array.from({ length: 250 }, (_, index) => `c${index}`);
    const sending = sink().send('acme', ids);
    for (;;) {
      const next = release.shift();
      if (next) next();
      else if (sqs.commandCalls(SendMessageBatchCommand).length === 25 && inFlight === 0) break;
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(await sending).toEqual([]);
    expect(most).toBe(DISCOVERY_CALLS_IN_FLIGHT);
    const sent = sqs.commandCalls(SendMessageBatchCommand).flatMap((call) => call.args[0].input.Entries!.map((entry) => JSON.parse(entry.MessageBody!).id));
    expect(sent.sort()).toEqual([...ids].sort());
  });

  it('sends again what SQS refused for a reason that may pass (bounded); reports what it could not send, never throws', async () => {
    let calls = 0;
    sqs.on(SendMessageBatchCommand).callsFake((input: { Entries: Array<{ Id: string; MessageBody: string }> }) => {
      calls += 1;
      const refuse = (entry: { MessageBody: string }) => entry.MessageBody.includes('"busy') || (calls === 1 && entry.MessageBody.includes('"once'));
      return {
        Successful: input.Entries.filter((entry) => !refuse(entry)).map((entry) => ({ Id: entry.Id, MessageId: 'x', MD5OfMessageBody: 'x' })),
        Failed: input.Entries.filter(refuse).map((entry) => ({ Id: entry.Id, SenderFault: false, Code: 'InternalError', Message: 'try again' })),
      };
    });
    expect(await sink().send('acme', ['fine', 'once', 'busy'])).toEqual([{ id: 'busy', error: 'InternalError: try again' }]);
    expect(calls).toBe(3);
    sqs.on(SendMessageBatchCommand).rejects(new Error('connect ECONNREFUSED'));
    expect(await sink().send('acme', ['a'])).toEqual([{ id: 'a', error: 'SendMessageBatch failed: Error: connect ECONNREFUSED' }]);
    expect(await sink().send('acme', [])).toEqual([]);
  });
});
