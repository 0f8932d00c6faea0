/**
 * Quiet accounts beside a busy one (fairness-scenario.ts, discovery-scenario.ts,
 * scope-accounts-scenario.ts): their users' ids sent one at a time, each id's time from its send to
 * its record done, and the quantiles of those times.
 */
import type { EnqueueMessage } from '../../tools/enqueue/send.js';
import { percentile, round } from './scenario.js';
import type { EventSourceName, SimSystem } from './system.js';

const SECOND = 1_000;

/** The quiet accounts' ids, as the sync's log lines tell them. */
export interface QuietWatch {
  /** `connection \n id` of each quiet id sent and not yet done → when it was sent. */
  pending: Map<string, number>;
  /** Each quiet id done: when it was sent, and its send-to-done time. */
  quietDone: Array<{ sentAt: number; ms: number }>;
}

/** A quiet id's `record done` on the sync queue: its send-to-done time (an id not sent as measured is passed over). */
export function quietIdDone(watch: QuietWatch, source: EventSourceName, itemId: string, at: number, connection: string): void {
  const key = `${connection}\n${itemId}`;
  const sentAt = watch.pending.get(key);
  if (source !== 'sync' || sentAt === undefined) return;
  watch.pending.delete(key);
  watch.quietDone.push({ sentAt, ms: at - sentAt });
}

/** The send-to-done times, ms, of the quiet ids sent from `from` to before `to`. */
export function quietTimes(watch: QuietWatch, from: number, to: number): Float64Array {
  return Float64Array.from(watch.quietDone.filter(({ sentAt }) => sentAt >= from && sentAt < to).map(({ ms }) => ms));
}

/** Quiet ids sent and never done, but those sent in the last 10 s before `now` (they may still be on their way). */
export function quietLeft(watch: QuietWatch, now: number): number {
  return [...watch.pending.values()].filter((sentAt) => sentAt < now - 10 * SECOND).length;
}

/**
 * Every quiet account sends its next unsent id every `sendEverySeconds`, the accounts spread evenly
 * over the interval, from the start; ids sent from `measuredFrom` on are measured.
 */
export function sendQuietIds(
  system: SimSystem,
  sendEverySeconds: number,
  quiet: readonly string[],
  sendsEach: number,
  watch: QuietWatch,
  measuredFrom: number,
  send: (messages: EnqueueMessage[]) => void,
): void {
  const everyMs = sendEverySeconds * SECOND;
  quiet.forEach((connection, k) => {
    const ids = system.provider.account(connection).itemIds().slice(0, sendsEach);
    sendOneByOne(system, connection, ids, everyMs, system.clock.ms() + Math.floor((k * everyMs) / quiet.length), watch, measuredFrom, send);
  });
}

/** One user of `connection` sends `ids` in order, one every `everyMs` from `firstAt`; ids sent from `measuredFrom` on are measured. */
export function sendOneByOne(
  system: SimSystem,
  connection: string,
  ids: readonly string[],
  everyMs: number,
  firstAt: number,
  watch: QuietWatch,
  measuredFrom: number,
  send: (messages: EnqueueMessage[]) => void,
): void {
  let next = 0;
  const sendNext = (): void => {
    if (next >= ids.length) return;
    const id = ids[next++]!;
    const now = system.clock.ms();
    if (now >= measuredFrom) watch.pending.set(`${connection}\n${id}`, now);
    send([{ connection, id }]);
    system.clock.at(now + everyMs, sendNext);
  };
  system.clock.at(firstAt, sendNext);
}

/** p50 and p99 of send-to-done times, seconds. */
export function quantiles(times: Float64Array): { p50: number; p99: number; max: number } {
  return {
    p50: round(percentile(times, 0.5) / SECOND, 3),
    p99: round(percentile(times, 0.99) / SECOND, 3),
    max: round((times.length > 0 ? Math.max(...times) : 0) / SECOND, 3),
  };
}
