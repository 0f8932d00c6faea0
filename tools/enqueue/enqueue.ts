/**
 * `npm run enqueue`: feed item ids to the sync queue, or a backfill to the reconcile queue.
 *
 *   npm run enqueue -- --queue-url <url> [--connection <id>] [id ...]          ids from the arguments
 *   some-command | npm run enqueue -- --queue-url <url> [--connection <id>]    one id per line from standard input
 *   npm run enqueue -- --queue-url <url> --resync-table <table> [--connection <id>]   every row the table holds
 *   npm run enqueue -- --reconcile-queue-url <url> --backfill [--connection <id>] [id ...]   a backfill (ids, or standard input)
 *
 * `--stage <stage>` in place of the queue's URL takes it from that deployment's stateful stack
 * (`ContentSyncStateful-<stage>`: its output QueueUrl, or ReconcileQueueUrl for a backfill).
 *
 * A backfill goes to the reconcile queue in the background lane (`lane` = `background`): the item
 * sync takes it with that queue's own containers and draws it from the provider pace as the sweep,
 * so users' ids keep their containers and come first. Every message carries its connection as its
 * MessageGroupId (fair queues).
 *
 * Every id (and the connection) is validated before anything is sent (a bad one is an error naming
 * it, and nothing is sent). Messages are `{"connection":"…","id":"…"}` with `--connection` and for
 * every row of `--resync-table` (each row's own connection), `{"id":"…"}` otherwise (the connection
 * `default`), sent with SendMessageBatch, at most 10 a call; entries the queue refuses for a reason
 * that may pass are re-sent (bounded, with backoff); refusals that are the sender's fault are
 * reported, not re-sent. Exits 0 when every id was sent, 1 otherwise, 2 on a usage error (a bad
 * `--connection` among them). The AWS clients use the SDK's standard configuration (AWS_REGION,
 * AWS_PROFILE, AWS_ENDPOINT_URL_SQS, AWS_ENDPOINT_URL_DYNAMODB...).
 *
 * The sending is send.ts, re-exported here for the local run and the tests.
 */
import { parseArgs } from 'node:util';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import { createProgress, formatDuration, type Progress } from './progress.js';
import { connectionIdProblem } from '../../functions/shared/connections/connection.js';
import { describeStackOutputs, OUTPUT_KEYS, stackReadFailure, statefulStackName, type StackOutputs } from '../stack-outputs.js';
import {
  backfillMessages,
  DEFAULT_MAX_ATTEMPTS,
  enqueueMessages,
  findInvalidMessages,
  InvalidIdsError,
  quoteMessage,
  readIdLines,
  scanTableKeys,
  type EnqueueMessage,
  type EnqueueOptions,
  type EnqueueProgress,
  type EnqueueResult,
} from './send.js';
import { runWhenMain } from '../cli-main.js';

// The sending itself (send.ts), for the local run and the tests.
export * from './send.js';

// ---- CLI ----------------------------------------------------------------------------------------

const USAGE = `Usage:
  npm run enqueue -- --queue-url <url> [--connection <id>] [id ...]
  <ids, one per line> | npm run enqueue -- --queue-url <url> [--connection <id>]
  npm run enqueue -- --queue-url <url> --resync-table <table name> [--connection <id>]
  npm run enqueue -- --reconcile-queue-url <url> --backfill [--connection <id>] [id ... | < file]
  npm run enqueue -- --stage <stage> [--backfill] [--connection <id>] [id ...]

Sends {"connection": "<connection>", "id": "<id>"} messages to the sync queue (SendMessageBatch,
at most 10 a call), each with its connection as its message group; without --connection, ids given
are sent as {"id": "<id>"} (the connection "default").

A backfill (--backfill: many ids of one account, say its first sync) goes to the reconcile queue
instead, with the message attribute lane = background: the item sync takes it with that queue's
own containers and after users' ids in the provider pace, so no other account's ids wait for it.

Options:
  --queue-url <url>        the sync queue's URL (the stateful stack's output QueueUrl; required
                           unless --backfill or --stage)
  --backfill               send to the reconcile queue, in the background lane
  --reconcile-queue-url <url>
                           the reconcile queue's URL (the stateful stack's output ReconcileQueueUrl;
                           required with --backfill unless --stage)
  --stage <stage>          the deployment whose queue is used: the output QueueUrl (with
                           --backfill, ReconcileQueueUrl) of its stateful stack
                           ContentSyncStateful-<stage>, in place of the URL
  --connection <id>        the connection the ids belong to (1-64 characters of A-Z a-z 0-9 . _ -);
                           with --resync-table: only that connection's rows
  --resync-table <name>    enqueue every row the items table holds, each with its connection
                           (after an outage or a configuration change); no ids may be given with it
  --dry-run                validate (and scan) but send nothing
  --max-attempts <n>       attempts per message for refusals that may pass (default ${DEFAULT_MAX_ATTEMPTS})
  -h, --help               this text

With no ids and no --resync-table, ids are read from standard input, one per line (blank lines
skipped, surrounding whitespace trimmed). Every id is validated before anything is sent.
AWS region, credentials and endpoints come from the SDK's standard configuration (AWS_REGION,
AWS_PROFILE, AWS_ENDPOINT_URL_SQS, AWS_ENDPOINT_URL_DYNAMODB...).
Exit status: 0 all sent, 1 something was not sent (or an error, a stack that cannot be read among
them), 2 usage error.`;

