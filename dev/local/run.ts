/**
 * `npm start`: the local run.
 *
 *   npm start                                   the whole story on embedded defaults (no AWS, no network)
 *   npm start -- --items 1000 --seed 7          a bigger or different simulated provider
 *   PROVIDER_BASE_URL=https://… npm start -- id1 id2     sync these ids from a real provider into the
 *                                               local table (ids from standard input when none are given)
 *
 * Real-provider credentials: CONTENT_SYNC_CLIENT_ID and CONTENT_SYNC_REFRESH_TOKEN, or the file
 * `.local/credentials.json` ({"clientId": "...", "refreshToken": "..."}; git ignores `.local/`).
 * Exit status: 0 when the run behaved as expected, 1 otherwise, 2 on a usage error.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { normalizeBaseUrl } from '../../functions/shared/base-url.js';
import { REVISION_FIELD_PATTERN } from '../../functions/shared/config.js';
import { findInvalidIds, InvalidIdsError, readIdLines } from '../../tools/enqueue/enqueue.js';
import { DEFAULT_ITEM_COUNT, DEFAULT_SEED, runAgainstProvider, runLocalStory } from './story.js';

export const CREDENTIALS_FILE = join('.local', 'credentials.json');

const USAGE = `Usage:
  npm start                                  the whole sync, locally, on a simulated provider
  npm start -- --items <n> --seed <n>        a simulated provider of n items (default ${DEFAULT_ITEM_COUNT}), another tree
  PROVIDER_BASE_URL=<url> npm start -- [id ...]
                                             sync these ids from a real provider into a local table
                                             (one id per line from standard input when none are given)

Real provider: credentials from CONTENT_SYNC_CLIENT_ID and CONTENT_SYNC_REFRESH_TOKEN, or from
${CREDENTIALS_FILE} ({"clientId": "...", "refreshToken": "..."}); REVISION_FIELD (default
"revision") names the revision inside an item. Nothing touches AWS: DynamoDB, SQS and Secrets
Manager run locally. Files go to .local/ (ignored by git).`;

interface Io {
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  env: NodeJS.ProcessEnv;
}

function readCredentials(env: NodeJS.ProcessEnv, file: string): { clientId: string; refreshToken: string; source: 'env' | 'file' } {
  const clientId = env.CONTENT_SYNC_CLIENT_ID?.trim();
  const refreshToken = env.CONTENT_SYNC_REFRESH_TOKEN?.trim();
  if (clientId || refreshToken) {
    if (!clientId || !refreshToken) {
      throw new Error('set both CONTENT_SYNC_CLIENT_ID and CONTENT_SYNC_REFRESH_TOKEN (or neither, and use the credentials file)');
    }
    return { clientId, refreshToken, source: 'env' };
  }
  if (!existsSync(file)) {
    throw new Error(
      `no credentials: set CONTENT_SYNC_CLIENT_ID and CONTENT_SYNC_REFRESH_TOKEN, or write ${file} as {"clientId": "...", "refreshToken": "..."}`,
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    // The parser's message can quote the file: leave it out.
    throw new Error(`${file} is not JSON; expected {"clientId": "...", "refreshToken": "..."}`);
  }
  const value = (typeof parsed === 'object' && parsed !== null ? parsed : {}) as Record<string, unknown>;
  if (typeof value.clientId !== 'string' || value.clientId.trim() === '' || typeof value.refreshToken !== 'string' || value.refreshToken.trim() === '') {
    throw new Error(`${file} must hold {"clientId": "...", "refreshToken": "..."} with non-empty strings`);
  }
  return { clientId: value.clientId.trim(), refreshToken: value.refreshToken.trim(), source: 'file' };
}

function saveCredentials(file: string, credentials: { clientId: string; refreshToken: string }): void {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(credentials, null, 2)}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
}

export async function main(argv: string[], io: Io = { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr, env: process.env }): Promise<number> {
  const err = (line: string): void => void io.stderr.write(`${line}\n`);
  let values: { items?: string; seed?: string; help?: boolean };
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      args: argv,
      options: { items: { type: 'string' }, seed: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
      allowPositionals: true,
      strict: true,
    }));
  } catch (error) {
    err(`start: ${(error as Error).message}\nRun with --help for usage.`);
    return 2;
  }
  if (values.help) {
    io.stdout.write(`${USAGE}\n`);
    return 0;
  }

  const baseUrlRaw = io.env.PROVIDER_BASE_URL?.trim();
  if (!baseUrlRaw) {
    // The demo: everything embedded.
    if (positionals.length > 0) {
      err('start: ids are synced from a real provider only: set PROVIDER_BASE_URL (see --help)');
      return 2;
    }
    const itemCount = values.items === undefined ? DEFAULT_ITEM_COUNT : Number(values.items);
    const seed = values.seed === undefined ? DEFAULT_SEED : Number(values.seed);
    if (!Number.isInteger(itemCount) || itemCount < 10 || itemCount > 100_000) {
      err('start: --items must be a whole number from 10 to 100000');
      return 2;
    }
    if (!Number.isInteger(seed) || seed < 0) {
      err('start: --seed must be a whole number');
      return 2;
    }
    const result = await runLocalStory({ itemCount, seed });
    return result.ok ? 0 : 1;
  }

  // Against a real provider.
  if (values.items !== undefined || values.seed !== undefined) {
    err('start: --items and --seed are for the simulated provider; unset PROVIDER_BASE_URL to use it');
    return 2;
  }
  let baseUrl: string;
  try {
    baseUrl = normalizeBaseUrl(baseUrlRaw);
  } catch (error) {
    err(`start: PROVIDER_BASE_URL: ${(error as Error).message}`);
    return 2;
  }
  const revisionField = io.env.REVISION_FIELD?.trim() || 'revision';
  if (!REVISION_FIELD_PATTERN.test(revisionField)) {
    err(`start: REVISION_FIELD must be a dot path such as "revision" or "meta.rev", got "${revisionField}"`);
    return 2;
  }
  let credentials: ReturnType<typeof readCredentials>;
  try {
    credentials = readCredentials(io.env, CREDENTIALS_FILE);
  } catch (error) {
    err(`start: ${(error as Error).message}`);
    return 2;
  }
  if (credentials.source === 'file') {
    try {
      if ((statSync(CREDENTIALS_FILE).mode & 0o077) !== 0) err(`note: ${CREDENTIALS_FILE} is readable by other users; chmod 600 it`);
    } catch {
      // Not fatal.
    }
  }

  let ids = positionals;
  if (ids.length === 0) {
    if (io.stdin.isTTY) err('Reading ids from standard input, one per line; end with Ctrl-D (Ctrl-Z on Windows).');
    ids = await readIdLines(io.stdin);
  }
  if (ids.length === 0) {
    err('start: no ids given: pass them as arguments (npm start -- id1 id2) or one per line on standard input');
    return 2;
  }
  const invalid = findInvalidIds(ids);
  if (invalid.length > 0) {
    err(`start: ${new InvalidIdsError(invalid).message}`);
    return 2;
  }

  io.stdout.write(
    `Credentials from ${credentials.source === 'env' ? 'CONTENT_SYNC_CLIENT_ID / CONTENT_SYNC_REFRESH_TOKEN' : CREDENTIALS_FILE}; ` +
      `revision field "${revisionField}"${io.env.REVISION_FIELD?.trim() ? ' (REVISION_FIELD)' : ' (the default; set REVISION_FIELD to change it)'}.\n`,
  );
  const result = await runAgainstProvider({
    baseUrl,
    credentials: { clientId: credentials.clientId, refreshToken: credentials.refreshToken },
    ids,
    revisionField,
    onRefreshTokenRotated: (refreshToken) => {
      // The old refresh token no longer works: keep the new one where the next run finds it.
      saveCredentials(CREDENTIALS_FILE, { clientId: credentials.clientId, refreshToken });
      const note =
        credentials.source === 'env'
          ? `The provider rotated the refresh token: CONTENT_SYNC_REFRESH_TOKEN no longer works. The new one is in ${CREDENTIALS_FILE}; unset CONTENT_SYNC_CLIENT_ID and CONTENT_SYNC_REFRESH_TOKEN to use it.`
          : `The provider rotated the refresh token; the new one is saved in ${CREDENTIALS_FILE}.`;
      return note;
    },
  });
  return result.ok ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (status) => {
    process.exitCode = status;
  },
  (error: unknown) => {
    process.stderr.write(`start: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}\n`);
    process.exitCode = 1;
  },
);
