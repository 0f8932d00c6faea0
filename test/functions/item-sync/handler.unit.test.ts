/**
 * The item sync handler with every AWS client mocked (aws-sdk-client-mock), a scripted provider and
 * a scripted connections' access layer (unit-harness.ts): the messages, the stored revisions, the
 * compare-and-write and the dead letters, asserting the exact commands sent. The other outcomes of
 * docs/item-sync.md ("How each message ends") are in large-items, retry, pace and connections
 * .unit.test.ts.
 */
import 'aws-sdk-client-mock-vitest/extend';
import { describe, expect, it } from 'vitest';
import {
  BatchGetItemCommand,
  ConditionalCheckFailedException,
  DynamoDBServiceException,
  PutItemCommand,
  ProvisionedThroughputExceededException,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import { DeleteObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { emfDimensionSets } from '../../../dev/fakes/emf.js';
import { DLQ_URL, ScriptedProvider, item, providerError } from './helpers.js';
import { BUCKET, NOW, TABLE, TOKEN_1, build, ddb, k, marshalled, run, s3, sqs, stored, useHarness } from './unit-harness.js';

useHarness();

describe('parsing and the stored revisions', () => {
  it('takes {"id"} and bare ids, reads the whole batch in one BatchGetItem and stores new items as the contract row', async () => {
    const provider = new ScriptedProvider()
      .on('a', item('a', 3, { nested: { list: [1, 'x', null, { deep: true }] }, empty: '', nothing: null }))
      .on('b', item('b', 'rev-7'));
    const { result, metrics } = await run(build(provider), ['{"id": "a"}', '  b \n']);

    expect(result).toEqual({ batchItemFailures: [] });
    expect(ddb).toHaveReceivedCommandTimes(BatchGetItemCommand, 1);
    expect(ddb).toReceiveCommandWith(BatchGetItemCommand, {
      RequestItems: {
        [TABLE]: {
          Keys: [k('a'), k('b')],
          // The object key too: a write replacing the row deletes it (also when its answer is lost);
          // syncedAt and childrenPending: a folder whose children are still to be sent (discovery).
          ProjectionExpression: '#connection, #id, #revision, #deleted, #itemObject, #syncedAt, #childrenPending',
          ExpressionAttributeNames: {
            '#connection': 'connection',
            '#id': 'id',
            '#revision': 'revision',
            '#deleted': 'deleted',
            '#itemObject': 'itemObject',
            '#syncedAt': 'syncedAt',
            '#childrenPending': 'childrenPending',
          },
        },
      },
    });
    // The whole command: a plain conditional PutItem (no row to replace: no ReturnValues).
    expect(ddb.commandCalls(PutItemCommand).find((call) => call.args[0].input.Item?.['id']?.S === 'a')?.args[0].input).toEqual({
      TableName: TABLE,
      Item: {
        connection: { S: 'default' },
        id: { S: 'a' },
        type: { S: 'file' },
        revision: { S: '3' },
        syncedAt: { S: NOW.toISOString() },
        item: {
          M: {
            id: { S: 'a' },
            type: { S: 'file' },
            name: { S: 'a.txt' },
            revision: { N: '3' },
            nested: { M: { list: { L: [{ N: '1' }, { S: 'x' }, { NULL: true }, { M: { deep: { BOOL: true } } }] } } },
            empty: { S: '' },
            nothing: { NULL: true },
          },
        },
      },
      ConditionExpression: 'attribute_not_exists(#id)',
      ExpressionAttributeNames: { '#id': 'id' },
    });
    expect(ddb).toReceiveCommandWith(PutItemCommand, { Item: marshalled({ ...k('b'), revision: { S: 'rev-7' } }) });
    expect(provider.calls.map((call) => [call.id, call.token])).toEqual([
      ['a', TOKEN_1],
      ['b', TOKEN_1],
    ]);
    expect(metrics).toMatchObject({
      ItemsFetched: 2,
      ItemsCreated: 2,
      ItemsUpdated: 0,
      ItemsUnchanged: 0,
      ItemsDeleted: 0,
      RecordsRetried: 0,
      RecordsDeadLettered: 0,
    });
  });

  it('fetches an id once however many records carry it, and every record shares the outcome', async () => {
    const provider = new ScriptedProvider().on('dup', item('dup', 1));
    const { result } = await run(build(provider), ['{"id":"dup"}', 'dup', ' dup ', '{"id":"dup","extra":1}']);

    expect(result.batchItemFailures).toEqual([]);
    expect(provider.calls).toHaveLength(1);
    expect(ddb).toReceiveCommandWith(BatchGetItemCommand, {
      RequestItems: { [TABLE]: expect.objectContaining({ Keys: [k('dup')] }) },
    });
    expect(ddb).toHaveReceivedCommandTimes(PutItemCommand, 1);
  });

  it('reads UnprocessedKeys again until DynamoDB has answered for every id', async () => {
    ddb
      .on(BatchGetItemCommand)
      .resolvesOnce({
        Responses: { [TABLE]: [{ ...k('a'), revision: { S: '1' } }] },
        UnprocessedKeys: { [TABLE]: { Keys: [k('b')] } },
      })
      .resolves({ Responses: { [TABLE]: [{ ...k('b'), revision: { S: '1' } }] } });
    const provider = new ScriptedProvider().on('a', item('a', 1)).on('b', item('b', 1));
    const { result, metrics } = await run(build(provider), ['a', 'b']);

    expect(result.batchItemFailures).toEqual([]);
    expect(ddb).toHaveReceivedCommandTimes(BatchGetItemCommand, 2);
    expect(ddb).toHaveReceivedNthCommandWith(BatchGetItemCommand, 2, {
      RequestItems: { [TABLE]: expect.objectContaining({ Keys: [k('b')] }) },
    });
    expect(ddb).not.toHaveReceivedCommand(PutItemCommand);
    expect(metrics['ItemsUnchanged']).toBe(2);
  });

  it('retries the whole batch when UnprocessedKeys never clear (throttled reads)', async () => {
    ddb.on(BatchGetItemCommand).resolves({ Responses: { [TABLE]: [] }, UnprocessedKeys: { [TABLE]: { Keys: [k('a')] } } });
    const provider = new ScriptedProvider().on('a', item('a', 1));
    const { result, metrics } = await run(build(provider), ['a']);

    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
    expect(provider.calls).toHaveLength(0);
    expect(metrics['RecordsRetried']).toBe(1);
  });
});

describe('compare and write', () => {
  it('writes nothing for an unchanged revision (numbers compare as their JSON text)', async () => {
    stored([{ id: 'a', revision: '42' }, { id: 'b', revision: 'r1' }]);
    const provider = new ScriptedProvider().on('a', item('a', 42)).on('b', item('b', 'r1'));
    const { result, metrics } = await run(build(provider), ['a', 'b']);

    expect(result.batchItemFailures).toEqual([]);
    expect(ddb).not.toHaveReceivedCommand(PutItemCommand);
    expect(ddb).not.toHaveReceivedCommand(UpdateItemCommand);
    expect(metrics).toMatchObject({ ItemsFetched: 2, ItemsUnchanged: 2, ItemsCreated: 0, ItemsUpdated: 0 });
  });

  it('updates a changed revision, conditional on the stored revision it compared with', async () => {
    stored([{ id: 'a', revision: '1' }]);
    const provider = new ScriptedProvider().on('a', item('a', 2));
    const { metrics } = await run(build(provider), ['a']);

    expect(ddb).toHaveReceivedCommandTimes(PutItemCommand, 1);
    expect(ddb.commandCalls(PutItemCommand)[0]!.args[0].input).toEqual({
      TableName: TABLE,
      Item: marshalled({ revision: { S: '2' } }),
      ConditionExpression: '#revision = :expected AND attribute_not_exists(#deleted)',
      ExpressionAttributeNames: { '#revision': 'revision', '#deleted': 'deleted' },
      ExpressionAttributeValues: { ':expected': { S: '1' } },
      // The row it replaces, to learn the object it pointed to (deleted after the write).
      ReturnValues: 'ALL_OLD',
    });
    expect(metrics['ItemsUpdated']).toBe(1);
  });

  it('reads the revision at a dot path (REVISION_FIELD=meta.rev)', async () => {
    stored([{ id: 'a', revision: '1' }]);
    const provider = new ScriptedProvider().on('a', { id: 'a', type: 'folder', meta: { rev: 5 }, revision: 1 });
    await run(build(provider, { env: { REVISION_FIELD: 'meta.rev' } }), ['a']);

    expect(ddb).toReceiveCommandWith(PutItemCommand, {
      Item: marshalled({ type: { S: 'folder' }, revision: { S: '5' } }),
      ExpressionAttributeValues: { ':expected': { S: '1' } },
    });
  });

  it('marks a stored row deleted on 404, keeping its copy, conditional on its revision', async () => {
    stored([{ id: 'gone', revision: '9' }]);
    const provider = new ScriptedProvider().on('gone', providerError('not-found', 404));
    const { result, metrics } = await run(build(provider), ['gone']);

    expect(result.batchItemFailures).toEqual([]);
    // One UpdateItem, the whole command (no ReturnValues: a tombstone keeps its object).
    expect(ddb).toHaveReceivedCommandTimes(UpdateItemCommand, 1);
    expect(ddb.commandCalls(UpdateItemCommand)[0]!.args[0].input).toEqual({
      TableName: TABLE,
      Key: k('gone'),
      UpdateExpression: 'SET #deleted = :true, #syncedAt = :syncedAt REMOVE #childrenPending',
      ConditionExpression: '#revision = :expected AND attribute_not_exists(#deleted)',
      ExpressionAttributeNames: { '#revision': 'revision', '#deleted': 'deleted', '#syncedAt': 'syncedAt', '#childrenPending': 'childrenPending' },
      ExpressionAttributeValues: { ':expected': { S: '9' }, ':true': { BOOL: true }, ':syncedAt': { S: NOW.toISOString() } },
    });
    expect(ddb).not.toHaveReceivedCommand(PutItemCommand);
    expect(metrics['ItemsDeleted']).toBe(1);
  });

  it('writes nothing for a 404 on an unknown id or on a row already deleted', async () => {
    stored([{ id: 'tomb', revision: '3', deleted: true }]);
    const provider = new ScriptedProvider().on('never', providerError('not-found', 404)).on('tomb', providerError('not-found', 404));
    const { result, metrics } = await run(build(provider), ['never', 'tomb']);

    expect(result.batchItemFailures).toEqual([]);
    expect(ddb).not.toHaveReceivedCommand(PutItemCommand);
    expect(ddb).not.toHaveReceivedCommand(UpdateItemCommand);
    expect(sqs).not.toHaveReceivedCommand(SendMessageBatchCommand);
    expect(metrics['ItemsDeleted']).toBe(0);
  });

  it('brings a deleted item back (same revision included), conditional on the tombstone', async () => {
    stored([{ id: 'back', revision: '3', deleted: true }]);
    const provider = new ScriptedProvider().on('back', item('back', 3));
    const { metrics } = await run(build(provider), ['back']);

    expect(ddb).toHaveReceivedCommandTimes(PutItemCommand, 1);
    expect(ddb.commandCalls(PutItemCommand)[0]!.args[0].input).toEqual({
      TableName: TABLE,
      Item: expect.not.objectContaining({ deleted: expect.anything() }),
      ConditionExpression: '#revision = :expected AND #deleted = :true',
      ExpressionAttributeNames: { '#revision': 'revision', '#deleted': 'deleted' },
      ExpressionAttributeValues: { ':expected': { S: '3' }, ':true': { BOOL: true } },
      ReturnValues: 'ALL_OLD',
    });
    expect(metrics['ItemsUpdated']).toBe(1);
  });

  it('after a lost write race reads the row again (consistently), fetches again and re-decides', async () => {
    ddb
      .on(BatchGetItemCommand)
      .resolvesOnce({ Responses: { [TABLE]: [{ ...k('race'), revision: { S: '1' } }] } })
      .resolves({ Responses: { [TABLE]: [{ ...k('race'), revision: { S: '3' } }] } });
    ddb.on(PutItemCommand).rejectsOnce(new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: {} }));
    const provider = new ScriptedProvider().on('race', item('race', 2), item('race', 3));
    const { result, metrics } = await run(build(provider), ['race']);

    expect(result.batchItemFailures).toEqual([]);
    expect(provider.calls).toHaveLength(2);
    expect(ddb).toHaveReceivedNthCommandWith(BatchGetItemCommand, 2, {
      RequestItems: {
        [TABLE]: expect.objectContaining({ Keys: [k('race')], ConsistentRead: true }),
      },
    });
    // The second fetch found the revision another writer stored: nothing more to write.
    expect(ddb).toHaveReceivedCommandTimes(PutItemCommand, 1);
    expect(metrics['ItemsUnchanged']).toBe(1);
  });

  it('gives a write race up as retry-later after a bounded number of rounds', async () => {
    stored([{ id: 'hot', revision: '1' }]);
    ddb.on(PutItemCommand).rejects(new ConditionalCheckFailedException({ message: 'The conditional request failed', $metadata: {} }));
    const provider = new ScriptedProvider().on('hot', item('hot', 2));
    const { result, logs } = await run(build(provider), ['hot']);

    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
    expect(ddb).toHaveReceivedCommandTimes(PutItemCommand, 3);
    expect(provider.calls).toHaveLength(3);
    expect(sqs).not.toHaveReceivedCommand(SendMessageBatchCommand);
    expect(logs.find((line) => line['message'] === 'record will be retried')).toMatchObject({
      itemId: 'hot',
      reason: expect.stringContaining('conditional write lost 3 times'),
    });
  });

  it('retries a record whose write was throttled beyond the SDK retries', async () => {
    ddb.on(PutItemCommand).rejects(
      new ProvisionedThroughputExceededException({ message: 'Rate of requests exceeds the allowed throughput', $metadata: {} }),
    );
    const provider = new ScriptedProvider().on('a', item('a', 1)).on('b', item('b', 1));
    const { result } = await run(build(provider), ['a', 'b']);

    expect(result.batchItemFailures).toEqual([{ itemIdentifier: 'm1' }, { itemIdentifier: 'm2' }]);
    expect(sqs).not.toHaveReceivedCommand(SendMessageBatchCommand);
  });
});

