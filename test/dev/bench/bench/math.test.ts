/** The benchmark's arithmetic: the ideal time of a batch, the batching window, median/min/max. */
import { describe, expect, it } from 'vitest';
import { batchingWindowSeconds, idealMs } from '../../../../dev/bench/bench/measure.js';
import { formatSummary, median, summarize } from '../../../../dev/bench/support/stats.js';

const rtt = { batchGetItem: { '10': 2, '100': 6 }, putItem: 2, putItemWave: { '1': 2, '10': 15 } };

describe('idealMs', () => {
  it('is ⌈N/C⌉·L plus one BatchGetItem plus one wave of C PutItems per wave, for new and changed items', () => {
    expect(idealMs(10, 10, 50, 'new', rtt)).toEqual({
      total: 50 + 2 + 15,
      parts: { waves: 1, providerMs: 50, batchGetMs: 2, writeWaves: 1, putWaveMs: 15, putMs: 15 },
    });
    expect(idealMs(100, 10, 50, 'changed', rtt).total).toBe(10 * 50 + 6 + 10 * 15);
  });

  it('has no writes for unchanged items', () => {
    expect(idealMs(100, 10, 50, 'unchanged', rtt).total).toBe(10 * 50 + 6);
  });

  it('is N waves of one fetch and one PutItem when sequential (C = 1)', () => {
    expect(idealMs(10, 1, 50, 'new', rtt).total).toBe(10 * 50 + 2 + 10 * 2);
  });

  it('rounds the waves up and never uses more concurrency than records', () => {
    expect(idealMs(25, 10, 50, 'unchanged', { ...rtt, batchGetItem: { '25': 3 } }).parts.waves).toBe(3);
    expect(idealMs(5, 10, 50, 'unchanged', { ...rtt, batchGetItem: { '5': 1 } }).parts.waves).toBe(1);
  });
});

describe('batchingWindowSeconds', () => {
  it('is 0 up to 10 records and 1 s above (Lambda requires a window for batches over 10)', () => {
    expect(batchingWindowSeconds(10)).toBe(0);
    expect(batchingWindowSeconds(11)).toBe(1);
    expect(batchingWindowSeconds(100)).toBe(1);
  });
});

describe('stats', () => {
  it('gives the median, min and max of the runs', () => {
    expect(median([5, 1, 3])).toBe(3);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    const summary = summarize([120, 100, 140, 110, 400]);
    expect(summary).toMatchObject({ median: 120, min: 100, max: 400, runs: 5 });
    expect(formatSummary(summary)).toBe('120 [100–400]');
  });
});
