/**
 * The names the docs use, read out of README.md and docs/*.md (test/docs/names.test.ts holds them to
 * the code): every code span of the prose with the sentence or table cell it stands in, every line of
 * a fenced code block, and the command lines of both (`npm run enqueue -- --stage blue`, `curl -X
 * PUT "$API/connections/acme"`). And the names the code declares, read out of its source files: the
 * constants, and the environment variables it reads.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../infra/helpers.js';
import { DOC_PAGES, codeSpans, flat, page, tables, withoutCodeBlocks, type Table } from './markdown.js';

/** A code span of a page's prose, without its backticks, and the sentence or table cell it is in. */
export interface Span {
  path: string;
  text: string;
  /** The sentence (or the table cell) around it, line breaks folded. */
  context: string;
}

/** Where a piece of text comes from: a page, and whether it is prose (a code span) or a code block's line. */
export interface Located {
  path: string;
  text: string;
  inCodeBlock: boolean;
}

/** UPPER_SNAKE with at least one underscore: how a variable or a constant is written. */
export const UPPER_SNAKE = /^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$/;

/** The sentences of a paragraph (folded to one line): a `.` or `;` and a space end one, outside code spans. */
export function sentences(paragraph: string): string[] {
  const out: string[] = [];
  let current = '';
  let code = false;
  for (let i = 0; i < paragraph.length; i += 1) {
    const c = paragraph[i]!;
    current += c;
    if (c === '`') code = !code;
    else if (!code && (c === '.' || c === ';') && /\s/.test(paragraph[i + 1] ?? ' ')) {
      out.push(current.trim());
      current = '';
    }
  }
  if (current.trim() !== '') out.push(current.trim());
  return out;
}

/** Every code span of every page's prose (tables included, code blocks not), each with its sentence or cell. */
export function proseSpans(paths: readonly string[] = DOC_PAGES): Span[] {
  const out: Span[] = [];
  for (const path of paths) {
    const blocks = withoutCodeBlocks(page(path)).split(/\n\s*\n/);
    for (const block of blocks) {
      const lines = block.split('\n');
      const tableLines = lines.filter((line) => line.startsWith('|'));
      // A table: each cell is a context of its own (its text, not the whole row).
      for (const table of tables(tableLines.join('\n'))) {
        for (const cell of [...table.header, ...table.rows.flat()]) for (const text of codeSpans(cell)) out.push({ path, text, context: flat(cell) });
      }
      const prose = flat(lines.filter((line) => !line.startsWith('|')).join('\n'));
      for (const sentence of sentences(prose)) for (const text of codeSpans(sentence)) out.push({ path, text, context: sentence });
    }
  }
  return out;
}

/**
 * Every line of every fenced code block, a line continued with `\` joined to the next, with the
 * block's language (`bash`, `ts`, `json`, or '' when none is given).
 */
