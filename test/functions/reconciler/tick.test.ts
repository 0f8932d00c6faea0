/**
 * The reconciler's core (functions/reconciler/tick.ts) with fakes of its ports: a pass covers every
 * id once; a crash between sending a page and advancing past it repeats that page only; ticks that
 * overlap never skip; the high-water mark bounds the backlog; passes end, and the next waits for
 * freshnessHours; segments spread over workers never conflict; the projection's arithmetic.
 */
import { describe, expect, it } from 'vitest';
import { newPass, runTick, type TickReport } from '../../../functions/reconciler/tick.js';
import type { ItemKey } from '../../../functions/reconciler/ports.js';
import { HOUR, idList, keyOf, label, segmentOf, settings, T0, world, FakeItemIds, type World } from './fakes.js';

const TICK = 60_000;

/** Runs a tick that may use 50 s from the world's clock. */
function tick(w: World, overrides: Parameters<typeof settings>[0] = {}, deps = w.deps): Promise<TickReport> {
  return runTick(deps, settings(overrides), w.clock.ms + 50_000);
}

/** Ids sent more than once in `pass`. */
function duplicates(w: World, pass = 1): string[] {
  return [...w.queue.counts(pass)].filter(([, count]) => count > 1).map(([id]) => id).sort();
}

function expectEveryIdOnce(w: World, ids: string[], pass = 1): void {
  const counts = w.queue.counts(pass);
  expect([...counts.keys()].sort()).toEqual([...ids].sort());
  expect(duplicates(w, pass)).toEqual([]);
}

/** Ticks (a minute apart) until the pass has ended; returns the reports. */
async function untilEnded(w: World, overrides: Parameters<typeof settings>[0] = {}, limit = 100): Promise<TickReport[]> {
  const reports: TickReport[] = [];
  for (let i = 0; i < limit; i += 1) {
    const report = await tick(w, overrides);
    reports.push(report);
    if (report.state === 'ended' || report.state === 'waiting') return reports;
    w.clock.advance(TICK);
  }
  throw new Error('the pass did not end');
}

describe('a pass', () => {
  it('sends every id once, page by page per segment, each page starting after the last id of the one before, and ends', async () => {
    const ids = idList(237);
    const w = world(ids);
    const report = await tick(w);

    expect(report).toMatchObject({ state: 'ended', pass: 1, startedPass: true, enqueued: 237, refused: 0, passIds: 237, idsKnown: 237 });
    expect(report.passLengthSeconds).toBe(0);
    expectEveryIdOnce(w, ids);
    expect(w.queue.sent.every((message) => message.pass === 1)).toBe(true);
    // Per segment: 10 rows a page, each after the last id of the page before; the last page has no LastEvaluatedKey.
    for (let segment = 0; segment < 4; segment += 1) {
      const inSegment = ids.filter((id) => segmentOf(id, 4) === segment).sort();
      const requests = w.ids.pages.filter((page) => page.segment === segment);
      expect(requests.every((page) => page.totalSegments === 4 && page.limit === 10)).toBe(true);
      expect(requests.map((page) => page.after?.id)).toEqual(
        Array.from({ length: Math.floor(inSegment.length / 10) + 1 }, (_, page) => (page === 0 ? undefined : inSegment[page * 10 - 1])),
      );
      expect(w.cursor.row!.segments[segment]).toEqual({ done: true, version: requests.length, ids: inSegment.length });
    }
    expect(w.cursor.row).toMatchObject({ pass: 1, startedAt: T0, endedAt: T0 });
    // One write per page (no write per id), plus the pass's start and end.
    expect(w.cursor.writes.filter((write) => write.kind === 'advance')).toHaveLength(w.ids.pages.length);
    expect(w.cursor.writes.map((write) => write.kind).filter((kind) => kind !== 'advance')).toEqual(['start', 'end']);
  });

  it('an empty table: the pass starts and ends at once', async () => {
    const w = world([]);
    expect(await tick(w)).toMatchObject({ state: 'ended', pass: 1, enqueued: 0, passIds: 0, passLengthSeconds: 0 });
    expect(w.queue.sent).toEqual([]);
  });

  it('a running pass keeps its own number of segments when the setting changes', async () => {
    const ids = idList(100);
    const w = world(ids);
    await tick(w, { highWater: 20 });
    expect(w.cursor.row!.segments).toHaveLength(4);
    w.queue.take();
    w.clock.advance(TICK);
    await untilEnded(w, { segments: 7 });
    expect(w.ids.pages.every((page) => page.totalSegments === 4)).toBe(true);
    expectEveryIdOnce(w, ids);
  });
});

