/**
 * The soak's verdict after quiescence. The checks are pure functions of what the run left behind
 * (the provider's final items, the table's rows, the objects in the items bucket, the writes the
 * table took, the dead letters and the output, the getToken calls and the connection's
 * credentials), so that they are tested themselves
 * (test/dev/bench/soak/checks.test.ts): each must catch the failure it is there for. `judge`
 * (verdict.ts) applies them to a run.
 */
import { isDeepStrictEqual } from 'node:util';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { revisionText } from '../../../functions/item-sync/item.js';
import { fromAttributeValue } from '../../../functions/item-sync/adapters/dynamodb-item-store.js';
import { getPath } from '../../../functions/shared/json.js';
import { jsonLines, occurrences } from '../../fakes/capture-output.js';
import type { RecordedWrite } from '../../fakes/dynamo-meter.js';
import { itemObjectOf, type ItemObjectRead } from '../../fakes/s3.js';
import type { StoredMessage } from '../../fakes/sqs-model.js';
import type { ExpectedDeadLetter } from './bad-messages.js';

export type { ExpectedDeadLetter } from './bad-messages.js';

export type Row = Record<string, AttributeValue>;

/** A message in the dead-letter queue, as the checks read it. */
export interface DeadLetterEntry {
  /** `redrive`: moved by the queue after maxReceiveCount; `handler`: sent by the sync function. */
  source: 'redrive' | 'handler';
  body: string;
  /** The original message's id (the `sourceMessageId` attribute, or the redriven message's own id). */
  sourceMessageId: string;
  /** Why: the `error` attribute, or "maxReceiveCount exceeded". */
  reason: string;
  attributes: Record<string, string>;
  /** When it was sent (first sent, for a redriven message). */
  at: number;
}

export function deadLetterEntries(messages: readonly StoredMessage[]): DeadLetterEntry[] {
  return messages.map((message) => {
    const attributes: Record<string, string> = {};
    for (const [name, value] of Object.entries(message.messageAttributes)) attributes[name] = value.StringValue ?? '';
    const redriven = message.deadLetterQueueSourceArn !== undefined;
    return {
      source: redriven ? 'redrive' : 'handler',
      body: message.body,
      sourceMessageId: redriven ? message.messageId : (attributes['sourceMessageId'] ?? ''),
      reason: redriven ? 'maxReceiveCount exceeded' : (attributes['error'] ?? ''),
      attributes,
      at: message.sentAt,
    };
  });
}

export interface StateCheck {
  /** Good ids whose item exists at the provider with no row. */
  itemsLost: number;
  /** Rows at another revision than the provider's, live rows for deleted items, tombstones for live ones. */
  itemsStale: number;
  /** Rows at the right revision whose item (inline, or read from the items bucket) is not the provider's item. */
  contentMismatches: number;
  /** Rows for ids that were never sent as good messages. */
  unexpectedRows: number;
  details: string[];
}

/**
 * `goodIds`: every id sent in a well-formed message; `providerItem(id)`: the item the provider
 * serves now (undefined once deleted); `rows`: the table after quiescence; `objects`: the object of
 * each row that points to the items bucket, read back (a row whose object was not found there is
 * left to checkObjects, which counts it).
 */
export function checkState(
  goodIds: Iterable<string>,
  providerItem: (id: string) => Record<string, unknown> | undefined,
  rows: ReadonlyMap<string, Row>,
  revisionField: string,
  objects: ReadonlyMap<string, ItemObjectRead> = new Map(),
): StateCheck {
  const result: StateCheck = { itemsLost: 0, itemsStale: 0, contentMismatches: 0, unexpectedRows: 0, details: [] };
  const note = (line: string): void => {
    if (result.details.length < 20) result.details.push(line);
  };
  const good = new Set(goodIds);
  for (const id of good) {
    const item = providerItem(id);
    const row = rows.get(id);
    const deleted = row?.['deleted']?.BOOL === true;
    if (item) {
      if (!row) {
        result.itemsLost += 1;
        note(`lost: ${id}`);
        continue;
      }
      const latest = revisionText(getPath(item, revisionField));
      if (deleted || row['revision']?.S !== latest) {
        result.itemsStale += 1;
        note(`stale: ${id} stored ${row['revision']?.S}${deleted ? ' (deleted)' : ''}, provider ${latest}`);
      } else if (row['itemObject'] === undefined) {
        if (!isDeepStrictEqual(fromAttributeValue(row['item'] ?? { NULL: true }), item)) {
          result.contentMismatches += 1;
          note(`content differs: ${id}`);
        }
      } else {
        const read = objects.get(id);
        if (read?.kind === 'found' && !isDeepStrictEqual(read.item, item)) {
          result.contentMismatches += 1;
          note(`content differs: ${id} (its object in the items bucket)`);
        }
      }
    } else if (row && !deleted) {
      // Deleted at the provider: a row must be a tombstone (no row: it was never stored, also right).
      result.itemsStale += 1;
      note(`stale: ${id} deleted at the provider but stored live`);
    }
  }
  for (const id of rows.keys()) {
    if (!good.has(id)) {
      result.unexpectedRows += 1;
      note(`unexpected row: ${JSON.stringify(id.slice(0, 60))}`);
    }
  }
  return result;
}