export function codeBlockLines(paths: readonly string[] = DOC_PAGES): Array<Located & { language: string }> {
  const out: Array<Located & { language: string }> = [];
  for (const path of paths) {
    let language: string | undefined;
    let pending = '';
    for (const line of page(path).split('\n')) {
      const fence = /^\s*```(\S*)/.exec(line);
      if (fence) {
        language = language === undefined ? fence[1]! : undefined;
        pending = '';
        continue;
      }
      if (language === undefined) continue;
      if (/\\\s*$/.test(line)) {
        pending += `${line.replace(/\\\s*$/, '')} `;
        continue;
      }
      out.push({ path, text: `${pending}${line}`.trim(), inCodeBlock: true, language });
      pending = '';
    }
  }
  return out;
}

/** A shell line without its comment (a `#` after white space, outside quotes). */
export function withoutComment(line: string): string {
  let quote: string | undefined;
  for (let i = 0; i < line.length; i += 1) {
    const c = line[i]!;
    if (quote !== undefined) {
      if (c === quote) quote = undefined;
    } else if (c === "'" || c === '"') quote = c;
    else if (c === '#' && (i === 0 || /\s/.test(line[i - 1]!))) return line.slice(0, i).trimEnd();
  }
  return line;
}

/** The comment of a shell line (after its `#`), or ''. */
export function commentOf(line: string): string {
  const code = withoutComment(line);
  return code.length < line.length ? line.slice(code.length).replace(/^\s*#\s*/, '') : '';
}

/**
 * The commands of a shell line or a code span: split at `|`, `&&`, `;` and `$(`, each without the
 * variables set before it (`PROVIDER_BASE_URL=… npm start`) or a leading `$ ` prompt.
 */
export function commandsOf(line: string): string[] {
  return withoutComment(line)
    .split(/\|\||&&|\||;|\$\(/)
    .map((part) =>
      part
        .trim()
        .replace(/^\$ /, '')
        .replace(/^export\s+/, '')
        .replace(/^(?:[A-Z][A-Z0-9_]*=\S*\s+)+/, '')
        .trim(),
    )
    .filter((part) => part !== '');
}

/** A command line's words, quotes kept together (`-d '{"a": 1}'` is two words). */
export function words(command: string): string[] {
  return [...command.matchAll(/'[^']*'|"[^"]*"|\S+/g)].map((m) => m[0]);
}

/** The flag a word is (`--stage`, `--max-old-space-size=8192`, `-y`), without its dashes and value; undefined when it is none. */
export function flagOf(word: string): string | undefined {
  const m = /^--?([A-Za-z][\w:.-]*?)(?:=.*)?$/.exec(word);
  return m ? m[1]! : undefined;
}

// ---- the code's own names ---------------------------------------------------------------------------

/** The source directories whose names the docs may use. */
export const SOURCE_DIRS: readonly string[] = ['functions', 'infra', 'dev', 'tools', 'clients/typescript/src', 'test/support'];

/** Every TypeScript source file below SOURCE_DIRS (tests excluded), with its text. */
export function sourceFiles(): Map<string, string> {
  const out = new Map<string, string>();
  for (const dir of SOURCE_DIRS) {
    for (const file of readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' }) as string[]) {
      if (!/\.m?ts$/.test(file) || /\.test\.ts$/.test(file) || file.split(/[\\/]/).includes('node_modules')) continue;
      const path = `${dir}/${file.split('\\').join('/')}`;
      out.set(path, readFileSync(join(ROOT, path), 'utf8'));
    }
  }
  return out;
}

/** The UPPER_SNAKE names the sources declare (`const`, `let`, a class's `static` or `readonly` member, a renamed binding). */
export function declaredConstants(sources: Map<string, string>): Set<string> {
  const out = new Set<string>();
  for (const text of sources.values()) {
    for (const m of text.matchAll(/\b(?:const|let|var|static|readonly)\s+([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)\b/g)) out.add(m[1]!);
    // `const { min: BATCH_SIZE_MIN, max: BATCH_SIZE_MAX } = …`
    for (const m of text.matchAll(/\bconst\s*\{([^}]*)\}\s*=/g)) for (const n of m[1]!.matchAll(/:\s*([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)\b/g)) out.add(n[1]!);
  }
  return out;
}

/**
 * The environment variables the sources read by name, with a file that reads each: `env.NAME`,
 * `env?.NAME`, `env['NAME']` (process.env's too), and `env[NAME_CONSTANT]` where the sources declare
 * `const NAME_CONSTANT = 'NAME'`. (`env[ENV.x]`: the functions' variables, config.ts ENV.)
 */
export function environmentReads(sources: Map<string, string>): Map<string, string> {
  const named = new Map<string, string>();
  for (const text of sources.values()) {
    for (const m of text.matchAll(/\bconst\s+([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)\s*=\s*['"]([A-Z][A-Z0-9_]*)['"]/g)) named.set(m[1]!, m[2]!);
  }
  const out = new Map<string, string>();
  for (const [path, text] of sources) {
    for (const m of text.matchAll(/\benv(?:\?\.|\.)([A-Z][A-Z0-9_]*)\b|\benv\[\s*['"]([A-Z][A-Z0-9_]*)['"]\s*\]|\benv\[\s*([A-Z][A-Z0-9_]*)\s*\]/g)) {
      const name = m[1] ?? m[2] ?? named.get(m[3]!);
      if (name !== undefined && !out.has(name)) out.set(name, path);
    }
  }
  return out;
}

/** The tables of every page, each with its page. */
export function everyTable(paths: readonly string[] = DOC_PAGES): Array<{ path: string; table: Table }> {
  return paths.flatMap((path) => tables(page(path)).map((table) => ({ path, table })));
}
