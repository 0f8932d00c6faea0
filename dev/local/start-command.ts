/**
 * `npm start`'s command line (dev/local/run.ts runs it): the usage, the options read and checked, then
 * the local story (story.ts) or the run against a real provider. `main` returns the exit status: 0
 * when the run behaved as expected, 1 otherwise, 2 on a usage error (nothing started). The checks of
 * `--items`, `--seed` and the provider's variables serve `npm run serve` too (serve-command.ts).
 */
import '../system/sdk-notice.js';
import { missingJava } from '../fakes/dynamodb-local.js';
import { statSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { normalizeBaseUrl } from '../../functions/shared/base-url.js';
import { ENV, REVISION_FIELD_PATTERN } from '../../functions/shared/config.js';
import { findInvalidIds, InvalidIdsError, readIdLines } from '../../tools/enqueue/enqueue.js';
import { CREDENTIALS_FILE, readCredentials, saveCredentials, type CredentialsSource } from './credentials.js';
import { DEFAULT_ITEM_COUNT, DEFAULT_SEED, runAgainstProvider, runLocalStory } from './story.js';

const USAGE = `Usage:
  npm start                                  the main job, locally, on a simulated provider with three
                                             connections: added through the client API (a PUT each),
                                             synced from their roots, checked, copied from the feed
  npm start -- --tour  (npm run tour)        the whole tour: also changes synced again, one connection
                                             revoked mid-run and recovered (its new credentials put
                                             through the client API), the reconciler, an erase (a
                                             DELETE through the client API)
  npm start -- --items <n> --seed <n>        the account "default" holds n items (default ${DEFAULT_ITEM_COUNT}), another tree
  ${ENV.baseUrl}=<url> npm start -- [id ...]
                                             sync these ids from a real provider into a local table
                                             (one id per line from standard input when none are given)

Real provider: credentials from CONTENT_SYNC_CLIENT_ID and CONTENT_SYNC_REFRESH_TOKEN, or from
${CREDENTIALS_FILE} ({"clientId": "...", "refreshToken": "..."}), added as the connection
"default" with npm run connections -- add (the token on its standard input); ${ENV.revisionField}
(default "revision") names the revision inside an item. Nothing touches AWS: DynamoDB, S3 and SQS
run locally. Files go to .local/ (ignored by git).`;

export interface Io {
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  env: NodeJS.ProcessEnv;
}

/** A mistake in how the run was asked for: printed after the command's name, exit status 2. */
export class UsageError extends Error {}

/** The command line's options, as parseArgs reads them (test/docs holds the docs to them). */
export const START_OPTIONS = { items: { type: 'string' }, seed: { type: 'string' }, tour: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } } as const;

type Options = { items?: string; seed?: string; tour?: boolean; help?: boolean };

export async function main(argv: string[], io: Io = { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr, env: process.env }): Promise<number> {
  let values: Options;
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      args: argv,
      options: START_OPTIONS,
      allowPositionals: true,
      strict: true,
    }));
  } catch (error) {
    io.stderr.write(`start: ${(error as Error).message}\nRun with --help for usage.\n`);
    return 2;
  }
  if (values.help) {
    io.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const java = missingJava();
  if (java !== undefined) {
    io.stderr.write(`start: ${java}\n`);
    return 1;
  }
  try {
    // Without a provider address, the demo: everything embedded.
    const ok = io.env[ENV.baseUrl]?.trim() ? await runWithProvider(values, positionals, io) : await runDemo(values, positionals);
    return ok ? 0 : 1;
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.stderr.write(`start: ${error.message}\n`);
    return 2;
  }
}

async function runDemo(values: Options, positionals: readonly string[]): Promise<boolean> {
  if (positionals.length > 0) throw new UsageError(`ids are synced from a real provider only: set ${ENV.baseUrl} (see --help)`);
  const { itemCount, seed } = simulatorSize(values);
  return (await runLocalStory({ itemCount, seed, tour: values.tour === true })).ok;
}

/** The simulated provider's size and seed from `--items` and `--seed`, checked (the defaults when not given). */
export function simulatorSize(values: { items?: string; seed?: string }): { itemCount: number; seed: number } {
  const itemCount = values.items === undefined ? DEFAULT_ITEM_COUNT : Number(values.items);
  const seed = values.seed === undefined ? DEFAULT_SEED : Number(values.seed);
  if (!Number.isInteger(itemCount) || itemCount < 10 || itemCount > 100_000) throw new UsageError('--items must be a whole number from 10 to 100000');
  if (!Number.isInteger(seed) || seed < 0) throw new UsageError('--seed must be a whole number');
  return { itemCount, seed };
}

