/**
 * AWS stand-ins for the benchmark and the soak, plugged into the real SDK v3 clients as middleware:
 *
 * - Secrets Manager and SQS are answered in-process by a middleware at the very start of the
 *   client's stack (the `initialize` step, highest priority): the handler code under test talks to
 *   a real `SecretsManagerClient` / `SQSClient` object, but no request leaves the process. That keeps
 *   the soak deterministic and fast and lets the SQS answers act on the soak's own queue model
 *   (ChangeMessageVisibility, the dead-letter queue).
 * - DynamoDB is real (dynalite, over HTTP). `instrumentDynamo` adds a middleware in the
 *   `deserialize` step, that is below the SDK's retry middleware: it counts every request that
 *   reaches the table and every successful write (with the row state it stored), and can inject
 *   throttling (ProvisionedThroughputExceededException / ThrottlingException, which the SDK retries
 *   with its own backoff), BatchGetItem UnprocessedKeys, and lost write acknowledgements (the write
 *   is applied, then the caller sees a time-out and the SDK sends it again).
 */
import { createHash, randomUUID } from 'node:crypto';
import { DynamoDBServiceException, ProvisionedThroughputExceededException, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { ResourceNotFoundException, SecretsManagerServiceException, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { QueueDoesNotExist, SQSServiceException, type SQSClient } from '@aws-sdk/client-sqs';

type AnyInput = Record<string, unknown>;
type Handler = (args: { input: AnyInput }) => Promise<{ output: AnyInput; response: unknown }>;
type Middleware = (next: Handler, context: { commandName?: string }) => Handler;

interface Stack {
  middlewareStack: { add(middleware: Middleware, options: { step: string; priority?: string; name: string }): void };
}

const OK = { httpStatusCode: 200 };

function answer(output: AnyInput): { output: AnyInput; response: unknown } {
  return { output: { ...output, $metadata: { ...OK, requestId: randomUUID() } }, response: {} };
}

function commandName(context: { commandName?: string }): string {
  return (context.commandName ?? '').replace(/Command$/, '');
}

// ---- Secrets Manager ---------------------------------------------------------------------------

export interface SecretCalls {
  GetSecretValue: number;
  PutSecretValue: number;
  /** GetSecretValue calls answered with an injected failure. */
  injectedFailures: number;
}

/** One in-memory Secrets Manager shared by every client attached to it (every "container"). */
export class FakeSecrets {
  readonly calls: SecretCalls = { GetSecretValue: 0, PutSecretValue: 0, injectedFailures: 0 };
  /** Every value ever stored, in order (the soak collects the tokens in them). */
  readonly history: Array<{ secretId: string; value: string }> = [];
  private readonly values = new Map<string, { value: string; version: number }>();

  constructor(
    private readonly faults: { getFailureRate?: number; random?: () => number } = {},
  ) {}

  set(secretId: string, value: string): void {
    const version = (this.values.get(secretId)?.version ?? 0) + 1;
    this.values.set(secretId, { value, version });
    this.history.push({ secretId, value });
  }

  get(secretId: string): string | undefined {
    return this.values.get(secretId)?.value;
  }

  attach(client: SecretsManagerClient): SecretsManagerClient {
    const middleware: Middleware = (_next, context) => async (args) => {
      const input = args.input;
      const secretId = String(input['SecretId'] ?? '');
      switch (commandName(context)) {
        case 'GetSecretValue': {
          this.calls.GetSecretValue += 1;
          const rate = this.faults.getFailureRate ?? 0;
          if (rate > 0 && (this.faults.random ?? Math.random)() < rate) {
            this.calls.injectedFailures += 1;
            throw new SecretsManagerServiceException({
              name: 'ThrottlingException',
              $fault: 'client',
              message: 'Rate exceeded (injected)',
              $metadata: { httpStatusCode: 400 },
            });
          }
          const stored = this.values.get(secretId);
          if (!stored) {
            throw new ResourceNotFoundException({ message: "Secrets Manager can't find the specified secret.", $metadata: { httpStatusCode: 400 } });
          }
          return answer({ ARN: arnOf(secretId), Name: secretId, SecretString: stored.value, VersionId: `v${stored.version}`, VersionStages: ['AWSCURRENT'] });
        }
        case 'PutSecretValue': {
          this.calls.PutSecretValue += 1;
          if (!this.values.has(secretId)) {
            throw new ResourceNotFoundException({ message: "Secrets Manager can't find the specified secret.", $metadata: { httpStatusCode: 400 } });
          }
          this.set(secretId, String(input['SecretString'] ?? ''));
          return answer({ ARN: arnOf(secretId), Name: secretId, VersionId: `v${this.values.get(secretId)!.version}`, VersionStages: ['AWSCURRENT'] });
        }
        default:
          throw new Error(`FakeSecrets: ${commandName(context)} is not supported`);
      }
    };
    (client as unknown as Stack).middlewareStack.add(middleware, { step: 'initialize', priority: 'high', name: 'fakeSecretsManager' });
    return client;
  }
}

function arnOf(secretId: string): string {
  return secretId.startsWith('arn:') ? secretId : `arn:aws:secretsmanager:eu-west-1:000000000000:secret:${secretId}-AbCdEf`;
}

// ---- SQS -----------------------------------------------------------------------------------------

export interface SqsMessageAttribute {
  DataType?: string;
  StringValue?: string;
}

export interface SqsSendEntry {
  Id: string;
  MessageBody: string;
  MessageAttributes?: Record<string, SqsMessageAttribute>;
  DelaySeconds?: number;
}

export interface SqsEntryResult {
  Id: string;
  /** Set when the entry failed. */
  error?: { Code: string; Message: string; SenderFault: boolean };
  MessageId?: string;
}

/** What the fake SQS client delegates to: the soak's queue model, or a recorder in the benchmark. */
export interface SqsBackend {
  /** The URL of a queue, or undefined when there is no such queue. */
  queueUrl(queueName: string, accountId: string | undefined): string | undefined;
  sendMessages(queueUrl: string, entries: SqsSendEntry[]): SqsEntryResult[];
  changeVisibility(queueUrl: string, entries: Array<{ Id: string; ReceiptHandle: string; VisibilityTimeout: number }>): SqsEntryResult[];
}

export interface SqsCalls {
  [operation: string]: number;
}

const md5 = (text: string): string => createHash('md5').update(text, 'utf8').digest('hex');

/** Answers an SQSClient's commands from a backend; counts the calls by operation into `calls`. */
export function attachFakeSqs(client: SQSClient, backend: SqsBackend, calls: SqsCalls): SQSClient {
  const middleware: Middleware = (_next, context) => async (args) => {
    const input = args.input;
    const operation = commandName(context);
    calls[operation] = (calls[operation] ?? 0) + 1;
    const queueUrl = String(input['QueueUrl'] ?? '');
    switch (operation) {
      case 'GetQueueUrl': {
        const url = backend.queueUrl(String(input['QueueName'] ?? ''), input['QueueOwnerAWSAccountId'] as string | undefined);
        if (!url) throw new QueueDoesNotExist({ message: 'The specified queue does not exist.', $metadata: { httpStatusCode: 400 } });
        return answer({ QueueUrl: url });
      }
      case 'SendMessage': {
        const [result] = backend.sendMessages(queueUrl, [{ ...(input as unknown as SqsSendEntry), Id: 'single' }]);
        if (!result || result.error) {
          throw new SQSServiceException({
            name: result?.error?.Code ?? 'InternalError',
            $fault: result?.error?.SenderFault ? 'client' : 'server',
            message: result?.error?.Message ?? 'send failed',
            $metadata: { httpStatusCode: result?.error?.SenderFault ? 400 : 500 },
          });
        }
        return answer({ MessageId: result.MessageId, MD5OfMessageBody: md5(String(input['MessageBody'] ?? '')) });
      }
      case 'SendMessageBatch': {
        const entries = (input['Entries'] ?? []) as SqsSendEntry[];
        const results = backend.sendMessages(queueUrl, entries);
        const bodies = new Map(entries.map((entry) => [entry.Id, entry.MessageBody]));
        return answer({
          Successful: results
            .filter((r) => !r.error)
            .map((r) => ({ Id: r.Id, MessageId: r.MessageId, MD5OfMessageBody: md5(bodies.get(r.Id) ?? '') })),
          Failed: results.filter((r) => r.error).map((r) => ({ Id: r.Id, ...r.error! })),
        });
      }
      case 'ChangeMessageVisibility': {
        const [result] = backend.changeVisibility(queueUrl, [
          { Id: 'single', ReceiptHandle: String(input['ReceiptHandle']), VisibilityTimeout: Number(input['VisibilityTimeout']) },
        ]);
        if (!result || result.error) {
          throw new SQSServiceException({
            name: result?.error?.Code ?? 'InternalError',
            $fault: 'client',
            message: result?.error?.Message ?? 'change failed',
            $metadata: { httpStatusCode: 400 },
          });
        }
        return answer({});
      }
      case 'ChangeMessageVisibilityBatch': {
        const entries = (input['Entries'] ?? []) as Array<{ Id: string; ReceiptHandle: string; VisibilityTimeout: number }>;
        const results = backend.changeVisibility(queueUrl, entries);
        return answer({
          Successful: results.filter((r) => !r.error).map((r) => ({ Id: r.Id })),
          Failed: results.filter((r) => r.error).map((r) => ({ Id: r.Id, ...r.error! })),
        });
      }
      default:
        throw new Error(`fake SQS: ${operation} is not supported`);
    }
  };
  (client as unknown as Stack).middlewareStack.add(middleware, { step: 'initialize', priority: 'high', name: 'fakeSqs' });
  return client;
}

// ---- DynamoDB ------------------------------------------------------------------------------------

/** A successful write as the table stored it: `live:<revision>` or `deleted:<revision>`. */
export interface RecordedWrite {
  id: string;
  state: string;
  operation: 'PutItem' | 'UpdateItem';
}

export interface DynamoChaos {
  random: () => number;
  /** Fraction of requests refused with a throttling error before they reach the table. */
  throttleRate: number;
  /** Fraction of successful BatchGetItem answers with some keys moved to UnprocessedKeys. */
  unprocessedRate: number;
  /** Fraction of successful writes whose answer is lost (the SDK sees a time-out and re-sends). */
  lostAckRate: number;
}

/** Counters shared by every client instrumented with it. */
export class DynamoMeter {
  /** Requests that reached the table, by operation (SDK re-tries included; injected throttles not). */
  readonly requests: Record<string, number> = {};
  readonly conditionalFailures: Record<string, number> = {};
  readonly writes: RecordedWrite[] = [];
  readonly injected = { throttled: 0, unprocessedResponses: 0, unprocessedKeys: 0, lostAcks: 0 };

  reset(): void {
    for (const key of Object.keys(this.requests)) delete this.requests[key];
    for (const key of Object.keys(this.conditionalFailures)) delete this.conditionalFailures[key];
    this.writes.length = 0;
    this.injected.throttled = 0;
    this.injected.unprocessedResponses = 0;
    this.injected.unprocessedKeys = 0;
    this.injected.lostAcks = 0;
  }

  totalRequests(): number {
    return Object.values(this.requests).reduce((sum, n) => sum + n, 0);
  }
}

const WRITES = new Set(['PutItem', 'UpdateItem']);

export function instrumentDynamo(client: DynamoDBClient, meter: DynamoMeter, chaos?: DynamoChaos): DynamoDBClient {
  const middleware: Middleware = (next, context) => async (args) => {
    const operation = commandName(context);
    if (chaos && chaos.throttleRate > 0 && chaos.random() < chaos.throttleRate) {
      meter.injected.throttled += 1;
      if (chaos.random() < 0.5) {
        throw new ProvisionedThroughputExceededException({
          message: 'The level of configured provisioned throughput for the table was exceeded (injected)',
          $metadata: { httpStatusCode: 400 },
        });
      }
      throw new DynamoDBServiceException({
        name: 'ThrottlingException',
        $fault: 'client',
        message: 'Throughput exceeds the current capacity of your table or index (injected)',
        $metadata: { httpStatusCode: 400 },
      });
    }
    if (operation === 'UpdateItem' && args.input['ReturnValues'] === undefined) {
      // Ask for the row as written, to record its state; the adapter ignores the extra output.
      args = { ...args, input: { ...args.input, ReturnValues: 'ALL_NEW' } };
    }
    meter.requests[operation] = (meter.requests[operation] ?? 0) + 1;
    let result: { output: AnyInput; response: unknown };
    try {
      result = await next(args);
    } catch (error) {
      if ((error as { name?: string }).name === 'ConditionalCheckFailedException') {
        meter.conditionalFailures[operation] = (meter.conditionalFailures[operation] ?? 0) + 1;
      }
      throw error;
    }
    if (WRITES.has(operation)) {
      const write = recordedWrite(operation as RecordedWrite['operation'], args.input, result.output);
      if (write) meter.writes.push(write);
      if (chaos && chaos.lostAckRate > 0 && chaos.random() < chaos.lostAckRate) {
        meter.injected.lostAcks += 1;
        const error = new Error('socket hang up after the write (injected: the answer was lost)') as Error & { code: string; $metadata: object };
        error.name = 'TimeoutError';
        error.code = 'ECONNRESET';
        error.$metadata = {};
        throw error;
      }
    }
    if (operation === 'BatchGetItem' && chaos && chaos.unprocessedRate > 0 && chaos.random() < chaos.unprocessedRate) {
      moveToUnprocessed(result.output, args.input, chaos.random, meter);
    }
    return result;
  };
  (client as unknown as Stack).middlewareStack.add(middleware, { step: 'deserialize', priority: 'high', name: 'benchDynamoMeter' });
  return client;
}

function recordedWrite(operation: RecordedWrite['operation'], input: AnyInput, output: AnyInput): RecordedWrite | undefined {
  if (operation === 'PutItem') {
    const item = input['Item'] as Record<string, AttributeValue> | undefined;
    const id = item?.['id']?.S;
    if (id === undefined) return undefined;
    return { id, state: `${item?.['deleted']?.BOOL ? 'deleted' : 'live'}:${item?.['revision']?.S ?? ''}`, operation };
  }
  const row = output['Attributes'] as Record<string, AttributeValue> | undefined;
  const id = row?.['id']?.S ?? (input['Key'] as Record<string, AttributeValue> | undefined)?.['id']?.S;
  if (id === undefined) return undefined;
  return { id, state: `${row?.['deleted']?.BOOL ? 'deleted' : 'live'}:${row?.['revision']?.S ?? '?'}`, operation };
}

/** Moves a random part (at least one) of the answered keys to UnprocessedKeys, as a throttled table does. */
function moveToUnprocessed(output: AnyInput, input: AnyInput, random: () => number, meter: DynamoMeter): void {
  const requestItems = input['RequestItems'] as Record<string, { Keys: Array<Record<string, AttributeValue>> } & AnyInput>;
  const responses = (output['Responses'] ?? {}) as Record<string, Array<Record<string, AttributeValue>>>;
  const unprocessed: Record<string, AnyInput> = {};
  for (const [table, request] of Object.entries(requestItems)) {
    const keys = request.Keys;
    if (keys.length === 0) continue;
    const count = Math.max(1, Math.floor(random() * keys.length));
    const moved = new Set(keys.slice(keys.length - count).map((key) => key['id']?.S));
    responses[table] = (responses[table] ?? []).filter((row) => !moved.has(row['id']?.S));
    unprocessed[table] = { ...request, Keys: keys.slice(keys.length - count) };
    meter.injected.unprocessedKeys += count;
  }
  meter.injected.unprocessedResponses += 1;
  output['Responses'] = responses;
  output['UnprocessedKeys'] = unprocessed;
}
