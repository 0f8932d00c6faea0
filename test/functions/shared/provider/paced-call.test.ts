/**
 * The paced provider call on its own (functions/shared/provider/paced-call.ts), with a scripted pace
 * and a scripted connections' access layer: the slot asked before and the answer told after every
 * request, the access layer asked after a 401 (another token once; wait; dead) without the breaker
 * ever hearing of it, 429s waited out in the pace, transient failures retried with backoff while
 * there is time, and what is counted.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { PermanentError, ProviderError, type ProviderErrorKind } from '../../../../functions/shared/errors.js';
import type { Log } from '../../../../functions/shared/ports.js';
import type { AccessOptions, ConnectionAccess, ConnectionGate } from '../../../../functions/shared/connections/ports.js';
import {
  OutOfTimeError,
  PacedCaller,
  REFUSED_WAIT_SECONDS,
  SLOT_MARGIN_MS,
  WaitError,
  type ConnectionSession,
  type PacedCallCounts,
  type PacedCallSettings,
} from '../../../../functions/shared/provider/paced-call.js';
import type { Grant, PaceGate, RequestResult } from '../../../../functions/shared/provider/pace/provider-pace.js';

const T0 = Date.parse('2026-11-21T10:00:00.000Z');
const SETTINGS: PacedCallSettings = { attempts: 3, backoff: { baseMs: 200, capMs: 2_000, jitter: 'equal' } };

/** A pace that grants what it is scripted to (then `go`), and remembers every question and answer. */
class ScriptedPace implements PaceGate {
  readonly grants: Grant[] = [];
  readonly asked: Array<{ afterFailure?: boolean; sweep?: boolean; backlog?: boolean }> = [];
  readonly told: RequestResult[] = [];
  outage: { reason: 'provider'; since: number } | undefined;
  maxHoldMs: number | undefined;

  async acquire(options: { afterFailure?: boolean; sweep?: boolean; backlog?: boolean } = {}): Promise<Grant> {
    this.asked.push(options);
    return this.grants.shift() ?? { kind: 'go', probe: false };
  }
  async report(result: RequestResult): Promise<void> {
    this.told.push(result);
  }
  outageKnown(): { reason: 'provider'; since: number } | undefined {
    return this.outage;
  }
  waitingForProbe(): boolean {
    return false;
  }
}

/** The access layer after a refusal: answers what it is scripted to (the last answer repeats), and remembers every question. */
class ScriptedAccess implements Pick<ConnectionAccess, 'afterRefusal' | 'knownRefused'> {
  readonly asked: Array<{ connection: string; rejected: string }> = [];
  readonly deadlines: Array<number | undefined> = [];
  constructor(private readonly answers: ConnectionGate[]) {}
  /** As the access layer does: the last token refused of each connection is known refused. */
  knownRefused(connection: string, token: string): boolean {
    return this.asked.findLast((asked) => asked.connection === connection)?.rejected === token;
  }

  async afterRefusal(connection: string, rejected: string, options: AccessOptions = {}): Promise<ConnectionGate> {
    this.asked.push({ connection, rejected });
    this.deadlines.push(options.deadline);
    const answer = this.answers.length > 1 ? this.answers.shift() : this.answers[0];
    if (!answer) throw new Error('afterRefusal was not expected');
    return answer;
  }
}

const ready = (token: string): ConnectionGate => ({ kind: 'ready', connection: 'acme', token, paceKey: 'client#my-client' });

const fail = (kind: ProviderErrorKind, status?: number, retryAfterSeconds?: number): ProviderError =>
  new ProviderError(`simulated ${kind}`, {
    kind,
    operation: 'getItem',
    ...(status !== undefined ? { status } : {}),
    ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}),
  });

let now: number;
let sleeps: number[];
let logs: Array<{ message: string; attributes: Record<string, unknown> }>;
let pace: ScriptedPace;
let access: ScriptedAccess;
let session: ConnectionSession;
let counts: PacedCallCounts;
let controller: AbortController;

const log: Log = {
  debug: () => undefined,
  info: (message, attributes = {}) => void logs.push({ message, attributes }),
  warn: (message, attributes = {}) => void logs.push({ message, attributes }),
  error: (message, attributes = {}) => void logs.push({ message, attributes }),
};

