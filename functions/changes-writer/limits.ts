/**
 * The changes writer's numbers that the stacks deploy (infra/deployment.ts) and its core relies on.
 * No imports, so the CDK app can use them without loading the function.
 */

/** The function's time-out, seconds. */
export const CHANGES_WRITER_TIMEOUT_SECONDS = 60;

/**
 * A change row above a head written this long ago was left by a writer that is gone: no invocation
 * outlives the time-out, and the margin covers clocks.
 */
export const CHANGES_WRITER_STALE_AFTER_MS = (CHANGES_WRITER_TIMEOUT_SECONDS + 60) * 1000;

/**
 * A container takes a connection it found open (its erase not running) as open for this long
 * without reading its row again: one read a connection every 10 s, not one a batch. A batch begun on
 * a read this old numbers as one already under way when the erase starts: a change it writes above
 * a head the erase deleted is never read (a read starts at the head; the head is never made again
 * without a read of the row of its own: app.ts `mayStart`) and expires with the retention.
 */
export const CHANGES_WRITER_OPEN_KEPT_MS = 10_000;
