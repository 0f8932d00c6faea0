/**
 * The changes scenario's client application (changes-scenario.ts): for every connection, the typed
 * client of clients/typescript (`changes`, pages of 1,000 to the end of the feed, unsigned) reading
 * through the real client API handler, its `fetch` handing each request to the handler in process
 * as API Gateway's HTTP API calls it (payload 2.0), in virtual time. Each connection is read every
 * `periodMs`, the connections spread evenly over the period; a read of a connection still under way
 * when its next one is due is not doubled.
 *
 * - It stops (no read at all) when told (`stopFor`), for a while, then goes on from the cursors it
 *   stored: a cursor is stored when `onCursor` hands it, once every change of its page has been
 *   applied (given to the ledger).
 * - From the stop on, it keeps a digest (SHA-256) of every change it reads, as answered; `replay`
 *   reads each connection again from the cursor it stored when it stopped, to the end, and tells
 *   whether the changes are the same ones, byte for byte.
 * - `probe` reads one change right after its commit, from the cursor before it.
 *
 * Every call is an invocation of the API's function (counted, with its virtual duration) and an
 * API Gateway request; the consumer's own, the replay's and the probes' apart. The client tries
 * nothing again (`retries: 0`): a read that fails is counted and the next period's read goes on
 * from the stored cursor, each request one invocation.
 */
import { createHash, type Hash } from 'node:crypto';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { encodeFeedCursor } from '../../functions/shared/changes/feed.js';
import { createClient, type Change, type ContentSyncClient } from '../../clients/typescript/src/index.js';
import type { ApiHandler } from '../system/functions.js';
import type { ChangesLedger, CommittedChange } from './changes-ledger.js';
import { keyOf } from './changes-ledger.js';
import type { InvocationCount } from './meters.js';
import type { VirtualClock } from './virtual-clock.js';

/** The API's URL the sim's requests name (its host as in `apiEvent`); nothing listens there: `fetch` hands each to the handler. */
const SIM_API_URL = 'https://sim.execute-api.us-east-1.amazonaws.com/';

/** The API's invocations of one kind of caller, and how they ended. */
export interface ApiCalls extends InvocationCount {
  /** Answers other than 200. */
  failed: number;
}

export interface ConsumerOptions {
  clock: VirtualClock;
  /** The API's function for each caller (each with its own metered DynamoDB client). */
  handlers: { consumer: ApiHandler; replay: ApiHandler; probe: ApiHandler };
  /** The API's deployed memory (its invocations' GB-seconds). */
  memoryMb: number;
  ledger: ChangesLedger;
  connections: readonly string[];
  periodMs: number;
}

interface Reader {
  cursor: string | undefined;
  busy: boolean;
  /** Since the stop: the cursor stored then, and a digest of every change read since. */
  replayFrom?: { cursor: string | undefined; digest: Hash; changes: number };
}

export interface ReplayResult {
  connections: number;
  /** Changes read again. */
  changes: number;
  /** Connections whose changes read again differ from those read the first time (count, or digest). */
  differing: number;
}

export interface ProbeResult {
  probes: number;
  /** Probes whose read returned the change just committed. */
  found: number;
}

export class FeedConsumer {
  readonly calls: ApiCalls;
  readonly replayCalls: ApiCalls;
  readonly probeCalls: ApiCalls;
  readonly probes: ProbeResult = { probes: 0, found: 0 };
  /** Reads the consumer made (each to the end of the feed, one or more calls). */
  reads = 0;
  readsFailed = 0;
  /** When it stopped and went on (virtual ms). */
  stop: { from: number; to: number } | undefined;
  private readonly readers = new Map<string, Reader>();
  /** The typed client of each kind of caller: its requests to its own handler, counted in its own calls. */
  private readonly clients: { consumer: ContentSyncClient; replay: ContentSyncClient; probe: ContentSyncClient };
  private stopped = false;

  constructor(private readonly options: ConsumerOptions) {
    const calls = (): ApiCalls => ({ invocations: 0, durationMs: 0, memoryMb: options.memoryMb, failed: 0 });
    this.calls = calls();
    this.replayCalls = calls();
    this.probeCalls = calls();
    this.clients = {
      consumer: this.client(this.calls, options.handlers.consumer),
      replay: this.client(this.replayCalls, options.handlers.replay),
      probe: this.client(this.probeCalls, options.handlers.probe),
    };
    for (const connection of options.connections) this.readers.set(connection, { cursor: undefined, busy: false });
  }

  /** Stops reading now, for `forMs`; from now on, what it reads is kept for the replay. */
  stopFor(forMs: number): void {
    const { clock } = this.options;
    this.stopped = true;
    this.stop = { from: clock.ms(), to: clock.ms() + forMs };
    for (const reader of this.readers.values()) reader.replayFrom = { cursor: reader.cursor, digest: createHash('sha256'), changes: 0 };
    clock.at(this.stop.to, () => void (this.stopped = false));
  }

