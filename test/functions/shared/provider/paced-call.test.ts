/**
 * The paced provider call on its own (functions/shared/provider/paced-call.ts), with a scripted pace
 * and token source: the slot asked before and the answer told after every request, the one fresh
 * token read after a 401, 429s waited out in the pace, transient failures retried with backoff
 * while there is time, and what is counted.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { ProviderError, type ProviderErrorKind } from '../../../../functions/shared/errors.js';
import type { Log } from '../../../../functions/shared/ports.js';
import type { AccessTokenSource } from '../../../../functions/shared/provider/access-token.js';
import {
  OutOfTimeError,
  PacedCaller,
  SLOT_MARGIN_MS,
  WaitError,
  type PacedCallCounts,
  type PacedCallSettings,
} from '../../../../functions/shared/provider/paced-call.js';
import type { Grant, PaceGate, RequestResult } from '../../../../functions/shared/provider/pace/provider-pace.js';

const T0 = Date.parse('2026-11-21T10:00:00.000Z');
const SETTINGS: PacedCallSettings = { attempts: 3, backoff: { baseMs: 200, capMs: 2_000, jitter: 'equal' } };

/** A pace that grants what it is scripted to (then `go`), and remembers every question and answer. */
class ScriptedPace implements PaceGate {
  readonly grants: Grant[] = [];
  readonly asked: Array<{ afterFailure?: boolean; sweep?: boolean }> = [];
  readonly told: RequestResult[] = [];
  outage: { reason: 'provider' | 'token'; since: number } | undefined;

  async acquire(options: { afterFailure?: boolean; sweep?: boolean } = {}): Promise<Grant> {
    this.asked.push(options);
    return this.grants.shift() ?? { kind: 'go', probe: false };
  }
  async report(result: RequestResult): Promise<void> {
    this.told.push(result);
  }
  outageKnown(): { reason: 'provider' | 'token'; since: number } | undefined {
    return this.outage;
  }
  waitingForProbe(): boolean {
    return false;
  }
}

/** The secret's tokens in the order the refresher writes them: a read takes the next (the last stays). */
class ScriptedTokens implements AccessTokenSource {
  reads = 0;
  refused: string | undefined;
  private current: string;
  constructor(private readonly written: string[]) {
    this.current = written[0]!;
  }
  async get(): Promise<string> {
    return this.current;
  }
  async refresh(): Promise<string> {
    this.reads += 1;
    this.current = this.written[Math.min(this.reads, this.written.length - 1)]!;
    return this.current;
  }
  markRefused(token: string): void {
    this.refused = token;
  }
  isRefused(token: string): boolean {
    return this.refused === token;
  }
}

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
let tokens: ScriptedTokens;
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
      pace,
      tokens,
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
  tokens = new ScriptedTokens(['token-1', 'token-2']);
  counts = { fetched: 0, rateLimited: 0 };
  controller = new AbortController();
});

describe('PacedCaller: the pace and the answer', () => {
  it('asks the pace for a slot (as the sweep when it is one), sends the token, tells the pace ok and counts the answer', async () => {
    const { request, sent } = scripted({ id: 'a' });
    expect(await caller({ sweep: true }).call(request, { itemId: 'a' })).toEqual({ id: 'a' });
    expect(pace.asked).toEqual([{ afterFailure: false, sweep: true }]);
    expect(pace.told).toEqual([{ kind: 'ok' }]);
    expect(sent).toEqual(['token-1']);
    expect(counts).toEqual({ fetched: 1, rateLimited: 0 });
  });

  it('throws a 404 or another 4xx as it is, after telling the pace the provider is up; nothing is counted', async () => {
    for (const error of [fail('not-found', 404), fail('permanent', 403), fail('malformed')]) {
      await expect(caller().call(scripted(error).request, {})).rejects.toBe(error);
    }
    expect(pace.told).toEqual([{ kind: 'ok' }, { kind: 'ok' }, { kind: 'ok' }]);
    expect(counts).toEqual({ fetched: 0, rateLimited: 0 });
  });

  it('waits for a slot within the invocation, and waits (postponed) for one beyond it', async () => {
    pace.grants.push({ kind: 'wait', until: T0 + 1_500, why: 'pace' });
    expect(await caller().call(scripted('x').request, {})).toBe('x');
    expect(sleeps).toEqual([1_500]);

    now = T0;
    const deadline = T0 + 10_000;
    pace.grants.push({ kind: 'wait', until: deadline - SLOT_MARGIN_MS, why: 'retry-after' });
    const error = await caller({ deadline }).call(scripted('x').request, {}).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WaitError);
    expect(error).toMatchObject({
      message: "no slot of the provider pace before this invocation ends (the provider's Retry-After)",
      wait: { kind: 'pace', seconds: 9, retryAfter: true },
    });
  });

  it('an open breaker: no request, the call waits (outage)', async () => {
    pace.grants.push({ kind: 'outage', reason: 'provider', since: T0 - 5_000 });
    const { request, sent } = scripted('x');
    await expect(caller().call(request, {})).rejects.toMatchObject({
      name: 'WaitError',
      message: 'the provider fails every request (outage)',
      wait: { kind: 'outage', reason: 'provider' },
    });
    expect(sent).toEqual([]);
  });

  it('past the deadline: OutOfTimeError before the token is read or the pace asked', async () => {
    const slow = new ScriptedTokens(['token-1']);
    slow.get = async () => {
      throw new Error('the token must not be read');
    };
    tokens = slow;
    await expect(caller({ deadline: T0 }).call(scripted('x').request, {})).rejects.toBeInstanceOf(OutOfTimeError);
    expect(pace.asked).toEqual([]);
  });
});

