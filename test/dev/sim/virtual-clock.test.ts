/**
 * The simulations' clock (dev/sim/virtual-clock.ts): timers in virtual time, and real I/O tracked so
 * that it takes none and reaches the server one call at a time, in the order it was made: what makes
 * a simulation's figures the same on every run, however fast the machine answers.
 */
import { setImmediate as realImmediate } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../../dev/sim/virtual-clock.js';

/** Real I/O that answers after `turns` turns of the event loop. */
async function realWork(turns: number): Promise<void> {
  for (let k = 0; k < turns; k++) await realImmediate();
}

describe('VirtualClock', () => {
  it('fires timers in time order, those of one instant in the order they were set', async () => {
    const clock = new VirtualClock(0);
    const fired: string[] = [];
    clock.at(20, () => fired.push('b'));
    clock.at(10, () => fired.push('a'));
    clock.at(20, () => fired.push('c'));
    await clock.run(15);
    expect(fired).toEqual(['a']);
    expect(clock.ms()).toBe(15);
    await clock.run(100);
    expect(fired).toEqual(['a', 'b', 'c']);
    // Nothing left to run: the clock stands at the time it was run to.
    expect(clock.ms()).toBe(100);
  });

  it('starts tracked calls one at a time in the order they were made, whichever the server would answer first', async () => {
    const clock = new VirtualClock(0);
    const log: string[] = [];
    const call = (name: string, turns: number) => async () => {
      log.push(`start ${name}`);
      await realWork(turns);
      log.push(`end ${name}`);
      return name;
    };
    // The first is the slowest: unordered, the others would answer before it.
    const answers = await Promise.all([clock.track(call('a', 5)), clock.track(call('b', 1)), clock.track(call('c', 0))]);
    expect(answers).toEqual(['a', 'b', 'c']);
    expect(log).toEqual(['start a', 'end a', 'start b', 'end b', 'start c', 'end c']);
  });

  it('starts the next tracked call after one that failed, and hands the caller its error', async () => {
    const clock = new VirtualClock(0);
    const failed = clock.track(async () => {
      await realWork(2);
      throw new Error('refused');
    });
    const next = clock.track(async () => 'answered');
    await expect(failed).rejects.toThrow('refused');
    await expect(next).resolves.toBe('answered');
  });

  it('holds virtual time still while a tracked call is under way', async () => {
    const clock = new VirtualClock(0);
    const seen: number[] = [];
    clock.at(0, () => {
      void clock.track(() => realWork(20)).then(() => {
        seen.push(clock.ms());
        clock.at(clock.ms() + 5, () => seen.push(clock.ms()));
      });
    });
    clock.at(1, () => seen.push(clock.ms()));
    await clock.run(100);
    // The call's answer comes before the timer at 1 ms, however many real turns it took.
    expect(seen).toEqual([0, 1, 5]);
  });

  it('runs the clock while awaiting work that waits virtual time, and stops when it settles', async () => {
    const clock = new VirtualClock(0);
    clock.at(500, () => undefined);
    const answer = await clock.during(clock.sleep(30).then(() => 'slept'));
    expect(answer).toBe('slept');
    expect(clock.ms()).toBe(30);
    expect(clock.pending).toBe(1);
  });

  it('refuses to run on for work that waits for something else than a timer or a tracked call', async () => {
    const clock = new VirtualClock(0);
    const never = new Promise<void>(() => undefined);
    await expect(clock.during(never)).rejects.toThrow('the work waits for something that is neither a timer nor a tracked call');
    // The clock did not run to the end of time.
    expect(clock.ms()).toBe(0);
  });
});
