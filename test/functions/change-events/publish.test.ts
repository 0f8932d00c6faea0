/**
 * A stream batch through the core with a scripted publisher: the calls made (order, size, one event
 * per id a call), what is handed back after a refused event, an unmappable record or the deadline,
 * and the counts.
 */
import { describe, expect, it } from 'vitest';
import { isLifecycleEvent } from '../../../functions/change-events/lifecycle.js';
import type { BusEvent, ChangeEvent, EventPublisher, PublishOutcome } from '../../../functions/change-events/ports.js';
import { announceBatch, entryBytes, MAX_CALL_BYTES, MAX_EVENTS_PER_CALL } from '../../../functions/change-events/publish.js';
import { eventRouter } from '../../../functions/change-events/sources.js';
import type { Log } from '../../../functions/shared/ports.js';
import { CONNECTIONS_TABLE, connectionRecord, connectionRow, live, record, tombstone, type ConnectionRow } from './helpers.js';

/** Records each call; refuses the events `refuse` says (by call number from 1 and id). */
class ScriptedPublisher implements EventPublisher {
  readonly calls: ChangeEvent[][] = [];
  constructor(private readonly refuse: (call: number, event: ChangeEvent) => string | undefined = () => undefined) {}

  async publish(events: readonly ChangeEvent[]): Promise<PublishOutcome[]> {
    this.calls.push([...events]);
    const call = this.calls.length;
    return events.map((event) => {
      const error = this.refuse(call, event);
      return error === undefined ? { published: true } : { published: false, error };
    });
  }

  /** Each call as `detailType id revision` strings. */
  summary(): string[][] {
    return this.calls.map((call) => call.map((event) => `${event.detailType} ${event.detail.id} ${event.detail.revision}`));
  }
}

class MemoryLog implements Log {
  readonly lines: Array<{ level: string; message: string; attributes: Record<string, unknown> }> = [];
  debug(message: string, ...a: Record<string, unknown>[]) { this.lines.push({ level: 'debug', message, attributes: Object.assign({}, ...a) }); }
  info(message: string, ...a: Record<string, unknown>[]) { this.lines.push({ level: 'info', message, attributes: Object.assign({}, ...a) }); }
  warn(message: string, ...a: Record<string, unknown>[]) { this.lines.push({ level: 'warn', message, attributes: Object.assign({}, ...a) }); }
  error(message: string, ...a: Record<string, unknown>[]) { this.lines.push({ level: 'error', message, attributes: Object.assign({}, ...a) }); }
}

const T0 = '2026-11-21T10:00:00.000Z';
const T1 = '2026-11-21T10:05:00.000Z';

function deps(publisher: EventPublisher, log = new MemoryLog(), now = () => 0, deadline = 1_000) {
  return { publisher, log, now, deadline };
}

const seq = (n: number) => `${n}`.padStart(21, '0');

