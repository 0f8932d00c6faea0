/**
 * The one place that decides how a record ends (docs/item-sync.md, "How each message ends"): done, later, retry,
 * dead, or moved (to the background lane); carry-out.ts, beside it, does what each decision asks. Every error the sync meets is
 * mapped here; an error nobody anticipated is retried (SQS's own redrive policy moves a message that
 * keeps failing to the dead-letter queue in the end).
 */
import { PermanentError, ProviderError, TransientError } from '../../shared/errors.js';
import { OutOfTimeError, WaitError, type Wait } from '../../shared/provider/paced-call.js';

// Why a record waits, and the errors that say so, are the paced provider call's (shared/provider/paced-call.ts).
export { OutOfTimeError, WaitError, type Wait };

export type DoneResult = 'created' | 'updated' | 'unchanged' | 'deleted' | 'absent';

export type Outcome =
  | { kind: 'done'; result: DoneResult }
  /**
   * Later: the record waits, which is not a failure. It is sent again to its queue with a delay (a
   * new message: a fresh receive count) and the delivered one is done; maxReceiveCount counts only
   * real failures.
   */
  | { kind: 'later'; reason: string; wait: Wait }
  /** `delaySeconds`: the provider's Retry-After, applied to the message's visibility. */
  | { kind: 'retry'; reason: string; delaySeconds?: number }
  | { kind: 'dead'; reason: string }
  /**
   * Moved: a users' batch held more of the connection's ids than it syncs (a backlog sent to the
   * users' queue); the id was sent to the background lane, and the delivered message is done.
   */
  | { kind: 'moved'; reason: string };

/** Longest visibility timeout SQS accepts (12 hours). */
export const MAX_DELAY_SECONDS = 43_200;

export interface OutcomePolicy {
  /**
   * Shortest delay given to a rate-limited record (SYNC_RATE_LIMIT_MIN_DELAY_SECONDS, default 60).
   * Setting a message's visibility replaces what is left of the queue's own (6 × the function's
   * time-out): a `Retry-After: 2` taken as it is would bring the record back within seconds, and a
   * rate limit lasting a few such rounds would use up the queue's maxReceiveCount and dead-letter
   * healthy items. So Retry-After delays a record at least this long.
   */
  rateLimitMinDelaySeconds: number;
}

export function outcomeOf(error: unknown, policy: OutcomePolicy): Exclude<Outcome, { kind: 'done' | 'moved' }> {
  if (error instanceof WaitError) return { kind: 'later', reason: error.message, wait: error.wait };
  if (error instanceof PermanentError) return { kind: 'dead', reason: error.message };
  if (error instanceof ProviderError) {
    switch (error.kind) {
      case 'permanent':
        return error.status === undefined
          ? { kind: 'dead', reason: `the item cannot be requested from the provider (${error.message})` }
          : { kind: 'dead', reason: `the provider cannot serve this item as asked (${error.message})` };
      case 'malformed':
        return { kind: 'dead', reason: `the provider's answer is not an item (${error.message})` };
      case 'rate-limited': {
        const retry: { kind: 'retry'; reason: string; delaySeconds?: number } = {
          kind: 'retry',
          reason: `the provider is rate limiting (${error.message})`,
        };
        if (error.retryAfterSeconds !== undefined) {
          retry.delaySeconds = Math.min(
            Math.max(policy.rateLimitMinDelaySeconds, Math.ceil(error.retryAfterSeconds)),
            MAX_DELAY_SECONDS,
          );
        }
        return retry;
      }
      case 'unauthorized':
        return {
          kind: 'retry',
          reason: `the provider refused the connection's access token, also the one given after the refusal (${error.message})`,
        };
      case 'transient':
        return { kind: 'retry', reason: `the provider failed in a way that may pass (${error.message})` };
      case 'not-found':
        // The sync handles 404 itself (tombstone or nothing); reaching here is a bug: retry, never drop.
        return { kind: 'retry', reason: `unexpected not-found (${error.message})` };
    }
  }
  if (error instanceof TransientError || error instanceof OutOfTimeError) {
    return { kind: 'retry', reason: error.message };
  }
  const name = error instanceof Error ? error.name : 'Error';
  const message = error instanceof Error ? error.message : String(error);
  return { kind: 'retry', reason: `unexpected failure (${name}: ${message})` };
}

/** Longest delay SQS gives a message it is sent (DelaySeconds). */
export const MAX_SEND_DELAY_SECONDS = 900;

export interface PostponePolicy {
  /** Shortest delay given to a rate-limited record (SYNC_RATE_LIMIT_MIN_DELAY_SECONDS). */
  rateLimitMinDelaySeconds: number;
  /** Longest delay of the outage schedule (SYNC_POSTPONE_MAX_SECONDS). */
  postponeMaxSeconds: number;
}

/** First delay of the outage schedule (a blip passes quickly); it doubles with every postponement, up to the policy's maximum. */
export const OUTAGE_FIRST_DELAY_SECONDS = 5;

/**
 * The delay of a waiting record. The pace: the wait it was told, at least a second (at least
 * `rateLimitMinDelaySeconds` when the wait is a Retry-After, to keep a rate limit from churning the
 * queue). Its connection (paused, failing, a refresh in progress): the gate's seconds, at least a
 * second. An outage: a growing schedule from the record's earlier postponements, 5 s, 10 s, 20 s, …
 * up to `postponeMaxSeconds`, with ±20% jitter so that a backlog does not come back at once. Never
 * more than SQS's 900 s.
 */
export function postponeDelaySeconds(
  wait: Wait,
  postponements: number,
  policy: PostponePolicy,
  random: () => number,
): number {
  let seconds: number;
  if (wait.kind === 'pace') {
    seconds = Math.max(1, Math.ceil(wait.seconds), wait.retryAfter ? policy.rateLimitMinDelaySeconds : 0);
  } else if (wait.kind === 'connection') {
    seconds = Math.max(1, Math.ceil(wait.seconds));
  } else {
    const step = OUTAGE_FIRST_DELAY_SECONDS * 2 ** Math.min(Math.max(0, postponements), 16);
    seconds = Math.min(policy.postponeMaxSeconds, step) * (0.8 + 0.4 * random());
  }
  return Math.min(MAX_SEND_DELAY_SECONDS, Math.max(1, Math.round(seconds)));
}
