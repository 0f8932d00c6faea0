/**
 * The item sync handler and the provider pace (mocked clients, port-level pace stores,
 * unit-harness.ts): the sweep's share, an open breaker known in the container, and the container's
 * paces, one per pace key.
 */
import 'aws-sdk-client-mock-vitest/extend';
import { describe, expect, it, vi } from 'vitest';
import { BatchGetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import { MemoryPaceStore } from '../../../dev/fakes/memory-pace-store.js';
import {
  closeBreaker,
  DEFAULT_PACE_SETTINGS,
  initialPaceState,
  openBreaker,
  type PaceState,
} from '../../../functions/shared/provider/pace/pace-state.js';
import { PaceMap } from '../../../functions/item-sync/app.js';
import { PaceBreaker, ProviderPace } from '../../../functions/shared/provider/pace/provider-pace.js';
import { QUEUE_URL, ScriptedProvider, item } from './helpers.js';
import { NOW, build as buildDeployed, ddb, harness, run, runRecords, sqs, useHarness, type BuildOverrides } from './unit-harness.js';
import { SYNC_PACE_LEASE_SECONDS } from '../../../functions/item-sync/app.js';

useHarness();

/**
 * The handler with the pace's own default lease (a tenth of a second of the rate) and 10 requests
 * in flight: the numbers these tests work out by hand. As deployed the sync draws
 * SYNC_PACE_LEASE_SECONDS and SYNC_FETCH_CONCURRENCY's default (the first test says what that draws).
 */
function build(provider: ScriptedProvider, overrides: BuildOverrides = {}): ReturnType<typeof buildDeployed> {
  return buildDeployed(provider, {
    paceSettings: { leaseSeconds: DEFAULT_PACE_SETTINGS.leaseSeconds },
    ...overrides,
    env: { SYNC_FETCH_CONCURRENCY: '10', ...overrides.env },
  });
}

/** Runs a batch whose records all carry the given message attributes (Number), e.g. `reconcilePass`. */
function runWithAttributes(handler: ReturnType<typeof build>, bodies: string[], attributes: Record<string, string>, remainingMs = 60_000) {
  return run(handler, bodies, remainingMs, attributes);
}

/** The pace settings the handler runs with here (PROVIDER_REQUESTS_PER_SECOND=1000). */
const PACE = { ...DEFAULT_PACE_SETTINGS, maxRate: 1000 };

/** A pace row at NOW with the given changes (the settings above; both buckets full unless changed). */
async function paceRow(changes: Partial<PaceState> = {}): Promise<MemoryPaceStore> {
  const paceStore = new MemoryPaceStore();
  await paceStore.write({ ...initialPaceState(PACE, NOW.getTime()), ...changes }, 0);
  return paceStore;
}

describe('the deployed lease', () => {
  it('draws a quarter of a second of the rate, at most SYNC_FETCH_CONCURRENCY (50): 50 of a full bucket at 1000/s, then what the batch still wants', async () => {
    expect(SYNC_PACE_LEASE_SECONDS).toBe(0.25);
    const store = new MemoryPaceStore();
    const ids = Array.from({ length: 60 }, (_, n) => `i${n}`);
    const provider = new ScriptedProvider();
    for (const id of ids) provider.on(id, item(id, 1));
    await run(buildDeployed(provider, { paceStore: store }), ids);
    expect(provider.calls).toHaveLength(60);
    // The bucket holds two leases' worth of the rate (2 × 0.25 s × 1000/s = 500): a draw of 50, then of the 10 left.
    expect(store.writes).toBe(2);
    expect(store.state).toMatchObject({ tokens: 440, sweepTokens: 500 });
  });

  it('draws no more than a batch asks for: a batch of two ids takes two tokens, and leaves the rest to every other container', async () => {
    const store = new MemoryPaceStore();
    const provider = new ScriptedProvider().on('a', item('a', 1)).on('b', item('b', 1));
    await run(buildDeployed(provider, { paceStore: store }), ['a', 'b']);
    expect(provider.calls).toHaveLength(2);
    expect(store.writes).toBe(1);
    expect(store.state).toMatchObject({ tokens: 498, sweepTokens: 500 });
  });

  it('forgets at the end of a batch what it did not ask for: the next batch of the container draws for its own ids only', async () => {
    // Users deep in debt (500 tokens at 1000/s): the id gets no slot before the invocation ends.
    const store = await paceRow({ tokens: -500 });
    const provider = new ScriptedProvider().on('a', item('a', 1)).on('b', item('b', 1)).on('c', item('c', 1));
    const handler = buildDeployed(provider, { paceStore: store });
    const first = await run(handler, ['a'], 2_000);
    expect(first.metrics).toMatchObject({ RecordsPostponed: 1 });
    expect(provider.calls).toHaveLength(0);

    // 10 s on, the bucket is full again (500 at 1000/s, the deployed lease): two ids take two tokens.
    harness.clockMs += 10_000;
    await run(handler, ['b', 'c']);
    expect(provider.calls.map((call) => call.id)).toEqual(['b', 'c']);
    expect(store.state).toMatchObject({ tokens: 498 });
  });
});

describe('the sweep (records the reconciler sent, message attribute reconcilePass)', () => {
  it('asks the pace as the sweep: the lease is drawn from the sweep’s bucket as well as the shared one', async () => {
    const sweepStore = new MemoryPaceStore();
    const provider = new ScriptedProvider().on('a', item('a', 1));
    const swept = await runWithAttributes(build(provider, { paceStore: sweepStore }), ['a'], { reconcilePass: '3' });
    expect(swept.result).toEqual({ batchItemFailures: [] });
    expect(swept.metrics).toMatchObject({ ItemsCreated: 1 });
    // A full bucket at 1000/s holds 200; the batch's one id draws one token from both buckets.
    expect(sweepStore.state).toMatchObject({ tokens: 199, sweepTokens: 199 });

    const userStore = new MemoryPaceStore();
    await run(build(new ScriptedProvider().on('a', item('a', 1)), { paceStore: userStore }), ['a']);
    expect(userStore.state).toMatchObject({ tokens: 199, sweepTokens: 200 });

    // Pass 0 is a pass.
    const firstPass = new MemoryPaceStore();
    await runWithAttributes(build(new ScriptedProvider().on('a', item('a', 1)), { paceStore: firstPass }), ['a'], { reconcilePass: '0' });
    expect(firstPass.state).toMatchObject({ tokens: 199, sweepTokens: 199 });
  });

  it.each([
    // 100 ms at 1000/s refill the users' bucket to full (200) and the sweep's by the rest of the rate; the one id draws one token.
    ['unset (20)', {}, 79],
    ['0', { PROVIDER_USERS_RESERVED_PERCENT: '0' }, 99],
    ['50', { PROVIDER_USERS_RESERVED_PERCENT: '50' }, 49],
    ['75', { PROVIDER_USERS_RESERVED_PERCENT: '75' }, 24],
  ])('PROVIDER_USERS_RESERVED_PERCENT %s: the sweep’s bucket refills at the rest of the rate, users’ ids draw as before', async (_name, env, sweepTokens) => {
    const sweepStore = await paceRow({ sweepTokens: 0, at: NOW.getTime() - 100 });
    await runWithAttributes(build(new ScriptedProvider().on('a', item('a', 1)), { paceStore: sweepStore, env }), ['a'], { reconcilePass: '1' });
    expect(sweepStore.state!.tokens).toBe(199);
    expect(sweepStore.state!.sweepTokens).toBeCloseTo(sweepTokens, 9);

    // Users' ids take from the shared bucket only, whatever the sweep's share.
    const userStore = await paceRow({ sweepTokens: 0 });
    const provider = new ScriptedProvider().on('a', item('a', 1));
    await run(build(provider, { paceStore: userStore, env }), ['a']);
    expect(provider.calls).toHaveLength(1);
    expect(userStore.state).toMatchObject({ tokens: 199, sweepTokens: 0 });
  });

  it('waits while users are in debt (never borrows), where users’ ids go into debt at once', async () => {
    const sweepStore = await paceRow({ tokens: -50 });
    const provider = new ScriptedProvider().on('a', item('a', 1));
    // The jitter that spreads sweep containers (0–20 ms): half of it here.
    const random = vi.spyOn(Math, 'random').mockReturnValue(0.5);
    try {
      await runWithAttributes(build(provider, { paceStore: sweepStore }), ['a'], { reconcilePass: '3' });
    } finally {
      random.mockRestore();
    }
    // The one id's token needs 51 more at 1000/s: 51 ms, and 10 ms of jitter; that wait is not written.
    expect(harness.sleeps).toEqual([61]);
    expect(provider.calls).toHaveLength(1);
    expect(sweepStore.writes).toBe(2);
    expect(sweepStore.state).toMatchObject({ tokens: 10, sweepTokens: 199, at: NOW.getTime() + 61 });

    harness.sleeps = [];
    harness.clockMs = NOW.getTime();
    const userStore = await paceRow({ tokens: -50 });
    await run(build(new ScriptedProvider().on('a', item('a', 1)), { paceStore: userStore }), ['a']);
    // A lease of one token into debt (-51): it is due at +51 ms.
    expect(harness.sleeps).toEqual([51]);
    expect(userStore.state).toMatchObject({ tokens: -51, sweepTokens: 200 });
  });

  it('sends a sweep record that gets no slot in this invocation again with postponements, reconcilePass and its lane, in its connection’s group', async () => {
    // Users at the largest debt (500 tokens at 1000/s): the sweep's next try is after the invocation's last useful slot.
    const paceStore = await paceRow({ tokens: -500 });
    const provider = new ScriptedProvider().on('a', item('a', 1));
    const { result, metrics } = await runWithAttributes(build(provider, { paceStore }), ['a'], { postponements: '1', reconcilePass: '4' }, 2_000);

    expect(result).toEqual({ batchItemFailures: [] });
    expect(provider.calls).toHaveLength(0);
    expect(sqs.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input)).toEqual([
      {
        QueueUrl: QUEUE_URL,
        Entries: [
          {
            Id: 'm0',
            MessageBody: 'a',
            DelaySeconds: 1,
            MessageGroupId: 'default',
            MessageAttributes: {
              postponements: { DataType: 'Number', StringValue: '2' },
              reconcilePass: { DataType: 'Number', StringValue: '4' },
              // Sent before the lane existed: it is the background lane's, and says so from now on.
              lane: { DataType: 'String', StringValue: 'background' },
            },
          },
        ],
      },
    ]);
    expect(metrics).toMatchObject({ RecordsPostponed: 1, RecordsRetried: 0, ItemsCreated: 0 });
  });

  it.each([['abc'], ['-1'], ['1.5'], ['9007199254740993'], ['Infinity'], ['1e400']])(
    'ignores a malformed reconcilePass (%s): the batch is users’ ids, and the attribute is not sent on',
    async (value) => {
      const paceStore = new MemoryPaceStore();
      const provider = new ScriptedProvider().on('a', item('a', 1));
      await runWithAttributes(build(provider, { paceStore }), ['a'], { reconcilePass: value });
      expect(provider.calls).toHaveLength(1);
      expect(paceStore.state).toMatchObject({ tokens: 199, sweepTokens: 200 });

      // Postponed (the breaker opened meanwhile): sent again without reconcilePass.
      const opened = await paceRow();
      await opened.write(openBreaker(opened.state!, NOW.getTime(), 'provider', PACE), 1);
      sqs.resetHistory();
      await runWithAttributes(build(new ScriptedProvider(), { paceStore: opened }), ['b'], { reconcilePass: value });
      expect(sqs.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input.Entries)).toEqual([
        [{ Id: 'm0', MessageBody: 'b', DelaySeconds: 5, MessageGroupId: 'default', MessageAttributes: { postponements: { DataType: 'Number', StringValue: '1' } } }],
      ]);
    },
  );
});