describe('announceBatch', () => {
  it('an empty batch makes no call and hands nothing back', async () => {
    const publisher = new ScriptedPublisher();
    expect(await announceBatch([], deps(publisher))).toEqual({ counts: { published: 0, lifecycle: 0, failed: 0, ignored: 0, retried: 0 }, done: 0, failures: [] });
    expect(publisher.calls).toEqual([]);
  });

  it('publishes every real change in stream order, skips the records that announce nothing', async () => {
    const publisher = new ScriptedPublisher();
    const records = [
      record(undefined, live('a', '1', T0)),
      record(live('b', '1', T0), live('b', '1', T1)), // same revision: nothing
      record(live('c', '1', T0), live('c', '2', T1)),
      record(live('d', '1', T0), undefined), // REMOVE: nothing
      record(live('e', '1', T0), tombstone(live('e', '1'), T1)),
      record(tombstone(live('f', '1'), T0), live('f', '1', T1)),
    ];
    const report = await announceBatch(records, deps(publisher));
    expect(publisher.summary()).toEqual([['ItemCreated a 1', 'ItemUpdated c 2', 'ItemDeleted e 1', 'ItemRestored f 1']]);
    expect(report).toEqual({ counts: { published: 4, lifecycle: 0, failed: 0, ignored: 2, retried: 0 }, done: 6, failures: [] });
  });

  it(`at most ${MAX_EVENTS_PER_CALL} events a call`, async () => {
    const publisher = new ScriptedPublisher();
    const records = Array.from({ length: 23 }, (_, i) => record(undefined, live(`id-${i}`, '1', T0)));
    const report = await announceBatch(records, deps(publisher));
    expect(publisher.calls.map((call) => call.length)).toEqual([10, 10, 3]);
    expect(publisher.calls.flat().map((event) => event.detail.id)).toEqual(records.map((_, i) => `id-${i}`));
    expect(report.counts.published).toBe(23);
  });

  it('never two events of one id in a call: the later change waits for the earlier one to be accepted', async () => {
    const publisher = new ScriptedPublisher();
    const records = [
      record(undefined, live('a', '1', T0)),
      record(undefined, live('b', '1', T0)),
      record(live('a', '1', T0), live('a', '2', T1)),
      record(undefined, live('c', '1', T0)),
      record(live('a', '2', T1), tombstone(live('a', '2'), T1)),
    ];
    await announceBatch(records, deps(publisher));
    expect(publisher.summary()).toEqual([
      ['ItemCreated a 1', 'ItemCreated b 1'],
      ['ItemUpdated a 2', 'ItemCreated c 1'],
      ['ItemDeleted a 2'],
    ]);
  });

  it(`a call stays within ${MAX_CALL_BYTES} bytes of entries`, async () => {
    const publisher = new ScriptedPublisher();
    // Ids at the 1,024-byte limit and long revisions: about 60 KB an event.
    const records = Array.from({ length: 6 }, (_, i) => record(undefined, live(`${i}`.padEnd(1024, 'x'), 'r'.repeat(60_000), T0)));
    await announceBatch(records, deps(publisher));
    expect(publisher.calls.map((call) => call.length)).toEqual([4, 2]);
    for (const call of publisher.calls) {
      expect(call.reduce((sum, event) => sum + entryBytes(event), 0)).toBeLessThanOrEqual(MAX_CALL_BYTES);
    }
  });

  it('entryBytes: Source, DetailType and the Detail JSON in UTF-8 bytes', () => {
    const event: ChangeEvent = { detailType: 'ItemCreated', detail: { connection: 'default', id: 'é', type: 'file', revision: '1', previousRevision: null, syncedAt: T0 } };
    expect(entryBytes(event)).toBe('content-sync'.length + 'ItemCreated'.length + Buffer.byteLength(JSON.stringify(event.detail)));
    expect(Buffer.byteLength(JSON.stringify(event.detail))).toBe(JSON.stringify(event.detail).length + 1);
  });

  it('a refused event: no later call; it and every record after it are handed back, the first by its sequence number', async () => {
    const publisher = new ScriptedPublisher((_call, event) => (event.detail.id === 'c' ? 'ThrottlingException: Rate exceeded' : undefined));
    const log = new MemoryLog();
    const records = Array.from({ length: 14 }, (_, i) => record(undefined, live(String.fromCharCode(97 + i), '1', T0), { sequenceNumber: seq(i + 1) }));
    const report = await announceBatch(records, deps(publisher, log));
    // One call of ten: a, b, d.. j were accepted, c was refused; k.. n never sent.
    expect(publisher.calls).toHaveLength(1);
    expect(report.failures).toEqual(records.slice(2).map((_, i) => seq(i + 3)));
    expect(report.counts).toEqual({ published: 9, lifecycle: 0, failed: 1, ignored: 0, retried: 12 });
    expect(log.lines.filter((line) => line.level === 'error')).toEqual([
      {
        level: 'error',
        message: 'change event not published: the record is handed back',
        attributes: { connection: 'default', id: 'c', detailType: 'ItemCreated', sequenceNumber: seq(3), error: 'ThrottlingException: Rate exceeded' },
      },
    ]);
  });

  it('the same id of two connections is two items: their events may share a call', async () => {
    const publisher = new ScriptedPublisher();
    const records = [
      record(undefined, live('same', '1', T0, { connection: 'acme' })),
      record(undefined, live('same', '1', T0, { connection: 'globex' })),
      record(live('same', '1', T0, { connection: 'acme' }), live('same', '2', T1, { connection: 'acme' })),
    ];
    await announceBatch(records, deps(publisher));
    expect(publisher.calls.map((call) => call.map((event) => `${event.detail.connection} ${event.detailType} ${event.detail.revision}`))).toEqual([
      ['acme ItemCreated 1', 'globex ItemCreated 1'],
      ['acme ItemUpdated 2'],
    ]);
  });

  it('a refused event of an id whose next change waits: that change is not sent', async () => {
    const publisher = new ScriptedPublisher((call) => (call === 1 ? 'InternalFailure' : undefined));
    const records = [record(undefined, live('a', '1', T0), { sequenceNumber: seq(1) }), record(live('a', '1', T0), live('a', '2', T1), { sequenceNumber: seq(2) })];
    const report = await announceBatch(records, deps(publisher));
    expect(publisher.summary()).toEqual([['ItemCreated a 1']]);
    expect(report.failures).toEqual([seq(1), seq(2)]);
  });

  it('a missing outcome counts as refused', async () => {
    const publisher: EventPublisher = { publish: async () => [] };
    const report = await announceBatch([record(undefined, live('a', '1', T0), { sequenceNumber: seq(7) })], deps(publisher));
    expect(report).toEqual({ counts: { published: 0, lifecycle: 0, failed: 1, ignored: 0, retried: 1 }, done: 0, failures: [seq(7)] });
  });

  it('a record that cannot be mapped: the records before it are announced, it and the rest handed back', async () => {
    const publisher = new ScriptedPublisher();
    const log = new MemoryLog();
    const records = [
      record(undefined, live('a', '1', T0), { sequenceNumber: seq(1) }),
      record(live('x', '1', T0), live('x', '1', T1), { sequenceNumber: seq(2) }),
      record(undefined, { connection: 'default', id: 'bad', type: 'file', syncedAt: T0 }, { sequenceNumber: seq(3), eventID: 'ev-bad' }),
      record(undefined, live('b', '1', T0), { sequenceNumber: seq(4) }),
    ];
    const report = await announceBatch(records, deps(publisher, log));
    expect(publisher.summary()).toEqual([['ItemCreated a 1']]);
    expect(report).toEqual({ counts: { published: 1, lifecycle: 0, failed: 0, ignored: 1, retried: 2 }, done: 2, failures: [seq(3), seq(4)] });
    expect(log.lines.find((line) => line.level === 'error')).toEqual({
      level: 'error',
      message: 'stream record cannot be mapped to a change event: it and the records after it are handed back',
      attributes: { eventID: 'ev-bad', eventName: 'INSERT', sequenceNumber: seq(3), error: 'row "bad" of connection "default" has no text attribute "revision"' },
    });
  });

  it('out of time: no call starts at the deadline; the records not yet sent are handed back', async () => {
    let now = 0;
    const publisher: EventPublisher & { calls: number } = {
      calls: 0,
      async publish(events) {
        this.calls += 1;
        now += 600; // each call takes 600 ms
        return events.map(() => ({ published: true as const }));
      },
    };
    const records = Array.from({ length: 25 }, (_, i) => record(undefined, live(`id-${i}`, '1', T0), { sequenceNumber: seq(i + 1) }));
    const log = new MemoryLog();
    const report = await announceBatch(records, deps(publisher, log, () => now, 1_000));
    expect(publisher.calls).toBe(2);
    expect(report.counts).toEqual({ published: 20, lifecycle: 0, failed: 0, ignored: 0, retried: 5 });
    expect(report.failures).toEqual(records.slice(20).map((_, i) => seq(i + 21)));
    expect(log.lines.find((line) => line.level === 'warn')?.message).toBe('out of time: the rest of the batch is handed back');
  });
});

