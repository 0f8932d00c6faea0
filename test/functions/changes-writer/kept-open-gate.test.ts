/**
 * The changes writer's batch gate (functions/changes-writer/kept-open-gate.ts): a connection found
 * open is taken as open for CHANGES_WRITER_OPEN_KEPT_MS, one found closed is read each time, and the
 * container keeps at most its limit of connections.
 */
import { describe, expect, it } from 'vitest';
import { KeptOpenGate } from '../../../functions/changes-writer/kept-open-gate.js';
import { CHANGES_WRITER_OPEN_KEPT_MS } from '../../../functions/changes-writer/limits.js';
import type { ConnectionGate } from '../../../functions/changes-writer/ports.js';

function counting(states: Record<string, boolean>): ConnectionGate & { reads: string[] } {
  const reads: string[] = [];
  return {
    reads,
    open: async (connection) => {
      reads.push(connection);
      return states[connection] ?? false;
    },
  };
}

describe('the batch gate', () => {
  it('takes a connection found open as open for CHANGES_WRITER_OPEN_KEPT_MS, then reads it again', async () => {
    let now = 1_000_000;
    const inner = counting({ acme: true });
    const gate = new KeptOpenGate(inner, () => now, CHANGES_WRITER_OPEN_KEPT_MS);
    expect(await gate.open('acme')).toBe(true);
    now += CHANGES_WRITER_OPEN_KEPT_MS - 1;
    expect(await gate.open('acme')).toBe(true);
    expect(inner.reads).toEqual(['acme']);
    now += 1;
    expect(await gate.open('acme')).toBe(true);
    expect(inner.reads).toEqual(['acme', 'acme']);
  });

  it('reads a connection found closed each time, and keeps it open from the read that finds it open again', async () => {
    let now = 0;
    const states: Record<string, boolean> = { leaving: true };
    const inner = counting(states);
    const gate = new KeptOpenGate(inner, () => now, CHANGES_WRITER_OPEN_KEPT_MS);
    expect(await gate.open('leaving')).toBe(true);
    // Its erase runs: the next read once the kept time has passed finds it closed, and so does each after.
    states['leaving'] = false;
    now += CHANGES_WRITER_OPEN_KEPT_MS;
    expect(await gate.open('leaving')).toBe(false);
    expect(await gate.open('leaving')).toBe(false);
    expect(inner.reads).toHaveLength(3);
    // Put again: open at the next read, then kept.
    states['leaving'] = true;
    expect(await gate.open('leaving')).toBe(true);
    expect(await gate.open('leaving')).toBe(true);
    expect(inner.reads).toHaveLength(4);
    // A connection with no row is closed, never kept.
    expect(await gate.open('nobody')).toBe(false);
    expect(await gate.open('nobody')).toBe(false);
    expect(inner.reads.filter((c) => c === 'nobody')).toHaveLength(2);
  });

  it('keeps at most its limit of connections, the one stored longest ago dropped first', async () => {
    const inner = counting({ a: true, b: true, c: true });
    const gate = new KeptOpenGate(inner, () => 0, CHANGES_WRITER_OPEN_KEPT_MS, 2);
    for (const connection of ['a', 'b', 'c', 'b', 'c', 'a']) await gate.open(connection);
    // a, b, c read; b and c kept; a dropped with c's read, so read again.
    expect(inner.reads).toEqual(['a', 'b', 'c', 'a']);
  });
});