function caller(options: { deadline?: number; sweep?: boolean; settings?: PacedCallSettings; random?: number } = {}): PacedCaller {
  return new PacedCaller(
    {
      connections: access,
      clock: { now: () => new Date(now) },
      log,
      random: () => options.random ?? 0.5,
      sleep: async (ms) => {
        sleeps.push(ms);
        now += ms;
      },
    },
    options.settings ?? SETTINGS,
    { deadline: options.deadline ?? T0 + 60_000, signal: controller.signal, sweep: options.sweep ?? false, counts },
  );
}

/** A request answering from a script (an Error is thrown), recording the token each call sent. */
function scripted(...answers: unknown[]) {
  const sent: string[] = [];
  const request = async (token: string): Promise<unknown> => {
    sent.push(token);
    const answer = answers.length > 1 ? answers.shift() : answers[0];
    if (answer instanceof Error) throw answer;
    return answer;
  };
  return { request, sent };
}

beforeEach(() => {
  now = T0;
  sleeps = [];
  logs = [];
  pace = new ScriptedPace();
  access = new ScriptedAccess([]);
  session = { connection: 'acme', token: 'token-1', pace };
  counts = { fetched: 0, rateLimited: 0 };
  controller = new AbortController();
});

describe('PacedCaller: the pace and the answer', () => {
  it('asks the pace for a slot (as the sweep when it is one), sends the token, tells the pace ok and counts the answer', async () => {
    const { request, sent } = scripted({ id: 'a' });
    expect(await caller({ sweep: true }).call(session, request, { itemId: 'a' })).toEqual({ id: 'a' });
    expect(pace.asked).toEqual([{ afterFailure: false, sweep: true }]);
    expect(pace.told).toEqual([{ kind: 'ok' }]);
    expect(sent).toEqual(['token-1']);
    expect(counts).toEqual({ fetched: 1, rateLimited: 0 });
  });

  it('throws a 404 or another 4xx as it is, after telling the pace the provider is up; nothing is counted', async () => {
    for (const error of [fail('not-found', 404), fail('permanent', 403), fail('malformed')]) {
      await expect(caller().call(session, scripted(error).request, {})).rejects.toBe(error);
    }
    expect(pace.told).toEqual([{ kind: 'ok' }, { kind: 'ok' }, { kind: 'ok' }]);
    expect(counts).toEqual({ fetched: 0, rateLimited: 0 });
  });

  it('waits for a slot within the invocation, and waits (postponed) for one beyond it', async () => {
    pace.grants.push({ kind: 'wait', until: T0 + 1_500, why: 'pace' });
    expect(await caller().call(session, scripted('x').request, {})).toBe('x');
    expect(sleeps).toEqual([1_500]);

    now = T0;
    const deadline = T0 + 10_000;
    pace.grants.push({ kind: 'wait', until: deadline - SLOT_MARGIN_MS, why: 'retry-after' });
    const error = await caller({ deadline }).call(session, scripted('x').request, {}).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WaitError);
    expect(error).toMatchObject({
      message: "no slot of the provider pace before this invocation ends (the provider's Retry-After)",
      wait: { kind: 'pace', seconds: 9, retryAfter: true },
    });
  });

  it("a pace with maxHoldMs (one connection's among others) holds the call that long at most, then it waits outside the invocation", async () => {
    pace.maxHoldMs = 2_000;
    // Waits of 500 ms each: the fourth ends at the hold (T0 + 2 s) and is waited; the fifth would end beyond it.
    for (let n = 1; n <= 5; n += 1) pace.grants.push({ kind: 'wait', until: T0 + n * 500, why: 'pace' });
    const { request, sent } = scripted('x');
    const error = await caller().call(session, request, {}).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WaitError);
    expect(error).toMatchObject({
      message: "no slot of the connection's provider pace within 2 s (the provider pace); the batch's other records are not held for it",
      wait: { kind: 'pace', seconds: 2, retryAfter: false },
    });
    expect(sleeps).toEqual([500, 500, 500, 500]);
    expect(sent).toEqual([]);

    // A Retry-After beyond the hold: at once, waiting the Retry-After's time. The pace's word (the
    // time its slot comes), not the provider's: no floor of SYNC_RATE_LIMIT_MIN_DELAY_SECONDS.
    pace.grants.length = 0;
    sleeps = [];
    pace.grants.push({ kind: 'wait', until: now + 30_000, why: 'retry-after' });
    await expect(caller({ deadline: now + 60_000 }).call(session, request, {})).rejects.toMatchObject({
      message: "no slot of the connection's provider pace within 2 s (the provider's Retry-After); the batch's other records are not held for it",
      wait: { kind: 'pace', seconds: 30, retryAfter: false },
    });
    expect(sleeps).toEqual([]);

    // Without maxHoldMs (the client id's pace: the whole batch's), the same waits are waited out.
    pace.maxHoldMs = undefined;
    const start = now;
    for (let n = 1; n <= 5; n += 1) pace.grants.push({ kind: 'wait', until: start + n * 500, why: 'pace' });
    expect(await caller({ deadline: now + 60_000 }).call(session, request, {})).toBe('x');
    expect(sleeps).toEqual([500, 500, 500, 500, 500]);
  });

  it("a held call waits outside for the pace's wait, at least the hold, not booked behind the batch's ids sent away; a backlog's session draws as one", async () => {
    const booked: number[] = [];
    const booking = Object.assign(pace, {
      maxHoldMs: 1_000,
      bookReturn(minMs: number): number {
        booked.push(minMs);
        return now + 60_000;
      },
    });
    booking.grants.push({ kind: 'wait', until: now + 3_000, why: 'retry-after' });
    const { request, sent } = scripted('x');
    await expect(caller({ sweep: true }).call({ ...session, backlog: true }, request, {})).rejects.toMatchObject({
      wait: { kind: 'pace', seconds: 3, retryAfter: false },
    });
    expect(pace.asked).toEqual([{ afterFailure: false, sweep: true, backlog: true }]);
    expect(sent).toEqual([]);

    // A slot within the hold but past the invocation's deadline (less the time a request needs): the hold.
    booking.grants.push({ kind: 'wait', until: now + 800, why: 'retry-after' });
    await expect(caller({ deadline: now + 1_500 }).call(session, request, {})).rejects.toMatchObject({
      message: "no slot of the provider pace before this invocation ends (the provider's Retry-After)",
      wait: { kind: 'pace', seconds: 1, retryAfter: false },
    });
    expect(booked).toEqual([]);
    pace.asked.length = 0;

    // A session that is no backlog asks as before (no `backlog` key).
    expect(await caller().call(session, request, {})).toBe('x');
    expect(pace.asked[0]).toEqual({ afterFailure: false, sweep: false });
  });

  it('an open breaker: no request, the call waits (outage)', async () => {
    pace.grants.push({ kind: 'outage', reason: 'provider', since: T0 - 5_000 });
    const { request, sent } = scripted('x');
    await expect(caller().call(session, request, {})).rejects.toMatchObject({
      name: 'WaitError',
      message: 'the provider fails every request (outage)',
      wait: { kind: 'outage', reason: 'provider' },
    });
    expect(sent).toEqual([]);
  });

  it('past the deadline: OutOfTimeError before the pace is asked or a request made', async () => {
    const { request, sent } = scripted('x');
    await expect(caller({ deadline: T0 }).call(session, request, {})).rejects.toBeInstanceOf(OutOfTimeError);
    expect(pace.asked).toEqual([]);
    expect(sent).toEqual([]);
  });
});

