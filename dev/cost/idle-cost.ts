/**
 * What a deployment costs a month with no traffic: no connection, no id sent, an empty items table.
 * The command (`npm run cost:idle`) and the table it prints: the month's lines from both stacks'
 * synthesized templates (cdk.json's context, with any `-c key=value` on top) at the prices of
 * dev/cost/prices.ts, for a 30-day month. The lines are priced in idle-lines.ts (every resource
 * type of the templates priced or named free when idle, with why), from the idle runs and the
 * assumptions of idle-runs.ts. docs/cost.md quotes the table and the total.
 *
 *   npx tsx dev/cost/idle-cost.ts [-c key=value ...]
 */
import { runWhenMain } from '../../tools/cli-main.js';
import { synthesizeTemplates } from '../synth.js';
import { formatTotal, idleCost, idleTotal, type IdleLine } from './idle-lines.js';
import { IDLE_ASSUMPTIONS } from './idle-runs.js';
import { IDLE_PRICES_AS_OF, PRICES_AS_OF, PRICES_REGION } from './prices.js';

/** The lines and the total as a Markdown table (what docs/cost.md holds). */
export function idleTable(lines: readonly IdleLine[]): string {
  const rows = lines.map((line) =>
    [line.service, line.what, String(line.resources), `${quantity(line.quantity)} ${line.quantity === 1 ? singular(line.unit) : line.unit}`, `${price(line.price)} per ${line.per}`, line.usd.toFixed(4)].join(' | '),
  );
  return [
    '| service | what | resources | a month | price (USD) | USD |',
    '|---|---|---:|---:|---|---:|',
    ...rows.map((row) => `| ${row} |`),
    `| **total** | | | | | **${formatTotal(idleTotal(lines)).slice(1)}** |`,
  ].join('\n');
}

/** A quantity as the table shows it: whole numbers grouped, small ones to four significant digits. */
function quantity(value: number): string {
  if (Number.isInteger(value)) return value.toLocaleString('en-US');
  if (value >= 100) return Math.round(value).toLocaleString('en-US');
  return Number(value.toPrecision(4)).toString();
}

/** A price with at least two decimals (0.10, 3.00) and all it has (0.0000133334). */
function price(value: number): string {
  const decimals = (String(value).split('.')[1] ?? '').length;
  return value.toFixed(Math.max(2, decimals));
}

/** `key-months` of one: `key-month`. */
function singular(unit: string): string {
  return unit.endsWith('-months') ? unit.slice(0, -1) : unit;
}

/** `-c key=value` (or `--context key=value`) pairs as context overrides. */
export function contextArgs(argv: readonly string[]): Record<string, string> {
  const overrides: Record<string, string> = {};
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i]!;
    if (arg !== '-c' && arg !== '--context') throw new Error(`unknown argument ${arg}: give context values as -c key=value`);
    const pair = argv[i + 1] ?? '';
    const at = pair.indexOf('=');
    if (at <= 0) throw new Error(`${arg} needs key=value, got "${pair}"`);
    overrides[pair.slice(0, at)] = pair.slice(at + 1);
    i += 1;
  }
  return overrides;
}

async function main(argv: string[]): Promise<number> {
  const overrides = contextArgs(argv);
  const lines = idleCost(synthesizeTemplates(overrides));
  const given = Object.entries(overrides).map(([key, value]) => `-c ${key}=${value}`).join(' ');
  process.stdout.write(
    [
      `A deployment with no traffic, a ${IDLE_ASSUMPTIONS.days}-day month (cdk.json's context${given ? `, ${given}` : ''}), ` +
        `at AWS's public ${PRICES_REGION} prices as of ${PRICES_AS_OF} (CloudWatch alarms, dashboard, metrics and Logs storage: ${IDLE_PRICES_AS_OF}), free tiers left out:`,
      '',
      idleTable(lines),
      '',
      `total: ${formatTotal(idleTotal(lines))} a month`,
      '',
    ].join('\n'),
  );
  return 0;
}

runWhenMain(import.meta.url, 'idle-cost', main);
