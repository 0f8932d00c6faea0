/**
 * The one time limit of the test run: a guard against a genuine hang, not a speed limit. Every test
 * and hook gets it (vitest.config.mts), and so does anything in a test that waits for a child
 * process or a client that must not give up first. It is far above what any test needs on a loaded
 * machine (the longest takes about 30 s on an idle one), so it can only end a test that would never
 * end. No test sets a limit of its own.
 */
export const HANG_GUARD_MS = 600_000;
