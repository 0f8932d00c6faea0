/**
 * SQS for the local system, the harness's one model of the service (dev/fakes/sqs-model.ts) behind
 * real SDK clients, reached one of two ways:
 *
 * - inProcessAws: the clients answered in process (dev/fakes/in-process-aws.ts), each call
 *   counted when asked, on any clock (the soak's scaled one, a simulation's virtual one);
 * - emulatorAws: the HTTP emulator on 127.0.0.1 (dev/fakes/aws-emulator.ts), as `npm start` runs.
 *
 * Either way the queues are the model's, so a scenario looks at them directly.
 */
import { SQSClient } from '@aws-sdk/client-sqs';
import { AwsEmulator } from '../fakes/aws-emulator.js';
import type { Clock } from '../fakes/clock.js';
import { attachSqs, InProcessEventSource, type CallCounts } from '../fakes/in-process-aws.js';
import { sqsClientQueue, type EventSourceQueue } from '../fakes/lambda.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../fakes/local-aws.js';
import { SqsModel } from '../fakes/sqs-model.js';

export interface SqsClientOptions {
  /** SDK calls counted by operation. */
  calls?: CallCounts;
  /** Sees the client before the backend answers through it (its middleware runs first). */
  watch?: (client: SQSClient) => void;
}

export interface AwsBackend {
  readonly kind: 'in-process' | 'emulator';
  readonly region: string;
  readonly sqs: SqsModel;
  /** The emulator's address (emulatorAws only). */
  readonly endpoint: string | undefined;
  /** A new SQS client reaching the model. */
  sqsClient(options?: SqsClientOptions): SQSClient;
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
  const clients: Array<{ destroy(): void }> = [];
  const made = <T extends { destroy(): void }>(client: T): T => {
    clients.push(client);
    return client;
  };
  return {
    kind: 'in-process',
    region: LOCAL_REGION,
    sqs,
    endpoint: undefined,
    sqsClient(clientOptions = {}) {
      const client = made(new SQSClient({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS }));
      clientOptions.watch?.(client);
      return attachSqs(client, sqs, clientOptions.calls);
    },
    eventSourceQueue: (queueName, waitSeconds) => new InProcessEventSource(sqs, queueName, waitSeconds),
    async close() {
      sqs.close();
      for (const client of clients) client.destroy();
    },
  };
}

/** The HTTP emulator on 127.0.0.1 (an ephemeral port). */
export async function emulatorAws(): Promise<AwsBackend> {
  const emulator = await AwsEmulator.start({ region: LOCAL_REGION });
  const config = { endpoint: emulator.endpoint, region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS };
  const clients: Array<{ destroy(): void }> = [];
  const eventSourceClient = new SQSClient(config);
  clients.push(eventSourceClient);
  return {
    kind: 'emulator',
    region: LOCAL_REGION,
    sqs: emulator.sqs,
    endpoint: emulator.endpoint,
    sqsClient(clientOptions = {}) {
      const client = new SQSClient(config);
      clients.push(client);
      clientOptions.watch?.(client);
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
