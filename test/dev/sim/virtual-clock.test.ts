/**
 * The simulations' clock (dev/sim/virtual-clock.ts): timers in virtual time, and real I/O tracked so
 * that it takes none and reaches the server one call at a time, in the order it was made: what makes
 * a simulation's figures the same on every run, however fast the machine answers. Pipelined calls
 * (`call`): the clock runs on while the server answers, up to the call's answer time, and answers are
 * handed over at their answer times, one at a time.
 */
import { setImmediate as realImmediate } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { CallSlot } from '../../../dev/fakes/dynamo-latency.js';
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

  describe('call (pipelined)', () => {
    /** A call whose one exchange takes `turns` real turns; the log says when each thing happened, in virtual ms. */
    function pipelined(clock: VirtualClock, log: string[], name: string, answerAt: number, turns: number): Promise<string> {
      return clock.call(answerAt, async (slot: CallSlot) => {
        log.push(`${name} made at ${clock.ms()}`);
        const answer = await slot.exchange(async () => {
          log.push(`send ${name}`);
          await realWork(turns);
          log.push(`answered ${name}`);
          return name;
        });
        log.push(`${name} handed over at ${clock.ms()}`);
        return answer;
      });
    }

    it('runs the clock on while the server answers, queues the calls made meanwhile behind it, and hands each answer over at its answer time', async () => {
      const clock = new VirtualClock(0);
      const log: string[] = [];
      const answers: Array<Promise<string>> = [];
      clock.at(0, () => answers.push(pipelined(clock, log, 'a', 10, 30)));
      // Due before a's answer time: fires while the server works on a; its call is sent after a's answer.
      clock.at(5, () => {
        log.push('timer at 5');
        answers.push(pipelined(clock, log, 'b', 15, 0));
      });
      // Due after a's answer time: fires only once a has been handed over, however long the server took.
      clock.at(12, () => log.push('timer at 12'));
      await clock.run(100);
      expect(await Promise.all(answers)).toEqual(['a', 'b']);
      // The server's order: a, then b; b was made while the server worked on a.
      expect(log.filter((line) => line.startsWith('send') || line.startsWith('answered'))).toEqual(['send a', 'answered a', 'send b', 'answered b']);
      expect(log.indexOf('b made at 5')).toBeLessThan(log.indexOf('answered a'));
      expect(log.filter((line) => !line.startsWith('send') && !line.startsWith('answered'))).toEqual([
        'a made at 0',
        'timer at 5',
        'b made at 5',
        'a handed over at 10',
        'timer at 12',
        'b handed over at 15',
      ]);
    });

    it('hands an answer over alone at its instant: a timer due then runs before it, however fast the server answered', async () => {
      const order = async (serverTurns: number): Promise<string[]> => {
        const clock = new VirtualClock(0);
        const log: string[] = [];
        // Set before the call: due at the call's answer time, earlier in the order of that instant.
        clock.at(5, () => {
          void (async () => {
            for (let k = 0; k < 20; k++) await Promise.resolve();
            log.push('timer done');
          })();
        });
        clock.at(0, () => {
          void clock.call(5, async (slot: CallSlot) => {
            await slot.exchange(() => realWork(serverTurns));
            for (let k = 0; k < 3; k++) await Promise.resolve();
            log.push(`answer handled at ${clock.ms()}`);
          });
        });
        await clock.run(100);
        return log;
      };
      // A server that has answered long before the answer time, and one that answers after it.
      expect(await order(0)).toEqual(['timer done', 'answer handled at 5']);
      expect(await order(40)).toEqual(['timer done', 'answer handled at 5']);
    });

    it('holds the clock at the answer time until the call settles: a retry is sent and answered then, before any later timer', async () => {
      const clock = new VirtualClock(0);
      const log: string[] = [];
      clock.at(0, () => {
        void clock.call(10, async (slot: CallSlot) => {
          await slot.exchange(async () => void log.push(`first sent at ${clock.ms()}`));
          // The SDK's backoff before its retry: real time, with virtual time still.
          await realWork(10);
          await slot.exchange(async () => void log.push(`retry sent at ${clock.ms()}`));
          log.push(`settled at ${clock.ms()}`);
        });
      });
      clock.at(11, () => log.push('timer at 11'));
      await clock.run(100);
      expect(log).toEqual(['first sent at 0', 'retry sent at 10', 'settled at 10', 'timer at 11']);
    });

    it('prepares calls one at a time, in the order they were made, with the clock still until each has sent its request', async () => {
      const clock = new VirtualClock(0);
      const log: string[] = [];
      clock.at(0, () => {
        for (const [name, turns] of [['a', 10], ['b', 0]] as const) {
          void clock.call(20, async (slot: CallSlot) => {
            log.push(`prepare ${name} at ${clock.ms()}`);
            // Preparation that takes real time (a retried throttle before any request): b waits for it.
            await realWork(turns);
            await slot.exchange(async () => void log.push(`send ${name}`));
          });
        }
      });
      clock.at(1, () => log.push('timer at 1'));
      await clock.run(100);
      expect(log).toEqual(['prepare a at 0', 'send a', 'prepare b at 0', 'send b', 'timer at 1']);
    });

    it('lets the clock run on after a call that failed before sending anything, and hands the caller its error', async () => {
      const clock = new VirtualClock(0);
      let failed: Promise<void> | undefined;
      clock.at(0, () => {
        failed = clock.call(10, async () => {
          await realWork(2);
          throw new Error('refused before any request');
        });
        void failed.catch(() => undefined);
      });
      const fired: number[] = [];
      clock.at(3, () => fired.push(clock.ms()));
      await clock.run(100);
      await expect(failed).rejects.toThrow('refused before any request');
      expect(fired).toEqual([3]);
    });

    it('returns from run only once every request sent has been answered, its answer time still to come', async () => {
      const clock = new VirtualClock(0);
      let answered = false;
      clock.at(0, () => {
        void clock.call(50, (slot: CallSlot) =>
          slot.exchange(async () => {
            await realWork(20);
            answered = true;
          }),
        );
      });
      expect(await clock.run(10)).toBe(10);
      // What the harness reads of the tables after run includes the request; the caller has not had the answer yet.
      expect(answered).toBe(true);
      expect(clock.pending).toBe(1);
      await clock.run(100);
      expect(clock.pending).toBe(0);
    });
  });
});