export interface CliIo {
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
}

export interface CliDeps {
  sqs?: SQSClient;
  dynamodb?: DynamoDBClient;
  enqueue?: EnqueueOptions;
  /** The stateful stack's outputs (--stage); default CloudFormation DescribeStacks. */
  stackOutputs?: StackOutputs;
}

class UsageError extends Error {}

/**
 * The SQS client, from the SDK's standard configuration. The SDK sends each request to the host of
 * the queue URL, even when an endpoint is configured; when AWS_ENDPOINT_URL_SQS (or AWS_ENDPOINT_URL)
 * is set, it is used instead, as the operator asked (a VPC endpoint, a local emulator).
 */
function createSqsClient(env: NodeJS.ProcessEnv): SQSClient {
  const endpointConfigured = Boolean(env.AWS_ENDPOINT_URL_SQS?.trim() || env.AWS_ENDPOINT_URL?.trim());
  return new SQSClient(endpointConfigured ? { useQueueUrlAsEndpoint: false } : {});
}

type CliValues = {
  'queue-url'?: string;
  backfill?: boolean;
  'reconcile-queue-url'?: string;
  connection?: string;
  'resync-table'?: string;
  'dry-run'?: boolean;
  'max-attempts'?: string;
  stage?: string;
  help?: boolean;
};

/** Where the queue's URL comes from: given, or the output of a deployment's stateful stack (--stage). */
type QueueSource = { url: string } | { stackName: string; outputKey: string };

interface CliRequest {
  /** The sync queue's URL, or with --backfill the reconcile queue's. */
  queueUrl: string;
  backfill: boolean;
  values: CliValues;
  positionals: string[];
}

/** The command line checked: the request but for the queue's URL, and where that comes from. */
type ParsedRequest = Omit<CliRequest, 'queueUrl'> & { queue: QueueSource };

