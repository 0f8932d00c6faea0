/**
 * The small chaos soak, part of `npm test`: a few hundred ids through several handler instances at
 * once, with provider faults, token rotations, changing revisions, duplicate deliveries, DynamoDB
 * throttling and deliberately bad messages (dev/bench/soak/; `npm run soak` runs 10,000 ids).
 *
 * It asserts every figure the soak promises, and also that the faults really happened, so that it
 * cannot pass by not testing anything.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { badMessages } from '../../../../dev/bench/soak/bad-messages.js';
import { changePlan } from '../../../../dev/bench/soak/feed.js';
import { runSoak } from '../../../../dev/bench/soak/index.js';
import type { SoakReport } from '../../../../dev/bench/soak/report.js';

const IDS = 300;
const ROTATIONS = 3;

describe(`chaos soak: ${IDS} ids, 5 instances at once`, () => {
  let report: SoakReport;

  beforeAll(async () => {
    // The rarer DynamoDB faults are made more frequent than in `npm run soak`, so that a few hundred
    // ids surely meet them.
    // Half the bumps make an item cross the row limit, and S3 fails often, so that a few hundred ids
    // surely see large items grow and shrink while they are in flight, and S3 failures on the way.
    report = await runSoak({
      ids: IDS,
      seed: 20_261_121,
      instances: 5,
      // Batches of 10 (not the deployed 100): 300 ids make enough invocations for every kind of chaos.
      batchSize: 10,
      latencyMs: 1,
      rotations: ROTATIONS,
      lostAckRate: 0.03,
      unprocessedRate: 0.2,
      rateLimitRate: 0.01,
      resizeShare: 0.5,
      s3FailureRate: 0.3,
      // No failed getToken: a container whose on-demand refresh fails waits 30 s of real time before
      // it tries again, while its records come back from the scaled SQS in milliseconds and are sent
      // again, thousands of times, for as long: how often that happened depended on the machine's
      // speed (which caller's getToken met the failure), and it made the run last minutes instead of
      // seconds. The refresh's failures are tested in test/functions/shared/connections and in the
      // token outage scenario (test/dev/sim/pace-scenarios.test.ts); `npm run soak` keeps them.
      tokenFailureRate: 0,
      // SQS time runs 1,000 times faster than the handlers' here: at the deployed 360 s, a message
      // would be visible again after 360 ms of real time, which a starved machine's invocations
      // outlast again and again, until the queue redrives the message to the dead-letter queue.
      // Ten times that (3.6 s) keeps the redeliveries and the failed records coming back within
      // the run, and far from what a loaded machine's invocation needs.
      visibilityTimeoutSeconds: 3_600,
    });
  });

  it('reaches quiescence with every figure as expected', () => {
    expect(report.problems).toEqual([]);
    expect(report.ok).toBe(true);
    expect(report.figures.messagesLeft).toBe(0);
    expect(report.figures.handlerErrors).toBe(0);
  });

  it('loses no item and leaves none stale: every provider item stored at its latest revision, deleted ones tombstoned', () => {
    expect(report.figures.itemsLost).toBe(0);
    expect(report.figures.itemsStale).toBe(0);
    expect(report.figures.contentMismatches).toBe(0);
    expect(report.figures.unexpectedRows).toBe(0);
    // Not vacuous: the table holds the whole tree plus what the change feed created, some tombstoned.
    expect(report.activity.items.rowsAtEnd - report.activity.items.tombstones).toBe(report.activity.items.atEnd);
    expect(report.activity.items.atEnd).toBeGreaterThan(IDS * 0.95);
    expect(report.activity.changeFeed.deleted).toBeGreaterThan(0);
  });

  it('writes only real changes', () => {
    expect(report.figures.excessWrites).toBe(0);
    expect(report.activity.dynamodb.writes).toBe(report.activity.dynamodb.distinctStates);
    // Every row at the end was written at least once (an id made too large to fetch never is).
    expect(report.activity.dynamodb.writes).toBeGreaterThanOrEqual(report.activity.items.rowsAtEnd);
    expect(report.activity.items.rowsAtEnd).toBeGreaterThan(IDS * 0.95);
    // Duplicates, redeliveries and unchanged items were processed without writing.
    expect(report.activity.handlerMetrics['ItemsUnchanged']).toBeGreaterThan(0);
  });

  it('dead-letters exactly the deliberately bad messages, each with its reason', () => {
    const expected = badMessages('revision');
    expect(report.figures.badMessages).toBe(expected.length);
    expect(report.figures.deadLetteredExpected).toBe(expected.length);
    expect(report.figures.deadLetteredUnexpected).toBe(0);
    expect(report.figures.deadLetteredWrongReason).toBe(0);
    expect(report.figures.deadLettersMissing).toBe(0);
    expect(report.activity.messages.redriven).toBe(0);
    expect(new Set(report.deadLetters.map((entry) => entry.what))).toEqual(new Set(expected.map((message) => message.what)));
    for (const entry of report.deadLetters) {
      const message = expected.find((candidate) => candidate.what === entry.what)!;
      expect(entry.reason).toMatch(message.expected);
    }
  });

  it('prints no token anywhere', () => {
    expect(report.figures.tokensInOutput).toBe(0);
    expect(report.activity.tokens.issued).toBeGreaterThan(ROTATIONS);
    expect(report.activity.outputBytes).toBeGreaterThan(10_000);
  });

  it('met every kind of provider fault, including 401s while the token rotated', () => {
    const provider = report.activity.provider;
    expect(provider.serverErrors).toBeGreaterThan(0);
    expect(provider.rateLimited).toBeGreaterThan(0);
    expect(provider.dropped).toBeGreaterThan(0);
    expect(provider.slow).toBeGreaterThan(0);
    expect(provider.unauthorized).toBeGreaterThan(0);
    expect(report.activity.tokens.rotations).toBe(ROTATIONS);
    expect(report.activity.tokens.revocations).toBe(ROTATIONS);
    // About 20% transient errors (5xx, 408, drops) among the item requests.
    const transient = provider.serverErrors + (provider.byStatus['408'] ?? 0) + provider.dropped;
    expect(transient / provider.itemRequests).toBeGreaterThan(0.1);
  });

  it('saw at-least-once delivery: duplicates (some at the same time in two instances), redeliveries, and waiting records sent again', () => {
    const messages = report.activity.messages;
    expect(messages.duplicatesInjected).toBeGreaterThan(0);
    expect(messages.concurrentDuplicates).toBeGreaterThan(0);
    expect(messages.redeliveries).toBeGreaterThan(0);
    // Records that had to wait (the first rotation's revoked access token, issued less than a
    // minute before, waits for the refreshers' new one; a Retry-After outlasting the invocation) were
    // sent again by the sync, not failed; none came back before its delay.
    expect(messages.sentAgain).toBeGreaterThan(0);
    expect(report.figures.deliveredBeforeRetryAfter).toBe(0);
    expect(messages.invocations).toBeGreaterThan(IDS / 10);
  });

  it('changed revisions while the sync ran, also of items in flight', () => {
    const feed = report.activity.changeFeed;
    expect(feed.bumped).toBeGreaterThan(0);
    expect(feed.bumpedWhileInFlight).toBeGreaterThan(0);
    expect(feed.deleted).toBeGreaterThan(0);
    expect(feed.created).toBeGreaterThan(0);
    expect(feed.resurrected).toBeGreaterThan(0);
    expect(report.activity.messages.changeNotifications).toBe(feed.bumped + feed.deleted + feed.created + feed.resurrected);
  });

  it('keeps the items bucket and the table in agreement after races: no pointer to nothing, no unexplained object, each object what its row says', () => {
    expect(report.figures.pointersToNothing).toBe(0);
    expect(report.figures.objectMismatches).toBe(0);
    expect(report.figures.orphanedObjects).toBe(0);
    expect(report.figures.objectsUnchecked).toBe(0);
    // Not vacuous: large items were stored, replaced and deleted while duplicates and races went on,
    // and rows point to the bucket at the end (their objects read back and compared with the provider).
    const objects = report.activity.objects;
    expect(objects.largeAtStart).toBeGreaterThanOrEqual(3);
    expect(report.activity.changeFeed.grown + report.activity.changeFeed.shrunk).toBeGreaterThan(0);
    expect(objects.written).toBeGreaterThan(objects.largeAtStart);
    expect(objects.deleted).toBeGreaterThan(0);
    expect(objects.rowsWithObject).toBeGreaterThan(0);
    // S3 failed too (injected): uploads retried, deletes that failed left objects the sync logged.
    expect(objects.putFailuresInjected + objects.deleteFailuresInjected).toBeGreaterThan(0);
  });

  it('makes one getToken at a time and never loses (or replays) a rotated refresh token', () => {
    expect(report.figures.concurrentGetToken).toBe(0);
    expect(report.figures.refreshTokensLost).toBe(0);
    expect(report.activity.tokens.getTokenAtOnce).toBe(1);
    // Two refresher runs at the start and at every rotation, each finding the connection due or not
    // (a container may have refreshed it on demand first); at least one getToken a rotation.
    const tokens = report.activity.tokens;
    expect(tokens.refresherRuns).toBe(2 * (ROTATIONS + 1));
    expect(tokens.refreshed + tokens.skipped + tokens.failed).toBeLessThanOrEqual(tokens.refresherRuns);
    expect(tokens.getTokenRequests).toBeGreaterThanOrEqual(ROTATIONS + 1);
    // The provider rotated the refresh token at every getToken it answered 200.
    expect(report.activity.provider.tokenByStatus['200']).toBeGreaterThanOrEqual(tokens.refreshed);
  });

  it("absorbed refused reads of the connections table (injected throttling, above the SDK's retries)", () => {
    const connections = report.activity.connections;
    expect(connections.readFailuresInjected).toBeGreaterThan(0);
    expect(connections.requests['GetItem']).toBeGreaterThan(0);
    expect(connections.requests['Scan']).toBe(2 * (ROTATIONS + 1));
  });

  it('was throttled by DynamoDB and absorbed it', () => {
    const dynamodb = report.activity.dynamodb;
    expect(dynamodb.throttlesInjected).toBeGreaterThan(0);
    expect(dynamodb.unprocessedKeysInjected).toBeGreaterThan(0);
    expect(dynamodb.lostAcksInjected).toBeGreaterThan(0);
  });
});

describe('changePlan', () => {
  it('is the same for a seed, mostly bumps, and holds every kind of change', () => {
    const plan = changePlan(30, 7);
    expect(changePlan(30, 7)).toEqual(plan);
    expect(new Set(plan)).toEqual(new Set(['bump', 'delete', 'create', 'resurrect']));
    expect(plan.filter((kind) => kind === 'bump').length).toBeGreaterThan(15);
    let deleted = 0;
    for (const kind of plan) {
      if (kind === 'delete') deleted += 1;
      if (kind === 'resurrect') deleted -= 1;
      expect(deleted).toBeGreaterThanOrEqual(0);
    }
  });
});
