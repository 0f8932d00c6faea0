/** Median, minimum and maximum of a set of runs. */
export interface Summary {
  median: number;
  min: number;
  max: number;
  runs: number;
  values: number[];
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function summarize(values: readonly number[]): Summary {
  return {
    median: median(values),
    min: values.length ? Math.min(...values) : Number.NaN,
    max: values.length ? Math.max(...values) : Number.NaN,
    runs: values.length,
    values: values.map((v) => Math.round(v * 100) / 100),
  };
}

/** `123 [118–131]` with the given number of decimals. */
export function formatSummary(summary: Summary, decimals = 0, unit = ''): string {
  const f = (v: number): string => v.toFixed(decimals);
  return `${f(summary.median)}${unit} [${f(summary.min)}–${f(summary.max)}]`;
}

/** `value` rounded to `decimals` decimals. */
export function round(value: number, decimals: number): number {
  const f = 10 ** decimals;
  return Math.round(value * f) / f;
}