async function runWithProvider(values: Options, positionals: readonly string[], io: Io): Promise<boolean> {
  const err = (line: string): void => void io.stderr.write(`${line}\n`);
  if (values.items !== undefined || values.seed !== undefined || values.tour) {
    throw new UsageError(`--items, --seed and --tour are for the simulated provider; unset ${ENV.baseUrl} to use it`);
  }
  const { baseUrl, revisionField, revisionFieldSet } = providerSettings(io.env);
  const credentials = credentialsFor(io.env, err);
  const ids = await idsToSync(positionals, io.stdin, err);

  io.stdout.write(
    `Credentials from ${credentials.source === 'env' ? 'CONTENT_SYNC_CLIENT_ID / CONTENT_SYNC_REFRESH_TOKEN' : CREDENTIALS_FILE}; ` +
      `revision field "${revisionField}"${revisionFieldSet ? ` (${ENV.revisionField})` : ` (the default; set ${ENV.revisionField} to change it)`}.\n`,
  );
  const result = await runAgainstProvider({
    baseUrl,
    credentials: { clientId: credentials.clientId, refreshToken: credentials.refreshToken },
    ids,
    revisionField,
    onRefreshTokenRotated: (refreshToken) => {
      // The old refresh token no longer works: keep the new one where the next run finds it.
      saveCredentials(CREDENTIALS_FILE, { clientId: credentials.clientId, refreshToken });
      return credentials.source === 'env'
        ? `The provider rotated the refresh token: CONTENT_SYNC_REFRESH_TOKEN no longer works. The new one is in ${CREDENTIALS_FILE}; unset CONTENT_SYNC_CLIENT_ID and CONTENT_SYNC_REFRESH_TOKEN to use it.`
        : `The provider rotated the refresh token; the new one is saved in ${CREDENTIALS_FILE}.`;
    },
  });
  return result.ok;
}

/** The provider's address and the revision field, from the variables the deployed functions read. */
export function providerSettings(env: NodeJS.ProcessEnv): { baseUrl: string; revisionField: string; revisionFieldSet: boolean } {
  let baseUrl: string;
  try {
    baseUrl = normalizeBaseUrl(env[ENV.baseUrl]!.trim());
  } catch (error) {
    throw new UsageError(`${ENV.baseUrl}: ${(error as Error).message}`);
  }
  const revisionFieldSet = Boolean(env[ENV.revisionField]?.trim());
  const revisionField = env[ENV.revisionField]?.trim() || 'revision';
  if (!REVISION_FIELD_PATTERN.test(revisionField)) {
    throw new UsageError(`${ENV.revisionField} must be a dot path such as "revision" or "meta.rev", got "${revisionField}"`);
  }
  return { baseUrl, revisionField, revisionFieldSet };
}

function credentialsFor(env: NodeJS.ProcessEnv, err: (line: string) => void): CredentialsSource {
  let credentials: CredentialsSource;
  try {
    credentials = readCredentials(env, CREDENTIALS_FILE);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  if (credentials.source === 'file') {
    try {
      if ((statSync(CREDENTIALS_FILE).mode & 0o077) !== 0) err(`note: ${CREDENTIALS_FILE} is readable by other users; chmod 600 it`);
    } catch {
      // Not fatal.
    }
  }
  return credentials;
}

/** The ids from the arguments, or else one per line from standard input; every one valid. */
async function idsToSync(positionals: readonly string[], stdin: Io['stdin'], err: (line: string) => void): Promise<string[]> {
  let ids = [...positionals];
  if (ids.length === 0) {
    if (stdin.isTTY) err('Reading ids from standard input, one per line; end with Ctrl-D (Ctrl-Z on Windows).');
    ids = await readIdLines(stdin);
  }
  if (ids.length === 0) throw new UsageError('no ids given: pass them as arguments (npm start -- id1 id2) or one per line on standard input');
  const invalid = findInvalidIds(ids);
  if (invalid.length > 0) throw new UsageError(new InvalidIdsError(invalid).message);
  return ids;
}

