/** Formats of the two secrets (docs/configuration.md, "Secrets"), parsed and checked without any AWS import. */
import { CredentialsNotConfiguredError, SecretFormatError } from './errors.js';
import { isObject } from './json.js';
import type { AccessToken, Credentials } from './ports.js';

/** What the deploy writes into the credentials secret until the operator puts real values there. */
export const CREDENTIALS_PLACEHOLDER = 'REPLACE_ME';

export function parseCredentials(secretId: string, text: string | undefined): Credentials {
  const value = parseObject(secretId, text, '{"clientId": "...", "refreshToken": "..."}');
  const { clientId, refreshToken } = value;
  if (clientId === CREDENTIALS_PLACEHOLDER || refreshToken === CREDENTIALS_PLACEHOLDER) {
    throw new CredentialsNotConfiguredError(secretId);
  }
  if (typeof clientId !== 'string' || clientId.trim() === '') {
    throw new SecretFormatError(secretId, '"clientId" must be a non-empty string');
  }
  if (typeof refreshToken !== 'string' || refreshToken.trim() === '') {
    throw new SecretFormatError(secretId, '"refreshToken" must be a non-empty string');
  }
  return { clientId, refreshToken };
}

export function parseAccessToken(secretId: string, text: string | undefined): AccessToken {
  const value = parseObject(secretId, text, '{"accessToken": "...", "refreshedAt": "<ISO-8601>"}');
  const { accessToken, refreshedAt } = value;
  if (typeof accessToken !== 'string' || accessToken.trim() === '') {
    throw new SecretFormatError(secretId, '"accessToken" must be a non-empty string (has the token refresher run?)');
  }
  if (typeof refreshedAt !== 'string' || Number.isNaN(Date.parse(refreshedAt))) {
    throw new SecretFormatError(secretId, '"refreshedAt" must be an ISO-8601 time');
  }
  return { accessToken, refreshedAt };
}

function parseObject(secretId: string, text: string | undefined, expected: string): Record<string, unknown> {
  if (text === undefined || text.trim() === '') {
    throw new SecretFormatError(secretId, `has no string value; expected ${expected}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    // The parser's message can quote the secret's text: leave it out.
    throw new SecretFormatError(secretId, `is not JSON; expected ${expected}`);
  }
  if (!isObject(parsed)) throw new SecretFormatError(secretId, `is not a JSON object; expected ${expected}`);
  return parsed;
}
