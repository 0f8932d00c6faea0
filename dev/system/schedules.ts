/**
 * The schedules as deployed (infra/deployment.ts scheduleDeployment), on any clock: the token
 * refresher every tokenRefreshMinutes, the reconciler every minute (as EventBridge Scheduler: each
 * interval, whether or not the last invocation is still running).
 */
import type { Clock } from '../fakes/clock.js';

export interface Schedule {
  /** Stops the schedule (a timer already due still runs its check and does nothing). */
  stop(): void;
}

/** Calls `fire` every `everyMs` of `clock`'s time, the first time `firstAfterMs` from now (default one interval). */
export function every(clock: Clock, everyMs: number, fire: () => void, firstAfterMs = everyMs): Schedule {
  let running = true;
  let next = clock.now() + firstAfterMs;
  const arm = (): void => {
    clock.setTimer(next - clock.now(), () => {
      if (!running) return;
      next += everyMs;
      fire();
      arm();
    });
  };
  arm();
  return { stop: () => void (running = false) };
}