export interface ObjectCheck {
  /** Rows (live or tombstones) whose item is in the items bucket. */
  rowsWithObject: number;
  /** Rows whose itemObject points to no object. */
  pointersToNothing: number;
  /** Objects that are not what their row says (size, SHA-256, not a JSON object), or a malformed itemObject. */
  objectMismatches: number;
  /** Objects no row points to that nothing explains. */
  orphanedObjects: number;
  /**
   * Objects no row points to that the run explains: the sync logged each one it left
   * ("item object left in the bucket", e.g. a failed delete), or it belonged to a row replaced by
   * a write whose answer was lost (the writer never learns that row).
   */
  orphansExplained: number;
  /** Rows whose object could not be read, plus 1 when the bucket could not be listed: what the check could not look at. */
  objectsUnchecked: number;
  details: string[];
}

/**
 * The items bucket against the table: every row's object is there and is what the row says, and
 * every object under items/ is pointed to by a row, unless the run explains it (`explained`).
 * `reads`: each itemObject row's object read back (readItemObject), by id; `listing`: the keys
 * under items/ with their sizes, or why the bucket could not be listed.
 */
export function checkObjects(
  rows: ReadonlyMap<string, Row>,
  reads: ReadonlyMap<string, ItemObjectRead>,
  listing: ReadonlyMap<string, number> | { error: string },
  explained: ReadonlySet<string>,
): ObjectCheck {
  const result: ObjectCheck = { rowsWithObject: 0, pointersToNothing: 0, objectMismatches: 0, orphanedObjects: 0, orphansExplained: 0, objectsUnchecked: 0, details: [] };
  const note = (line: string): void => {
    if (result.details.length < 20) result.details.push(line);
  };
  const pointed = new Set<string>();
  for (const [id, row] of rows) {
    if (row['itemObject'] === undefined) continue;
    result.rowsWithObject += 1;
    const key = itemObjectOf(fromAttributeValue({ M: row }) as Record<string, unknown>)?.key;
    if (key !== undefined) pointed.add(key);
    const read = reads.get(id);
    switch (read?.kind) {
      case 'found':
        break;
      case 'missing':
        result.pointersToNothing += 1;
        note(`pointer to nothing: ${id} -> ${key}`);
        break;
      case 'mismatch':
        result.objectMismatches += 1;
        note(`object not what its row says: ${id} (${read.why})`);
        break;
      case 'unreadable':
        result.objectsUnchecked += 1;
        note(`object not read: ${id} (${read.error})`);
        break;
      default:
        result.objectsUnchecked += 1;
        note(`object not read: ${id}`);
    }
  }
  if ('error' in listing) {
    result.objectsUnchecked += 1;
    note(`the items bucket could not be listed (${listing.error}): objects no row points to were not looked for`);
    return result;
  }
  for (const key of listing.keys()) {
    if (pointed.has(key)) continue;
    if (explained.has(key)) {
      result.orphansExplained += 1;
    } else {
      result.orphanedObjects += 1;
      note(`object no row points to: ${key}`);
    }
  }
  return result;
}

/** The keys the sync logged as "item object left in the bucket". */
export function objectsLeftInLogs(output: string): string[] {
  const keys: string[] = [];
  for (const line of jsonLines(output)) {
    if (typeof line !== 'string' && line['message'] === 'item object left in the bucket' && typeof line['objectKey'] === 'string') keys.push(line['objectKey']);
  }
  return keys;
}

export interface WriteCheck {
  writes: number;
  /** Distinct (id, state) pairs written: the real changes. */
  distinctStates: number;
  /** Writes that stored a state the row had already held: writes minus real changes. */
  excessWrites: number;
  details: string[];
}

/**
 * A state is `live:<revision>` or `deleted:<revision>`; revisions only move forward (the change feed
 * never gives an item back an older revision), so a state written twice for an id is a redundant write.
 */
export function checkWrites(writes: readonly RecordedWrite[]): WriteCheck {
  const seen = new Set<string>();
  const details: string[] = [];
  let excessWrites = 0;
  for (const write of writes) {
    const key = `${write.id}\u0000${write.state}`;
    if (seen.has(key)) {
      excessWrites += 1;
      if (details.length < 20) details.push(`redundant write: ${write.id} ${write.state} (${write.operation})`);
    }
    seen.add(key);
  }
  return { writes: writes.length, distinctStates: seen.size, excessWrites, details };
}

export interface DeadLetterSummary {
  reason: string;
  /** Dead-letter entries of this message (or kind of message) with this reason. */
  entries: number;
  /** What the message was, when it is an expected one; else "UNEXPECTED: <body>". */
  what: string;
}