describe('PacedCaller: the token', () => {
  it('after a 401 reads the secret afresh once and sends the new token', async () => {
    const { request, sent } = scripted(fail('unauthorized', 401), 'x');
    expect(await caller().call(request, { itemId: 'a' })).toBe('x');
    expect(sent).toEqual(['token-1', 'token-2']);
    expect(tokens.reads).toBe(1);
    expect(pace.told).toEqual([{ kind: 'ok' }, { kind: 'ok' }]);
    expect(logs).toEqual([{ message: 'access token refused; retrying with the token read afresh', attributes: { itemId: 'a' } }]);
  });

  it('a second 401 (the fresh token refused too): no further read; the token is marked refused and the call waits (outage: token)', async () => {
    const { request, sent } = scripted(fail('unauthorized', 401));
    const error = await caller().call(request, {}).catch((e: unknown) => e);
    expect(sent).toEqual(['token-1', 'token-2']);
    expect(tokens.reads).toBe(1);
    expect(tokens.refused).toBe('token-2');
    expect(pace.told).toEqual([{ kind: 'ok' }, { kind: 'ok' }, { kind: 'token-refused' }]);
    expect(error).toMatchObject({
      name: 'WaitError',
      message: 'the provider refuses the access token the secret holds (waiting for the token refresher); last answer: getItem: simulated unauthorized; HTTP 401',
      wait: { kind: 'outage', reason: 'token' },
    });
  });

  it('the secret still holds the refused token: marked refused at once, the call waits', async () => {
    tokens = new ScriptedTokens(['token-1']);
    const { request, sent } = scripted(fail('unauthorized', 401));
    await expect(caller().call(request, {})).rejects.toMatchObject({ wait: { kind: 'outage', reason: 'token' } });
    expect(sent).toEqual(['token-1']);
    expect(tokens.refused).toBe('token-1');
    expect(pace.told).toEqual([{ kind: 'ok' }, { kind: 'token-refused' }]);
  });

  it('the probe of a breaker open for the token goes only with another token', async () => {
    tokens = new ScriptedTokens(['token-1']);
    tokens.markRefused('token-1');
    pace.grants.push({ kind: 'go', probe: true, reason: 'token' });
    const { request, sent } = scripted('x');
    await expect(caller().call(request, {})).rejects.toMatchObject({ wait: { kind: 'outage', reason: 'token' } });
    expect(sent).toEqual([]);
    expect(pace.told).toEqual([{ kind: 'token-refused' }]);

    tokens = new ScriptedTokens(['token-1', 'token-2']);
    tokens.markRefused('token-1');
    pace.grants.push({ kind: 'go', probe: true, reason: 'token' });
    const probe = scripted('x');
    expect(await caller().call(probe.request, {})).toBe('x');
    expect(probe.sent).toEqual(['token-2']);
  });
});

describe('PacedCaller: 429 and transient failures', () => {
  it('a 429 is counted, told to the pace with its Retry-After, and the request made again when the pace allows', async () => {
    const { request, sent } = scripted(fail('rate-limited', 429, 2), fail('rate-limited', 429), 'x');
    expect(await caller().call(request, { itemId: 'a' })).toBe('x');
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
    expect(await caller().call(request, { itemId: 'a' })).toBe('x');
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
    await expect(caller({ settings: { ...SETTINGS, attempts: 2 } }).call(request, {})).rejects.toBe(last);
    expect(sent).toHaveLength(2);
    expect(sleeps).toEqual([150]);
  });

  it('does not back off past the deadline: the failure is thrown instead', async () => {
    const error = fail('transient', 503);
    await expect(caller({ deadline: T0 + 150, random: 0.5 }).call(scripted(error).request, {})).rejects.toBe(error);
    expect(sleeps).toEqual([]);
  });

  it('stops retrying once the breaker is open: the call waits (outage: provider)', async () => {
    const { request } = scripted(fail('transient', 503));
    const call = caller().call(request, {});
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
    await expect(caller().call(request, {})).rejects.toBe(error);
    expect(pace.told).toEqual([]);
    expect(sleeps).toEqual([]);
  });
});
