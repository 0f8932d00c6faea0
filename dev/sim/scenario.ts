/** What a simulation scenario gives back: its figures and its checks against the goals. */

export interface Check {
  what: string;
  value: string;
  ok: boolean;
  /** A goal judged at full scale only: a short run reports it without failing on it. */
  fullScaleOnly?: boolean;
}

export interface ScenarioResult {
  name: string;
  /** Virtual duration simulated. */
  virtualMs: number;
  /** Real time it took. */
  realMs: number;
  figures: Record<string, number | string>;
  checks: Check[];
}

export function check(what: string, value: number | string, ok: boolean, options: { fullScaleOnly?: boolean } = {}): Check {
  return { what, value: String(value), ok, ...(options.fullScaleOnly ? { fullScaleOnly: true } : {}) };
}

/** Whether a run fails on this check: every check at full scale; a short run passes over the full-scale-only goals. */
export function judged(check: Check, short: boolean): boolean {
  return !(short && check.fullScaleOnly === true);
}

export async function timed(name: string, fn: () => Promise<Omit<ScenarioResult, 'name' | 'realMs'>>): Promise<ScenarioResult> {
  const started = Date.now();
  const result = await fn();
  return { name, ...result, realMs: Date.now() - started };
}

/** Nearest-rank percentile; 0 for no values. */
export function percentile(values: Float64Array, p: number): number {
  if (values.length === 0) return 0;
  const sorted = Float64Array.from(values).sort();
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!;
}

export function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

