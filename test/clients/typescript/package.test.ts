/**
 * The client package itself (clients/typescript): its committed types (src/schema.d.ts and its
 * parts) are what its `generate` script writes from docs/openapi.json now (else: run
 * `npm run generate -w clients/typescript`); the error codes it knows are the document's; it
 * imports nothing of the repository outside its folder, and no package it does not depend on; and
 * its README's examples type-check against it.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { builtinModules } from 'node:module';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import ts from 'typescript';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { API_ERROR_CODES, type ApiErrorCode } from '../../../clients/typescript/src/index.js';

const ROOT = resolve(import.meta.dirname, '../../..');
const PACKAGE = join(ROOT, 'clients/typescript');
const manifest = JSON.parse(readFileSync(join(PACKAGE, 'package.json'), 'utf8')) as { scripts: Record<string, string>; dependencies: Record<string, string> };

describe('src/schema.d.ts and its parts (src/schema/)', () => {
  it("are what the generate script writes from docs/openapi.json now (npm run generate -w clients/typescript)", async () => {
    expect(manifest.scripts['generate']).toBe('node scripts/generate.mjs');
    const fresh = mkdtempSync(join(tmpdir(), 'client-schema-'));
    try {
      await promisify(execFile)(process.execPath, [join(PACKAGE, 'scripts/generate.mjs'), fresh], { cwd: PACKAGE });
      const files = ['schema.d.ts', ...readdirSync(join(PACKAGE, 'src/schema')).map((name) => `schema/${name}`)].sort();
      expect(['schema.d.ts', ...readdirSync(join(fresh, 'schema')).map((name) => `schema/${name}`)].sort()).toEqual(files);
      for (const file of files) {
        expect(readFileSync(join(PACKAGE, 'src', file), 'utf8'), `docs/openapi.json changed: run npm run generate -w clients/typescript (${file})`).toBe(readFileSync(join(fresh, file), 'utf8'));
      }
    } finally {
      rmSync(fresh, { recursive: true, force: true });
    }
  });
});

describe('error codes', () => {
  it("API_ERROR_CODES: every code of the document's error bodies, no other", () => {
    const document = JSON.parse(readFileSync(join(ROOT, 'docs/openapi.json'), 'utf8')) as { components: { schemas: Record<string, { properties?: { error?: { properties?: { code?: { enum?: string[]; const?: string } } } } }> } };
    const codes = new Set<string>();
    for (const schema of Object.values(document.components.schemas)) {
      const code = schema.properties?.error?.properties?.code;
      for (const value of code?.enum ?? (code?.const !== undefined ? [code.const] : [])) codes.add(value);
    }
    expect([...codes].sort()).toEqual([...API_ERROR_CODES].sort());
    expectTypeOf<(typeof API_ERROR_CODES)[number]>().toEqualTypeOf<ApiErrorCode>();
  });
});

describe('the package stands alone', () => {
  it('its sources import only each other, Node built-ins and its dependencies', () => {
    const sources = readdirSync(join(PACKAGE, 'src'), { recursive: true, encoding: 'utf8' }).filter((file) => /\.ts$/.test(file));
    expect(sources).toEqual(expect.arrayContaining(['index.ts', 'client.ts', 'schema.d.ts', join('schema', 'paths.d.ts')]));
    for (const file of sources) {
      const text = readFileSync(join(PACKAGE, 'src', file), 'utf8');
      for (const match of text.matchAll(/\bfrom\s+'([^']+)'|\bimport\(\s*'([^']+)'\s*\)/g)) {
        const specifier = (match[1] ?? match[2])!;
        if (specifier.startsWith('.')) {
          expect(specifier, `${file} imports ${specifier}`).toMatch(/^\.\/([a-z0-9-]+\/)?[a-z0-9-]+\.js$/);
          continue;
        }
        const name = specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0]!;
        const builtin = specifier.startsWith('node:') || builtinModules.includes(name);
        expect(builtin || name in manifest.dependencies, `${file} imports ${specifier}`).toBe(true);
      }
    }
  });
});

describe('the README', () => {
  it('its TypeScript examples type-check against the package, strict', () => {
    const readme = readFileSync(join(PACKAGE, 'README.md'), 'utf8');
    const blocks = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1]!);
    expect(blocks.length).toBeGreaterThanOrEqual(2);
    // One module: the later examples go on from the first one's `api` and `cursors`.
    const example = join(PACKAGE, 'readme-example.mts');
    const options: ts.CompilerOptions = {
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      lib: ['lib.es2023.d.ts'],
      types: ['node'],
      typeRoots: [join(ROOT, 'node_modules/@types')],
      strict: true,
      noUncheckedIndexedAccess: true,
      skipLibCheck: true,
      noEmit: true,
      baseUrl: PACKAGE,
      paths: { '@content-sync/client': ['./src/index.ts'] },
    };
    const host = ts.createCompilerHost(options);
    const text = blocks.join('\n');
    const { getSourceFile, fileExists, readFile } = host;
    host.getSourceFile = (name, language, ...rest) => (name === example ? ts.createSourceFile(name, text, language) : getSourceFile.call(host, name, language, ...rest));
    host.fileExists = (name) => name === example || fileExists.call(host, name);
    host.readFile = (name) => (name === example ? text : readFile.call(host, name));
    const program = ts.createProgram([example], options, host);
    const problems = ts.getPreEmitDiagnostics(program).map((diagnostic) => ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
    expect(problems).toEqual([]);
  });
});
