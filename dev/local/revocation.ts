/**
 * The local story's revocation and recovery: one account (globex) withdraws its authorization at
 * the provider mid-run. The token refresher's next run meets the refusal and the connection
 * becomes `failing`; a pass over every connection's ids then shows the other connections syncing
 * as before while the failing one's messages wait in the queue (sent again with a delay, never
 * dead-lettered) and the provider hears nothing from it; `npm run connections -- list` shows it
 * failing with the reason. The account authorizes the application again (a new refresh token),
 * its code puts the new credentials through the client API (a second PUT), and the waiting ids sync.
 */
import { ENV } from '../../functions/shared/config.js';
import { formatDuration } from '../../tools/enqueue/progress.js';
import type { AccountCounters, ProviderSimulator } from '../simulator/provider-simulator.js';
import { REVOKED } from './accounts.js';
import { putConnection, refresh, showLifecycle, type LocalRun } from './local-run.js';
import { listConnections, listedConnections } from './operator.js';
import {
  connectionOfBody,
  drainPass,
  idOfBody,
  postponementsOf,
  printPass,
  startPass,
  syncPass,
  waitingMessages,
  type ConnectionCounts,
  type ConnectionIds,
  type PassLimits,
  type PassSummary,
} from './passes.js';

/** Times each of the failing connection's messages is postponed before the story replaces its credentials. */
export const POSTPONEMENTS_SHOWN = 2;

/** What the revocation and the recovery showed. */
export interface RevocationRun {
  connection: string;
  /** Its ids sent while it was failing; all of them waited. */
  waitingIds: number;
  /** How many times its messages had been postponed when its credentials were replaced: fewest, most. */
  postponed: { fewest: number; most: number };
  /** Its messages dead-lettered from the revocation until they synced (0: none was lost). */
  deadLettered: number;
  /** Its status and failure reason as `npm run connections -- list --json` gave them while it was failing. */
  listed: { status: string; reason?: string };
  /** Provider requests for the account from the revocation until the connection was failing (the refusal that told). */
  requestsUntilFailing: number;
  /** Provider requests for the account while the connection was failing (until the credentials were replaced). */
  requestsWhileFailing: number;
  /** How long it was failing, until the credentials were replaced, seconds. */
  failingSeconds: number;
  /** The pass after the credentials were replaced: its ids. */
  recovered: ConnectionCounts | undefined;
}

/** Requests an account's counters grew by. */
function requestsBetween(before: AccountCounters, after: AccountCounters): number {
  return after.tokenRequests - before.tokenRequests + (after.itemRequests - before.itemRequests);
}

/** True once the sync queue holds only the connection's messages, each postponed at least `times` times. */
function onlyWaiting(run: LocalRun, connection: string, times: number): boolean {
  const messages = waitingMessages(run);
  return messages.length > 0 && messages.every((m) => connectionOfBody(m.body) === connection && postponementsOf(m) >= times);
}

export interface RevocationPlan {
  /** Each connection's ids to send while the connection is failing. */
  sends: readonly ConnectionIds[];
  /** Changes at the provider meanwhile (new revisions), described for the screen. */
  changes: () => string;
  limits: PassLimits;
  /** Each pass, as it ends (the story's table of passes). */
  onPass: (pass: PassSummary) => void;
}

/**
 * Revokes the account, runs the token refresher, syncs every connection's ids until only the
 * revoked one's wait, shows the list, re-authorizes the account, adds the new credentials with the
 * CLI and drains its waiting ids. Problems go to `run.problems`.
 */
