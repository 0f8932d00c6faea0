/**
 * What a request to the connections' core (operations.ts) and the feed's readers (changes/feed.ts)
 * came to: done, or refused with a code and a sentence. Types only, no imports: every caller and
 * core module can name them without importing another's logic.
 */

/** Why a request was refused (its status: docs/client-api.md); `cursor-expired` only for the feed and the snapshot. */
export type RefusalCode = 'bad-request' | 'not-found' | 'conflict' | 'cursor-expired';

export interface Refusal {
  ok: false;
  code: RefusalCode;
  message: string;
  /** Bad ids of a send: their position in the list and why. */
  rejected?: Array<{ index: number; reason: string }>;
}

/** Done: `changed` false when the request changed nothing (repeated, or already so). */
export interface Done<T> {
  ok: true;
  value: T;
  changed: boolean;
}

export type Outcome<T> = Done<T> | Refusal;
