/**
 * The real provider's credentials for `npm start` against a provider (run.ts): from the variables
 * CONTENT_SYNC_CLIENT_ID and CONTENT_SYNC_REFRESH_TOKEN, or from the file `.local/credentials.json`
 * (`{"clientId": "...", "refreshToken": "..."}`, git-ignored), where a refresh token the provider
 * rotated is saved for the next run. No error message ever quotes the file's text.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Credentials } from '../../functions/shared/ports.js';

export const CREDENTIALS_FILE = join('.local', 'credentials.json');

export type CredentialsSource = Credentials & { source: 'env' | 'file' };

/** `{"clientId": "...", "refreshToken": "..."}`, both non-empty strings (trimmed); an error names `file` and what is wrong, never the text. */
export function parseCredentials(file: string, text: string): Credentials {
  const expected = 'expected {"clientId": "...", "refreshToken": "..."}';
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    // The parser's message can quote the file's text: left out.
    throw new Error(`${file} is not JSON; ${expected}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error(`${file} is not a JSON object; ${expected}`);
  const { clientId, refreshToken } = parsed as Record<string, unknown>;
  if (typeof clientId !== 'string' || clientId.trim() === '') throw new Error(`${file}: "clientId" must be a non-empty string`);
  if (typeof refreshToken !== 'string' || refreshToken.trim() === '') throw new Error(`${file}: "refreshToken" must be a non-empty string`);
  return { clientId: clientId.trim(), refreshToken: refreshToken.trim() };
}

/** From the two variables, or else from the file. */
export function readCredentials(env: NodeJS.ProcessEnv, file: string): CredentialsSource {
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
  return { ...parseCredentials(file, readFileSync(file, 'utf8')), source: 'file' };
}

/** Writes the file, readable by its owner only. */
export function saveCredentials(file: string, credentials: Credentials): void {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify({ clientId: credentials.clientId, refreshToken: credentials.refreshToken }, null, 2)}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
}