describe('a tick that fails', () => {
  it('between sending a page and advancing past it: the next tick sends that page again, and only that page', async () => {
    const ids = idList(100);
    const w = world(ids);
    let advances = 0;
    let crashed: { segment: number; after: ItemKey | undefined } | undefined;
    w.cursor.beforeWrite = (write) => {
      if (write.kind !== 'advance') return;
      advances += 1;
      if (advances === 3) {
        crashed = { segment: write.segment!, after: w.cursor.row!.segments[write.segment!]!.after };
        throw new Error('the invocation was stopped');
      }
    };
    await expect(tick(w, { segments: 2 })).rejects.toThrow('the invocation was stopped');
    w.cursor.beforeWrite = undefined;
    // The page that was sent but not advanced past.
    const page = await new FakeItemIds(ids).page({ segment: crashed!.segment, totalSegments: 2, limit: 10, ...(crashed!.after ? { after: crashed!.after } : {}) });
    expect(page.keys).toHaveLength(10);

    w.clock.advance(TICK);
    expect((await tick(w, { segments: 2 })).state).toBe('ended');
    expect(new Set(w.queue.counts(1).keys())).toEqual(new Set(ids));
    expect(duplicates(w)).toEqual(page.keys.map(label).sort());
  });

  it('in the middle of sending a page: the next tick sends the whole page again; nothing is skipped', async () => {
    const ids = idList(60);
    const w = world(ids);
    w.queue.failNext = { error: new Error('SendMessageBatch failed'), sendBeforeFailing: 4 };
    await expect(tick(w, { segments: 1 })).rejects.toThrow('SendMessageBatch failed');
    expect(w.cursor.row!.segments[0]).toEqual({ done: false, version: 0, ids: 0 });
    w.clock.advance(TICK);
    await tick(w, { segments: 1 });
    expect(duplicates(w)).toEqual([...ids].sort().slice(0, 4));
    expect(new Set(w.queue.counts(1).keys())).toEqual(new Set(ids));
  });

  it('on a Scan that fails: nothing of that page was sent or advanced; the other segments stop; the next tick goes on', async () => {
    const ids = idList(200);
    const w = world(ids);
    w.ids.failNext = Object.assign(new Error('Throughput exceeds the current capacity'), { name: 'ThrottlingException' });
    await expect(tick(w)).rejects.toThrow('Throughput exceeds');
    expect(w.queue.sent.length).toBeLessThan(ids.length);
    w.clock.advance(TICK);
    await untilEnded(w);
    expectEveryIdOnce(w, ids);
  });

  it('after the last page but before the end of the pass was written: the next tick ends the pass', async () => {
    const ids = idList(30);
    const w = world(ids);
    w.cursor.beforeWrite = (write) => {
      if (write.kind === 'end') throw new Error('stopped');
    };
    await expect(tick(w)).rejects.toThrow('stopped');
    expect(w.cursor.row!.endedAt).toBeUndefined();
    w.cursor.beforeWrite = undefined;
    w.clock.advance(TICK);
    const report = await tick(w);
    expect(report).toMatchObject({ state: 'ended', pass: 1, enqueued: 0, passLengthSeconds: 60, projectedPassSeconds: 60 });
    expect(w.cursor.row!.endedAt).toBe(T0 + TICK);
    expectEveryIdOnce(w, ids);
  });
});

