/**
 * Virtual time for simulations: hours of system behaviour in seconds of real time, running the real
 * code. Everything the simulated code waits for (sleep, provider latency, SQS delays) is a timer
 * here; `run` moves the clock from timer to timer, each time after letting every pending promise
 * settle. Simulated code uses no real timers, and real I/O (DynamoDB Local over loopback) only through
 * `track`: while a tracked call is under way, time stands still, so a DynamoDB call takes no
 * virtual time (a simulation adds the round trip it wants as a virtual sleep).
 *
 * Tracked calls reach DynamoDB Local one at a time, in the order the simulated code made them: the
 * answers, and which of two transactions on one row wins, are then the same on every run, however
 * fast the machine and the server answer. Two calls at one virtual instant still race as they would
 * in AWS: the later one finds the row the earlier one wrote (its condition fails, it is cancelled).
 */
import type { Clock as FakeClock, Timer as FakeTimer } from '../fakes/clock.js';
import type { Clock } from '../../functions/shared/ports.js';

interface Timer {
  at: number;
  seq: number;
  fire: () => void;
}

export class VirtualClock implements Clock {
  private nowMs: number;
  private seq = 0;
  private readonly heap: Timer[] = [];
  private busy = 0;
  private idle: Array<() => void> = [];
  /** The last tracked call (the next one starts when it has settled). */
  private tail: Promise<unknown> = Promise.resolve();

  constructor(startMs = Date.UTC(2026, 0, 1)) {
    this.nowMs = startMs;
  }

  now(): Date {
    return new Date(this.nowMs);
  }

  ms(): number {
    return this.nowMs;
  }

  /** Resolves when virtual time has moved `ms` ahead. */
  sleep = (ms: number): Promise<void> => new Promise((resolve) => this.at(this.nowMs + Math.max(0, ms), resolve));

  /** Calls `fire` at virtual time `at` (or at once, in order, if `at` has passed). */
  at(at: number, fire: () => void): void {
    this.push({ at: Math.max(at, this.nowMs), seq: this.seq++, fire });
  }

  /** The clock as the harness's fakes take it (the SQS model, the schedules). */
  asFakeClock(): FakeClock {
    return {
      now: () => this.nowMs,
      setTimer: (ms: number, fn: () => void): FakeTimer => {
        let cancelled = false;
        this.at(this.nowMs + Math.max(0, ms), () => {
          if (!cancelled) fn();
        });
        return { cancel: () => void (cancelled = true) };
      },
    };
  }

  /**
   * Starts `work` (real I/O the simulated code waits for) once every call tracked before it has
   * settled, and holds virtual time still until it settles. `work` must not wait for virtual time
   * or for another tracked call.
   */
  track<T>(work: () => Promise<T>): Promise<T> {
    this.busy += 1;
    const done = (): void => {
      this.busy -= 1;
      if (this.busy === 0) for (const resolve of this.idle.splice(0)) resolve();
    };
    const result = this.tail.then(() => work());
    this.tail = result.then(done, done);
    return result;
  }

  /** `work` awaited with the clock running until it settles (for work that waits virtual time: a call with AWS's round trip). */
  async during<T>(work: Promise<T>): Promise<T> {
    let settled = false;
    work.then(
      () => void (settled = true),
      () => void (settled = true),
    );
    await this.run(Number.MAX_SAFE_INTEGER, () => settled || (this.heap.length === 0 && this.busy === 0));
    await settle();
    if (!settled) throw new Error('the work waits for something that is neither a timer nor a tracked call: nothing is left to run');
    return work;
  }

  /** Pending timers. */
  get pending(): number {
    return this.heap.length;
  }

  /**
   * Runs timers in time order until virtual time would pass `untilMs`, `stop()` answers true, or
   * nothing is left to run. Returns the virtual time reached.
   */
  async run(untilMs: number, stop: () => boolean = () => false): Promise<number> {
    for (;;) {
      await settle();
      while (this.busy > 0) {
        await new Promise<void>((resolve) => this.idle.push(resolve));
        await settle();
      }
      if (stop()) return this.nowMs;
      const next = this.heap[0];
      if (next === undefined || next.at > untilMs) {
        this.nowMs = Math.max(this.nowMs, Math.min(untilMs, next?.at ?? untilMs));
        return this.nowMs;
      }
      this.nowMs = next.at;
      // Every timer due at this instant fires before the promises they resolve run on.
      while (this.heap[0] !== undefined && this.heap[0].at === this.nowMs) this.pop().fire();
    }
  }

  private push(timer: Timer): void {
    const heap = this.heap;
    heap.push(timer);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(heap[i]!, heap[parent]!)) break;
      [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
      i = parent;
    }
  }

  private pop(): Timer {
    const heap = this.heap;
    const top = heap[0]!;
    const last = heap.pop()!;
    if (heap.length > 0) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < heap.length && before(heap[l]!, heap[m]!)) m = l;
        if (r < heap.length && before(heap[r]!, heap[m]!)) m = r;
        if (m === i) break;
        [heap[i], heap[m]] = [heap[m]!, heap[i]!];
        i = m;
      }
    }
    return top;
  }
}

function before(a: Timer, b: Timer): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}

/** Lets every promise chain that can run now run to its next wait. */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
