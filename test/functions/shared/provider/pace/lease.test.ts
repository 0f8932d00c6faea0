/** A container's side of its leases: spending a lease's tokens, and the demand that bounds a draw. */
import { describe, expect, it } from 'vitest';
import { PaceDemand, spend, type Lease } from '../../../../../functions/shared/provider/pace/lease.js';

describe('spend', () => {
  it('gives a token when it is due, then waits for the next; nothing once spent or expired', () => {
    const lease: Lease = { tokens: 2, nextAt: 100, intervalMs: 10, expiresAt: 500 };
    expect(spend(lease, 90)).toEqual({ kind: 'wait', until: 100, why: 'pace' });
    expect(spend(lease, 100)).toEqual({ kind: 'go', probe: false });
    expect(spend(lease, 105)).toEqual({ kind: 'wait', until: 110, why: 'pace' });
    expect(spend(lease, 130)).toEqual({ kind: 'go', probe: false });
    expect(spend(lease, 200)).toBeUndefined();
    expect(spend({ tokens: 5, nextAt: 0, intervalMs: 0, expiresAt: 500 }, 500)).toBeUndefined();
  });
});

describe('PaceDemand', () => {
  it('wants without bound until a claim, then what the claims still want (at least one)', () => {
    const demand = new PaceDemand();
    expect(demand.wanted()).toBe(Number.POSITIVE_INFINITY);
    const first = demand.claim(2);
    const second = demand.claim(3);
    expect(demand.wanted()).toBe(5);
    demand.granted();
    demand.granted();
    demand.granted();
    expect(demand.wanted()).toBe(2);
    first();
    expect(demand.wanted()).toBe(2);
    demand.granted();
    demand.granted();
    expect(demand.wanted()).toBe(1);
    second();
    expect(demand.wanted()).toBe(Number.POSITIVE_INFINITY);
  });
});