describe('dead letters', () => {
  const bad = [
    '',
    '{"id": ""}',
    '{"id": 5}',
    '{"name": "x"}',
    '{not json',
    '{"id": null}',
    'tab\there',
    '{"id": "nul\\u0000"}',
    '{"id": "\\ud800"}',
    'x'.repeat(1025),
  ];

  it('sends every bad body to the DLQ with the original body, error and sourceMessageId, and nothing else happens', async () => {
    const provider = new ScriptedProvider().on('ok', item('ok', 1));
    const bodies = [...bad, 'ok'];
    const { result, metrics } = await run(build(provider), bodies);

    expect(result).toEqual({ batchItemFailures: [] });
    expect(provider.calls.map((call) => call.id)).toEqual(['ok']);
    expect(ddb).toReceiveCommandWith(BatchGetItemCommand, {
      RequestItems: { [TABLE]: expect.objectContaining({ Keys: [k('ok')] }) },
    });
    const sent = sqs.commandCalls(SendMessageBatchCommand).flatMap((call) => call.args[0].input.Entries ?? []);
    expect(sent.map((entry) => entry.MessageBody)).toEqual(bad);
    for (const [index, entry] of sent.entries()) {
      // No connection could be read from the body: no message group.
      expect(entry.MessageGroupId).toBeUndefined();
      expect(entry.MessageAttributes?.['sourceMessageId']).toEqual({ DataType: 'String', StringValue: `m${index + 1}` });
      expect(entry.MessageAttributes?.['error']?.DataType).toBe('String');
      expect(entry.MessageAttributes?.['error']?.StringValue).toMatch(/\w+ \w+/);
    }
    expect(sqs).toHaveReceivedCommandTimes(SendMessageBatchCommand, 1);
    expect(sqs).toReceiveCommandWith(SendMessageBatchCommand, { QueueUrl: DLQ_URL });
    const reasons = sent.map((entry) => entry.MessageAttributes?.['error']?.StringValue);
    expect(reasons).toEqual([
      'the item id is empty',
      'the item id is empty',
      'the message body\'s "id" is a number, not a string',
      'the message body has no "id"; expected {"id": "<item id>"}',
      'the message body starts with "{" but is not valid JSON; expected {"id": "<item id>"}',
      'the message body\'s "id" is null, not a string',
      'the item id contains a control character (U+0009) at position 3',
      'the item id contains a control character (U+0000) at position 3',
      'the item id is not well-formed Unicode (a lone surrogate)',
      'the item id is 1025 bytes long in UTF-8; the limit is 1024 bytes',
    ]);
    expect(metrics).toMatchObject({ RecordsDeadLettered: bad.length, ItemsCreated: 1, RecordsRetried: 0 });
  });

  it('dead-letters an id over 1,024 bytes in UTF-8 up front: no provider request, no read of the table', async () => {
    const long = [
      JSON.stringify({ id: 'é'.repeat(600) }),
      JSON.stringify({ connection: 'acme', id: '😀'.repeat(300) }),
      '日'.repeat(1000),
    ];
    const provider = new ScriptedProvider();
    const { result, metrics } = await run(build(provider), long);

    expect(result).toEqual({ batchItemFailures: [] });
    expect(provider.calls).toEqual([]);
    expect(ddb).not.toHaveReceivedCommand(BatchGetItemCommand);
    expect(ddb).not.toHaveReceivedCommand(PutItemCommand);
    const sent = sqs.commandCalls(SendMessageBatchCommand).flatMap((call) => call.args[0].input.Entries ?? []);
    expect(sent.map((entry) => [entry.MessageBody, entry.MessageAttributes?.['error']?.StringValue])).toEqual([
      [long[0], 'the item id is 1200 bytes long in UTF-8; the limit is 1024 bytes'],
      [long[1], 'the item id is 1200 bytes long in UTF-8; the limit is 1024 bytes'],
      [long[2], 'the item id is 3000 bytes long in UTF-8; the limit is 1024 bytes'],
    ]);
    expect(metrics).toMatchObject({ RecordsDeadLettered: 3, ItemsFetched: 0 });
  });

  it.each([
    ['a 400', providerError('permanent', 400), /the provider cannot serve this item as asked \(.*HTTP 400/],
    ['a 403', providerError('permanent', 403), /HTTP 403/],
    ['a 200 that is not JSON', providerError('malformed', 200), /the provider's answer is not an item/],
    ['a 200 array', [1, 2], /200 answer is an array, not an item object/],
    ['another id', item('someone-else', 1), /another item \(id "someone-else"\)/],
    ['no revision', { id: 'x', type: 'file' }, /no value at the revision field "revision"/],
    ['an empty revision', item('x', ''), /an empty string at the revision field/],
    ['a boolean revision', item('x', true), /a boolean at the revision field/],
    ['an unknown type', { id: 'x', type: 'symlink', revision: 1 }, /type "symlink"; expected "file" or "folder"/],
  ])('dead-letters %s with a reason that says why', async (_name, answer, reason) => {
    const provider = new ScriptedProvider().on('x', answer);
    const { result, metrics } = await run(build(provider), ['{"id":"x"}']);

    expect(result.batchItemFailures).toEqual([]);
    expect(ddb).not.toHaveReceivedCommand(PutItemCommand);
    expect(sqs).toReceiveCommandWith(SendMessageBatchCommand, {
      QueueUrl: DLQ_URL,
      Entries: [
        {
          Id: 'm0',
          MessageBody: '{"id":"x"}',
          MessageGroupId: 'default',
          MessageAttributes: {
            error: { DataType: 'String', StringValue: expect.stringMatching(reason) },
            sourceMessageId: { DataType: 'String', StringValue: 'm1' },
          },
        },
      ],
    });
    expect(metrics['RecordsDeadLettered']).toBe(1);
  });

  it('dead-letters an item DynamoDB refuses as too large even as a row pointing to its object (ValidationException on both writes)', async () => {
    ddb.on(PutItemCommand).rejects(
      new DynamoDBServiceException({
        name: 'ValidationException',
        $fault: 'client',
        $metadata: { httpStatusCode: 400 },
        message: 'Item size has exceeded the maximum allowed size',
      }),
    );
    const provider = new ScriptedProvider().on('big', item('big', 1));
    await run(build(provider), ['big']);

    expect(sqs).toReceiveCommandWith(SendMessageBatchCommand, {
      Entries: [
        expect.objectContaining({
          MessageAttributes: expect.objectContaining({
            error: { DataType: 'String', StringValue: expect.stringMatching(/^item too large to store \(\d+ bytes; DynamoDB's limit is 400 KB\)$/) },
          }),
        }),
      ],
    });
    // The inline row, then the row pointing to the object; the object, pointed to by nothing, is gone.
    expect(ddb).toHaveReceivedCommandTimes(PutItemCommand, 2);
    expect(s3).toHaveReceivedCommandTimes(PutObjectCommand, 1);
    const key = s3.commandCalls(PutObjectCommand)[0]!.args[0].input.Key;
    expect(s3).toReceiveCommandExactlyOnceWith(DeleteObjectCommand, { Bucket: BUCKET, Key: key });
  });

  it('dead-letters any other ValidationException with DynamoDB\'s own words, never as too large, and nothing goes to the bucket', async () => {
    const message = 'One or more parameter values were invalid: Aggregated size of all range keys has exceeded the size limit of 1024 bytes';
    ddb.on(PutItemCommand).rejects(
      new DynamoDBServiceException({ name: 'ValidationException', $fault: 'client', $metadata: { httpStatusCode: 400 }, message }),
    );
    const provider = new ScriptedProvider().on('x', item('x', 1));
    const { result, metrics } = await run(build(provider), ['{"id":"x"}']);

    expect(result.batchItemFailures).toEqual([]);
    const sent = sqs.commandCalls(SendMessageBatchCommand).flatMap((call) => call.args[0].input.Entries ?? []);
    expect(sent.map((entry) => entry.MessageAttributes?.['error']?.StringValue)).toEqual([
      `DynamoDB refused the item's PutItem as invalid (ValidationException: ${message})`,
    ]);
    expect(ddb).toHaveReceivedCommandTimes(PutItemCommand, 1);
    expect(s3).not.toHaveReceivedCommand(PutObjectCommand);
    expect(metrics).toMatchObject({ RecordsDeadLettered: 1, RecordsRetried: 0 });
  });

  it('retries (never drops) a record the DLQ did not accept', async () => {
    sqs.on(SendMessageBatchCommand).resolves({
      Successful: [{ Id: 'm1', MessageId: 'x', MD5OfMessageBody: 'x' }],
      Failed: [{ Id: 'm0', SenderFault: false, Code: 'InternalError', Message: 'try again' }],
    });
    const { result, metrics } = await run(build(new ScriptedProvider()), ['', '{"id": 1}']);

    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
    expect(metrics).toMatchObject({ RecordsDeadLettered: 1, RecordsRetried: 1 });
  });

  it('retries every dead record when SendMessageBatch fails as a whole', async () => {
    sqs.on(SendMessageBatchCommand).rejects(new Error('socket hang up'));
    const { result } = await run(build(new ScriptedProvider()), ['', '{"id": 1}']);

    expect(result.batchItemFailures).toEqual([{ itemIdentifier: 'm1' }, { itemIdentifier: 'm2' }]);
  });

  it('sends dead letters in batches of at most 10', async () => {
    const bodies = Array.from({ length: 23 }, () => '');
    await run(build(new ScriptedProvider()), bodies);

    const sizes = sqs.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input.Entries!.length);
    expect(sizes).toEqual([10, 10, 3]);
  });
});

describe('the metrics’ dimensions', () => {
  it('service alone; with CONTENT_SYNC_STAGE, the stage beside it, on every metric', async () => {
    const dimensions = async (env: Record<string, string>) => {
      stored([{ id: 'a', revision: '1' }]);
      const { output } = await run(build(new ScriptedProvider().on('a', item('a', 1)), { env }), ['a']);
      return emfDimensionSets(output);
    };
    expect(await dimensions({})).toEqual(['ContentSync: service=item-sync']);
    expect(await dimensions({ CONTENT_SYNC_STAGE: 'staging' })).toEqual(['ContentSync: service=item-sync, stage=staging']);
  });
});
