/**
 * What the provider pace and its callers exchange (provider-pace.ts): its row's port, its options
 * and snapshot, a grant, how a request ended, and a container's view of a client id's breaker. No
 * I/O here.
 */
import type { BreakerReason, PaceSettings, PaceState } from './pace-state.js';

/** The control table's pace row, as the pace needs it. */
export interface PaceStore {
  /** The stored state and its version; undefined when there is none yet. Throws when it cannot be read. */
  read(): Promise<{ state: unknown; version: number } | undefined>;
  /** Writes `state` as version `expectedVersion + 1` if the stored version is still `expectedVersion` (0: none). */
  write(state: PaceState, expectedVersion: number): Promise<'written' | 'conflict'>;
}

export type Grant =
  /** Send now. A probe is the one request the open breaker lets through (`reason` says why it is open). */
  | { kind: 'go'; probe: false }
  | { kind: 'go'; probe: true; reason: BreakerReason }
  /** No slot before `until` (epoch ms). */
  | { kind: 'wait'; until: number; why: 'pace' | 'retry-after' }
  /** The breaker is open: do not call the provider. */
  | { kind: 'outage'; reason: BreakerReason; since: number };

/** How a provider request ended, as the pace needs to know. */
export type RequestResult =
  /** A usable answer, or one that shows the provider is up (404, 4xx, a malformed 200). */
  | { kind: 'ok' }
  | { kind: 'rate-limited'; retryAfterMs?: number }
  /**
   * 5xx, time-out, refused or dropped connection. `repeat`: another attempt at a request that
   * already failed (a poison item failing again is not more evidence of an outage).
   */
  | { kind: 'failed'; repeat?: boolean };

/**
 * The container's view of one client id's breaker, shared by the paces that are given it (one per
 * connection under `paceScope` `connection`): its row (`client#<client id>`), and what the
 * container last learned of it. When one of them learns that the breaker is open, every one of them
 * answers `outage`.
 */
export class PaceBreaker {
  /** The breaker open, as the container last learned it. */
  outage: Outage | undefined;
  /** When the container last learned the breaker's state from its row (or opened it). */
  readAt = 0;
  /** The row's failure count as last read: a success resets it only when it is not 0. */
  sharedFailures = 0;
  /** Failed requests in a row in this container (decides alone while the store cannot be used). */
  consecutiveFailures = 0;
  /** The read of the row in progress (one at a time per container). */
  checking: Promise<unknown> | undefined;

  constructor(
    /** The breaker's row; undefined: the pace's own row (the breaker and the bucket one state). */
    readonly store?: PaceStore,
  ) {}
}

export interface Outage {
  reason: BreakerReason;
  since: number;
  nextProbeAt: number;
}

export interface ProviderPaceOptions {
  settings: PaceSettings;
  /** Local pace of this container while the store cannot be used, requests a second. */
  fallbackRate: number;
  /** Most requests this container has in flight at once: a lease holds no more tokens than it can spend. */
  concurrency: number;
  /** [0, 1), for jitter; default Math.random. */
  random?: () => number;
  /** How long to stay on the local pace before trying the store again. */
  fallbackMs?: number;
  /** While the store cannot be used: failed requests in a row in this container that open its local breaker (default settings.outageFailures). */
  outageFailures?: number;
  /** Conditional-write attempts per change before falling back. */
  writeAttempts?: number;
  /**
   * The longest a request waits for a slot of this pace within its invocation before it is
   * postponed (its record sent again with a delay); default: until the invocation's end. For a pace
   * that is not the whole batch's (`paceScope` `connection`: a batch mixes connections), so that one
   * connection's pace, slowed by its own limit or Retry-After, does not hold the others' records.
   */
  maxHoldMs?: number;
}

export interface PaceSnapshot {
  /** The rate last seen in the shared state (or the local fallback rate), requests a second. */
  rate: number;
  /** Epoch ms the breaker opened, when it is open. */
  breakerOpenSince?: number;
  breakerReason?: BreakerReason;
  /** True while this container runs on its local fallback pace. */
  fallback: boolean;
}