describe('announceBatch with lifecycle events (the connections table’s stream, routed by eventOf)', () => {
  /** Records each call of item changes and lifecycle events alike; refuses the events `refuse` says. */
  class BusPublisher implements EventPublisher {
    readonly calls: BusEvent[][] = [];
    constructor(private readonly refuse: (event: BusEvent) => string | undefined = () => undefined) {}

    async publish(events: readonly BusEvent[]): Promise<PublishOutcome[]> {
      this.calls.push([...events]);
      return events.map((event) => {
        const error = this.refuse(event);
        return error === undefined ? { published: true } : { published: false, error };
      });
    }

    /** Each call as `detailType connection` (lifecycle) or `detailType connection/id` (items) strings. */
    summary(): string[][] {
      return this.calls.map((call) =>
        call.map((event) => (isLifecycleEvent(event) ? `${event.detailType} ${event.detail.connection}` : `${event.detailType} ${event.detail.connection}/${event.detail.id}`)),
      );
    }
  }

  const eventOf = eventRouter({ connectionsTable: CONNECTIONS_TABLE, now: () => 0 });
  const lifecycleDeps = (publisher: EventPublisher, log = new MemoryLog()) => ({ ...deps(publisher, log), eventOf });
  const change = (row: ConnectionRow, status: string): ConnectionRow => ({ ...row, status, updatedAt: T1 });
  const acme = connectionRow('acme', 'active');
  const globex = connectionRow('globex', 'active');

  it('one connection’s lifecycle events never share a call; an item’s event and its connection’s may; counted in `lifecycle`', async () => {
    const publisher = new BusPublisher();
    const records = [
      connectionRecord(acme, change(acme, 'paused')),
      connectionRecord(globex, change(globex, 'paused')),
      record(undefined, live('f1', '1', T0, { connection: 'acme' })),
      connectionRecord(change(acme, 'paused'), change(acme, 'active')),
      connectionRecord(globex, { ...globex, leaseOwner: 'refresher-1', leaseUntil: 5 }),
      connectionRecord(acme, undefined),
    ];
    const report = await announceBatch(records, lifecycleDeps(publisher));
    expect(publisher.summary()).toEqual([
      ['ConnectionPaused acme', 'ConnectionPaused globex', 'ItemCreated acme/f1'],
      ['ConnectionResumed acme'],
    ]);
    expect(report).toEqual({ counts: { published: 4, lifecycle: 3, failed: 0, ignored: 2, retried: 0 }, done: 6, failures: [] });
  });

  it('a refused lifecycle event: as an item’s, it and every record after it are handed back, logged without an id', async () => {
    const publisher = new BusPublisher((event) => (event.detail.connection === 'globex' ? 'InternalFailure: Internal failure' : undefined));
    const log = new MemoryLog();
    const records = [
      connectionRecord(acme, change(acme, 'paused'), { sequenceNumber: seq(1) }),
      connectionRecord(globex, change(globex, 'removed'), { sequenceNumber: seq(2) }),
      connectionRecord(acme, change(acme, 'failing'), { sequenceNumber: seq(3) }),
    ];
    const report = await announceBatch(records, lifecycleDeps(publisher, log));
    expect(publisher.summary()).toEqual([['ConnectionPaused acme', 'ConnectionRemoved globex']]);
    expect(report).toEqual({ counts: { published: 1, lifecycle: 1, failed: 1, ignored: 0, retried: 2 }, done: 1, failures: [seq(2), seq(3)] });
    expect(log.lines.filter((line) => line.level === 'error')).toEqual([
      {
        level: 'error',
        message: 'change event not published: the record is handed back',
        attributes: { connection: 'globex', detailType: 'ConnectionRemoved', sequenceNumber: seq(2), error: 'InternalFailure: Internal failure' },
      },
    ]);
  });

  it('a lifecycle record that cannot be mapped: the records before it are announced, it and the rest handed back', async () => {
    const publisher = new BusPublisher();
    const log = new MemoryLog();
    const broken = connectionRecord(acme, change(acme, 'paused'), { sequenceNumber: seq(2), eventID: 'ev-broken' });
    delete broken.dynamodb!.OldImage;
    const records = [connectionRecord(globex, change(globex, 'paused'), { sequenceNumber: seq(1) }), broken, connectionRecord(acme, change(acme, 'removed'), { sequenceNumber: seq(3) })];
    const report = await announceBatch(records, lifecycleDeps(publisher, log));
    expect(publisher.summary()).toEqual([['ConnectionPaused globex']]);
    expect(report).toEqual({ counts: { published: 1, lifecycle: 1, failed: 0, ignored: 0, retried: 2 }, done: 1, failures: [seq(2), seq(3)] });
    expect(log.lines.find((line) => line.level === 'error')).toEqual({
      level: 'error',
      message: 'stream record cannot be mapped to a change event: it and the records after it are handed back',
      attributes: {
        eventID: 'ev-broken',
        eventName: 'MODIFY',
        sequenceNumber: seq(2),
        error: 'MODIFY record of the row of connection "acme" without an old image (the stream must be NEW_AND_OLD_IMAGES)',
      },
    });
  });

  it('entryBytes counts a lifecycle event as an item’s: Source, DetailType and the Detail JSON', () => {
    const event: BusEvent = { detailType: 'ConnectionFailing', detail: { connection: 'acme', status: 'failing', previousStatus: 'active', reason: 'é', at: T1 } };
    expect(entryBytes(event)).toBe('content-sync'.length + 'ConnectionFailing'.length + JSON.stringify(event.detail).length + 1);
  });
});