export interface DeadLetterCheck {
  /** Expected messages dead-lettered by the sync with their reason. */
  expected: number;
  /** Expected messages in all. */
  bad: number;
  /** Entries for messages that were not expected to die. */
  unexpected: number;
  /** Expected messages dead-lettered with another reason, or moved by the redrive. */
  wrongReason: number;
  /** Expected messages never dead-lettered. */
  missing: number;
  byReason: DeadLetterSummary[];
  details: string[];
}

/** The dead-letter queue must hold exactly the expected messages (by source message id), each with its reason. */
export function checkDeadLetters(entries: readonly DeadLetterEntry[], expected: ReadonlyMap<string, ExpectedDeadLetter>): DeadLetterCheck {
  const byReason = new Map<string, DeadLetterSummary>();
  const rightly = new Set<string>();
  const wrongly = new Set<string>();
  const details: string[] = [];
  let unexpected = 0;
  for (const entry of entries) {
    const message = expected.get(entry.sourceMessageId);
    const what = message ? message.what : `UNEXPECTED: ${describeBody(entry.body)}`;
    const key = `${what}\u0000${entry.reason}`;
    const summary = byReason.get(key) ?? { reason: entry.reason, entries: 0, what };
    summary.entries += 1;
    byReason.set(key, summary);
    if (!message) {
      unexpected += 1;
      if (details.length < 20) details.push(`unexpected dead letter (${entry.source}): ${describeBody(entry.body)}: ${entry.reason}`);
    } else if (entry.source === 'handler' && message.expected.test(entry.reason)) {
      rightly.add(entry.sourceMessageId);
    } else {
      wrongly.add(entry.sourceMessageId);
      if (details.length < 20) details.push(`wrong reason for "${message.what}" (${entry.source}): ${entry.reason}`);
    }
  }
  const missing = [...expected.keys()].filter((id) => !rightly.has(id) && !wrongly.has(id)).length;
  return {
    expected: [...rightly].filter((id) => !wrongly.has(id)).length,
    bad: expected.size,
    unexpected,
    wrongReason: wrongly.size,
    missing,
    byReason: [...byReason.values()].sort((a, b) => a.what.localeCompare(b.what)),
    details,
  };
}

/** Occurrences of every token in every text. Tokens shorter than 8 characters are ignored (not tokens). */
export function countTokens(tokens: Iterable<string>, texts: readonly string[]): number {
  let count = 0;
  for (const token of new Set(tokens)) {
    if (token.length < 8) continue;
    for (const text of texts) count += occurrences(text, token);
  }
  return count;
}

/** The access and refresh tokens the connections table's rows hold (`accessToken`, `refreshToken`). */
export function tokensInConnections(rows: Iterable<Row>): string[] {
  const tokens: string[] = [];
  for (const row of rows) {
    for (const key of ['accessToken', 'refreshToken']) {
      const token = row[key]?.S;
      if (token !== undefined && token.length >= 8) tokens.push(token);
    }
  }
  return tokens;
}

/**
 * The most requests in flight at once among these intervals ([received, responded), epoch ms; a
 * request never answered counts as open until `end`): for getToken, the lease allows one at a time.
 */
export function mostAtOnce(intervals: ReadonlyArray<readonly [number, number | undefined]>, end: number): number {
  const events: Array<[number, number]> = [];
  for (const [from, to] of intervals) events.push([from, 1], [to ?? end, -1]);
  // At the same instant an end comes before a start: [a, b) and [b, c) do not overlap.
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let open = 0;
  let most = 0;
  for (const [, step] of events) {
    open += step;
    most = Math.max(most, open);
  }
  return most;
}

/** What a connection's credentials must be after the run: active, its refresh token the provider's live one, never replayed. */
export interface CredentialsCheck {
  /** 1 when the connection's stored refresh token is not one the provider takes (lost, or replayed and revoked), else 0. */
  refreshTokensLost: number;
  details: string[];
}

export function checkCredentials(
  stored: { status: string; refreshToken: string } | undefined,
  provider: { authorized: boolean; liveRefreshTokens: readonly string[]; replays: number },
): CredentialsCheck {
  const details: string[] = [];
  if (!stored) details.push('the connection is missing from the connections table');
  else {
    if (stored.status !== 'active') details.push(`the connection is ${stored.status}, not active`);
    if (!provider.liveRefreshTokens.includes(stored.refreshToken)) details.push('the stored refresh token is not one the provider takes');
  }
  if (provider.replays > 0) details.push(`a rotated-away refresh token was presented again ${provider.replays} time(s)`);
  if (!provider.authorized) details.push("the provider revoked the account's grant");
  return { refreshTokensLost: details.length > 0 ? 1 : 0, details };
}

function describeBody(body: string): string {
  return JSON.stringify(body.length > 60 ? `${body.slice(0, 60)}…` : body);
}

