/**
 * The soak's run: the sync queue's event source as deployed (dev/system/event-sources.ts) hands
 * batches to the instances, one poller each, while the change feed goes on, until the queue is empty and the feed
 * is over (quiescence) or the time limit passes.
 */
import type { InvocationOutcome } from '../../fakes/lambda.js';
import { runSyncEventSource } from '../../system/event-sources.js';
import type { Feed } from './feed.js';
import { NAMES, type SoakWorld } from './world.js';

export interface RunResult {
  invocations: number;
  /** Invocations that threw, or answered with an identifier that was not in the batch. */
  handlerErrors: number;
  /** Every handler answer, as JSON (searched for tokens). */
  answers: string[];
  timedOut: boolean;
  /** Date.now() when the queue was empty and the feed over. */
  quiescentAt: number;
}

/** Real milliseconds a poller waits for a message before it looks again at the feed and at the end. */
const POLL_MS = 50;

export async function runInstances(world: SoakWorld, feed: Feed): Promise<RunResult> {
  const { o } = world;
  world.say(
    `soak: ${o.ids} ids + ${world.bad.length} bad messages, ${o.instances} instances, batch ${o.batchSize}, seed ${o.seed}; ` +
      `SQS time scaled to ${o.msPerSecond} ms per second (visibility ${o.visibilityTimeoutSeconds} s = ${o.visibilityTimeoutSeconds * o.msPerSecond} ms)`,
  );
  const answers: string[] = [];
  let lastProgress = Date.now();
  const result = await runSyncEventSource(world.system, 'sync', {
    containers: world.instances,
    waitSeconds: POLL_MS / o.msPerSecond,
    timeLimitMs: o.maxDurationMs - (Date.now() - world.t0),
    context: (instance, invocation) =>
      world.system.context(world.instances[instance]!, {
        awsRequestId: `soak-${instance}-${invocation}`,
        logStreamName: `soak/instance-${instance}`,
        timeoutMs: o.invocationTimeoutMs,
      }),
    beforeReceive: () => feed.tick(),
    finished: () => feed.done(),
    onBatch: (_instance, messages) => feed.ledger.delivered(messages.map((m) => ({ messageId: m.MessageId ?? '', body: m.Body ?? '' }))),
    onOutcome: (outcome: InvocationOutcome) => {
      if (outcome.answer !== undefined) answers.push(JSON.stringify(outcome.answer));
      feed.ledger.settled(outcome.messages.map((m) => m.MessageId ?? ''));
      world.tally.take(false);
    },
    onProgress: (progress) => {
      if (Date.now() - lastProgress < 5_000) return;
      lastProgress = Date.now();
      world.say(
        `  ${((Date.now() - world.t0) / 1000).toFixed(0).padStart(4)} s: ${feed.ledger.deliveredInitial.size}/${feed.ledger.initialMessageIds.size} first deliveries, ` +
          `${world.sqs.size(NAMES.syncQueue)} messages outstanding, ${progress.invocations} invocations, ${feed.mutationsDone}/${feed.mutationsPlanned} changes, ` +
          `${world.tokenStats.rotations}/${o.rotations} rotations`,
      );
    },
  });
  await feed.settled();
  return { invocations: result.invocations, handlerErrors: result.failedInvocations, answers, timedOut: !result.drained, quiescentAt: Date.now() };
}
