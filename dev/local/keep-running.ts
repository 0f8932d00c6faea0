/**
 * The local run kept running (`npm run serve`): what Lambda's event source mappings and EventBridge
 * Scheduler do in AWS without end, here on the wall clock, with the run's own functions
 * (local-run.ts `Handlers`):
 *
 * - the item sync's event sources on the sync queue and the reconcile queue (dev/system/event-sources.ts
 *   runSyncEventSource, as deployed: the batch size and window, one poller per container up to
 *   syncMaxConcurrency), polling until stopped rather than until the queue is empty, as the local
 *   story's passes do;
 * - the eraser's on the erase queue (infra/deployment.ts eraseEventSourceDeployment: one message an
 *   invocation, two at a time);
 * - the schedules (dev/system/schedules.ts `every`, on the wall clock where a simulation has its
 *   virtual one): the token refresher every refresherEveryMinutes, the reconciler's ticks every
 *   minute when there is a reconciler, each interval whether or not the last invocation has ended,
 *   as EventBridge Scheduler invokes.
 *
 * The tables' streams feed the change-events function and the changes writer from the run's start
 * (change-events.ts). Each of these reports a line when it did something worth a developer's eye (a
 * refresh, the ids a reconciler's tick sent, an invocation that failed); never a token. `stop()` ends
 * the polling and the schedules and waits for the invocations under way.
 */
import { eraseEventSourceDeployment } from '../../infra/deployment.js';
import { systemClock } from '../fakes/clock.js';
import { runEventSource, type DrainResult, type InvocationOutcome } from '../fakes/lambda.js';
import type { BuiltFunction } from '../system/functions.js';
import { LAMBDA_LONG_POLL_SECONDS, runSyncEventSource } from '../system/event-sources.js';
import { every, type Schedule } from '../system/schedules.js';
import { describe, describeRefresh, type LocalRun } from './local-run.js';

const MINUTE_MS = 60_000;

export interface KeptRunning {
  /** Stops polling and scheduling; resolves once every invocation under way has ended. */
  stop(): Promise<void>;
}

export function keepRunning(run: LocalRun, report: (line: string) => void): KeptRunning {
  const { system, handlers } = run;
  let stopping = false;
  // No time limit: a source ends only when stopped.
  const untilStopped = { timeLimitMs: Number.POSITIVE_INFINITY, finished: () => stopping, stop: () => stopping };
  const failures = (what: string) => (outcome: InvocationOutcome) => {
    if (outcome.error !== undefined) report(`${what}: an invocation failed: ${describe(outcome.error)}`);
  };
  const containers = <H>(fn: BuiltFunction<H>): Array<BuiltFunction<H>> => Array.from({ length: system.deployment.syncEventSource.maxConcurrency }, () => fn);

  const polling: Array<Promise<DrainResult>> = [
    runSyncEventSource(system, 'sync', { containers: containers(handlers.sync), ...untilStopped, onOutcome: failures('item sync') }),
  ];
  if (system.queues.reconcile) {
    polling.push(runSyncEventSource(system, 'reconcile', { containers: containers(handlers.sweep), ...untilStopped, onOutcome: failures('item sync (reconcile queue)') }));
  }
  const erase = eraseEventSourceDeployment();
  polling.push(
    runEventSource({
      queue: system.aws.eventSourceQueue(system.queues.erase.name, LAMBDA_LONG_POLL_SECONDS),
      handlers: Array.from({ length: erase.maxConcurrency }, () => handlers.eraser.handler),
      batchSize: erase.batchSize,
      context: () => system.context(handlers.eraser),
      ...untilStopped,
      onOutcome: (outcome) => {
        if (outcome.error !== undefined) report(`eraser: an invocation failed: ${describe(outcome.error)}`);
        else if (outcome.failed.size > 0) report('eraser: an erase failed and goes back to its queue (handler logs: erase failed)');
      },
    }),
  );

  const underWay = new Set<Promise<void>>();
  const invoke = (what: string, work: () => Promise<void>): void => {
    const invocation: Promise<void> = work()
      .catch((error: unknown) => report(`${what}: the invocation failed: ${describe(error)}`))
      .finally(() => underWay.delete(invocation));
    underWay.add(invocation);
  };
  const { schedule } = system.deployment;
  const schedules: Schedule[] = [
    every(systemClock, schedule.refresherEveryMinutes * MINUTE_MS, () =>
      invoke('token refresher', async () => {
        const result = await handlers.refresher.handler({}, system.context(handlers.refresher));
        if (result.due > 0 || result.refused > 0 || result.failed > 0) report(describeRefresh(result));
      }),
    ),
  ];
  const ticks = schedule.reconciler;
  if (ticks) {
    schedules.push(
      every(systemClock, ticks.everyMinutes * MINUTE_MS, () => {
        for (let worker = 0; worker < ticks.workers; worker++) {
          invoke('reconciler', async () => {
            const tick = await handlers.reconciler.handler({ trigger: 'schedule', worker, workers: ticks.workers }, system.context(handlers.reconciler));
            if (tick.enqueued > 0) {
              report(`reconciler: pass ${tick.pass}, ${tick.enqueued} ids sent to the reconcile queue${tick.state === 'ended' ? ', the pass ended' : ''}`);
            }
          });
        }
      }),
    );
  }

  return {
    async stop() {
      stopping = true;
      for (const each of schedules) each.stop();
      await Promise.all(polling);
      while (underWay.size > 0) await Promise.all([...underWay]);
    },
  };
}
