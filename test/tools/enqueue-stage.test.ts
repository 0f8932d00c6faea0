/**
 * `npm run enqueue -- --stage <stage>`: the queue's URL from that deployment's stateful stack
 * (`ContentSyncStateful-<stage>`: QueueUrl, or ReconcileQueueUrl for a backfill), read before any
 * id; the stage checked by the rule of the context key `stage`; a stack that cannot be read is a
 * failure (1) printed whole, a usage mistake is 2, and nothing is sent either way.
 */
import { SendMessageBatchCommand, SQSClient, type SendMessageBatchCommandInput } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { main } from '../../tools/enqueue/enqueue.js';
import { io } from './cli-io.js';

const QUEUE_URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/ContentSyncStateful-staging-SyncQueue';
const RECONCILE_QUEUE_URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/ContentSyncStateful-staging-ReconcileQueue';
const sqsMock = mockClient(SQSClient);


/** The stacks read, in order. */
let stacksRead: string[];

function deps(outputs: (stackName: string) => Promise<Record<string, string>>) {
  return {
    sqs: new SQSClient({}),
    enqueue: { sleep: async () => undefined },
    stackOutputs: async (stackName: string) => {
      stacksRead.push(stackName);
      return outputs(stackName);
    },
  };
}

const deployed = deps(async () => ({ QueueUrl: QUEUE_URL, ReconcileQueueUrl: RECONCILE_QUEUE_URL, ItemsTableName: 'items' }));

beforeEach(() => {
  sqsMock.reset();
  stacksRead = [];
  sqsMock.on(SendMessageBatchCommand).callsFake((input: SendMessageBatchCommandInput) => ({
    Successful: (input.Entries ?? []).map((e) => ({ Id: e.Id, MessageId: `msg-${e.Id}`, MD5OfMessageBody: 'x' })),
    Failed: [],
  }));
});

const sent = () => sqsMock.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input);

describe('enqueue --stage', () => {
  it('sends to the sync queue of ContentSyncStateful-<stage> (its output QueueUrl)', async () => {
    const cli = io();
    expect(await main(['--stage', 'staging', '--connection', 'acme', 'fil-1'], cli, deployed)).toBe(0);
    expect(stacksRead).toEqual(['ContentSyncStateful-staging']);
    expect(sent()).toEqual([{ QueueUrl: QUEUE_URL, Entries: [{ Id: '0', MessageBody: '{"connection":"acme","id":"fil-1"}', MessageGroupId: 'acme' }] }]);
    expect(cli.err()).toContain(`Sent 1 of 1 ids from arguments (connection acme) to ${QUEUE_URL}`);
  });

  it('with --backfill, to its reconcile queue (ReconcileQueueUrl), in the background lane', async () => {
    expect(await main(['--stage', 'staging', '--backfill', 'fil-2'], io(), deployed)).toBe(0);
    expect(stacksRead).toEqual(['ContentSyncStateful-staging']);
    expect(sent()).toEqual([
      {
        QueueUrl: RECONCILE_QUEUE_URL,
        Entries: [{ Id: '0', MessageBody: '{"id":"fil-2"}', MessageGroupId: 'default', MessageAttributes: { lane: { DataType: 'String', StringValue: 'background' } } }],
      },
    ]);
  });

  it.each([
    [['--stage', 'Staging', 'a'], '--stage: must be 1 to 20 of a-z 0-9 - (it names the stacks ContentSyncStateful-<stage> and ContentSyncStateless-<stage>), got "Staging"'],
    [['--stage', '', 'a'], '--stage: must be 1 to 20 of a-z 0-9 - (it names the stacks ContentSyncStateful-<stage> and ContentSyncStateless-<stage>), got ""'],
    [['--stage', 'staging', '--queue-url', QUEUE_URL, 'a'], "give --stage or --queue-url, not both: --stage reads the queue's URL from the deployment's stack"],
    [['--stage', 'staging', '--backfill', '--reconcile-queue-url', RECONCILE_QUEUE_URL, 'a'], "give --stage or --reconcile-queue-url, not both: --stage reads the queue's URL from the deployment's stack"],
    [['a'], '--queue-url is required (or --stage <stage>: the deployment whose stack output QueueUrl is used)'],
  ])('%j: a usage error (2), no stack read, nothing sent', async (argv, message) => {
    const cli = io();
    expect(await main(argv, cli, deployed)).toBe(2);
    expect(cli.err()).toBe(`enqueue: ${message}\nRun with --help for usage.\n`);
    expect(stacksRead).toEqual([]);
    expect(sent()).toEqual([]);
  });

  it('a stack that cannot be read: a failure (1) with the whole reason, before any id is read', async () => {
    const cli = io('fil-1\n');
    const refused = deps(async () => {
      throw Object.assign(new Error('Stack with id ContentSyncStateful-staging does not exist'), { name: 'ValidationError' });
    });
    expect(await main(['--stage', 'staging'], cli, refused)).toBe(1);
    expect(cli.err()).toBe('enqueue: reading the stack ContentSyncStateful-staging failed: ValidationError: Stack with id ContentSyncStateful-staging does not exist\n');
    expect(cli.stdin.readableEnded).toBe(false);
    expect(sent()).toEqual([]);
  });

  it('a stack without the output: a usage error (2) that names the stack and the output', async () => {
    const cli = io();
    expect(await main(['--stage', 'staging', '--backfill', 'a'], cli, deps(async () => ({ QueueUrl: QUEUE_URL })))).toBe(2);
    expect(cli.err()).toBe('enqueue: the stack ContentSyncStateful-staging has no output ReconcileQueueUrl\nRun with --help for usage.\n');
    expect(sent()).toEqual([]);
  });

  it('--help names --stage', async () => {
    const cli = io();
    expect(await main(['--help'], cli, deployed)).toBe(0);
    expect(cli.out()).toMatch(/--stage <stage> +the deployment whose queue is used/);
  });
});