describe('PacedCaller: a refused token (401)', () => {
  it('asks the access layer for its connection alone and sends the other token it gives, once; the session keeps it', async () => {
    access = new ScriptedAccess([ready('token-2')]);
    const { request, sent } = scripted(fail('unauthorized', 401), 'x');
    expect(await caller({ deadline: T0 + 42_000 }).call(session, request, { connection: 'acme', itemId: 'a' })).toBe('x');
    expect(sent).toEqual(['token-1', 'token-2']);
    expect(access.asked).toEqual([{ connection: 'acme', rejected: 'token-1' }]);
    // With the invocation's deadline: the access layer starts no refresh that could not end before it.
    expect(access.deadlines).toEqual([T0 + 42_000]);
    expect(session.token).toBe('token-2');
    expect(counts).toEqual({ fetched: 1, rateLimited: 0 });
    expect(logs).toEqual([
      { message: "access token refused; retrying with the connection's other token", attributes: { connection: 'acme', itemId: 'a' } },
    ]);
  });

  it('tells the pace `ok` (the provider is up): the breaker never hears of a refused token, however many', async () => {
    access = new ScriptedAccess([ready('token-2'), ready('token-3')]);
    const { request } = scripted(fail('unauthorized', 401));
    await expect(caller().call(session, request, {})).rejects.toMatchObject({ kind: 'unauthorized' });
    expect(pace.told).toEqual([{ kind: 'ok' }, { kind: 'ok' }]);
    expect(pace.asked.map((a) => a.afterFailure)).toEqual([false, false]);
    expect(sleeps).toEqual([]);
  });

  it('the other token refused too: the access layer hears of it, no third request, the 401 is thrown (retried)', async () => {
    access = new ScriptedAccess([ready('token-2'), ready('token-3')]);
    const refused = fail('unauthorized', 401);
    const { request, sent } = scripted(refused);
    await expect(caller().call(session, request, {})).rejects.toBe(refused);
    expect(sent).toEqual(['token-1', 'token-2']);
    expect(access.asked).toEqual([
      { connection: 'acme', rejected: 'token-1' },
      { connection: 'acme', rejected: 'token-2' },
    ]);
    // The connection's next calls send what the access layer gave last.
    expect(session.token).toBe('token-3');
  });

  it('the same token again (nothing newer): no second request, the 401 is thrown', async () => {
    access = new ScriptedAccess([ready('token-1')]);
    const refused = fail('unauthorized', 401);
    const { request, sent } = scripted(refused);
    await expect(caller().call(session, request, {})).rejects.toBe(refused);
    expect(sent).toEqual(['token-1']);
  });

  it('the connection must wait (paused, failing, a refresh in progress): the call waits with the kind `connection` and its seconds', async () => {
    access = new ScriptedAccess([{ kind: 'wait', reason: 'connection "acme" is failing: the provider refused its refresh token', seconds: 300 }]);
    const { request, sent } = scripted(fail('unauthorized', 401), 'x');
    const error = await caller().call(session, request, {}).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WaitError);
    expect(error).toMatchObject({
      message: 'connection "acme" is failing: the provider refused its refresh token; last answer: getItem: simulated unauthorized; HTTP 401',
      wait: { kind: 'connection', reason: 'connection "acme" is failing: the provider refused its refresh token', seconds: 300 },
    });
    expect(sent).toEqual(['token-1']);
    expect(pace.told).toEqual([{ kind: 'ok' }]);
  });

  it('the connection is gone (removed meanwhile): PermanentError with the access layer\'s reason', async () => {
    access = new ScriptedAccess([{ kind: 'dead', reason: 'connection "acme" was removed' }]);
    const { request, sent } = scripted(fail('unauthorized', 401), 'x');
    const error = await caller().call(session, request, {}).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermanentError);
    expect(error).toMatchObject({ message: 'connection "acme" was removed' });
    expect(sent).toEqual(['token-1']);
  });

  it('a failure of the access layer (its table throttled) is thrown as it is', async () => {
    const throttled = new Error('the connections table is throttled');
    access = { asked: [], knownRefused: () => false, afterRefusal: async () => Promise.reject(throttled) } as unknown as ScriptedAccess;
    await expect(caller().call(session, scripted(fail('unauthorized', 401)).request, {})).rejects.toBe(throttled);
  });

  it('a token another call met a 401 with is not sent again: the call asks the access layer instead, sends nothing, and waits as told', async () => {
    const failing: ConnectionGate = { kind: 'wait', reason: 'connection "acme" is failing: the provider refused its refresh token', seconds: 300 };
    access = new ScriptedAccess([failing]);
    const { request, sent } = scripted(fail('unauthorized', 401), 'x');
    await expect(caller().call(session, request, { itemId: 'a' })).rejects.toBeInstanceOf(WaitError);
    // The batch's next record of the same connection: no request, no slot taken.
    const error = await caller().call(session, request, { itemId: 'b' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WaitError);
    expect(error).toMatchObject({ message: failing.reason, wait: { kind: 'connection', reason: failing.reason, seconds: 300 } });
    expect(sent).toEqual(['token-1']);
    expect(pace.asked).toHaveLength(1);
    expect(access.asked).toEqual([
      { connection: 'acme', rejected: 'token-1' },
      { connection: 'acme', rejected: 'token-1' },
    ]);
  });

  it('refused while the call waited for its slot: that token is not sent; the access layer\'s other token is', async () => {
    access = new ScriptedAccess([ready('token-2')]);
    const acquire = pace.acquire.bind(pace);
    pace.acquire = async (options) => {
      // Another call of the connection met a 401 with token-1 meanwhile.
      if (pace.asked.length === 0) access.asked.push({ connection: 'acme', rejected: 'token-1' });
      return acquire(options);
    };
    const { request, sent } = scripted('x');
    expect(await caller().call(session, request, {})).toBe('x');
    expect(sent).toEqual(['token-2']);
    expect(pace.asked).toHaveLength(2);
    expect(session.token).toBe('token-2');
  });

  it('a token known refused and nothing newer: no request, the call waits REFUSED_WAIT_SECONDS', async () => {
    access = new ScriptedAccess([ready('token-1')]);
    access.asked.push({ connection: 'acme', rejected: 'token-1' });
    const { request, sent } = scripted('x');
    const error = await caller().call(session, request, {}).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WaitError);
    expect(error).toMatchObject({ wait: { kind: 'connection', seconds: REFUSED_WAIT_SECONDS } });
    expect(sent).toEqual([]);
    expect(pace.asked).toEqual([]);
  });

  it('never puts a token in an error or a log line', async () => {
    access = new ScriptedAccess([ready('token-2'), { kind: 'wait', reason: 'connection "acme" is paused', seconds: 300 }]);
    const error = await caller()
      .call(session, scripted(fail('unauthorized', 401)).request, { connection: 'acme', itemId: 'a' })
      .catch((e: unknown) => e);
    const text = JSON.stringify({ message: (error as Error).message, wait: (error as WaitError).wait, logs });
    expect(text).not.toContain('token-1');
    expect(text).not.toContain('token-2');
  });
});

