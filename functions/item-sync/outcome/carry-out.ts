/**
 * Carrying out the outcomes decide.ts gave a batch's records, once every id is done: the dead go to
 * the dead-letter queue, the waiting are sent again with a delay, a rate-limited retry gets the
 * provider's Retry-After as its visibility; then every record is logged and counted as it ended
 * (`record done` at DEBUG, the others at INFO and above with their reason: docs/operations.md, "Logs").
 * Nothing is ever dropped: a record that could not be dead-lettered or sent again is retried.
 */
import type { DeadLetter, DeadLetterSink, MessageRequeue, MessageVisibility, PostponeRequest, RequeueRequest } from '../ports.js';
import type { Log } from '../../shared/ports.js';
import type { SyncCounts, SyncRecord } from '../batch.js';
import type { SyncMessage } from '../message.js';
import { postponeDelaySeconds, type Outcome, type PostponePolicy } from './decide.js';

export interface CarryOutPorts {
  deadLetters: DeadLetterSink;
  /** Sends a waiting record again, delayed (its delivery is then done). */
  requeue: MessageRequeue;
  visibility: MessageVisibility;
  log: Log;
  /** [0, 1), for the jitter of the outage postponements. */
  random: () => number;
}

/**
 * Carries out every record's outcome (an outcome changes to `retry` when carrying it out failed);
 * returns the message ids to report in batchItemFailures, in the order of the batch.
 */
export async function carryOut(
  records: readonly SyncRecord[],
  outcomes: Map<string, Outcome>,
  messages: ReadonlyMap<string, SyncMessage>,
  counts: SyncCounts,
  ports: CarryOutPorts,
  policy: PostponePolicy,
): Promise<string[]> {
  await sendDeadLetters(records, outcomes, messages, ports);
  await requeueWaiting(records, outcomes, messages, ports, policy);
  await postpone(records, outcomes, ports);
  return settle(records, outcomes, messages, counts, ports.log);
}

async function sendDeadLetters(
  records: readonly SyncRecord[],
  outcomes: Map<string, Outcome>,
  messages: ReadonlyMap<string, SyncMessage>,
  ports: CarryOutPorts,
): Promise<void> {
  const letters: DeadLetter[] = [];
  for (const record of records) {
    const outcome = outcomes.get(record.messageId);
    if (outcome?.kind === 'dead') {
      const connection = messages.get(record.messageId)?.connection;
      letters.push({ body: record.body, reason: outcome.reason, sourceMessageId: record.messageId, ...(connection !== undefined ? { connection } : {}) });
    }
  }
  if (letters.length === 0) return;
  for (const failed of await ports.deadLetters.send(letters)) {
    // Never dropped: a record that could not be dead-lettered is retried (and dead-lettered next time).
    outcomes.set(failed.sourceMessageId, {
      kind: 'retry',
      reason: `sending it to the dead-letter queue failed (${failed.error})`,
    });
  }
}

/**
 * Sends every waiting record again, delayed, in its lane and with its connection (the message's
 * group); one that cannot be sent is retried instead (never dropped).
 */
async function requeueWaiting(
  records: readonly SyncRecord[],
  outcomes: Map<string, Outcome>,
  messages: ReadonlyMap<string, SyncMessage>,
  ports: CarryOutPorts,
  policy: PostponePolicy,
): Promise<void> {
  const requests: RequeueRequest[] = [];
  for (const record of records) {
    const outcome = outcomes.get(record.messageId);
    if (outcome?.kind !== 'later') continue;
    const postponements = record.postponements ?? 0;
    const connection = messages.get(record.messageId)?.connection;
    requests.push({
      messageId: record.messageId,
      body: record.body,
      queueArn: record.queueArn,
      delaySeconds: postponeDelaySeconds(outcome.wait, postponements, policy, ports.random),
      postponements: postponements + 1,
      ...(record.reconcilePass !== undefined ? { reconcilePass: record.reconcilePass } : {}),
      ...(record.background === true ? { background: true } : {}),
      ...(record.backlog === true ? { backlog: true } : {}),
      ...(connection !== undefined ? { connection } : {}),
    });
  }
  if (requests.length === 0) return;
  for (const failed of await ports.requeue.requeue(requests)) {
    const request = requests.find((r) => r.messageId === failed.messageId);
    outcomes.set(failed.messageId, {
      kind: 'retry',
      reason: `it waits, but sending it again failed (${failed.error})`,
      ...(request ? { delaySeconds: request.delaySeconds } : {}),
    });
  }
}

/** A retry with a delay (Retry-After, or a waiting record that could not be sent again) gets it as its visibility. */
async function postpone(records: readonly SyncRecord[], outcomes: Map<string, Outcome>, ports: CarryOutPorts): Promise<void> {
  const requests: PostponeRequest[] = [];
  for (const record of records) {
    const outcome = outcomes.get(record.messageId);
    if (outcome?.kind === 'retry' && outcome.delaySeconds !== undefined) {
      requests.push({
        messageId: record.messageId,
        receiptHandle: record.receiptHandle,
        queueArn: record.queueArn,
        delaySeconds: outcome.delaySeconds,
      });
    }
  }
  if (requests.length === 0) return;
  for (const failed of await ports.visibility.postpone(requests)) {
    ports.log.warn('could not delay the next delivery of a rate-limited record', {
      messageId: failed.messageId,
      error: failed.error,
    });
  }
}

/**
 * Logs and counts how each record ended (its connection and item id beside its message id, when its
 * body could be read); returns the message ids to report in batchItemFailures. The records done
 * are logged first, at DEBUG: at INFO they are kept in the invocation's buffer, and the error line
 * of a record dead-lettered after them prints the whole batch's (createLogger's bufferDebug).
 */
function settle(
  records: readonly SyncRecord[],
  outcomes: ReadonlyMap<string, Outcome>,
  messages: ReadonlyMap<string, SyncMessage>,
  counts: SyncCounts,
  log: Log,
): string[] {
  const failures: string[] = [];
  const where = (record: SyncRecord) => {
    const message = messages.get(record.messageId);
    return { messageId: record.messageId, ...(message !== undefined ? { connection: message.connection, itemId: message.id } : {}) };
  };
  for (const record of records) {
    const outcome = outcomes.get(record.messageId)!;
    if (outcome.kind === 'done') log.debug('record done', { ...where(record), result: outcome.result });
    else if (outcome.kind === 'moved') log.debug('record moved to the background lane', { ...where(record), reason: outcome.reason });
  }
  for (const record of records) {
    const outcome = outcomes.get(record.messageId)!;
    switch (outcome.kind) {
      case 'done':
        break;
      case 'moved':
        counts.movedToBackground += 1;
        break;
      case 'later':
        counts.postponed += 1;
        log.info('record postponed', { ...where(record), reason: outcome.reason });
        break;
      case 'retry':
        failures.push(record.messageId);
        counts.retried += 1;
        log.warn('record will be retried', {
          ...where(record),
          reason: outcome.reason,
          ...(outcome.delaySeconds !== undefined ? { delaySeconds: outcome.delaySeconds } : {}),
        });
        break;
      case 'dead':
        counts.deadLettered += 1;
        log.error('record dead-lettered', { ...where(record), reason: outcome.reason, bodyLength: record.body.length });
        break;
    }
  }
  return failures;
}