describe('the background lane (message attribute lane = background: backfills and the reconciler)', () => {
  const background = { lane: { type: 'String', value: 'background' } } as const;

  it('draws a backfill record (lane, no reconcilePass) as the sweep', async () => {
    harness.connections.add('acme', { tokens: ['at-acme-1'] });
    const store = new MemoryPaceStore();
    const provider = new ScriptedProvider().on('a', item('a', 1));
    const { result } = await runRecords(build(provider, { paceStore: store }), [{ body: '{"connection":"acme","id":"a"}', attributes: background }]);
    expect(result).toEqual({ batchItemFailures: [] });
    expect(provider.calls).toHaveLength(1);
    expect(store.state).toMatchObject({ tokens: 199, sweepTokens: 199 });
  });

  it.each([['users'], ['Background'], ['']])('takes any other lane (%j) as users’', async (lane) => {
    const store = new MemoryPaceStore();
    await runRecords(build(new ScriptedProvider().on('a', item('a', 1)), { paceStore: store }), [{ body: 'a', attributes: { lane: { type: 'String', value: lane } } }]);
    expect(store.state).toMatchObject({ tokens: 199, sweepTokens: 200 });
  });

  it('takes a batch with one users’ record among background ones as users’: users never wait behind the sweep', async () => {
    const store = new MemoryPaceStore();
    const provider = new ScriptedProvider().on('a', item('a', 1)).on('b', item('b', 1));
    await runRecords(build(provider, { paceStore: store }), [{ body: 'a', attributes: background }, { body: 'b' }]);
    expect(provider.calls).toHaveLength(2);
    expect(store.state).toMatchObject({ tokens: 198, sweepTokens: 200 });
  });

  it('sends a waiting backfill record again in the background lane and its connection’s group, without reconcilePass', async () => {
    harness.connections.add('acme', { tokens: ['at-acme-1'] });
    // Users at the largest debt: the sweep's next try is after the invocation's last useful slot.
    const paceStore = await paceRow({ tokens: -500 });
    const provider = new ScriptedProvider().on('a', item('a', 1));
    const { result } = await runRecords(
      build(provider, { paceStore }),
      [{ body: '{"connection":"acme","id":"a"}', attributes: { ...background, postponements: { type: 'Number', value: '2' } } }],
      2_000,
    );
    expect(result).toEqual({ batchItemFailures: [] });
    expect(provider.calls).toHaveLength(0);
    expect(sqs.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input)).toEqual([
      {
        QueueUrl: QUEUE_URL,
        Entries: [
          {
            Id: 'm0',
            MessageBody: '{"connection":"acme","id":"a"}',
            DelaySeconds: 1,
            MessageGroupId: 'acme',
            MessageAttributes: {
              postponements: { DataType: 'Number', StringValue: '3' },
              lane: { DataType: 'String', StringValue: 'background' },
            },
          },
        ],
      },
    ]);
  });
});