describe('PacedCaller: 429 and transient failures', () => {
  it('a 429 is counted, told to the pace with its Retry-After, and the request made again when the pace allows', async () => {
    const { request, sent } = scripted(fail('rate-limited', 429, 2), fail('rate-limited', 429), 'x');
    expect(await caller().call(session, request, { itemId: 'a' })).toBe('x');
    expect(sent).toHaveLength(3);
    expect(pace.told).toEqual([{ kind: 'rate-limited', retryAfterMs: 2_000 }, { kind: 'rate-limited' }, { kind: 'ok' }]);
    // Not a failure: every slot is asked for as a first attempt, and nothing is slept here (the pace waits).
    expect(pace.asked.map((a) => a.afterFailure)).toEqual([false, false, false]);
    expect(sleeps).toEqual([]);
    expect(counts).toEqual({ fetched: 1, rateLimited: 2 });
    expect(logs[0]).toEqual({ message: 'rate limited; waiting for the pace', attributes: { itemId: 'a', retryAfterSeconds: 2 } });
  });

  it('retries transient failures after the backoff (200 ms doubling, equal jitter), telling the pace which are repeats', async () => {
    const { request, sent } = scripted(fail('transient', 503), fail('transient', 408), 'x');
    expect(await caller().call(session, request, { itemId: 'a' })).toBe('x');
    expect(sent).toHaveLength(3);
    expect(sleeps).toEqual([150, 300]);
    expect(pace.asked.map((a) => a.afterFailure)).toEqual([false, true, true]);
    expect(pace.told).toEqual([{ kind: 'failed', repeat: false }, { kind: 'failed', repeat: true }, { kind: 'ok' }]);
    expect(logs.map((line) => line.attributes)).toEqual([
      { itemId: 'a', attempt: 1, delayMs: 150, error: 'getItem: simulated transient; HTTP 503' },
      { itemId: 'a', attempt: 2, delayMs: 300, error: 'getItem: simulated transient; HTTP 408' },
    ]);
  });

  it('gives up after `attempts` requests and throws the last failure', async () => {
    const last = fail('transient', 500);
    const { request, sent } = scripted(fail('transient', 502), last);
    await expect(caller({ settings: { ...SETTINGS, attempts: 2 } }).call(session, request, {})).rejects.toBe(last);
    expect(sent).toHaveLength(2);
    expect(sleeps).toEqual([150]);
  });

  it('does not back off past the deadline: the failure is thrown instead', async () => {
    const error = fail('transient', 503);
    await expect(caller({ deadline: T0 + 150, random: 0.5 }).call(session, scripted(error).request, {})).rejects.toBe(error);
    expect(sleeps).toEqual([]);
  });

  it('stops retrying once the breaker is open: the call waits (outage: provider)', async () => {
    const { request } = scripted(fail('transient', 503));
    const call = caller().call(session, request, {});
    pace.outage = { reason: 'provider', since: T0 };
    await expect(call).rejects.toMatchObject({
      message: 'the provider fails every request (outage); last answer: getItem: simulated transient; HTTP 503',
      wait: { kind: 'outage', reason: 'provider' },
    });
    expect(sleeps).toEqual([]);
  });

  it('a request aborted at the deadline is not the provider failing: not told to the pace, not retried', async () => {
    const error = fail('transient');
    const request = async (): Promise<unknown> => {
      controller.abort();
      throw error;
    };
    await expect(caller().call(session, request, {})).rejects.toBe(error);
    expect(pace.told).toEqual([]);
    expect(sleeps).toEqual([]);
  });
});
