/**
 * The chaos soak: a seeded simulation of production, run in process.
 *
 *   - the provider simulator serves a generated item tree and injects faults on the items endpoint
 *     (5xx, 408 and dropped connections: 20% together; 429 with and without Retry-After; slow and
 *     hanging responses) and on the token endpoint;
 *   - a change feed bumps revisions, deletes, creates and resurrects items while the sync runs
 *     (often items whose message is being processed right then) and enqueues the id each time, as a
 *     real change notification would;
 *   - the connection `default` in the connections table; two token refreshers run at once every so
 *     often against a provider that rotates the refresh token (and revokes the grant if a rotated-away
 *     one ever comes back), and every access token issued so far is revoked just before they run, so
 *     containers holding a cached token meet 401s while the token rotates; the lease lets one getToken
 *     through at a time, and a rotated refresh token is never lost;
 *   - the SQS model (at-least-once: duplicate copies, some delivered to two containers at once;
 *     redelivery after batchItemFailures; Retry-After; the redrive to the dead-letter queue after
 *     maxReceiveCount) feeds batches to several handler instances at once through the event source
 *     mapping, each built by its own createSyncHandler call (its own token cache and clients: a
 *     separate container);
 *   - DynamoDB (DynamoDB Local) throttles a share of requests, leaves BatchGetItem keys unprocessed and
 *     loses some write acknowledgements (the SDK re-sends the conditional write); a share of the
 *     containers' reads of the connections table is refused above the SDK's retries;
 *   - a few deliberately bad messages are mixed in.
 *
 * After quiescence (queue drained, no more changes) it checks: items lost, items stale, rows whose
 * item differs from the provider's, writes minus real changes, dead letters (exactly the bad ones,
 * each with its reason), tokens (every one the provider issued or the connections table holds) in
 * the captured stdout/stderr and in the dead letters, getToken calls in flight at once (one at most),
 * and the connection's refresh token (active, the provider's live one, never replayed).
 *
 * Seeded: the same options give the same ids, bad messages, change feed and fault rates. The
 * interleaving of concurrent instances depends on timing, so counts of faults met vary a little from
 * run to run; the checks must hold on every run.
 *
 * Phases: setup.ts (the world, world.ts its shape), feed.ts (what goes into the queue and changes at
 * the provider), run.ts (the instances drain the queue), verdict.ts (the checks of checks.ts applied),
 * report.ts.
 */
import { judge } from './verdict.js';
import { Feed } from './feed.js';
import { SOAK_DEFAULTS, type SoakOptions } from './options.js';
import { buildReport, type SoakReport } from './report.js';
import { runInstances } from './run.js';
import { setUpSoak } from './setup.js';

export async function runSoak(input: Partial<SoakOptions> = {}): Promise<SoakReport> {
  const world = await setUpSoak({ ...SOAK_DEFAULTS, ...input });
  try {
    const feed = new Feed(world);
    feed.sendInitial();
    const run = await runInstances(world, feed);
    world.tally.take(false);
    await world.sim.close();
    world.tally.take(true);
    world.capture.stop();
    world.say(`  quiescent after ${((run.quiescentAt - world.t0) / 1000).toFixed(1)} s; checking`);
    return buildReport(world, feed, run, await judge(world, feed, run));
  } finally {
    await world.close();
  }
}
