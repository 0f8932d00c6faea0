/**
 * What the harness's dynalite committed in a TransactWriteItems, for the harness pieces that watch
 * rows as they are written (dynamo-meter.ts, dev/sim/items-stream.ts). A transaction returns no
 * rows (it cannot ask for ALL_OLD or ALL_NEW), so the fake itself tells the rows each action
 * replaced and wrote (dynalite-transactions.ts), at the moment it commits:
 *
 * - a dynalite in this process tells every commit, synchronously, once its writes are stored and
 *   before it answers and lets go of the rows' locks: commits are told in commit order;
 * - a dynalite in a child process (dynalite-child.ts) sends its parent (over the IPC channel, before
 *   it answers) the commits of the requests that carried REPORT_COMMIT_HEADER only (copying rows
 *   across costs, and only a watching client asks, with askForCommitReports); dynalite.ts tells
 *   them here as they arrive, still in commit order.
 *
 * A client learns what its own transaction committed by its ClientRequestToken (`watchCommit`): a
 * token is a random UUID, so it names one request of one client, and a transaction the SDK sent
 * again with the same token (after a lost answer) is committed, so told, once.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';

/** A row as dynalite holds it: attribute values as in the request's JSON (`{"S": "…"}`, `{"N": "…"}`…). */
export type Row = Record<string, Record<string, unknown>>;

/** One action of a committed transaction that wrote a row (a Put, an Update or a Delete). */
export interface CommittedWrite {
  table: string;
  /** The table's key attributes, partition key first. */
  keyNames: string[];
  /** The row before the transaction; undefined when there was none. */
  oldImage?: Row;
  /** The row after it; undefined when the action deleted it. */
  newImage?: Row;
}

export interface CommittedTransaction {
  /** The request's ClientRequestToken (the SDK always sends one). */
  token: string | undefined;
  /** The writes in the order of the request's actions (condition checks left out). */
  writes: CommittedWrite[];
  /** The request carried REPORT_COMMIT_HEADER. */
  reportAsked: boolean;
}

/** The HTTP header with which a request asks a dynalite in a child process to send its commit to the parent. */
export const REPORT_COMMIT_HEADER = 'x-harness-report-commit';
/** How long a client waits for the report of a commit its request was answered for. */
export const COMMIT_REPORT_WAIT_MS = 10_000;
/** The errors that say a transaction did not commit (no other attempt of its request will). */
const NOT_COMMITTED = new Set(['TransactionCanceledException', 'ValidationException', 'ResourceNotFoundException', 'IdempotentParameterMismatchException']);
/** A watch whose transaction never committed (it was cancelled) is forgotten after this long. */
const WATCH_KEPT_MS = 15 * 60_000;

type Listener = (commit: CommittedTransaction) => void;

interface Watch {
  since: number;
  onCommit: Listener;
  commit?: CommittedTransaction;
  waiters: Array<(commit: CommittedTransaction) => void>;
}

const listeners = new Set<Listener>();
const watches = new Map<string, Set<Watch>>();
const asking = new WeakSet<object>();
let forgotten = 0;

/** Tells a commit to every listener, then to the watches of its token (the fake calls it, or dynalite.ts for a child's). */
export function tellCommit(commit: CommittedTransaction): void {
  for (const listener of listeners) listener(commit);
  if (commit.token === undefined) return;
  const watching = watches.get(commit.token);
  if (!watching) return;
  watches.delete(commit.token);
  for (const watch of watching) {
    watch.commit = commit;
    watch.onCommit(commit);
    for (const waiter of watch.waiters.splice(0)) waiter(commit);
  }
}

/** Calls `listener` with every commit told in this process; returns what stops it. */
export function onCommit(listener: Listener): () => void {
  listeners.add(listener);
  return () => void listeners.delete(listener);
}

export interface CommitWatch {
  /** The commit, once told; rejects when none is told within `waitMs` (default COMMIT_REPORT_WAIT_MS). */
  committed(waitMs?: number): Promise<CommittedTransaction>;
  /** Forgets the watch (its transaction will not commit). */
  stop(): void;
}

/**
 * Calls `onCommitted` when the transaction with `token` commits, synchronously as it is told (so in
 * commit order). Set it before the request is sent.
 */
export function watchCommit(token: string, onCommitted: Listener): CommitWatch {
  forgetOldWatches();
  const watch: Watch = { since: Date.now(), onCommit: onCommitted, waiters: [] };
  let watching = watches.get(token);
  if (!watching) watches.set(token, (watching = new Set()));
  watching.add(watch);
  return {
    committed: (waitMs = COMMIT_REPORT_WAIT_MS) =>
      watch.commit
        ? Promise.resolve(watch.commit)
        : new Promise<CommittedTransaction>((resolve, reject) => {
            const timer = setTimeout(() => {
              reject(new Error(`no commit of the transaction with ClientRequestToken ${token} was reported within ${waitMs} ms (is the endpoint the harness's dynalite?)`));
            }, waitMs);
            watch.waiters.push((commit) => {
              clearTimeout(timer);
              resolve(commit);
            });
          }),
    stop: () => {
      watching.delete(watch);
      if (watching.size === 0 && watches.get(token) === watching) watches.delete(token);
    },
  };
}

/** The SDK's error says the transaction did not commit: its watch can stop. */
export function notCommitted(error: unknown): boolean {
  return NOT_COMMITTED.has((error as { name?: string }).name ?? '');
}

/**
 * Makes `client` mark its TransactWriteItems requests with REPORT_COMMIT_HEADER, so that a dynalite
 * in a child process reports their commits here (once per client; a dynalite in this process
 * reports every commit anyway).
 */
export function askForCommitReports(client: DynamoDBClient): void {
  if (asking.has(client)) return;
  asking.add(client);
  type Next = (args: { request?: { headers?: Record<string, string> } }) => Promise<unknown>;
  client.middlewareStack.add(
    ((next: Next, context: { commandName?: string }) => (args: { request?: { headers?: Record<string, string> } }) => {
      if (context.commandName === 'TransactWriteItemsCommand' && args.request?.headers) args.request.headers[REPORT_COMMIT_HEADER] = '1';
      return next(args);
    }) as never,
    { step: 'build', priority: 'low', name: 'reportCommits' },
  );
}

/** Drops the watches older than WATCH_KEPT_MS (looked for at most once a minute). */
function forgetOldWatches(): void {
  const now = Date.now();
  if (now - forgotten < 60_000) return;
  forgotten = now;
  const before = now - WATCH_KEPT_MS;
  for (const [token, watching] of watches) {
    for (const watch of watching) if (watch.since < before) watching.delete(watch);
    if (watching.size === 0) watches.delete(token);
  }
}