describe('ticks that overlap', () => {
  it('never skip an id: the one that loses a segment stops, and each lost race repeats at most one page', async () => {
    const ids = idList(400);
    const w = world(ids);
    const reports = await Promise.all([tick(w, { segments: 2 }), tick(w, { segments: 2 }), tick(w, { segments: 2 })]);
    // The pass was started once; the others read it.
    expect(reports.filter((report) => report.startedPass)).toHaveLength(1);
    expect(reports.some((report) => report.state === 'lost')).toBe(true);
    w.clock.advance(TICK);
    await untilEnded(w, { segments: 2 });
    expect(new Set(w.queue.counts(1).keys())).toEqual(new Set(ids));
    const lostRaces = w.cursor.writes.filter((write) => write.kind === 'advance' && write.result === 'conflict').length;
    expect(lostRaces).toBeGreaterThan(0);
    expect(duplicates(w).length).toBeLessThanOrEqual(10 * lostRaces);
    // Every advance that was written moved a segment forward by one page: versions count them.
    const written = w.cursor.writes.filter((write) => write.kind === 'advance' && write.result === 'written').length;
    expect(w.cursor.row!.segments.reduce((sum, segment) => sum + segment.version, 0)).toBe(written);
  });

  it('a tick that read the cursor before another one went on sends one stale page per segment, loses, and changes nothing', async () => {
    const ids = idList(120);
    const w = world(ids);
    await tick(w, { segments: 2, highWater: 20 }); // pass 1 running: one page of each segment sent
    w.queue.take();
    w.clock.advance(TICK);

    // Tick A reads the cursor, then stalls on its first Scan page of each segment (both asked for
    // before B starts).
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let stalled!: () => void;
    const bothStalled = new Promise<void>((resolve) => (stalled = resolve));
    const slowIds = new FakeItemIds(ids);
    slowIds.beforePage = () => {
      if (slowIds.pages.length === 2) stalled();
      return gate;
    };
    const a = tick(w, { segments: 2 }, { ...w.deps, ids: slowIds });
    await bothStalled;
    // Tick B finishes the pass meanwhile.
    const b = await tick(w, { segments: 2 });
    expect(b.state).toBe('ended');
    const row = structuredClone(w.cursor.row);
    release();
    const reportA = await a;

    expect(reportA.state).toBe('lost');
    expect(w.cursor.row).toEqual(row);
    // A sent the page after the cursor it had read, in each segment it started: those are the only repeats.
    expect(duplicates(w).length).toBeGreaterThan(0);
    expect(duplicates(w).length).toBeLessThanOrEqual(20);
    expect(new Set(w.queue.counts(1).keys())).toEqual(new Set(ids));
  });
});

describe('the high-water mark', () => {
  it('bounds the backlog: a tick sends at most highWater − backlog, and leaves once the sync takes nothing', async () => {
    const ids = idList(100);
    const w = world(ids);
    const first = await tick(w, { highWater: 25 });
    expect(first).toMatchObject({ state: 'running', enqueued: 25, backlog: 25 });
    // One look, a top-up, a wait, a second look: nothing was taken, so the backlog lasts: the tick leaves.
    expect(w.sleeps).toEqual([5_000]);
    expect(w.queue.backlogReads).toBe(2);

    w.clock.advance(TICK);
    expect((await tick(w, { highWater: 25 })).enqueued).toBe(0);
    w.queue.take(10);
    w.clock.advance(TICK);
    expect((await tick(w, { highWater: 25 })).enqueued).toBe(10);
    expect(w.queue.sent).toHaveLength(35);
    expect(w.queue.maxBacklog).toBe(25);
  });

  it('a tick stays and tops the queue up again while the sync would empty it before the next tick', async () => {
    const ids = idList(1_000);
    const w = world(ids);
    // The sync takes everything during each wait.
    const deps = {
      ...w.deps,
      sleep: async (ms: number) => {
        w.sleeps.push(ms);
        w.clock.advance(ms);
        w.queue.take();
      },
    };
    const report = await runTick(deps, settings({ highWater: 25 }), w.clock.ms + 50_000);
    // Top-ups at 0, 5, …, 45 s; no wait that would end past the deadline.
    expect(report.enqueued).toBe(250);
    expect(w.sleeps).toHaveLength(9);
    expect(w.queue.maxBacklog).toBe(25);
  });

  it('workers share it: each fills its part of what the queue lacks', async () => {
    const ids = idList(300);
    const w = world(ids);
    const [zero, one] = await Promise.all([tick(w, { highWater: 100, workers: 2, worker: 0 }), tick(w, { highWater: 100, workers: 2, worker: 1 })]);
    expect(zero.enqueued).toBeLessThanOrEqual(50);
    expect(one.enqueued).toBeLessThanOrEqual(50);
    expect(zero.enqueued + one.enqueued).toBe(100);
    // The sync takes 60: each fills half of what the queue lacks, together back to the mark.
    w.queue.take(60);
    w.clock.advance(TICK);
    const again = await Promise.all([tick(w, { highWater: 100, workers: 2, worker: 0 }), tick(w, { highWater: 100, workers: 2, worker: 1 })]);
    expect(again.map((report) => report.enqueued)).toEqual([30, 30]);
    expect(w.queue.maxBacklog).toBe(100);
  });

  it('no page is started after the deadline', async () => {
    const ids = idList(100);
    const w = world(ids);
    w.ids.beforePage = () => w.clock.advance(30_000);
    const report = await tick(w, { segments: 1 });
    expect(w.ids.pages).toHaveLength(2); // at 0 s and 30 s; at 60 s the 50 s deadline had passed
    expect(report).toMatchObject({ state: 'running', enqueued: 20 });
    const none = world(ids);
    expect(await runTick(none.deps, settings(), none.clock.ms)).toMatchObject({ state: 'running', enqueued: 0, startedPass: true });
    expect(none.ids.pages).toEqual([]);
  });
});

