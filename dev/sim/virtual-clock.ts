/**
 * Virtual time for simulations: hours of system behaviour in seconds of real time, running the real
 * code. Everything the simulated code waits for (sleep, provider latency, SQS delays) is a timer
 * here; `run` moves the clock from timer to timer, each time after letting every pending promise
 * settle. Simulated code uses no real timers, and real I/O (DynamoDB Local over loopback) only through
 * `track` or `call`, so that the figures are the same on every run, however fast the machine and
 * the server answer:
 *
 * - Every request reaches DynamoDB Local in the order the simulated code made it, one at a time (one
 *   line of exchanges): the answers, and which of two transactions on one row wins, are the same on
 *   every run. Two calls at one virtual instant still race as they would in AWS: the later one finds
 *   the row the earlier one wrote (its condition fails, it is cancelled).
 * - `call` (every DynamoDB call of the system: dev/fakes/dynamo-latency.ts) is pipelined: the call
 *   is sent at its virtual instant and answered at its answer time (AWS's round trip later), and the
 *   clock runs on meanwhile, up to that answer time: timers due before it fire, and the calls they
 *   make are prepared and queued behind it while DynamoDB Local answers it. What the SDK does with an
 *   answer (reading it, the harness's meters and injected faults, a retry) runs only when the clock
 *   reaches the answer time, one answer at a time, so that it too happens at the same point of every
 *   run. Node.js prepares the next requests while the server works on the last one: the two
 *   processes share the machine's CPUs instead of taking turns.
 * - `track` (a harness's own reading, such as the stream's) holds virtual time still from its start
 *   until its work settles: it takes no virtual time (a simulation adds the round trip it wants as a
 *   virtual sleep).
 *
 * The preparation of calls (the SDK's middleware up to the request: serializing, signing, the
 * harness's faults decided before the request) runs one call at a time, in the order the calls were
 * made, with virtual time held still: a retry's real backoff in one call never lets another call's
 * request overtake it.
 */
import type { CallSlot, Pipeline } from '../fakes/dynamo-latency.js';
import type { Clock as FakeClock, Timer as FakeTimer } from '../fakes/clock.js';
import type { Clock } from '../../functions/shared/ports.js';

interface Timer {
  at: number;
  seq: number;
  fire: () => void;
  /** A pipelined call's answer time: its answer is handed over alone, before any later timer fires. */
  answer?: boolean;
}

const ignore = (): void => undefined;

export class VirtualClock implements Clock, Pipeline {
  private nowMs: number;
  private seq = 0;
  private readonly heap: Timer[] = [];
  /** Work that holds virtual time still: calls being prepared, answers being handed over, tracked work. */
  private busy = 0;
  private idle: Array<() => void> = [];
  /** Settles when the last call in line for its preparation (or tracked work) has let the next one go. */
  private prepared: Promise<void> = Promise.resolve();
  /** The last exchange in line with DynamoDB Local (the next is sent once it has been answered). */
  private line: Promise<unknown> = Promise.resolve();

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
   * Starts `work` (real I/O the simulated code waits for) once every call made before it has been
   * prepared and every request sent before it has been answered, and holds virtual time still until
   * it settles. `work` must not wait for virtual time or for another tracked call or `call`.
   */
  track<T>(work: () => Promise<T>): Promise<T> {
    this.busy += 1;
    const result = this.preparationTurn().then(async (next) => {
      try {
        const answer = this.line.then(() => work());
        this.line = answer.then(ignore, ignore);
        return await answer;
      } finally {
        next();
      }
    });
    result.then(this.unbusy, this.unbusy);
    return result;
  }

  /**
   * A pipelined call (an SDK call: `run` prepares it, sends each HTTP exchange through the slot,
   * reads its answer), made now and answered at `answerAt`. Its preparation waits for the calls made
   * before it to have been prepared, with virtual time held still; once its first exchange is in
   * line, virtual time runs on up to `answerAt`, when its answer (the first exchange's, and any
   * retry's after it) is handed over with virtual time held still again until `run` settles.
   */
  async call<T>(answerAt: number, run: (slot: CallSlot) => Promise<T>): Promise<T> {
    this.busy += 1;
    const next = await this.preparationTurn();
    let state: 'preparing' | 'sent' | 'answering' | 'settled' = 'preparing';
    let open!: () => void;
    const answerTime = new Promise<void>((resolve) => (open = resolve));
    const slot: CallSlot = {
      exchange: <R>(work: () => Promise<R>): Promise<R> => {
        const raw = this.line.then(() => work());
        this.line = raw.then(ignore, ignore);
        if (state === 'preparing') {
          state = 'sent';
          next();
          this.push({
            at: Math.max(answerAt, this.nowMs),
            seq: this.seq++,
            answer: true,
            fire: () => {
              if (state !== 'sent') return;
              state = 'answering';
              this.busy += 1;
              open();
            },
          });
          this.unbusy();
        }
        return answerTime.then(() => raw);
      },
    };
    try {
      return await run(slot);
    } finally {
      if (state === 'preparing') {
        next();
        this.unbusy();
      } else if (state === 'answering') {
        this.unbusy();
      }
      state = 'settled';
    }
  }

  /** Resolves with the function that lets the next call be prepared, once the calls before have let this one. */
  private preparationTurn(): Promise<() => void> {
    let next!: () => void;
    const released = new Promise<void>((resolve) => (next = resolve));
    const turn = this.prepared.then(() => next);
    this.prepared = released;
    return turn;
  }

  private readonly unbusy = (): void => {
    this.busy -= 1;
    if (this.busy === 0) for (const resolve of this.idle.splice(0)) resolve();
  };

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
      if (stop()) return this.drained();
      const next = this.heap[0];
      if (next === undefined || next.at > untilMs) {
        this.nowMs = Math.max(this.nowMs, Math.min(untilMs, next?.at ?? untilMs));
        return this.drained();
      }
      this.nowMs = next.at;
      // Every timer due at this instant fires before the promises they resolve run on; a call's
      // answer is handed over alone, neither after nor before another timer in its batch (its
      // handling may wait for the server, or for real time: a retry's backoff, and what those timers
      // start would run beside it in an order the machine's speed decides).
      let fired = false;
      while (this.heap[0] !== undefined && this.heap[0].at === this.nowMs) {
        if (this.heap[0].answer && fired) break;
        const timer = this.pop();
        timer.fire();
        fired = true;
        if (timer.answer) break;
      }
    }
  }

  /** The time reached, once every request sent so far has been answered (what the harness reads of the tables then includes them). */
  private async drained(): Promise<number> {
    await this.line;
    return this.nowMs;
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
