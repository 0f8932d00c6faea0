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