describe('passes and freshnessHours', () => {
  it('a pass that ended early is followed by the next one freshnessHours after it started, not before', async () => {
    const ids = idList(30);
    const w = world(ids);
    expect((await tick(w)).state).toBe('ended');

    w.clock.ms = T0 + HOUR;
    const waiting = await tick(w);
    expect(waiting).toMatchObject({ state: 'waiting', pass: 1, enqueued: 0, nextPassAt: T0 + 24 * HOUR, passAgeSeconds: 3600, projectedPassSeconds: 0 });
    expect(waiting.passLengthSeconds).toBeUndefined();
    expect(w.queue.sent).toHaveLength(30);

    w.clock.ms = T0 + 24 * HOUR - 1;
    expect((await tick(w)).state).toBe('waiting');
    w.clock.ms = T0 + 24 * HOUR;
    const second = await tick(w);
    expect(second).toMatchObject({ state: 'ended', pass: 2, startedPass: true, enqueued: 30, passStartedAt: T0 + 24 * HOUR });
    expect(w.cursor.row!.previous).toEqual({ pass: 1, startedAt: T0, endedAt: T0, ids: 30 });
    expectEveryIdOnce(w, ids, 2);
  });

  it('freshnessHours 0: the next pass starts at the next tick', async () => {
    const ids = idList(30);
    const w = world(ids);
    await tick(w, { freshnessHours: 0 });
    w.clock.advance(TICK);
    expect(await tick(w, { freshnessHours: 0 })).toMatchObject({ pass: 2, startedPass: true, enqueued: 30 });
  });

  it('a pass longer than freshnessHours is followed by the next one at once', async () => {
    const ids = idList(40);
    const w = world(ids);
    const reports: TickReport[] = [];
    for (let i = 0; i < 4; i += 1) {
      reports.push(await tick(w, { freshnessHours: 1, highWater: 10, segments: 1 }));
      w.queue.take();
      w.clock.advance(HOUR / 2);
    }
    expect(reports.map((report) => report.state)).toEqual(['running', 'running', 'running', 'running']);
    const ended = await tick(w, { freshnessHours: 1, highWater: 10, segments: 1 });
    expect(ended).toMatchObject({ state: 'ended', pass: 1 });
    expect(ended.passLengthSeconds).toBeGreaterThan(3600);
    w.clock.advance(TICK);
    expect(await tick(w, { freshnessHours: 1, highWater: 10, segments: 1 })).toMatchObject({ pass: 2, startedPass: true });
  });

  it('two ticks that find the pass due start it once', async () => {
    const w = world(idList(30));
    await tick(w, { freshnessHours: 0 });
    w.clock.advance(TICK);
    const reports = await Promise.all([tick(w, { freshnessHours: 0 }), tick(w, { freshnessHours: 0 })]);
    expect(reports.filter((report) => report.startedPass)).toHaveLength(1);
    expect(reports.every((report) => report.pass === 2)).toBe(true);
    expect(w.cursor.writes.filter((write) => write.kind === 'start').map((write) => write.result)).toEqual(['written', 'written', 'conflict']);
  });
});

