/**
 * Just enough Markdown for test/docs: the pages of README.md and docs/, their tables, links and
 * headings' anchors (GitHub's rules), and their text with line breaks folded, for the figures.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../infra/helpers.js';

/** README.md and every page of docs/, as paths relative to the repository. */
export const DOC_PAGES: readonly string[] = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)];

export function page(path: string): string {
  return readFileSync(join(ROOT, path), 'utf8');
}

/** The text with every run of white space (line breaks too) one space: a sentence reads as one line. */
export function flat(text: string): string {
  return text.replace(/\s+/g, ' ');
}

/** The text without its fenced code blocks (each line of one becomes empty: line numbers are kept). */
export function withoutCodeBlocks(text: string): string {
  let fenced = false;
  return text
    .split('\n')
    .map((line) => {
      if (/^\s*```/.test(line)) {
        fenced = !fenced;
        return '';
      }
      return fenced ? '' : line;
    })
    .join('\n');
}

/** From the heading whose text is `heading` to the next heading of its level or above. */
export function section(text: string, heading: string): string {
  const lines = withoutCodeBlocks(text).split('\n');
  const start = lines.findIndex((line) => /^#+ /.test(line) && line.replace(/^#+ /, '') === heading);
  if (start < 0) throw new Error(`no heading "${heading}"`);
  const level = /^#+/.exec(lines[start]!)![0].length;
  const end = lines.findIndex((line, i) => i > start && /^#+ /.test(line) && /^#+/.exec(line)![0].length <= level);
  return lines.slice(start, end < 0 ? undefined : end).join('\n');
}

export interface Table {
  header: string[];
  rows: string[][];
}

/** A table row's cells: `|` inside a code span or escaped (`\|`) belongs to its cell. */
function cells(line: string): string[] {
  const out: string[] = [];
  let cell = '';
  let code = false;
  for (let i = 0; i < line.length; i += 1) {
    const c = line[i]!;
    if (c === '\\' && line[i + 1] === '|') {
      cell += '|';
      i += 1;
    } else if (c === '`') {
      code = !code;
      cell += c;
    } else if (c === '|' && !code) {
      out.push(cell.trim());
      cell = '';
    } else cell += c;
  }
  out.push(cell.trim());
  // The leading and trailing pipes leave an empty cell at each end.
  return out.slice(1, -1);
}

/** Every table of the text (outside code blocks), its header and rows as cells. */
export function tables(text: string): Table[] {
  const found: Table[] = [];
  const lines = withoutCodeBlocks(text).split('\n');
  for (let i = 0; i + 1 < lines.length; i += 1) {
    if (!lines[i]!.startsWith('|') || !/^\|[\s|:-]+\|$/.test(lines[i + 1]!) || (i > 0 && lines[i - 1]!.startsWith('|'))) continue;
    const rows: string[][] = [];
    for (let j = i + 2; j < lines.length && lines[j]!.startsWith('|'); j += 1) rows.push(cells(lines[j]!));
    found.push({ header: cells(lines[i]!), rows });
  }
  return found;
}

/** The one table of `text` whose header is exactly `header`. */
export function tableWithHeader(text: string, header: readonly string[]): Table {
  const matching = tables(text).filter((t) => t.header.join(' | ') === header.join(' | '));
  if (matching.length !== 1) throw new Error(`expected one table headed ${header.join(' | ')}, found ${matching.length}`);
  return matching[0]!;
}

/** The code spans of a cell or sentence, without their backticks. */
export function codeSpans(text: string): string[] {
  return [...text.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
}

/**
 * The anchors GitHub gives the page's headings: the heading's text as rendered (code spans' backticks
 * dropped), lowercased, every character but letters, digits, spaces, `-` and `_` removed, each space
 * a `-`; a repeated anchor gets `-1`, `-2`, … in order.
 */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of withoutCodeBlocks(text).split('\n')) {
    const heading = /^#{1,6} +(.*?) *#* *$/.exec(line);
    if (!heading) continue;
    const slug = heading[1]!
      .replace(/`/g, '')
      .toLowerCase()
      .replace(/[^\p{L}\p{N} _-]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    out.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return out;
}

export interface Link {
  target: string;
  line: number;
}

/** The inline links of the text, outside code blocks and code spans. */
export function links(text: string): Link[] {
  const out: Link[] = [];
  withoutCodeBlocks(text)
    .split('\n')
    .forEach((raw, index) => {
      const line = raw.replace(/`[^`]*`/g, 'code');
      for (const m of line.matchAll(/\]\(([^)\s]+)\)/g)) out.push({ target: m[1]!, line: index + 1 });
    });
  return out;
}

const WORDS: Record<string, number> = { a: 1, an: 1, one: 1, two: 2, three: 3, four: 4, five: 5, six: 6, seven: 7, eight: 8, nine: 9, ten: 10 };

/** A number as the docs write it: `10,000`, `0.25`, or a word (`five`, `an`). */
export function toNumber(text: string): number {
  const word = WORDS[text.toLowerCase()];
  if (word !== undefined) return word;
  if (!/^\d[\d,]*(\.\d+)?$/.test(text)) throw new Error(`not a number: "${text}"`);
  return Number(text.replace(/,/g, ''));
}
