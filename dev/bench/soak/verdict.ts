/** The soak's verdict after quiescence: the checks (checks.ts) applied to what the run left behind. */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fromAttributeValue } from '../../../functions/item-sync/adapters/dynamodb-item-store.js';
import { ITEM_OBJECT_PREFIX } from '../../../functions/item-sync/item-writer.js';
import { DEFAULT_CONNECTION } from '../../../functions/shared/connections/connection.js';
import { occurrences } from '../../fakes/capture-output.js';
import { sumEmfMetrics } from '../../fakes/emf.js';
import { itemObjectOf, listObjects, readItemObject, type ItemObjectRead } from '../../fakes/s3.js';
import {
  checkCredentials,
  checkDeadLetters,
  checkObjects,
  checkState,
  checkWrites,
  countTokens,
  deadLetterEntries,
  mostAtOnce,
  objectsLeftInLogs,
  tokensInConnections,
  type CredentialsCheck,
  type DeadLetterCheck,
  type ObjectCheck,
  type Row,
  type WriteCheck,
} from './checks.js';
import type { Feed } from './feed.js';
import type { RunResult } from './run.js';
import { NAMES, type SoakWorld } from './world.js';

export interface SoakFigures {
  /** Ids enqueued (not deliberately bad) whose item exists at the provider with no row. */
  itemsLost: number;
  /** Rows whose revision is not the provider's latest, or whose tombstone state is wrong. */
  itemsStale: number;
  /** Rows at the latest revision whose `item` is not the provider's item. */
  contentMismatches: number;
  /** Rows for ids never sent as good messages (a bad id stored). */
  unexpectedRows: number;
  /** Rows whose itemObject points to no object in the items bucket. */
  pointersToNothing: number;
  /** Objects that are not what their row says (size, SHA-256, content). */
  objectMismatches: number;
  /** Objects in the items bucket no row points to, that no `item object left in the bucket` line explains. */
  orphanedObjects: number;
  /** Rows whose object could not be read, or 1 when the bucket could not be listed. */
  objectsUnchecked: number;
  /** Successful writes that stored an (id, revision|deleted) state the table had already held. */
  excessWrites: number;
  /** Distinct bad messages dead-lettered with the expected reason. */
  deadLetteredExpected: number;
  /** Bad messages sent. */
  badMessages: number;
  /** Dead-letter entries for messages that were not deliberately bad (or moved by the redrive). */
  deadLetteredUnexpected: number;
  /** Bad messages dead-lettered with another reason than the expected one. */
  deadLetteredWrongReason: number;
  /** Bad messages never dead-lettered. */
  deadLettersMissing: number;
  /** Occurrences of any token ever issued in stdout/stderr, dead letters and handler answers. */
  tokensInOutput: number;
  /** Messages still in the queue at the end (0 after quiescence). */
  messagesLeft: number;
  /** Invocations that threw, or answered with an identifier that was not in the batch. */
  handlerErrors: number;
  /** Postponed records delivered again before their Retry-After. */
  deliveredBeforeRetryAfter: number;
  /** Most getToken calls in flight at once beyond one (the lease allows one per connection at a time). */
  concurrentGetToken: number;
  /** 1 when the connection's refresh token is lost: not active, its stored token not the provider's live one, or a rotated one replayed (the grant revoked). */
  refreshTokensLost: number;
}

export interface Verdict {
  figures: SoakFigures;
  /** One sentence per figure that is off, then the details the checks gave. */
  problems: string[];
  rows: ReadonlyMap<string, Row>;
  writes: WriteCheck;
  objects: ObjectCheck;
  /** What the sync logged about item objects: written, deleted, kept after a lost answer, left behind. */
  objectLog: { written: number; deleted: number; kept: number; left: number };
  deadLetters: DeadLetterCheck;
  credentials: CredentialsCheck;
  /** Most getToken calls in flight at once. */
  getTokenAtOnce: number;
  /** Sums of the handlers' own EMF metrics. */
  handlerMetrics: Record<string, number>;
  outputBytes: number;
}

