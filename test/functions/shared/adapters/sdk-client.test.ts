/**
 * The functions' AWS SDK clients (functions/shared/adapters/sdk-client.ts): built without the SDK's
 * logger middleware, which walks every request and answer for a logger nobody configured.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { SQSClient } from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import { SDK_LOGGER_MIDDLEWARE, withoutSdkLogger } from '../../../../functions/shared/adapters/sdk-client.js';

const ROOT = join(import.meta.dirname, '../../../..');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sources(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
  );
}

const loggers = (client: { middlewareStack: { identify(): string[] } }): string[] =>
  client.middlewareStack.identify().filter((entry) => entry.startsWith(`${SDK_LOGGER_MIDDLEWARE} `));

describe('withoutSdkLogger', () => {
  it('removes the SDK logger middleware, and only it', () => {
    const made = new SQSClient({ region: 'eu-west-1' });
    const before = made.middlewareStack.identify();
    expect(loggers(made)).toHaveLength(1);
    const client = withoutSdkLogger(made);
    expect(client).toBe(made);
    expect(loggers(client)).toEqual([]);
    expect(client.middlewareStack.identify()).toEqual(before.filter((entry) => !entry.startsWith(`${SDK_LOGGER_MIDDLEWARE} `)));
  });

  it('is how every function builds each AWS SDK client (new XClient(...) inside withoutSdkLogger)', () => {
    const built: string[] = [];
    for (const file of sources(join(ROOT, 'functions'))) {
      const text = readFileSync(file, 'utf8');
      // The local name of each client class imported (`SQSClient`, or `Queue` for `SQSClient as Queue`).
      const sdkClasses = [...text.matchAll(/import \{([^}]*)\} from '@aws-sdk\/client-[a-z0-9-]+'/g)].flatMap((match) =>
        match[1]!
          .split(',')
          .map((entry) => entry.trim().split(/\s+as\s+/))
          .filter(([imported]) => imported!.endsWith('Client'))
          .map(([imported, local]) => local ?? imported!),
      );
      for (const name of sdkClasses) {
        for (const match of text.matchAll(new RegExp(`new ${name}\\(`, 'g'))) {
          const wrapped = text.slice(Math.max(0, match.index - 'withoutSdkLogger('.length), match.index) === 'withoutSdkLogger(';
          built.push(`${relative(ROOT, file)}: ${name}${wrapped ? '' : ' (with the logger middleware)'}`);
        }
      }
    }
    // Every entry point's clients and the adapters that make one (S3, KMS).
    expect(built.length).toBeGreaterThanOrEqual(18);
    expect(built.filter((line) => line.endsWith('(with the logger middleware)'))).toEqual([]);
  });
});