export async function revokeAndRecover(run: LocalRun, simulator: ProviderSimulator, plan: RevocationPlan, step: number): Promise<RevocationRun> {
  const { screen, problems } = run;
  const connection = REVOKED;
  const account = simulator.account(connection);

  screen.line(`${step}. ${connection} withdraws its authorization: the provider revokes its grant (its refresh and access tokens answer 401 from now on)`);
  const atRevocation = simulator.accountCounters(connection);
  simulator.revokeAccount(connection);
  screen.line(`   meanwhile at the provider: ${plan.changes()}`);
  screen.line('   the token refresher\'s next run, as its schedule would start it:');
  const report = await refresh(run);
  if (report.refused !== 1) problems.push(`after the revocation: the token refresher counted ${report.refused} refusals, expected 1 (${connection})`);
  const record = await run.system.connections.get(connection, { consistent: true });
  if (record?.status !== 'failing') problems.push(`after the revocation: ${connection} is ${record?.status ?? 'missing'}, expected failing`);
  screen.line(`   ${connection} is failing: ${record?.health.lastFailureReason ?? '(no reason recorded)'}`);
  await showLifecycle(run);
  const atFailing = simulator.accountCounters(connection);
  const failingSince = Date.now();

  const wait = run.handlers.sync.environment[ENV.connectionWaitSeconds];
  screen.line(
    `${step + 1}. Sync every id the table knows, every connection: ${connection}'s messages wait (CONNECTION_WAIT_SECONDS=${wait} for this run) while the others sync; the pass stops once ${connection}'s have each waited ${POSTPONEMENTS_SHOWN} times`,
  );
  const failingPass = await syncPass(run, `${connection} failing`, plan.sends, plan.limits, { stop: () => onlyWaiting(run, connection, POSTPONEMENTS_SHOWN) });
  failingPass.waitingExpected = true;
  plan.onPass(failingPass);
  printPass(screen, failingPass);
  const waiting = waitingMessages(run).filter((m) => connectionOfBody(m.body) === connection);
  const postponements = waiting.map(postponementsOf);
  const postponed = { fewest: Math.min(...postponements), most: Math.max(...postponements) };
  const sent = plan.sends.filter((s) => s.connection === connection).reduce((sum, s) => sum + new Set(s.ids).size, 0);
  const own = failingPass.byConnection[connection];
  if (waiting.length !== sent) problems.push(`${failingPass.name}: ${waiting.length} of ${connection}'s ${sent} messages wait in the queue, expected all`);
  if (own && own.created + own.updated + own.deleted > 0) problems.push(`${failingPass.name}: ${connection}'s rows changed while it was failing`);
  for (const [other, counts] of Object.entries(failingPass.byConnection)) {
    if (other !== connection && counts.waiting > 0) problems.push(`${failingPass.name}: ${counts.waiting} messages of ${other} still wait`);
  }
  screen.line(
    `   ${connection}: ${waiting.length} messages wait in the sync queue, each sent again with a ${wait} s delay ${postponed.fewest === postponed.most ? `${postponed.most}` : `${postponed.fewest} to ${postponed.most}`} times so far; ${own?.deadLettered ?? 0} dead-lettered`,
  );
  await listConnections(run);
  const listedRecord = (await listedConnections(run)).find((c) => c.connection === connection);
  const listed = { status: listedRecord?.status ?? 'missing', ...(listedRecord?.refresh.lastFailureReason !== undefined ? { reason: listedRecord.refresh.lastFailureReason } : {}) };
  const beforeAdd = simulator.accountCounters(connection);
  const failingSeconds = (Date.now() - failingSince) / 1000;
  const requestsUntilFailing = requestsBetween(atRevocation, atFailing);
  const requestsWhileFailing = requestsBetween(atFailing, beforeAdd);
  screen.line(
    `   provider requests for ${connection}: ${requestsUntilFailing} until it was failing (the token refresher's getToken, refused), ${requestsWhileFailing} in the ${formatDuration(failingSeconds * 1000)} since`,
  );

  screen.line(`${step + 2}. ${connection} authorizes the application again; its code puts the new credentials (a second PUT), and its waiting ids sync`);
  const refreshToken = simulator.reauthorizeAccount(connection);
  const start = await startPass(run);
  await putConnection(run, connection, account.clientId, refreshToken);
  const recoveredPass = await drainPass(run, `${connection} re-added`, start, new Map([[connection, new Set(waiting.map((m) => idOfBody(m.body)))]]), plan.limits);
  plan.onPass(recoveredPass);
  printPass(screen, recoveredPass);
  const recovered = recoveredPass.byConnection[connection];
  const deadLettered = (own?.deadLettered ?? 0) + (recovered?.deadLettered ?? 0);
  if (!recoveredPass.drained) problems.push(`${recoveredPass.name}: ${recoveredPass.remaining} messages still wait after the credentials were replaced`);
  if (deadLettered > 0) problems.push(`${connection}: ${deadLettered} of its messages were dead-lettered; they should have waited`);
  return { connection, waitingIds: waiting.length, postponed, deadLettered, listed, requestsUntilFailing, requestsWhileFailing, failingSeconds, recovered };
}