/** Runs the CLI; returns the exit status. */
export async function main(argv: string[], io: CliIo = process, deps: CliDeps = {}): Promise<number> {
  let parsed: ParsedRequest | 'help';
  try {
    parsed = parseCommandLine(argv);
  } catch (error) {
    io.stderr.write(`enqueue: ${(error as Error).message}\nRun with --help for usage.\n`);
    return 2;
  }
  if (parsed === 'help') {
    io.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const { queue, ...rest } = parsed;
  let queueUrl: string;
  if ('url' in queue) queueUrl = queue.url;
  else {
    // Before any id is read or sent. DescribeStacks' errors hold no token; printed whole.
    let outputs: Record<string, string>;
    try {
      outputs = await (deps.stackOutputs ?? describeStackOutputs)(queue.stackName);
    } catch (error) {
      io.stderr.write(`enqueue: ${stackReadFailure(queue.stackName, error)}\n`);
      return 1;
    }
    const url = outputs[queue.outputKey]?.trim();
    if (!url) {
      io.stderr.write(`enqueue: the stack ${queue.stackName} has no output ${queue.outputKey}\nRun with --help for usage.\n`);
      return 2;
    }
    queueUrl = url;
  }
  const request: CliRequest = { ...rest, queueUrl };
  const progress = createProgress(io.stderr);
  try {
    return await runCli(request, io, deps, progress);
  } catch (error) {
    progress.clear();
    const e = error as Error;
    io.stderr.write(`enqueue: ${e.name}: ${e.message}\n`);
    return 1;
  }
}

/** The command line's options, as parseArgs reads them (test/docs holds the docs to them). */
export const ENQUEUE_OPTIONS = {
  'queue-url': { type: 'string' },
  backfill: { type: 'boolean' },
  'reconcile-queue-url': { type: 'string' },
  connection: { type: 'string' },
  'resync-table': { type: 'string' },
  'dry-run': { type: 'boolean' },
  'max-attempts': { type: 'string' },
  stage: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** The options and ids as given, checked; throws UsageError (or parseArgs' error) on a mistake. */
function parseCommandLine(argv: string[]): ParsedRequest | 'help' {
  const { values, positionals } = parseArgs({
    args: argv,
    options: ENQUEUE_OPTIONS,
    allowPositionals: true,
    strict: true,
  });
  if (values.help) return 'help';
  const backfill = values.backfill === true;
  const queue = queueSource(values, backfill);
  if (values['resync-table'] !== undefined && positionals.length > 0) {
    throw new UsageError('give either ids or --resync-table, not both');
  }
  if (values.connection !== undefined) {
    const problem = connectionIdProblem(values.connection);
    if (problem !== undefined) throw new UsageError(`--connection: ${problem}`);
  }
  if (values['max-attempts'] !== undefined && !/^([1-9]|10)$/.test(values['max-attempts'])) {
    throw new UsageError('--max-attempts must be a whole number from 1 to 10');
  }
  return { queue, backfill, values, positionals };
}

/**
 * Where the queue's URL comes from: --queue-url (with --backfill, --reconcile-queue-url), or with
 * --stage the output of that deployment's stateful stack; a usage error for anything else.
 */
function queueSource(values: CliValues, backfill: boolean): QueueSource {
  if (!backfill && values['reconcile-queue-url'] !== undefined) {
    throw new UsageError('--reconcile-queue-url goes with --backfill; users\' ids go to the sync queue (--queue-url)');
  }
  if (values.stage !== undefined) {
    const given = values['queue-url'] !== undefined ? '--queue-url' : values['reconcile-queue-url'] !== undefined ? '--reconcile-queue-url' : undefined;
    if (given !== undefined) throw new UsageError(`give --stage or ${given}, not both: --stage reads the queue's URL from the deployment's stack`);
    const stack = statefulStackName({ stage: values.stage });
    if ('problem' in stack) throw new UsageError(stack.problem);
    return { stackName: stack.stackName, outputKey: backfill ? OUTPUT_KEYS.reconcileQueue : OUTPUT_KEYS.queue };
  }
  const queueUrl = backfill ? backfillQueueUrl(values) : values['queue-url'];
  if (!queueUrl) throw new UsageError('--queue-url is required (or --stage <stage>: the deployment whose stack output QueueUrl is used)');
  const flag = backfill ? '--reconcile-queue-url' : '--queue-url';
  if (!/^https?:\/\/[^/]+\/.+/.test(queueUrl)) {
    throw new UsageError(`${flag} must be a queue URL such as https://sqs.eu-west-1.amazonaws.com/123456789012/content-sync-items, got "${queueUrl}"`);
  }
  return { url: queueUrl };
}

/**
 * The queue a backfill goes to: the reconcile queue, named by --reconcile-queue-url (the stateful
 * stack keeps it, and the item sync takes it, whatever freshnessHours is). Not --queue-url: a
 * backfill on the sync queue would take users' containers.
 */
function backfillQueueUrl(values: CliValues): string {
  if (values['queue-url'] !== undefined) {
    throw new UsageError('a backfill goes to the reconcile queue: give --reconcile-queue-url (the stateful stack\'s output ReconcileQueueUrl) instead of --queue-url');
  }
  const url = values['reconcile-queue-url'];
  if (!url) throw new UsageError('--backfill needs --reconcile-queue-url: the stateful stack\'s output ReconcileQueueUrl');
  return url;
}

async function runCli(request: CliRequest, io: CliIo, deps: CliDeps, progress: Progress): Promise<number> {
  const { queueUrl, values } = request;
  const err = (line: string): void => void io.stderr.write(`${line}\n`);
  const started = Date.now();
  const { messages, source } = await collectMessages(request, io, deps, progress);

  const invalid = findInvalidMessages(messages);
  if (invalid.length > 0) {
    err(`enqueue: ${new InvalidIdsError(invalid).message}`);
    return 1;
  }
  if (messages.length === 0) {
    err(`enqueue: no ids in ${source}; nothing to send`);
    return values['resync-table'] !== undefined ? 0 : 1;
  }
  if (values['dry-run']) {
    const distinct = new Set(messages.map((message) => JSON.stringify([message.connection, message.id]))).size;
    err(`Dry run: ${distinct} valid ids from ${source}; nothing sent to ${queueUrl}.`);
    return 0;
  }

  const sqs = deps.sqs ?? createSqsClient(process.env);
  const options = {
    ...deps.enqueue,
    ...(values['max-attempts'] ? { maxAttempts: Number(values['max-attempts']) } : {}),
    onProgress: (p: EnqueueProgress) =>
      progress.update(`sending: ${p.sent}/${p.total} sent${p.failed ? `, ${p.failed} failed` : ''}${p.resent ? `, ${p.resent} re-sent` : ''}`),
  };
  const result = request.backfill ? await backfillMessages(sqs, queueUrl, messages, options) : await enqueueMessages(sqs, queueUrl, messages, options);
  progress.clear();
  const to = request.backfill ? `${queueUrl} (a backfill, in the background lane)` : queueUrl;
  return printResult(result, { given: messages.length - result.duplicates, source, queueUrl: to, elapsedMs: Date.now() - started }, io);
}

/**
 * The messages to send and where they came from: the table's rows (--resync-table: each with its
 * connection; with --connection a Query of that connection's rows), or the ids of the arguments or
 * of standard input (with --connection, that connection's; else the connection `default`'s).
 */
async function collectMessages(
  request: CliRequest,
  io: CliIo,
  deps: CliDeps,
  progress: Progress,
): Promise<{ messages: EnqueueMessage[]; source: string }> {
  const { connection } = request.values;
  const table = request.values['resync-table'];
  if (table !== undefined) {
    const dynamodb = deps.dynamodb ?? new DynamoDBClient({});
    const of = connection === undefined ? table : `${table} (connection ${connection})`;
    const keys = await scanTableKeys(dynamodb, table, {
      ...(connection !== undefined ? { connection } : {}),
      onProgress: (n: number) => progress.update(`${connection === undefined ? 'scanning' : 'querying'} ${of}: ${n} ids`),
    });
    progress.done(`${connection === undefined ? 'scanned' : 'queried'} ${of}: ${keys.length} ids`);
    return { messages: keys, source: `table ${of}` };
  }
  const withConnection = (ids: string[]): EnqueueMessage[] => ids.map((id) => (connection === undefined ? { id } : { connection, id }));
  const of = connection === undefined ? '' : ` (connection ${connection})`;
  if (request.positionals.length > 0) return { messages: withConnection(request.positionals), source: `arguments${of}` };
  if (io.stdin.isTTY) io.stderr.write('Reading ids from standard input, one per line; end with Ctrl-D (Ctrl-Z on Windows).\n');
  return { messages: withConnection(await readIdLines(io.stdin)), source: `standard input${of}` };
}

/** Each id sent (stdout) and not sent (stderr), the summary; the exit status. */
function printResult(
  result: EnqueueResult,
  run: { given: number; source: string; queueUrl: string; elapsedMs: number },
  io: CliIo,
): number {
  const out = (line: string): void => void io.stdout.write(`${line}\n`);
  const err = (line: string): void => void io.stderr.write(`${line}\n`);
  for (const sent of result.sent) out(`sent ${quoteMessage(sent)} ${sent.messageId}`);
  for (const failed of result.failed) {
    err(`not sent ${quoteMessage(failed)}: ${failed.code}${failed.message ? ` ${failed.message}` : ''}${failed.senderFault ? ' (refused, not re-sent)' : ''}`);
  }
  let summary =
    `Sent ${result.sent.length} of ${run.given} ids from ${run.source} to ${run.queueUrl} ` +
    `in ${result.calls} SendMessageBatch call${result.calls === 1 ? '' : 's'} (${formatDuration(run.elapsedMs)})`;
  if (result.duplicates) summary += `; ${result.duplicates} duplicate id${result.duplicates === 1 ? '' : 's'} skipped`;
  if (result.resent) summary += `; ${result.resent} re-sent after a refusal or a failed call`;
  err(`${summary}.`);
  if (result.failed.length > 0) {
    err(`enqueue: ${result.failed.length} id${result.failed.length === 1 ? ' was' : 's were'} not sent${result.aborted ? ' (stopped after an error every further call would repeat)' : ''}.`);
    return 1;
  }
  return 0;
}

runWhenMain(import.meta.url, 'enqueue', main);
