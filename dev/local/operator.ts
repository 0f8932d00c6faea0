/**
 * The operator's part in the local run: `npm run connections -- …` (tools/connections, its runCli)
 * run in process against the local connections table, exactly as an operator runs it against a
 * deployment: the refresh token on standard input, the tables named by the variables the functions
 * read. What the CLI prints goes to the screen, indented under the command an operator would type
 * (a refresh token is never among its arguments, and the CLI never prints one).
 */
import type { ConnectionView } from '../../functions/shared/connections/view.js';
import { Readable, Writable } from 'node:stream';
import { ENV } from '../../functions/shared/config.js';
import { runCli } from '../../tools/connections/connections.js';
import type { LocalRun } from './local-run.js';

/** What one CLI command did. */
export interface CliRun {
  status: number;
  stdout: string;
  stderr: string;
}

/** A connection as `list --json` prints it: its view (no token). */
export type ListedConnection = ConnectionView;

function collector(): { stream: Writable; text: () => string } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      text += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
      done();
    },
  });
  return { stream, text: () => text };
}

/** Runs `npm run connections -- <args>` in process, `stdin` as its standard input (a pipe, not a terminal). */
export async function connectionsCli(run: LocalRun, args: readonly string[], stdin = ''): Promise<CliRun> {
  const stdout = collector();
  const stderr = collector();
  const { names } = run.system;
  const status = await runCli(
    [...args],
    { stdin: Readable.from(stdin === '' ? [] : [stdin]), stdout: stdout.stream, stderr: stderr.stream },
    {
      dynamodb: run.clients.dynamodb,
      s3: run.clients.s3,
      kms: run.clients.kms,
      env: {
        [ENV.connectionsTableName]: names.connectionsTable,
        [ENV.connectionsKeyArn]: run.system.aws.tokensKeyArn,
        [ENV.itemsTableName]: names.itemsTable,
        [ENV.itemsBucketName]: names.itemsBucket,
        [ENV.controlTableName]: names.controlTable,
      },
    },
  );
  return { status, stdout: stdout.text(), stderr: stderr.text() };
}

/** Prints the command as typed and what it printed; throws when it failed. */
async function operatorTypes(run: LocalRun, shown: string, args: readonly string[], stdin?: string): Promise<CliRun> {
  run.screen.line(`   $ ${shown}`);
  const result = await connectionsCli(run, args, stdin);
  for (const line of `${result.stdout}${result.stderr}`.split('\n')) if (line.trim() !== '') run.screen.line(`     ${line}`);
  if (result.status !== 0) throw new Error(`npm run connections -- ${args[0]} exited with status ${result.status}: ${result.stderr.trim()}`);
  return result;
}

/** `add`: a new connection, or new credentials for one; the refresh token on standard input, as the docs show it. */
export function addConnection(run: LocalRun, connection: string, clientId: string, refreshToken: string): Promise<CliRun> {
  const args = ['add', connection, '--client-id', clientId];
  return operatorTypes(run, `printf '%s' "$REFRESH_TOKEN" | npm run connections -- ${args.join(' ')}`, args, refreshToken);
}

/** `list`, printed. */
export function listConnections(run: LocalRun): Promise<CliRun> {
  return operatorTypes(run, 'npm run connections -- list', ['list']);
}

/** `list --json`, read (not printed): the connections as the operator sees them. */
export async function listedConnections(run: LocalRun): Promise<ListedConnection[]> {
  const result = await connectionsCli(run, ['list', '--json']);
  if (result.status !== 0) throw new Error(`npm run connections -- list --json exited with status ${result.status}: ${result.stderr.trim()}`);
  return JSON.parse(result.stdout) as ListedConnection[];
}
