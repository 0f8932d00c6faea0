/**
 * One SendMessageBatch call's entries, sent until each is sent or given up. SendMessageBatch can
 * refuse single entries (`Failed`) while accepting the rest, and the SDK does not retry those: an
 * entry refused for a reason that may pass (SenderFault false), or that the reply does not mention,
 * is sent again, up to a bounded number of calls; an entry refused as the sender's fault never is.
 * What a call that throws means is the caller's to say. Used by the item sync's dead-letter sink and
 * by the enqueue tool.
 */
import {
  SendMessageBatchCommand,
  type SendMessageBatchCommandOutput,
  type SendMessageBatchRequestEntry,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { backoffDelayMs, sleepMs, type Backoff } from '../backoff.js';

/** Why an entry was not sent (by the last call that tried it). */
export type EntryFailure =
  /** In the reply's `Failed`, with what SQS said. */
  | { kind: 'refused'; code: string | undefined; message: string | undefined; senderFault: boolean }
  /** Neither in `Successful` nor in `Failed`. */
  | { kind: 'unanswered' }
  /** The call threw. */
  | { kind: 'call-failed'; error: unknown }
  /** Not tried again: `shouldStop` said so. */
  | { kind: 'stopped' };

export interface BatchSendOptions<T> {
  /** The request entry for an item; `position` is its place in this call's entries (Ids must be unique within a call). */
  entry(item: T, position: number): SendMessageBatchRequestEntry;
  /** Calls per entry, the first included (at least 1). */
  attempts: number;
  /** The wait after the given attempt (from 1) before the entries it left are sent again. */
  delayMs(attempt: number): number;
  sleep(ms: number): Promise<void>;
  /** A call threw: `retry` sends its entries again (it counts as an attempt), `give-up` ends them all. */
  onCallError(error: unknown): 'retry' | 'give-up';
  /** Checked before each call: true ends the entries still pending as `stopped`. */
  shouldStop?(): boolean;
  onSent(item: T, messageId: string | undefined): void;
  /**
   * An entry that will not be sent: refused as the sender's fault, ended by a failed call or a stop,
   * or still refused after the last attempt (`gaveUpAfter` is then the number of attempts).
   */
  onFailed(item: T, failure: EntryFailure, gaveUpAfter?: number): void;
  /** Entries about to be sent again after the wait. */
  onResend?(count: number): void;
  /** After each call and its wait, if any. */
  onAttemptDone?(): void;
}

/** Sends the items (at most 10) with SendMessageBatch, re-sending what may pass; returns the calls made. */
export async function sendMessageBatch<T>(
  client: SQSClient,
  queueUrl: string,
  items: readonly T[],
  options: BatchSendOptions<T>,
): Promise<{ calls: number }> {
  const attempts = Math.max(1, options.attempts);
  let pending = [...items];
  let calls = 0;
  for (let attempt = 1; pending.length > 0; attempt += 1) {
    if (options.shouldStop?.()) {
      for (const item of pending) options.onFailed(item, { kind: 'stopped' });
      break;
    }
    calls += 1;
    const retry = await sendOnce(client, queueUrl, pending, options);
    if (retry === 'given-up') {
      options.onAttemptDone?.();
      break;
    }
    if (retry.length > 0 && attempt >= attempts) {
      for (const { item, failure } of retry) options.onFailed(item, failure, attempt);
      pending = [];
    } else {
      pending = retry.map(({ item }) => item);
      if (pending.length > 0) {
        options.onResend?.(pending.length);
        await options.sleep(options.delayMs(attempt));
      }
    }
    options.onAttemptDone?.();
  }
  return { calls };
}

/** One call: reports the sent and the finally refused entries; returns those to send again (or `given-up`). */
async function sendOnce<T>(
  client: SQSClient,
  queueUrl: string,
  pending: readonly T[],
  options: BatchSendOptions<T>,
): Promise<Array<{ item: T; failure: EntryFailure }> | 'given-up'> {
  const entries = pending.map((item, position) => options.entry(item, position));
  let output: SendMessageBatchCommandOutput;
  try {
    output = await client.send(new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: entries }));
  } catch (error) {
    const failure: EntryFailure = { kind: 'call-failed', error };
    if (options.onCallError(error) === 'retry') return pending.map((item) => ({ item, failure }));
    for (const item of pending) options.onFailed(item, failure);
    return 'given-up';
  }
  const succeeded = new Map((output.Successful ?? []).map((entry) => [entry.Id, entry]));
  const refused = new Map((output.Failed ?? []).map((entry) => [entry.Id, entry]));
  const retry: Array<{ item: T; failure: EntryFailure }> = [];
  pending.forEach((item, position) => {
    const id = entries[position]!.Id;
    const ok = succeeded.get(id);
    const entry = refused.get(id);
    if (ok) {
      options.onSent(item, ok.MessageId);
    } else if (!entry) {
      retry.push({ item, failure: { kind: 'unanswered' } });
    } else {
      const failure: EntryFailure = { kind: 'refused', code: entry.Code, message: entry.Message, senderFault: entry.SenderFault === true };
      if (failure.senderFault) options.onFailed(item, failure);
      else retry.push({ item, failure });
    }
  });
  return retry;
}

/** How entries refused for a reason that may pass are sent again. */
export interface ResendOptions {
  /** Calls per entry, the first included; default 3. */
  attempts?: number;
  /** Wait before the first re-send, doubled for each further one; default 100 ms. */
  backoffMs?: number;
  sleep?: (ms: number) => Promise<void>;
}

export type ResendPolicy = Pick<BatchSendOptions<unknown>, 'attempts' | 'delayMs' | 'sleep'>;

/** The re-send part of BatchSendOptions, from ResendOptions and their defaults. */
export function resendPolicy(options: ResendOptions = {}): ResendPolicy {
  // No jitter: base × 2^(attempt-1), uncapped (the attempts are few).
  const backoff: Backoff = { baseMs: options.backoffMs ?? 100, jitter: 'none' };
  return {
    attempts: Math.max(1, options.attempts ?? 3),
    delayMs: (attempt) => backoffDelayMs(attempt, backoff, Math.random),
    sleep: options.sleep ?? sleepMs,
  };
}
