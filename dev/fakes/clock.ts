/**
 * Time for the fakes: what they read the time from and how they wait, so that a fake can run on the
 * wall clock, on a scaled clock (the soak: one SQS second in one real millisecond) or on a clock a
 * test moves by hand. Milliseconds since the epoch, like Date.now().
 */
export interface Timer {
  cancel(): void;
}

export interface Clock {
  now(): number;
  /** Calls `fn` once `ms` of this clock's time have passed (at once when `ms` ≤ 0, on a later turn). */
  setTimer(ms: number, fn: () => void): Timer;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(ms, fn) {
    const timer = setTimeout(fn, Math.max(0, ms));
    return { cancel: () => clearTimeout(timer) };
  },
};

/** A clock that runs `speed` times as fast as `base` from now on (its timers fire as much sooner). */
export function scaledClock(speed: number, base: Clock = systemClock): Clock {
  if (!(speed > 0)) throw new Error(`a clock's speed must be above 0, got ${speed}`);
  const origin = base.now();
  return {
    now: () => origin + (base.now() - origin) * speed,
    setTimer: (ms, fn) => base.setTimer(ms / speed, fn),
  };
}

/** A clock that stands still until `advance` moves it; due timers fire as it passes them, in order. */
export class ManualClock implements Clock {
  private time: number;
  private timers: Array<{ at: number; fn: () => void; cancelled: boolean }> = [];

  constructor(start = 0) {
    this.time = start;
  }

  now(): number {
    return this.time;
  }

  setTimer(ms: number, fn: () => void): Timer {
    const timer = { at: this.time + Math.max(0, ms), fn, cancelled: false };
    this.timers.push(timer);
    return { cancel: () => void (timer.cancelled = true) };
  }

  advance(ms: number): void {
    const until = this.time + ms;
    for (;;) {
      const due = this.timers.filter((t) => !t.cancelled && t.at <= until).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      this.time = Math.max(this.time, due.at);
      due.cancelled = true;
      due.fn();
    }
    this.timers = this.timers.filter((t) => !t.cancelled);
    this.time = until;
  }
}
