/**
 * `npm run generate -w clients/typescript`: the client's types from the API's OpenAPI document
 * (docs/openapi.json), by openapi-typescript, written as three named parts beside their index
 * (src/schema.d.ts): src/schema/paths.d.ts (the routes), components.d.ts (the schemas, parameters
 * and answers they share) and operations.d.ts (each operation's parameters, body and answers).
 * Each part is the generator's text as it is, cut at its top-level declarations, with the imports
 * it needs. `node scripts/generate.mjs <dir>` writes them under <dir> instead (a test compares).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import openapiTS, { astToString, COMMENT_HEADER } from 'openapi-typescript';

const DOCUMENT = new URL('../../../docs/openapi.json', import.meta.url);
const out = process.argv[2] ?? fileURLToPath(new URL('../src', import.meta.url));

const text = COMMENT_HEADER + astToString(await openapiTS(DOCUMENT, { defaultNonNullable: false }));
/** The generator's text from the declaration `start` up to the next one of `ends` (or its end). */
const part = (start, ...ends) => {
  const from = text.indexOf(start);
  if (from < 0) throw new Error(`openapi-typescript's output lacks "${start}"`);
  const to = Math.min(...ends.map((end) => text.indexOf(end, from)).filter((at) => at >= 0), text.length);
  return text.slice(from, to);
};
const header = COMMENT_HEADER.trimEnd();
const parts = {
  'schema/paths.d.ts': [`import type { components } from './components.js';`, `import type { operations } from './operations.js';`, '', part('export interface paths', 'export interface components')],
  'schema/components.d.ts': [part('export interface components', 'export interface operations')],
  'schema/operations.d.ts': [`import type { components } from './components.js';`, '', part('export interface operations')],
  'schema.d.ts': [
    `export type { paths, webhooks } from './schema/paths.js';`,
    `export type { components, $defs } from './schema/components.js';`,
    `export type { operations } from './schema/operations.js';`,
    '',
  ],
};
mkdirSync(join(out, 'schema'), { recursive: true });
for (const [path, lines] of Object.entries(parts)) writeFileSync(join(out, path), `${header}\n\n${lines.join('\n')}`);
