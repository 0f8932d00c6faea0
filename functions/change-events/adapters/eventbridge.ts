/**
 * EventPublisher on EventBridge PutEvents. PutEvents answers 200 even when it refuses entries: the
 * reply's FailedEntryCount and each entry's ErrorCode say which, and the SDK does not retry those.
 * An entry is published only when its result has an EventId and no ErrorCode; every other entry
 * (refused, missing from the reply, or in a call that threw after the SDK's own retries) is sent
 * again, alone with the others left, up to `attempts` calls in all, with a growing, jittered wait.
 * What is still not published then is reported failed, with the last error.
 */
import { PutEventsCommand, type EventBridgeClient, type PutEventsRequestEntry } from '@aws-sdk/client-eventbridge';
import { backoffDelayMs, sleepMs } from '../../shared/backoff.js';
import { EVENT_SOURCE } from '../change.js';
import type { BusEvent, EventPublisher, PublishOutcome } from '../ports.js';

export const DEFAULT_PUT_ATTEMPTS = 3;
export const DEFAULT_RETRY_BASE_MS = 100;

export interface EventBridgePublisherOptions {
  /** Calls per event, the first included (at least 1); default 3. */
  attempts?: number;
  /** First wait before sending refused entries again (doubles each time, jittered 50-100 %); default 100 ms. */
  retryBaseMs?: number;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
}

export class EventBridgePublisher implements EventPublisher {
  private readonly attempts: number;
  private readonly retryBaseMs: number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: () => number;

  constructor(
    private readonly client: EventBridgeClient,
    /** The bus's name or ARN (EVENT_BUS_NAME). */
    private readonly eventBusName: string,
    options: EventBridgePublisherOptions = {},
  ) {
    this.attempts = Math.max(1, options.attempts ?? DEFAULT_PUT_ATTEMPTS);
    this.retryBaseMs = options.retryBaseMs ?? DEFAULT_RETRY_BASE_MS;
    this.sleep = options.sleep ?? sleepMs;
    this.random = options.random ?? Math.random;
  }

  /** The PutEvents entry of an event (an item's change or a connection's lifecycle event alike). */
  entry(event: BusEvent): PutEventsRequestEntry {
    return {
      EventBusName: this.eventBusName,
      Source: EVENT_SOURCE,
      DetailType: event.detailType,
      Detail: JSON.stringify(event.detail),
    };
  }

  async publish(events: readonly BusEvent[]): Promise<PublishOutcome[]> {
    const outcomes: PublishOutcome[] = events.map(() => ({ published: false, error: 'not sent' }));
    let pending = events.map((_, index) => index);
    for (let attempt = 1; pending.length > 0 && attempt <= this.attempts; attempt += 1) {
      if (attempt > 1) await this.sleep(this.delayMs(attempt - 1));
      let results: Array<{ EventId?: string; ErrorCode?: string; ErrorMessage?: string }>;
      try {
        const reply = await this.client.send(new PutEventsCommand({ Entries: pending.map((index) => this.entry(events[index]!)) }));
        results = reply.Entries ?? [];
      } catch (error) {
        const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
        for (const index of pending) outcomes[index] = { published: false, error: `PutEvents failed: ${message}` };
        continue;
      }
      const refused: number[] = [];
      pending.forEach((index, position) => {
        const result = results[position];
        if (result?.EventId && !result.ErrorCode) {
          outcomes[index] = { published: true };
        } else {
          outcomes[index] = {
            published: false,
            error: result?.ErrorCode ? `${result.ErrorCode}: ${result.ErrorMessage ?? ''}`.trim() : 'PutEvents gave no result for the entry',
          };
          refused.push(index);
        }
      });
      pending = refused;
    }
    return outcomes;
  }

  /** base × 2^(attempt-1), no cap, equal jitter (50-100 % of the step). */
  private delayMs(attempt: number): number {
    return backoffDelayMs(attempt, { baseMs: this.retryBaseMs, jitter: 'equal' }, this.random);
  }
}
