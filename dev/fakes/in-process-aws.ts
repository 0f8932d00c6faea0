/**
 * The SQS and KMS models in process, for the bench, the soak and the simulations (no HTTP, no ports):
 *
 * - attachSqs plugs the model into a real SDK v3 client: a middleware at the very start
 *   of the client's stack (the `initialize` step, highest priority) answers every command through
 *   the same operations as the HTTP emulator (sqs-api.ts), so the handler code
 *   under test talks to a real `SQSClient`, but no request leaves the
 *   process. An error comes out as the SDK's own exception, above the SDK's retries: a fault injected
 *   in a model reaches the caller as if the SDK had given up.
 * - attachKms does the same for a KMSClient over the KMS model (kms-api.ts), blobs as the
 *   Uint8Array values the SDK takes and returns.
 * - InProcessEventSource is the queue side of an event source mapping (lambda.ts) on the SQS model;
 *   it holds the messages it hands out until the invocation is over (see sqs-model.ts).
 */
import * as kmsSdk from '@aws-sdk/client-kms';
import * as sqsSdk from '@aws-sdk/client-sqs';
import { randomUUID } from 'node:crypto';
import { handleKms } from './kms-api.js';
import type { KmsModel } from './kms-model.js';
import type { EventSourceQueue } from './lambda.js';
import { ServiceError } from './service-error.js';
import { handleSqs, renderMessage } from './sqs-api.js';
import type { SqsModel } from './sqs-model.js';

type Input = Record<string, unknown>;
type Handler = (args: { input: Input }) => Promise<{ output: Input; response: unknown }>;
type Middleware = (next: Handler, context: { commandName?: string }) => Handler;

interface WithStack {
  middlewareStack: { add(middleware: Middleware, options: { step: string; priority?: string; name: string }): void };
}

/** Calls by operation name (`ReceiveMessage`, `SendMessageBatch`...). */
export type CallCounts = Record<string, number>;

type ExceptionClass = new (...args: never[]) => Error;
type ExceptionOptions = { name?: string; $fault?: 'client' | 'server'; message: string; $metadata: object };

/** Answers an SQSClient's commands from the model; counts them by operation into `calls`. */
export function attachSqs(client: sqsSdk.SQSClient, model: SqsModel, calls: CallCounts = {}): sqsSdk.SQSClient {
  attach(client, 'inProcessSqs', (operation, input) => handleSqs(model, operation, input), sqsSdk, sqsSdk.SQSServiceException, calls);
  return client;
}

/** Answers a KMSClient's commands from the model; counts them by operation into `calls`. */
export function attachKms(client: kmsSdk.KMSClient, model: KmsModel, calls: CallCounts = {}): kmsSdk.KMSClient {
  attach(client, 'inProcessKms', (operation, input) => handleKms(model, operation, input, 'bytes'), kmsSdk, kmsSdk.KMSServiceException, calls);
  return client;
}

function attach(
  client: object,
  name: string,
  handle: (operation: string, input: Input) => unknown,
  sdk: Record<string, unknown>,
  base: ExceptionClass,
  calls: CallCounts,
): void {
  const middleware: Middleware = (_next, context) => async (args) => {
    const operation = (context.commandName ?? '').replace(/Command$/, '');
    calls[operation] = (calls[operation] ?? 0) + 1;
    try {
      const output = (await handle(operation, args.input)) as Input;
      return { output: { ...output, $metadata: { httpStatusCode: 200, requestId: randomUUID() } }, response: {} };
    } catch (error) {
      throw error instanceof ServiceError ? sdkException(error, sdk, base) : error;
    }
  };
  (client as WithStack).middlewareStack.add(middleware, { step: 'initialize', priority: 'high', name });
}

/** The SDK's modelled exception of that name (QueueDoesNotExist, ResourceNotFoundException...), or its base exception. */
function sdkException(error: ServiceError, sdk: Record<string, unknown>, base: ExceptionClass): Error {
  const $metadata = { httpStatusCode: error.status };
  const Modeled = sdk[error.type];
  if (typeof Modeled === 'function' && Modeled.prototype instanceof base) {
    return new (Modeled as new (options: ExceptionOptions) => Error)({ message: error.message, $metadata });
  }
  const Base = base as unknown as new (options: ExceptionOptions) => Error;
  return new Base({ name: error.type, $fault: error.senderFault ? 'client' : 'server', message: error.message, $metadata });
}

/** A queue of the model as an event source mapping sees it, long-polling up to `waitSeconds` of the model's time. */
export class InProcessEventSource implements EventSourceQueue {
  readonly arn: string;

  constructor(
    private readonly model: SqsModel,
    private readonly queueName: string,
    private readonly waitSeconds: number,
  ) {
    this.arn = model.queue(queueName).arn;
  }

  async receive(max: number, waitMs?: number): Promise<sqsSdk.Message[]> {
    const waitSeconds = waitMs === undefined ? this.waitSeconds : waitMs / 1000;
    const messages = await this.model.receive(this.queueName, { max, waitSeconds, hold: true });
    return messages.map((message) => renderMessage(this.model, message, ['All'], ['All']) as sqsSdk.Message);
  }

  async settle(succeeded: readonly sqsSdk.Message[], failed: readonly sqsSdk.Message[]): Promise<void> {
    for (const message of succeeded) this.model.deleteMessage(this.queueName, message.ReceiptHandle ?? '');
    for (const message of failed) this.model.release(this.queueName, message.ReceiptHandle ?? '');
  }

  async remaining(): Promise<number> {
    return this.model.size(this.queueName);
  }
}
