/**
 * SQS and KMS for the local system, the harness's one model of each service (dev/fakes/sqs-model.ts,
 * dev/fakes/kms-model.ts) behind real SDK clients, reached one of two ways:
 *
 * - inProcessAws: the clients answered in process (dev/fakes/in-process-aws.ts), each call
 *   counted when asked, on any clock (the soak's scaled one, a simulation's virtual one);
 * - emulatorAws: the HTTP emulator on 127.0.0.1 (dev/fakes/aws-emulator.ts), as `npm start` runs.
 *
 * Either way the queues and keys are the models', so a scenario looks at them directly. Each backend
 * holds one KMS key from the start, the one the tokens are sealed under (`tokensKeyArn`).
 */
import { KMSClient } from '@aws-sdk/client-kms';
import { SQSClient } from '@aws-sdk/client-sqs';
import { AwsEmulator } from '../fakes/aws-emulator.js';
import type { Clock } from '../fakes/clock.js';
import { attachKms, attachSqs, InProcessEventSource, type CallCounts } from '../fakes/in-process-aws.js';
import { KmsModel, type KeyMaterial } from '../fakes/kms-model.js';
import { sqsClientQueue, type EventSourceQueue } from '../fakes/lambda.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION, withoutSdkLogger } from '../fakes/local-aws.js';
import { SqsModel } from '../fakes/sqs-model.js';

export interface SqsClientOptions {
  /** SDK calls counted by operation. */
  calls?: CallCounts;
  /** Sees the client before the backend answers through it (its middleware runs first). */
  watch?: (client: SQSClient) => void;
}

export interface KmsClientOptions {
  /** SDK calls counted by operation (`GenerateDataKey`, `Decrypt`), in process and through the emulator alike. */
  calls?: CallCounts;
}

export interface AwsBackend {
  readonly kind: 'in-process' | 'emulator';
  readonly region: string;
  readonly sqs: SqsModel;
  readonly kms: KmsModel;
  /** The ARN of the backend's one KMS key (CONNECTIONS_KEY_ARN of the local system). */
  readonly tokensKeyArn: string;
  /** The emulator's address (emulatorAws only). */
  readonly endpoint: string | undefined;
  /** A new SQS client reaching the model. */
  sqsClient(options?: SqsClientOptions): SQSClient;
  /** A new KMS client reaching the model. */
  kmsClient(options?: KmsClientOptions): KMSClient;
  /**
   * A queue as Lambda's event source mapping polls it: its long poll (`waitSeconds` of the model's
   * time, in process; through the emulator, SQS's one-second wait of the local run).
   */
  eventSourceQueue(queueName: string, waitSeconds: number): EventSourceQueue;
  close(): Promise<void>;
}

export interface InProcessOptions {
  /** The SQS model's clock (visibility time-outs, delays, long polls); default the wall clock. */
  sqsClock?: Clock;
}

export function inProcessAws(options: InProcessOptions = {}): AwsBackend {
  const sqs = new SqsModel({ region: LOCAL_REGION, ...(options.sqsClock ? { clock: options.sqsClock } : {}) });
  const kms = new KmsModel({ region: LOCAL_REGION });
  const tokensKeyArn = kms.createKey();
  const clients: Array<{ destroy(): void }> = [];
  const made = <T extends { destroy(): void }>(client: T): T => {
    clients.push(client);
    return client;
  };
  return {
    kind: 'in-process',
    region: LOCAL_REGION,
    sqs,
    kms,
    tokensKeyArn,
    endpoint: undefined,
    sqsClient(clientOptions = {}) {
      const client = made(withoutSdkLogger(new SQSClient({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS })));
      clientOptions.watch?.(client);
      return attachSqs(client, sqs, clientOptions.calls);
    },
    kmsClient(clientOptions = {}) {
      const client = made(withoutSdkLogger(new KMSClient({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS })));
      return attachKms(client, kms, clientOptions.calls);
    },
    eventSourceQueue: (queueName, waitSeconds) => new InProcessEventSource(sqs, queueName, waitSeconds),
    async close() {
      sqs.close();
      for (const client of clients) client.destroy();
    },
  };
}

/** The HTTP emulator on 127.0.0.1 (an ephemeral port). */
export async function emulatorAws(options: { tokensKey?: KeyMaterial } = {}): Promise<AwsBackend> {
  const emulator = await AwsEmulator.start({ region: LOCAL_REGION });
  const tokensKeyArn = emulator.kms.createKey(options.tokensKey);
  const config = { endpoint: emulator.endpoint, region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS };
  const clients: Array<{ destroy(): void }> = [];
  const eventSourceClient = withoutSdkLogger(new SQSClient(config));
  clients.push(eventSourceClient);
  return {
    kind: 'emulator',
    region: LOCAL_REGION,
    sqs: emulator.sqs,
    kms: emulator.kms,
    tokensKeyArn,
    endpoint: emulator.endpoint,
    sqsClient(clientOptions = {}) {
      const client = withoutSdkLogger(new SQSClient(config));
      clients.push(client);
      clientOptions.watch?.(client);
      return client;
    },
    kmsClient(clientOptions = {}) {
      const client = withoutSdkLogger(new KMSClient(config));
      clients.push(client);
      if (clientOptions.calls) countCalls(client, clientOptions.calls);
      return client;
    },
    eventSourceQueue(queueName) {
      const queue = emulator.sqs.queue(queueName);
      return sqsClientQueue(eventSourceClient, queue.url, queue.arn);
    },
    async close() {
      for (const client of clients) client.destroy();
      await emulator.close().catch(() => undefined);
    },
  };
}

/** Counts a client's commands by operation (each once, however often the SDK retries it). */
function countCalls(client: KMSClient, calls: CallCounts): void {
  client.middlewareStack.add(
    (next, context) => (args) => {
      const operation = (context.commandName ?? '').replace(/Command$/, '');
      calls[operation] = (calls[operation] ?? 0) + 1;
      return next(args);
    },
    { step: 'initialize', priority: 'high', name: 'countKmsCalls' },
  );
}