/** Checks the state the run left (the output capture stopped), and writes the output to the log file. */
export async function judge(world: SoakWorld, feed: Feed, run: RunResult): Promise<Verdict> {
  const { o } = world;
  const rows = new Map((await world.dynamo.scan(NAMES.itemsTable)).map((row) => [row['id']!.S!, row]));
  const { reads, listing } = await readBucket(world, rows);
  const state = checkState(feed.ledger.goodIds, (id) => world.sim.getItem(id), rows, o.revisionField, reads);
  const writes = checkWrites(world.meter.writes);
  // A bad message the sync sent again before it died carries the id of the copy: the original's id counts.
  const dead = deadLetterEntries(world.sqs.peek(NAMES.syncDeadLetterQueue)).map((entry) => ({
    ...entry,
    sourceMessageId: feed.ledger.originalOf.get(entry.sourceMessageId) ?? entry.sourceMessageId,
  }));
  const deadCheck = checkDeadLetters(dead, feed.ledger.badByMessageId);

  // Tokens: every token issued or stored, searched in the output, the dead letters and the answers.
  const output = world.capture.text();
  // A write whose answer was lost deletes the object of the row it replaced like any other write (or
  // logs it as left): only the log explains an object no row points to.
  const objects = checkObjects(rows, reads, listing, new Set(objectsLeftInLogs(output)));
  const connectionRows = await world.dynamo.scan(NAMES.connectionsTable);
  for (const token of tokensInConnections(connectionRows)) world.tokens.add(token);
  // The refresh token: never lost, never replayed (the provider would have revoked the grant).
  const stored = await world.system.connections.get(DEFAULT_CONNECTION, { consistent: true });
  const account = world.sim.account(DEFAULT_CONNECTION);
  const credentials = checkCredentials(stored, { authorized: account.authorized, liveRefreshTokens: account.refreshTokens, replays: account.counters().replays });
  const getTokenAtOnce = mostAtOnce(world.tally.tokenIntervals, Date.now());
  const texts = [output, ...dead.map((entry) => `${entry.body}\n${JSON.stringify(entry.attributes)}`), ...run.answers];
  if (o.logFile) {
    mkdirSync(dirname(o.logFile), { recursive: true });
    writeFileSync(o.logFile, output);
  }
  const figures: SoakFigures = {
    itemsLost: state.itemsLost,
    itemsStale: state.itemsStale,
    contentMismatches: state.contentMismatches,
    unexpectedRows: state.unexpectedRows,
    pointersToNothing: objects.pointersToNothing,
    objectMismatches: objects.objectMismatches,
    orphanedObjects: objects.orphanedObjects,
    objectsUnchecked: objects.objectsUnchecked,
    excessWrites: writes.excessWrites,
    deadLetteredExpected: deadCheck.expected,
    badMessages: deadCheck.bad,
    deadLetteredUnexpected: deadCheck.unexpected,
    deadLetteredWrongReason: deadCheck.wrongReason,
    deadLettersMissing: deadCheck.missing,
    tokensInOutput: countTokens(world.tokens, texts),
    messagesLeft: world.sqs.size(NAMES.syncQueue),
    handlerErrors: run.handlerErrors,
    deliveredBeforeRetryAfter: world.sqs.queue(NAMES.syncQueue).stats.deliveredBeforeRetryAfter,
    concurrentGetToken: Math.max(0, getTokenAtOnce - 1),
    refreshTokensLost: credentials.refreshTokensLost,
  };
  const problems = problemsOf(figures, run.timedOut ? o.maxDurationMs : undefined);
  problems.push(...[...state.details, ...objects.details, ...writes.details, ...deadCheck.details, ...credentials.details].map((line) => `  ${line}`));
  const objectLog = {
    written: occurrences(output, '"message":"item too large for a row; storing it in the items bucket"'),
    deleted: occurrences(output, '"message":"item object deleted"'),
    kept: occurrences(output, '"message":"item object kept: its row was written after all'),
    left: occurrences(output, '"message":"item object left in the bucket"'),
  };
  return {
    figures,
    problems,
    rows,
    writes,
    objects,
    objectLog,
    deadLetters: deadCheck,
    credentials,
    getTokenAtOnce,
    handlerMetrics: sumEmfMetrics(output),
    outputBytes: output.length,
  };
}

const EXPECT_ZERO: Array<[keyof SoakFigures, string]> = [
  ['itemsLost', 'items lost'],
  ['itemsStale', 'items stale'],
  ['contentMismatches', 'rows whose item differs from the provider'],
  ['unexpectedRows', 'rows for ids never sent as good messages'],
  ['pointersToNothing', 'rows pointing to no object in the items bucket'],
  ['objectMismatches', 'objects not what their row says'],
  ['orphanedObjects', 'objects no row points to (unexplained)'],
  ['objectsUnchecked', 'objects the check could not read (or list)'],
  ['excessWrites', 'writes minus real changes'],
  ['deadLetteredUnexpected', 'unexpected dead letters'],
  ['deadLetteredWrongReason', 'bad messages dead-lettered for the wrong reason'],
  ['deadLettersMissing', 'bad messages never dead-lettered'],
  ['tokensInOutput', 'tokens in output'],
  ['messagesLeft', 'messages left in the queue'],
  ['handlerErrors', 'invocations that failed as a whole'],
  ['deliveredBeforeRetryAfter', 'records delivered before their Retry-After'],
  ['concurrentGetToken', 'getToken calls in flight at once beyond one'],
  ['refreshTokensLost', 'refresh tokens lost (or replayed, the grant revoked)'],
];

function problemsOf(figures: SoakFigures, timedOutAfterMs: number | undefined): string[] {
  const problems: string[] = [];
  if (timedOutAfterMs !== undefined) problems.push(`the queue did not drain within ${timedOutAfterMs} ms`);
  for (const [key, label] of EXPECT_ZERO) {
    if (figures[key] !== 0) problems.push(`${label}: ${figures[key]} (expected 0)`);
  }
  if (figures.deadLetteredExpected !== figures.badMessages) {
    problems.push(`bad messages dead-lettered with their reason: ${figures.deadLetteredExpected} of ${figures.badMessages}`);
  }
  return problems;
}

/** Each itemObject row's object read back, and the keys under items/ (or why they could not be listed). */
async function readBucket(
  world: SoakWorld,
  rows: ReadonlyMap<string, Row>,
): Promise<{ reads: Map<string, ItemObjectRead>; listing: Map<string, number> | { error: string } }> {
  const s3 = world.s3.client();
  try {
    const reads = new Map<string, ItemObjectRead>();
    for (const [id, row] of rows) {
      if (row['itemObject'] === undefined) continue;
      const pointer = itemObjectOf(fromAttributeValue({ M: row }) as Record<string, unknown>);
      reads.set(id, pointer ? await readItemObject(s3, NAMES.itemsBucket, pointer) : { kind: 'mismatch', why: 'itemObject is not {key, size, sha256}' });
    }
    let listing: Map<string, number> | { error: string };
    try {
      listing = await listObjects(s3, NAMES.itemsBucket, ITEM_OBJECT_PREFIX);
    } catch (error) {
      listing = { error: `${(error as Error).name}: ${(error as Error).message}` };
    }
    return { reads, listing };
  } finally {
    s3.destroy();
  }
}
