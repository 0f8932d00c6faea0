/**
 * paceScope `connection` as deployed, in virtual time (system.ts: the real item-sync handlers on both
 * queues with their deployed concurrency and batches, the real reconciler on its schedule, pace,
 * connections' access layer, provider client and DynamoDB adapters on DynamoDB Local, the SQS model with
 * fair queues and both redrive policies), against a provider with one account per connection, each
 * its own limit, unknown to the system.
 *
 * Each account's users send it a backlog at once, to the sync queue in its message group (the
 * enqueue tool's sending, no `--backfill`): `workSeconds` of its own limit, so that every account
 * has work from the start to about the same end. Measured per account, from the send to its last id
 * done: its ids a second as a share of its own limit (what it used of it), the share of its item
 * requests answered 429, the longest time it had work left and no id done (an idle tail), and how
 * often its ids waited outside an invocation (`record postponed`).
 *
 * Quiet accounts beside them send one id every few seconds (idle first, then beside the backlogs):
 * their send-to-done p50 and p99, idle and during, as in the backlog scenario.
 *
 * The checks are the goals: every busy account at least `tolerance.use` of its own limit and at most
 * `tolerance.limited` of its item requests answered 429, no gap of IDLE_GAP_GOAL_SECONDS or more
 * while it had work, every id done, nothing dead-lettered.
 */
import { enqueueMessages, type EnqueueMessage } from '../../tools/enqueue/send.js';
import { accountLimits, controlRequests } from './scope-scenarios.js';
import { quantiles, quietIdDone, quietLeft, quietTimes, sendQuietIds, type QuietWatch } from './quiet-accounts.js';
import { check, round, timed, type Check, type ScenarioResult } from './scenario.js';
import { startSystem } from './system.js';

const SECOND = 1_000;
const MINUTE = 60_000;

/** The goal: no busy account goes this long without an id done while it has work (an idle tail). */
export const IDLE_GAP_GOAL_SECONDS = 10;

export interface AccountsScale {
  /** The accounts' limits, requests a second (spread evenly from the first to the second). */
  accounts: number;
  limits: [number, number];
  /** Each account's backlog: this many seconds of its own limit. */
  workSeconds: number;
  /**
   * Accounts that each send one id every `sendEverySeconds` (their limit the lowest of `limits`), from
   * the start: idle for `idleMinutes` (after a warm-up: each one's first id), then beside the backlogs.
   */
  quietAccounts: number;
  sendEverySeconds: number;
  idleMinutes: number;
  /**
   * The goals' bounds: each busy account's use of its own limit (at least), the share of its item
   * requests answered 429 (at most). A short run's accounts have small limits and a minute of work:
   * the limit's search (from 5 requests/s, a 429 or two) is a larger part of it, so its bounds are wider.
   */
  tolerance: { use: number; limited: number };
  /** The provider's Retry-After on a 429, seconds. */
  retryAfterSeconds: number;
  providerLatencyMs: number;
  /** The run stops this long after the sends, done or not. */
  maxMinutes: number;
  seed: number;
}

/** 4 accounts of 10 to 40 requests/s (100 together), 3 minutes of work each. */
export const SCOPE_ACCOUNTS_FULL: AccountsScale = {
  accounts: 4,
  limits: [10, 40],
  workSeconds: 180,
  quietAccounts: 10,
  sendEverySeconds: 5,
  idleMinutes: 1,
  tolerance: { use: 0.9, limited: 0.01 },
  retryAfterSeconds: 1,
  providerLatencyMs: 50,
  maxMinutes: 15,
  seed: 11,
};

/** What `npm test` runs: 2 accounts of 4 and 8 requests/s, 40 s of work each. */
export const SCOPE_ACCOUNTS_SHORT: AccountsScale = {
  ...SCOPE_ACCOUNTS_FULL,
  accounts: 2,
  limits: [4, 8],
  workSeconds: 40,
  quietAccounts: 2,
  sendEverySeconds: 2,
  idleMinutes: 0.5,
  tolerance: { use: 0.75, limited: 0.04 },
  maxMinutes: 6,
  seed: 5,
};

interface AccountWatch {
  ids: number;
  done: Set<string>;
  /** Times of its ids done, in order. */
  doneAt: number[];
  postponed: number;
}

