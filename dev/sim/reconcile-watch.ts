/**
 * What the reconciliation scenario watches as the system runs: per id (by its index in the
 * system's ids), when it was checked, by whom, sent how often; and users' ids, from send to done.
 */
import type { ReconcileScale } from './reconcile-scale.js';
import type { SimSystem, SystemObserver } from './system.js';

/** Provider answers that are a check of the item: the item, or that it is gone. */
const CHECKED = new Set([200, 404]);

/** What the scenario counts as the system runs: per id (by its index in system.ids), and users' ids. */
export interface PassWatch {
  n: number;
  index: Map<string, number>;
  /** When each id was last checked (a provider answer that is a check), up to the pass end; -1: never. */
  lastCheck: Float64Array;
  /** When each id was first checked in the pass; -1: not yet. */
  firstInPass: Float64Array;
  /** Checks in the pass by the sync on the reconcile queue, and by the sync on the sync queue. */
  sweepChecks: Uint16Array;
  userChecks: Uint16Array;
  /** Records of each id the sync on the reconcile queue logged in the pass. */
  sweepDeliveries: Uint16Array;
  /** 1: the sweep lost a write race on the id in the pass. */
  races: Uint8Array;
  /** Times the reconciler sent each id (at most 255). */
  sent: Uint8Array;
  firstTickAt: number;
  /** Ids checked in the pass so far. */
  checked: number;
  /** When the last id was first checked in the pass. */
  passEndAt: number | undefined;
  /** Each id's age of its last check at passEndAt. */
  ages: Float64Array | undefined;
  rateLimited: number;
  /** Users' ids sent and not done yet, and when they were sent. */
  userSent: Map<string, number>;
  userDone: Array<{ sentAt: number; ms: number }>;
}

/** One run of the pass, once the event sources stopped. */
export interface PassRun {
  scale: ReconcileScale;
  system: SimSystem;
  watch: PassWatch;
  /** Virtual start and stop. */
  t0: number;
  end: number;
  /** Rows preloaded and the real time it took. */
  preload: { rows: number; ms: number };
}

export function newPassWatch(n: number): PassWatch {
  return {
    n,
    index: new Map(),
    lastCheck: new Float64Array(n).fill(-1),
    firstInPass: new Float64Array(n).fill(-1),
    sweepChecks: new Uint16Array(n),
    userChecks: new Uint16Array(n),
    sweepDeliveries: new Uint16Array(n),
    races: new Uint8Array(n),
    sent: new Uint8Array(n),
    firstTickAt: Number.POSITIVE_INFINITY,
    checked: 0,
    passEndAt: undefined,
    ages: undefined,
    rateLimited: 0,
    userSent: new Map(),
    userDone: [],
  };
}

export function inPass(watch: PassWatch, at: number): boolean {
  return at >= watch.firstTickAt && (watch.passEndAt === undefined || at <= watch.passEndAt);
}

/** The system's observer, counting into `watch`. */
export function passObserver(watch: PassWatch): SystemObserver {
  const { index, lastCheck, firstInPass, sweepChecks, userChecks, sweepDeliveries, races, sent } = watch;
  return {
    providerAnswer(source, itemId, status, at) {
      if (status === 429) watch.rateLimited += 1;
      const i = index.get(itemId);
      if (i === undefined || !CHECKED.has(status)) return;
      if (watch.passEndAt === undefined || at <= watch.passEndAt) lastCheck[i] = at;
      if (!inPass(watch, at)) return;
      if (source === 'reconcile') sweepChecks[i] = (sweepChecks[i] ?? 0) + 1;
      else userChecks[i] = (userChecks[i] ?? 0) + 1;
      if (firstInPass[i]! < 0) {
        firstInPass[i] = at;
        watch.checked += 1;
        if (watch.checked === watch.n) {
          watch.passEndAt = at;
          watch.ages = lastCheck.map((last) => at - last);
        }
      }
    },
    itemLog(source, message, itemId, at) {
      const i = index.get(itemId);
      if (i === undefined) return;
      if (source === 'sync' && message === 'record done') {
        const sentAt = watch.userSent.get(itemId);
        if (sentAt !== undefined) {
          watch.userDone.push({ sentAt, ms: at - sentAt });
          watch.userSent.delete(itemId);
        }
      }
      if (source === 'reconcile' && inPass(watch, at)) {
        if (message.startsWith('record ')) sweepDeliveries[i] = (sweepDeliveries[i] ?? 0) + 1;
        if (message.startsWith('write race lost')) races[i] = 1;
      }
    },
    reconcileSent(ids) {
      for (const id of ids) {
        const i = index.get(id);
        if (i !== undefined) sent[i] = Math.min(255, (sent[i] ?? 0) + 1);
      }
    },
  };
}

