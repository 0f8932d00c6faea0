/** Plain text tables for the CLIs. */

/** First column left-aligned, the others right-aligned, two spaces between columns. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const fmt = (cells: string[]): string =>
    cells
      .map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [fmt(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(fmt)].join('\n');
}

/** 12,345 */
export const n = (value: number): string => value.toLocaleString('en-US');

/** What the DynamoDB figures include: AWS's latency as modelled, scaled, or none. */
export function dynamoLatencyLabel(factor: number): string {
  if (factor === 0) return 'no latency injected';
  return `AWS's latency injected${factor === 1 ? '' : ` × ${factor}`} (dev/fakes/dynamo-latency.ts)`;
}