describe('an open breaker, no probe due in this container', () => {
  it('postpones a batch without reading the items table or calling the provider; 2 s after its last read it reads the row again', async () => {
    const paceStore = await paceRow();
    await paceStore.write(openBreaker(paceStore.state!, NOW.getTime(), 'provider', PACE), 1);
    const provider = new ScriptedProvider().on('a', item('a', 1)).on('b', item('b', 1));
    const handler = build(provider, { paceStore });
    const batchGets = () => ddb.commandCalls(BatchGetItemCommand).length;
    const sent = () => sqs.commandCalls(SendMessageBatchCommand).map((call) => call.args[0].input);

    // The first batch learns of the breaker from the row (after its read of the items table).
    const first = await run(handler, ['a']);
    expect(first.result).toEqual({ batchItemFailures: [] });
    expect(batchGets()).toBe(1);
    expect(provider.calls).toHaveLength(0);
    expect(first.metrics).toMatchObject({ RecordsPostponed: 1, BreakerOpen: 1 });

    // A second later: no read, no request; every record waits by the outage schedule (its third postponement: 20 s).
    harness.clockMs = NOW.getTime() + 1_000;
    sqs.resetHistory();
    const reads = paceStore.reads;
    const second = await runWithAttributes(handler, ['a', 'b'], { postponements: '2', reconcilePass: '7' });
    expect(second.result).toEqual({ batchItemFailures: [] });
    expect(batchGets()).toBe(1);
    expect(provider.calls).toHaveLength(0);
    expect(paceStore.reads).toBe(reads);
    const waiting = {
      postponements: { DataType: 'Number', StringValue: '3' },
      reconcilePass: { DataType: 'Number', StringValue: '7' },
      lane: { DataType: 'String', StringValue: 'background' },
    };
    expect(sent()).toEqual([
      {
        QueueUrl: QUEUE_URL,
        Entries: [
          { Id: 'm0', MessageBody: 'a', DelaySeconds: 20, MessageGroupId: 'default', MessageAttributes: waiting },
          { Id: 'm1', MessageBody: 'b', DelaySeconds: 20, MessageGroupId: 'default', MessageAttributes: waiting },
        ],
      },
    ]);
    expect(second.metrics).toMatchObject({ RecordsPostponed: 2, RecordsRetried: 0, BreakerOpen: 1, BreakerOpenSeconds: 1 });

    // Another container's probe succeeds: the row is closed.
    const row = (await paceStore.read())!;
    await paceStore.write(closeBreaker(row.state as PaceState, NOW.getTime() + 1_500), row.version);

    // Until 2 s after it read the row, this container still trusts what it knows.
    harness.clockMs = NOW.getTime() + 1_999;
    sqs.resetHistory();
    const third = await run(handler, ['a']);
    expect(batchGets()).toBe(1);
    expect(provider.calls).toHaveLength(0);
    expect(sent()).toEqual([
      {
        QueueUrl: QUEUE_URL,
        Entries: [{ Id: 'm0', MessageBody: 'a', DelaySeconds: 5, MessageGroupId: 'default', MessageAttributes: { postponements: { DataType: 'Number', StringValue: '1' } } }],
      },
    ]);
    expect(third.metrics).toMatchObject({ RecordsPostponed: 1, BreakerOpen: 1 });

    // Then it reads the row again, finds the breaker closed and syncs as usual.
    harness.clockMs = NOW.getTime() + 2_000;
    sqs.resetHistory();
    const fourth = await run(handler, ['a', 'b']);
    expect(fourth.result).toEqual({ batchItemFailures: [] });
    expect(batchGets()).toBe(2);
    expect(provider.calls.map((call) => call.id)).toEqual(['a', 'b']);
    expect(ddb).toHaveReceivedCommandTimes(PutItemCommand, 2);
    expect(sent()).toEqual([]);
    expect(fourth.metrics).toMatchObject({ ItemsCreated: 2, RecordsPostponed: 0, BreakerOpen: 0 });
  });

  it('still reads and calls the provider when this container’s probe is due', async () => {
    const paceStore = await paceRow();
    await paceStore.write(openBreaker(paceStore.state!, NOW.getTime() - 20_000, 'provider', PACE), 1);
    const provider = new ScriptedProvider().on('a', item('a', 1));
    const { result, metrics } = await run(build(provider, { paceStore }), ['a']);
    expect(result).toEqual({ batchItemFailures: [] });
    expect(ddb).toHaveReceivedCommandTimes(BatchGetItemCommand, 1);
    expect(provider.calls).toHaveLength(1);
    expect(paceStore.state?.breaker).toEqual({ open: false });
    expect(metrics).toMatchObject({ ItemsCreated: 1, BreakerOpen: 0 });
  });
});

