/**
 * dynalite (an in-memory DynamoDB) for the benchmark and the soak, with the items table created as
 * the stateful stack defines it (partition key `id`, string; on-demand).
 *
 * `mode: 'child'` (default) runs dynalite in a child Node.js process, so that DynamoDB's own CPU
 * work runs on another core than the handlers and the provider simulator, as it would in AWS;
 * `mode: 'in-process'` keeps it in this process (simpler to debug, one core for everything).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { ensureItemsTable } from '../../fakes/items-table.js';

export const AWS_REGION = 'eu-west-1';
export const AWS_CREDENTIALS = { accessKeyId: 'bench', secretAccessKey: 'bench' } as const;

export interface Dynalite {
  endpoint: string;
  close(): Promise<void>;
}

interface DynaliteServer {
  listen(port: number, host: string, callback: (error?: Error) => void): void;
  address(): AddressInfo | string | null;
  close(callback: () => void): void;
}

const require = createRequire(import.meta.url);

export async function startDynalite(mode: 'child' | 'in-process' = 'child'): Promise<Dynalite> {
  return mode === 'child' ? startChild() : startInProcess();
}

async function startInProcess(): Promise<Dynalite> {
  // dynalite ships no types; createRequire keeps its untyped import in this one place.
  const dynalite = require('dynalite') as (options: { createTableMs: number }) => DynaliteServer;
  const server = dynalite({ createTableMs: 0 });
  await new Promise<void>((resolve, reject) => server.listen(0, '127.0.0.1', (error) => (error ? reject(error) : resolve())));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function startChild(): Promise<Dynalite> {
  const modulePath = require.resolve('dynalite');
  const script = `
    const server = require(${JSON.stringify(modulePath)})({ createTableMs: 0 });
    server.listen(0, '127.0.0.1', (error) => {
      if (error) { console.error(String(error)); process.exit(1); }
      process.stdout.write('PORT ' + server.address().port + '\\n');
    });
    process.on('disconnect', () => process.exit(0));
    process.stdin.on('end', () => process.exit(0));
    process.stdin.resume();
  `;
  const child: ChildProcess = spawn(process.execPath, ['-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    let text = '';
    const onData = (chunk: Buffer): void => {
      text += chunk.toString('utf8');
      const match = /PORT (\d+)/.exec(text);
      if (match) {
        child.stdout?.off('data', onData);
        resolve(Number(match[1]));
      }
    };
    child.stdout?.on('data', onData);
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`dynalite child process exited early (code ${code})`)));
  });
  child.unref();
  (child.stdout as unknown as { unref?: () => void })?.unref?.();
  (child.stdin as unknown as { unref?: () => void })?.unref?.();
  return {
    endpoint: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.ref(); // keep the event loop alive until it has gone
        child.once('exit', () => resolve());
        child.stdin?.end();
        child.kill();
      }),
  };
}

/** A DynamoDB client for dynalite with the SDK's default retry behaviour (as handler.ts builds it). */
export function dynamoClient(endpoint: string): DynamoDBClient {
  return new DynamoDBClient({ region: AWS_REGION, endpoint, credentials: AWS_CREDENTIALS });
}

/** The items table as the stateful stack defines it (one definition: local/table.ts). */
export async function createItemsTable(endpoint: string, tableName: string): Promise<void> {
  const client = dynamoClient(endpoint);
  try {
    await ensureItemsTable(client, tableName);
  } finally {
    client.destroy();
  }
}
