/**
 * The SQS and Secrets Manager models in process, for the bench and the soak (no HTTP, no ports):
 *
 * - attachSqs / attachSecrets plug a model into a real SDK v3 client: a middleware at the very start
 *   of the client's stack (the `initialize` step, highest priority) answers every command through
 *   the same operations as the HTTP emulator (sqs-api.ts, secrets-model.ts), so the handler code
 *   under test talks to a real `SQSClient` / `SecretsManagerClient`, but no request leaves the
 *   process. An error comes out as the SDK's own exception, above the SDK's retries: a fault injected
 *   in a model reaches the caller as if the SDK had given up.
 * - InProcessEventSource is the queue side of an event source mapping (lambda.ts) on the SQS model;
 *   it holds the messages it hands out until the invocation is over (see sqs-model.ts).
 */
import * as secretsSdk from '@aws-sdk/client-secrets-manager';
import * as sqsSdk from '@aws-sdk/client-sqs';
import { randomUUID } from 'node:crypto';
import type { EventSourceQueue } from './lambda.js';
import { handleSecrets, type SecretStore } from './secrets-model.js';
import { ServiceError } from './service-error.js';
import { handleSqs, renderMessage } from './sqs-api.js';
import type { SqsModel } from './sqs-model.js';

type Input = Record<string, unknown>;
type Handler = (args: { input: Input }) => Promise<{ output: Input; response: unknown }>;
type Middleware = (next: Handler, context: { commandName?: string }) => Handler;

interface WithStack {
  middlewareStack: { add(middleware: Middleware, options: { step: string; priority?: string; name: string }): void };
}

/** Calls by operation name (`GetSecretValue`, `SendMessageBatch`...). */
export type CallCounts = Record<string, number>;

type ExceptionClass = new (...args: never[]) => Error;
type ExceptionOptions = { name?: string; $fault?: 'client' | 'server'; message: string; $metadata: object };

/** Answers an SQSClient's commands from the model; counts them by operation into `calls`. */
export function attachSqs(client: sqsSdk.SQSClient, model: SqsModel, calls: CallCounts = {}): sqsSdk.SQSClient {
  attach(client, 'inProcessSqs', (operation, input) => handleSqs(model, operation, input), sqsSdk, sqsSdk.SQSServiceException, calls);
  return client;
}

/** Answers a SecretsManagerClient's commands from the store; counts them by operation into `calls`. */
export function attachSecrets(client: secretsSdk.SecretsManagerClient, store: SecretStore, calls: CallCounts = {}): secretsSdk.SecretsManagerClient {
  const handle = (operation: string, input: Input): unknown => withDates(handleSecrets(store, operation, input) as Input);
  attach(client, 'inProcessSecretsManager', handle, secretsSdk, secretsSdk.SecretsManagerServiceException, calls);
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

/** The JSON protocol's dates are seconds since the epoch; the SDK hands them out as Dates. */
function withDates(output: Input): Input {
  const out = { ...output };
  for (const key of ['CreatedDate', 'DeletionDate']) {
    if (typeof out[key] === 'number') out[key] = new Date((out[key] as number) * 1000);
  }
  return out;
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

  async receive(max: number): Promise<sqsSdk.Message[]> {
    const messages = await this.model.receive(this.queueName, { max, waitSeconds: this.waitSeconds, hold: true });
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