describe('fan-out: segments spread over workers', () => {
  it('workers work on their own segments only, never conflict, and the last one ends the pass', async () => {
    const ids = idList(300);
    const w = world(ids);
    const reports = await Promise.all([0, 1, 2].map((worker) => tick(w, { workers: 3, worker, segments: 6 })));
    for (const [worker, report] of reports.entries()) {
      expect(report.state === 'running' || report.state === 'ended').toBe(true);
      const segments = new Set(w.ids.pages.filter((_, index) => index >= 0).map((page) => page.segment).filter((segment) => segment % 3 === worker));
      expect(segments).toEqual(new Set([worker, worker + 3]));
    }
    expect(w.cursor.writes.filter((write) => write.result === 'conflict' && write.kind === 'advance')).toEqual([]);
    for (const worker of [0, 1, 2]) {
      expect(w.cursor.writes.filter((write) => write.kind === 'advance' && write.segment! % 3 === worker).length).toBeGreaterThan(0);
    }
    // Whoever finished last saw every segment done and ended the pass.
    w.clock.advance(TICK);
    const after = await tick(w, { workers: 3, worker: 0, segments: 6 });
    expect(after.state === 'waiting' || after.state === 'ended').toBe(true);
    expect(w.cursor.row!.endedAt).toBeDefined();
    expectEveryIdOnce(w, ids);
  });

  it('refuses a worker outside 0 … workers − 1', async () => {
    const w = world([]);
    await expect(tick(w, { workers: 2, worker: 2 })).rejects.toThrow(RangeError);
    await expect(tick(w, { workers: 0, worker: 0 })).rejects.toThrow(RangeError);
  });
});

describe('ids SQS refuses', () => {
  it('are passed over, logged and counted; the pass goes on', async () => {
    const ids = idList(50);
    const w = world(ids);
    w.queue.refuse.add(ids[7]!);
    const report = await tick(w);
    expect(report).toMatchObject({ state: 'ended', enqueued: 49, refused: 1, passIds: 49 });
    expect(w.queue.counts().has(ids[7]!)).toBe(false);
    expect(w.log.lines.filter((line) => line.level === 'error')).toEqual([
      expect.objectContaining({
        message: 'the reconcile queue refused an id; it is passed over in this pass',
        attributes: expect.objectContaining({ connection: 'default', id: ids[7], pass: 1 }),
      }),
    ]);
  });
});

describe('every connection', () => {
  it('a pass sends every item of every connection once, the same id of two connections twice, each with its connection', async () => {
    const items = [
      ...idList(30).map((id) => ({ connection: 'acme', id })),
      ...idList(25).map((id) => ({ connection: 'globex', id })),
      ...idList(5),
    ];
    const w = world(items);
    const report = await untilEnded(w);

    expect(report.at(-1)).toMatchObject({ state: 'ended', passIds: 60 });
    expectEveryIdOnce(w, items.map(label));
    expect(w.queue.counts().get('acme/id-00000')).toBe(1);
    expect(w.queue.counts().get('globex/id-00000')).toBe(1);
    expect(w.queue.counts().get('id-00000')).toBe(1);
    // The cursor keeps the whole key: each page starts after the key (connection and id) the one before ended on.
    const after = w.ids.pages.flatMap((page) => (page.after ? [page.after] : []));
    expect(after.length).toBeGreaterThan(0);
    expect(after.every((key) => typeof key.connection === 'string' && typeof key.id === 'string')).toBe(true);
  });
});

