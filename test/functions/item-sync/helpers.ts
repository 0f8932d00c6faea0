/** Shared pieces of the item-sync tests: SQS events, Lambda contexts, a scripted provider, EMF metrics. */
import type { Context, SQSEvent } from 'aws-lambda';
import { ProviderError, type ProviderErrorKind } from '../../../functions/shared/errors.js';
import type { ProviderClient, RequestOptions, TokenGrant } from '../../../functions/shared/ports.js';
import { jsonLines } from '../../../dev/fakes/capture-output.js';
import { sumEmfMetrics } from '../../../dev/fakes/emf.js';
import { createContext, sqsEvent as lambdaSqsEvent } from '../../../dev/fakes/lambda.js';

export const QUEUE_ARN = 'arn:aws:sqs:eu-west-1:123456789012:content-sync-queue';
export const QUEUE_URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/content-sync-queue';
export const DLQ_URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/content-sync-dlq';
/** The reconcile queue: where discovery sends a folder's children (RECONCILE_QUEUE_URL). */
export const RECONCILE_URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/content-sync-reconcile';

/** One SQS record per body; message ids m1, m2... (or the given ones). */
export function sqsEvent(bodies: string[], messageIds?: string[]): SQSEvent {
  return lambdaSqsEvent(
    bodies.map((body, index) => {
      const messageId = messageIds?.[index] ?? `m${index + 1}`;
      return {
        MessageId: messageId,
        ReceiptHandle: `rh-${messageId}`,
        Body: body,
        Attributes: { ApproximateReceiveCount: '1', SentTimestamp: '1700000000000', SenderId: 'AIDAEXAMPLE', ApproximateFirstReceiveTimestamp: '1700000000001' },
      };
    }),
    QUEUE_ARN,
  );
}

export function lambdaContext(remainingMs: number | (() => number) = 60_000): Context {
  const remaining = typeof remainingMs === 'number' ? () => remainingMs : remainingMs;
  return createContext('item-sync', 'eu-west-1', 60_000, { accountId: '123456789012', awsRequestId: 'req-1', logStreamName: 'stream', remainingMs: remaining });
}

export type Answer = unknown | ProviderError | Error | ((call: ItemCall) => unknown);

export interface ItemCall {
  id: string;
  token: string;
  signal: AbortSignal | undefined;
}

/**
 * A provider whose answers are scripted per id: each call takes the next answer (the last one
 * repeats). An answer that is an Error is thrown, a function is called (and may return a promise).
 */
export class ScriptedProvider implements ProviderClient {
  readonly calls: ItemCall[] = [];
  inFlight = 0;
  maxInFlight = 0;
  private readonly script = new Map<string, Answer[]>();

  on(id: string, ...answers: Answer[]): this {
    this.script.set(id, answers);
    return this;
  }

  async getToken(): Promise<TokenGrant> {
    throw new Error('not used by the item sync');
  }

  async getItem(id: string, token: string, options?: RequestOptions): Promise<unknown> {
    const call = { id, token, signal: options?.signal };
    this.calls.push(call);
    this.inFlight += 1;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      await new Promise((resolve) => setImmediate(resolve));
      const answers = this.script.get(id);
      if (!answers || answers.length === 0) throw providerError('not-found', 404);
      const answer = answers.length > 1 ? answers.shift() : answers[0];
      const value = typeof answer === 'function' ? await (answer as (c: ItemCall) => unknown)(call) : answer;
      if (value instanceof Error) throw value;
      return structuredClone(value);
    } finally {
      this.inFlight -= 1;
    }
  }

  callsFor(id: string): ItemCall[] {
    return this.calls.filter((call) => call.id === id);
  }
}

export function providerError(kind: ProviderErrorKind, status?: number, extra: { retryAfterSeconds?: number } = {}): ProviderError {
  return new ProviderError(`simulated ${kind}`, {
    kind,
    operation: 'getItem',
    ...(status !== undefined ? { status } : {}),
    ...extra,
  });
}

export function item(id: string, revision: unknown, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { id, type: 'file', name: `${id}.txt`, revision, ...extra };
}

/** Metric name → value, from the EMF lines in captured output (summed over lines). */
export function metricsIn(output: string): Record<string, number> {
  return sumEmfMetrics(output);
}

/** The EMF namespaces seen in captured output. */
export function metricNamespaces(output: string): string[] {
  const namespaces = new Set<string>();
  for (const line of jsonLines(output)) {
    if (typeof line === 'string' || !line['_aws']) continue;
    for (const group of (line['_aws'] as { CloudWatchMetrics: Array<{ Namespace: string }> }).CloudWatchMetrics) {
      namespaces.add(group.Namespace);
    }
  }
  return [...namespaces];
}

/** The log lines (JSON, not EMF) in captured output. */
export function logLines(output: string): Array<Record<string, unknown>> {
  return jsonLines(output).filter(
    (line): line is Record<string, unknown> => typeof line !== 'string' && !line['_aws'],
  );
}