describe('PaceMap: the paces of one container', () => {
  it('makes one pace per key on first use and keeps at most its limit, dropping the least recently used', () => {
    const made: string[] = [];
    const paces = new PaceMap((key) => {
      made.push(key);
      return new ProviderPace(new MemoryPaceStore(), { now: () => NOW }, { debug() {}, info() {}, warn() {}, error() {} }, {
        settings: PACE,
        fallbackRate: 1,
        concurrency: 10,
      });
    }, 2);
    const a = paces.get('client#a');
    expect(paces.get('client#a')).toBe(a);
    paces.get('client#b');
    paces.get('client#a'); // a is now the most recently used
    paces.get('client#c'); // b goes
    expect(paces.get('client#a')).toBe(a);
    paces.get('client#b');
    expect(made).toEqual(['client#a', 'client#b', 'client#c', 'client#b']);
    expect(paces.snapshots()).toHaveLength(2);
  });

  it("gives the paces of one breaker key that is not their own one view of that breaker; a pace of its own key keeps its own", () => {
    const breakersMade: string[] = [];
    const given = new Map<string, PaceBreaker | undefined>();
    const paces = new PaceMap(
      (key, breaker) => {
        given.set(key, breaker);
        return new ProviderPace(new MemoryPaceStore(), { now: () => NOW }, { debug() {}, info() {}, warn() {}, error() {} }, {
          settings: PACE,
          fallbackRate: 1,
          concurrency: 10,
        }, breaker);
      },
      10,
      (key) => {
        breakersMade.push(key);
        return new PaceBreaker(new MemoryPaceStore());
      },
    );
    const a = paces.get('connection#a', 'client#c');
    paces.get('connection#b', 'client#c');
    paces.get('connection#x', 'client#d');
    paces.get('client#c', 'client#c');
    paces.get('client#e');
    expect(breakersMade).toEqual(['client#c', 'client#d']);
    expect(given.get('connection#a')).toBeInstanceOf(PaceBreaker);
    expect(given.get('connection#b')).toBe(given.get('connection#a'));
    expect(given.get('connection#x')).not.toBe(given.get('connection#a'));
    expect(given.get('client#c')).toBeUndefined();
    expect(given.get('client#e')).toBeUndefined();

    // What one pace learns of the breaker, the other pace of its client id knows.
    given.get('connection#a')!.outage = { reason: 'provider', since: NOW.getTime(), nextProbeAt: NOW.getTime() + 20_000 };
    expect(paces.get('connection#b', 'client#c').outageKnown()).toEqual({ reason: 'provider', since: NOW.getTime() });
    expect(paces.get('connection#x', 'client#d').outageKnown()).toBeUndefined();

    // A connection that now names another client id gets a new pace, under that client id's breaker.
    expect(paces.get('connection#a', 'client#c')).toBe(a);
    const moved = paces.get('connection#a', 'client#d');
    expect(moved).not.toBe(a);
    expect(given.get('connection#a')).toBe(given.get('connection#x'));
  });
});
