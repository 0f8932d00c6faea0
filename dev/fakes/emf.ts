/** Reading the functions' CloudWatch embedded metric format (EMF) lines back out of captured output. */

/** The EMF lines (JSON objects with `_aws`) of the output, parsed; any other line skipped. */
function* emfLines(output: string): Generator<Record<string, unknown>> {
  for (const line of output.split('\n')) {
    if (!line.includes('"_aws"')) continue;
    try {
      yield JSON.parse(line) as Record<string, unknown>;
    } catch {
      continue;
    }
  }
}

/** Sums every metric of the EMF lines (JSON objects with `_aws`) in the output, by metric name. */
export function sumEmfMetrics(output: string): Record<string, number> {
  const sums: Record<string, number> = {};
  for (const parsed of emfLines(output)) {
    const aws = parsed['_aws'] as { CloudWatchMetrics?: Array<{ Metrics?: Array<{ Name: string }> }> } | undefined;
    for (const directive of aws?.CloudWatchMetrics ?? []) {
      for (const metric of directive.Metrics ?? []) {
        const value = parsed[metric.Name];
        const total = Array.isArray(value) ? value.reduce((sum: number, v) => sum + Number(v), 0) : Number(value);
        if (Number.isFinite(total)) sums[metric.Name] = (sums[metric.Name] ?? 0) + total;
      }
    }
  }
  return sums;
}

/**
 * The distinct dimension sets of the EMF lines in the output, in the order first seen, each as
 * `<namespace>: <name>=<value>, ...` (the names in the order the line lists them), e.g.
 * `ContentSync: service=reconciler, stage=staging`.
 */
export function emfDimensionSets(output: string): string[] {
  const sets = new Set<string>();
  for (const parsed of emfLines(output)) {
    const aws = parsed['_aws'] as { CloudWatchMetrics?: Array<{ Namespace?: string; Dimensions?: string[][] }> } | undefined;
    for (const directive of aws?.CloudWatchMetrics ?? []) {
      for (const names of directive.Dimensions ?? []) {
        sets.add(`${directive.Namespace}: ${names.map((name) => `${name}=${String(parsed[name])}`).join(', ')}`);
      }
    }
  }
  return [...sets];
}