/** The scenario: quiet accounts alone, then every busy account's backlog at once; what each busy one used of its own limit. */
export function scopeAccounts(scale: AccountsScale, progress: (line: string) => void = () => undefined): Promise<ScenarioResult> {
  const [min, max] = scale.limits;
  const name =
    `paceScope connection as deployed: ${scale.accounts} accounts of ${min} to ${max} requests/s (unknown) sending ${scale.workSeconds} s ` +
    `of their limit at once, ${scale.quietAccounts} quiet accounts beside them`;
  return timed(name, async () => {
    const watches = new Map<string, AccountWatch>();
    const limits = new Map<string, number>();
    const quiet: QuietWatch = { pending: new Map(), quietDone: [] };
    const warmupMs = scale.sendEverySeconds * SECOND;
    const backlogAt = warmupMs + scale.idleMinutes * MINUTE;
    const hardStopMs = backlogAt + scale.maxMinutes * MINUTE;
    const sendsEach = Math.ceil(hardStopMs / (scale.sendEverySeconds * SECOND)) + 1;
    const system = await startSystem({
      ids: 0,
      accounts: { count: scale.accounts + scale.quietAccounts, idsEach: Math.max(Math.ceil(max * scale.workSeconds), sendsEach) },
      seed: scale.seed,
      rateLimit: { requestsPerSecond: max, scope: 'account', accountRequestsPerSecond: (id) => limits.get(id), retryAfterSeconds: scale.retryAfterSeconds },
      paceScope: 'connection',
      providerLatencyMs: scale.providerLatencyMs,
      recordedRequests: 1_000,
      // As deployed: the reconcile queue and its event source (the background lane). The reconciler's
      // first pass would check every row as it is written (a table filling up); it starts after the run.
      reconcile: { freshnessHours: 24, firstTickAfterMs: hardStopMs + MINUTE },
      observe: {
        itemLog(source, message, itemId, at, connection) {
          if (connection === undefined) return;
          const watch = watches.get(connection);
          if (!watch) {
            if (message === 'record done') quietIdDone(quiet, source, itemId, at, connection);
            return;
          }
          if (message === 'record postponed') watch.postponed += 1;
          if (message === 'record done' && !watch.done.has(itemId)) {
            watch.done.add(itemId);
            watch.doneAt.push(at);
          }
        },
      },
    });
    try {
      const busy = system.connectionIds.slice(0, scale.accounts);
      const quietIds = system.connectionIds.slice(scale.accounts);
      for (const [id, limit] of accountLimits({ accounts: scale.accounts, limits: scale.limits }, busy)) limits.set(id, limit);
      for (const id of quietIds) limits.set(id, min);
      const t0 = system.clock.ms();
      const sqs = system.local.aws.sqsClient();
      const send = { sleep: system.clock.sleep };
      sendQuietIds(system, scale.sendEverySeconds, quietIds, sendsEach, quiet, t0 + warmupMs, (messages) => void enqueueMessages(sqs, system.queueUrl, messages, send));
      const messages: EnqueueMessage[] = [];
      for (const connection of busy) {
        const ids = system.provider.account(connection).itemIds().slice(0, Math.round(limits.get(connection)! * scale.workSeconds));
        watches.set(connection, { ids: ids.length, done: new Set(), doneAt: [], postponed: 0 });
        messages.push(...ids.map((id) => ({ connection, id })));
      }
      const sentAt = t0 + backlogAt;
      let controlAtSend = 0;
      system.clock.at(sentAt, () => {
        controlAtSend = controlRequests(system);
        void enqueueMessages(sqs, system.queueUrl, messages, send);
      });
      const total = messages.length;
      const doneCount = (): number => [...watches.values()].reduce((sum, w) => sum + w.done.size, 0);
      const realStart = Date.now();
      const report = (): void => {
        progress(`${round((system.clock.ms() - t0) / MINUTE, 0)} min virtual, ${round((Date.now() - realStart) / 1000, 0)} s real: ${doneCount()} of ${total} done, sync queue ${system.sqs.size(system.queueUrl)}, reconcile queue ${system.sqs.size(system.reconcileQueueUrl!)}`);
        system.clock.at(system.clock.ms() + 10_000, report);
      };
      system.clock.at(t0 + MINUTE, report);
      await system.pollUntil(() => doneCount() >= total || system.clock.ms() >= t0 + hardStopMs);
      const backlogEnd = Math.max(...[...watches.values()].map((w) => w.doneAt.at(-1) ?? system.clock.ms()));
      const control = controlRequests(system) - controlAtSend;

      const figures: Record<string, number | string> = {
        accounts: `${scale.accounts}, limits ${busy.map((id) => limits.get(id)).join(', ')} requests/s (unknown to the system; Retry-After ${scale.retryAfterSeconds} s)`,
        sent: `${total.toLocaleString('en-US')} ids at once to the sync queue after ${scale.idleMinutes} idle minutes, each account ${scale.workSeconds} s of its limit, in its message group`,
        'quiet accounts': `${scale.quietAccounts}, limit ${min}/s each, one id every ${scale.sendEverySeconds} s each to the sync queue`,
      };
      const checks: Check[] = [];
      let worstUse = Infinity;
      let worstLimited = 0;
      let worstGap = 0;
      for (const connection of busy) {
        const limit = limits.get(connection)!;
        const watch = watches.get(connection)!;
        const counters = system.provider.accountCounters(connection);
        const last = watch.doneAt.at(-1) ?? system.clock.ms();
        const seconds = (last - sentAt) / SECOND;
        const use = seconds > 0 ? watch.done.size / seconds / limit : 0;
        const limited = counters.itemRequests > 0 ? counters.rateLimited / counters.itemRequests : 0;
        let gap = (watch.doneAt[0] ?? system.clock.ms()) - sentAt;
        for (let k = 1; k < watch.doneAt.length; k++) gap = Math.max(gap, watch.doneAt[k]! - watch.doneAt[k - 1]!);
        worstUse = Math.min(worstUse, use);
        worstLimited = Math.max(worstLimited, limited);
        worstGap = Math.max(worstGap, gap / SECOND);
        figures[connection] =
          `limit ${limit}/s: ${watch.done.size} of ${watch.ids} done in ${round(seconds, 1)} s, ${round(watch.done.size / Math.max(seconds, 1e-9), 2)}/s ` +
          `(${round(use * 100, 1)}% of its limit); ${counters.rateLimited} of ${counters.itemRequests} item requests 429 (${round(limited * 100, 2)}%); ` +
          `longest gap with work left ${round(gap / SECOND, 2)} s; ${watch.postponed} postponements (${round(watch.postponed / Math.max(1, watch.ids), 2)} an id)`;
        checks.push(check(`${connection}: every id done`, `${watch.done.size} of ${watch.ids}`, watch.done.size === watch.ids));
      }
      const idle = quantiles(quietTimes(quiet, t0 + warmupMs, sentAt));
      const during = quantiles(quietTimes(quiet, sentAt, backlogEnd));
      figures['quiet accounts, send to done: idle'] = `p50 ${idle.p50} s, p99 ${idle.p99} s`;
      figures['quiet accounts, send to done: beside the backlogs'] = `p50 ${during.p50} s, p99 ${during.p99} s (p99 ${idle.p99 > 0 ? round(during.p99 / idle.p99, 2) : '–'}× idle)`;
      const quietLeftNow = quietLeft(quiet, system.clock.ms());
      const requests = busy.reduce((sum, id) => sum + system.provider.accountCounters(id).itemRequests, 0);
      figures['control table requests a provider request (the sync, from the send to the end)'] = round(control / Math.max(1, requests), 2);
      const dead = system.sqs.size(system.dlqUrl) + (system.reconcileDlqUrl ? system.sqs.size(system.reconcileDlqUrl) : 0);
      figures['dead-lettered'] = dead;
      figures['real time'] = `${round((Date.now() - realStart) / 1000, 1)} s`;
      const { use: useGoal, limited: limitedGoal } = scale.tolerance;
      checks.push(
        check(`every busy account: at least ${round(useGoal * 100, 1)}% of its own limit, from the send to its last id done`, `${round(worstUse * 100, 1)}% at worst`, worstUse >= useGoal),
        check(`every busy account: at most ${round(limitedGoal * 100, 1)}% of its item requests answered 429`, `${round(worstLimited * 100, 2)}% at worst`, worstLimited <= limitedGoal),
        check(`no busy account without an id done for ${IDLE_GAP_GOAL_SECONDS} s while it had work`, `${round(worstGap, 2)} s at most`, worstGap < IDLE_GAP_GOAL_SECONDS),
        check('every quiet id done', `${quietLeftNow} left`, quietLeftNow === 0),
        check('nothing dead-lettered', dead, dead === 0),
      );
      return { virtualMs: system.clock.ms() - t0, figures, checks };
    } finally {
      await system.close();
    }
  });
}
