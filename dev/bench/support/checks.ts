/**
 * The soak's verdict after quiescence, as pure functions of what the run left behind: the provider's
 * final items, the table's rows, the writes the table took, the dead letters and the output. Kept
 * apart from the run so that the checks themselves are tested (test/soak/checks.test.ts): each
 * must catch the failure it is there for.
 */
import { isDeepStrictEqual } from 'node:util';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { revisionText } from '../../../functions/item-sync/item.js';
import { fromAttributeValue } from '../../../functions/item-sync/adapters/dynamodb-item-store.js';
import { getPath } from '../../../functions/shared/json.js';
import type { RecordedWrite } from '../../fakes/aws-fakes.js';
import { occurrences } from '../../fakes/output-capture.js';
import type { DeadLetterEntry } from '../../fakes/queue-model.js';

export type Row = Record<string, AttributeValue>;

export interface StateCheck {
  /** Good ids whose item exists at the provider with no row. */
  itemsLost: number;
  /** Rows at another revision than the provider's, live rows for deleted items, tombstones for live ones. */
  itemsStale: number;
  /** Rows at the right revision whose `item` is not the provider's item. */
  contentMismatches: number;
  /** Rows for ids that were never sent as good messages. */
  unexpectedRows: number;
  details: string[];
}

/**
 * `goodIds`: every id sent in a well-formed message; `providerItem(id)`: the item the provider
 * serves now (undefined once deleted); `rows`: the table after quiescence.
 */
export function checkState(
  goodIds: Iterable<string>,
  providerItem: (id: string) => Record<string, unknown> | undefined,
  rows: ReadonlyMap<string, Row>,
  revisionField: string,
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
      } else if (!isDeepStrictEqual(fromAttributeValue(row['item'] ?? { NULL: true }), item)) {
        result.contentMismatches += 1;
        note(`content differs: ${id}`);
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

export interface ExpectedDeadLetter {
  /** What the message is, for the report. */
  what: string;
  /** The dead-letter reason (the `error` attribute) it must carry. */
  expected: RegExp;
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

/** The access and refresh tokens held in secret values (JSON) ever written. */
export function tokensInSecrets(values: Iterable<string>): string[] {
  const tokens: string[] = [];
  for (const value of values) {
    try {
      const parsed = JSON.parse(value) as Record<string, unknown>;
      for (const key of ['accessToken', 'refreshToken']) {
        const token = parsed[key];
        if (typeof token === 'string' && token.length >= 8) tokens.push(token);
      }
    } catch {
      // not JSON: not a secret of ours
    }
  }
  return tokens;
}

function describeBody(body: string): string {
  return JSON.stringify(body.length > 60 ? `${body.slice(0, 60)}…` : body);
}
