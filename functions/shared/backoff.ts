/**
 * Exponential backoff, the one formula every retry here waits by: the step of attempt n (from 1) is
 * `baseMs × 2^(n-1)`, at most `capMs`, and the wait is that step with the policy's jitter:
 * - `none`: the step itself;
 * - `equal`: half the step fixed, half random (never less than half the step);
 * - `full`: anywhere from 0 to the step.
 * The wait is a whole number of milliseconds. No AWS import: core and adapters use it alike.
 */

export type Jitter = 'none' | 'equal' | 'full';

export interface Backoff {
  /** The step of the first attempt, in ms. */
  baseMs: number;
  /** Largest step, in ms; default none. */
  capMs?: number;
  jitter: Jitter;
}

/** The wait after attempt `attempt` (from 1) before the next one. `random` is [0, 1) (unused with jitter `none`). */
export function backoffDelayMs(attempt: number, backoff: Backoff, random: () => number): number {
  const step = Math.min(backoff.capMs ?? Infinity, backoff.baseMs * 2 ** (Math.max(1, attempt) - 1));
  switch (backoff.jitter) {
    case 'none':
      return Math.round(step);
    case 'equal':
      return Math.round(step / 2 + random() * (step / 2));
    case 'full':
      return Math.round(random() * step);
  }
}

/** Waits `ms` milliseconds on the real clock (the default `sleep` of the adapters that retry). */
export function sleepMs(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