  /** The reads from `t0` on, every period, until `ended()`. */
  start(t0: number, ended: () => boolean): void {
    const { clock, periodMs, connections } = this.options;
    connections.forEach((connection, k) => {
      const tick = (): void => {
        if (ended()) return;
        if (!this.stopped) void this.read(connection);
        clock.at(clock.ms() + periodMs, tick);
      };
      clock.at(t0 + Math.floor((k * periodMs) / connections.length), tick);
    });
  }

  get isStopped(): boolean {
    return this.stopped;
  }

  /** One read of `connection` to the end of its feed, from its stored cursor. */
  private async read(connection: string): Promise<void> {
    const reader = this.readers.get(connection)!;
    if (reader.busy) return;
    reader.busy = true;
    this.reads += 1;
    try {
      const changes = this.clients.consumer.changes(connection, {
        ...(reader.cursor !== undefined ? { after: reader.cursor } : {}),
        limit: 1000,
        onCursor: (next) => void (reader.cursor = next),
      });
      for await (const change of changes) {
        this.options.ledger.read(connection, change, this.options.clock.ms());
        if (reader.replayFrom) {
          reader.replayFrom.digest.update(`${JSON.stringify(change)}\n`);
          reader.replayFrom.changes += 1;
        }
      }
    } catch {
      this.readsFailed += 1;
    } finally {
      reader.busy = false;
    }
  }

  /** Each connection read again from the cursor it stored when it stopped, to the end: the same changes? */
  async replay(): Promise<ReplayResult> {
    const result: ReplayResult = { connections: 0, changes: 0, differing: 0 };
    for (const [connection, reader] of this.readers) {
      const from = reader.replayFrom;
      if (!from) continue;
      result.connections += 1;
      const digest = createHash('sha256');
      let changes = 0;
      try {
        for await (const change of this.clients.replay.changes(connection, { ...(from.cursor !== undefined ? { after: from.cursor } : {}), limit: 1000 })) {
          digest.update(`${JSON.stringify(change)}\n`);
          changes += 1;
        }
      } catch {
        result.differing += 1;
        continue;
      }
      result.changes += changes;
      if (changes !== from.changes || digest.digest('hex') !== from.digest.copy().digest('hex')) result.differing += 1;
    }
    return result;
  }

  /** Reads the change just committed, from the cursor before it, at once: is it there? */
  async probe(committed: CommittedChange): Promise<void> {
    this.probes.probes += 1;
    const after = encodeFeedCursor({ connection: committed.connection, epoch: committed.epoch, seq: committed.seq - 1 });
    const page = await this.clients.probe.changesPage(committed.connection, { after, limit: 1 }).catch(() => undefined);
    const first: Change | undefined = page?.changes[0];
    if (first && keyOf(first) === committed.key) this.probes.found += 1;
  }

  /** The typed client, unsigned, whose requests go to `handler` in process (as API Gateway's events), each counted in `calls`. */
  private client(calls: ApiCalls, handler: ApiHandler): ContentSyncClient {
    const { clock } = this.options;
    return createClient({
      baseUrl: SIM_API_URL,
      signer: false,
      retries: 0,
      // Real time, which a call in virtual time never nears: no call is cut short.
      timeoutMs: 600_000,
      sleep: (ms) => clock.sleep(ms),
      fetch: async (url) => {
        const started = clock.ms();
        calls.invocations += 1;
        try {
          const answer = await handler(apiEvent(`${url.pathname.slice(1)}${url.search}`, started));
          const status = answer.statusCode ?? 200;
          if (status !== 200) calls.failed += 1;
          const headers = Object.fromEntries(Object.entries(answer.headers ?? {}).map(([name, value]) => [name, String(value)]));
          return new Response(answer.body ?? null, { status, headers });
        } finally {
          calls.durationMs += clock.ms() - started;
        }
      },
    });
  }
}

/** A GET of `path` (under the API's URL, with its query) as API Gateway's HTTP API hands it to the function (payload 2.0). */
export function apiEvent(path: string, now: number): APIGatewayProxyEventV2 {
  const at = path.indexOf('?');
  const rawPath = `/${at < 0 ? path : path.slice(0, at)}`;
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath,
    rawQueryString: at < 0 ? '' : path.slice(at + 1),
    headers: { host: 'sim.execute-api.us-east-1.amazonaws.com', 'user-agent': 'changes-consumer' },
    requestContext: {
      accountId: '000000000000',
      apiId: 'sim',
      domainName: 'sim.execute-api.us-east-1.amazonaws.com',
      domainPrefix: 'sim',
      http: { method: 'GET', path: rawPath, protocol: 'HTTP/1.1', sourceIp: '192.0.2.1', userAgent: 'changes-consumer' },
      requestId: `sim-${now}`,
      routeKey: '$default',
      stage: '$default',
      time: new Date(now).toISOString(),
      timeEpoch: now,
    },
    isBase64Encoded: false,
  } as APIGatewayProxyEventV2;
}