describe('the projection', () => {
  it('W = ids known ÷ (ids taken off the queue ÷ pass age), after a warm-up', async () => {
    const w = world(idList(1_000));
    w.ids.count = 5_000;
    const first = await tick(w, { highWater: 100 });
    expect(first).toMatchObject({ state: 'running', enqueued: 100, passAgeSeconds: 5, idsKnown: 5_000 });
    expect(first.projectedPassSeconds).toBeUndefined(); // warm-up

    w.queue.take(60);
    w.clock.ms = T0 + 20 * 60_000;
    const second = await tick(w, { highWater: 100 });
    // 160 sent, 100 still queued: 60 taken in 1,205 s; 5,000 ids at that rate.
    expect(second).toMatchObject({ enqueued: 60, passIds: 160, backlog: 100, passAgeSeconds: 1205, idsKnown: 5_000 });
    expect(second.projectedPassSeconds).toBe(Math.round((5_000 / (60 / 1205)) * 10) / 10);
  });

  it('counts the ids sent when the table count is lower (or unknown), and the last pass when it is higher', async () => {
    const ids = idList(40);
    const w = world(ids);
    w.ids.count = 0; // a new table: DynamoDB has not counted yet
    expect((await tick(w, { freshnessHours: 0 })).idsKnown).toBe(40);
    w.ids.count = undefined;
    w.clock.advance(TICK);
    w.ids.keys = ids.slice(0, 10).map(keyOf);
    const second = await tick(w, { freshnessHours: 0 });
    expect(second).toMatchObject({ pass: 2, passIds: 10, idsKnown: 40 });
  });

  it('a sync that takes nothing projects a pass that never ends', async () => {
    const w = world(idList(1_000));
    await tick(w, { highWater: 100 });
    w.clock.ms = T0 + HOUR;
    const report = await tick(w, { highWater: 100 });
    expect(report.backlog).toBe(100);
    // At most one id taken in an hour (and a few seconds): 1,000 ids take over a thousand hours.
    expect(report.projectedPassSeconds!).toBeGreaterThan(1_000 * 3600);
  });

  it('a backfill on the queue (a backlog above the high-water mark): the tick sends nothing and projects nothing, then goes on', async () => {
    const w = world(idList(1_000));
    w.ids.count = 5_000;
    await tick(w, { highWater: 100 });
    w.queue.take(100);
    w.queue.others = 5_000; // npm run enqueue -- --backfill: the sweep's lane, not this pass's ids
    w.clock.ms = T0 + 20 * 60_000;
    const during = await tick(w, { highWater: 100 });
    expect(during).toMatchObject({ state: 'running', enqueued: 0, passIds: 100, backlog: 5_000 });
    // sent − backlog would say the sync took nothing of the pass: no W rather than a wrong one.
    expect(during.projectedPassSeconds).toBeUndefined();

    w.queue.others = 0; // the backfill is done
    w.clock.ms = T0 + 30 * 60_000;
    const after = await tick(w, { highWater: 100 });
    expect(after).toMatchObject({ state: 'running', enqueued: 100, passIds: 200, backlog: 100 });
    expect(after.projectedPassSeconds).toBe(Math.round((5_000 / (100 / 1805)) * 10) / 10);
  });

  it('once the pass ended: its length, published as the pass length by the tick that ended it only', async () => {
    // 45 ids in pages of 10: a tick sends 20, the sync takes them, …; the fifth page (5 ids) is the last.
    const ids = idList(45);
    const w = world(ids);
    await tick(w, { highWater: 20, segments: 1 });
    w.queue.take();
    w.clock.advance(TICK);
    expect((await tick(w, { highWater: 20, segments: 1 })).state).toBe('running');
    w.queue.take();
    w.clock.ms = T0 + 30 * 60_000;
    const ended = await tick(w, { highWater: 20, segments: 1 });
    expect(ended).toMatchObject({ state: 'ended', passLengthSeconds: 1800, projectedPassSeconds: 1800 });
    w.clock.advance(TICK);
    const waiting = await tick(w, { highWater: 20, segments: 1 });
    expect(waiting).toMatchObject({ state: 'waiting', projectedPassSeconds: 1800 });
    expect(waiting.passLengthSeconds).toBeUndefined();
  });
});

describe('newPass', () => {
  it('puts every segment at its start', () => {
    expect(newPass(3, T0, 2, { pass: 2, startedAt: 1, endedAt: 2, ids: 5 })).toEqual({
      pass: 3,
      startedAt: T0,
      segments: [
        { done: false, version: 0, ids: 0 },
        { done: false, version: 0, ids: 0 },
      ],
      previous: { pass: 2, startedAt: 1, endedAt: 2, ids: 5 },
    });
  });
});
