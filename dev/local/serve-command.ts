/**
 * `npm run serve`'s command line (dev/local/serve.ts runs it): the local run's system kept running,
 * for an application to be built against its client API. The system is the one `npm start` builds
 * (local-run.ts withLocalRun; for the simulator with story.ts simulatorSystem, the main job's
 * settings), but instead of playing a story it is kept running (keep-running.ts) until `stopped`
 * resolves (serve.ts: the first SIGINT or SIGTERM), then everything it started is stopped.
 *
 * - Without PROVIDER_BASE_URL: the provider simulator with the local run's three accounts
 *   (accounts.ts; `--items`, `--seed` as `npm start` takes them), its data in `.local/serve`, made
 *   anew at each start (a start is a new simulator with new tokens: nothing of the last one would
 *   work). It prints the simulator's client id and each account's refresh token, the simulator's
 *   fakes, for a developer to onboard a connection with.
 * - With PROVIDER_BASE_URL (and REVISION_FIELD), as `npm start` reads them: that provider, the
 *   tables and objects kept in `.local/serve-provider` between runs, the reconciler at its deployed
 *   freshnessHours (a pass a day, not a pass a minute of a real account). A connection is put with
 *   the developer's own credentials; no token of a real provider is ever printed.
 *
 * The client API listens on 127.0.0.1 only (`--port`, default a free one, printed) and checks no
 * signature, as none is checked locally. One line per request (method, route, connection, status,
 * time), never a body or a header. `main` returns the exit status: 0 once stopped, 1 when the system
 * could not start or failed, 2 on a usage error (nothing started).
 */
import '../system/sdk-notice.js';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { describeRoute } from '../../functions/client-api/routes.js';
import { ENV } from '../../functions/shared/config.js';
import { DEFAULT_CONNECTION } from '../../functions/shared/connections/connection.js';
import { missingJava } from '../fakes/dynamodb-local.js';
import type { ProviderSimulator } from '../simulator/provider-simulator.js';
import { systemConfig } from '../system/config.js';
import { accountItems, CONNECTIONS, LOCAL_PROVIDER_LIMIT, rootOf, startSimulator } from './accounts.js';
import type { LocalApiAnswer } from './client-api.js';
import { keepRunning } from './keep-running.js';
import { withLocalRun, type LocalRun, type RunPlan } from './local-run.js';
import { listConnections } from './operator.js';
import { display, type Screen, type Writer } from './screen.js';
import { providerSettings, simulatorSize, UsageError } from './start-command.js';
import { largeFileOf } from './story-changes.js';
import { DEFAULT_ITEM_COUNT, simulatorSystem } from './story.js';

const USAGE = `Usage:
  npm run serve                              the local system kept running until Ctrl-C: the client API on
                                             127.0.0.1 (its URL printed), the sync, the token refresher, the
                                             reconciler and the changes feed, against a simulated provider
                                             with three accounts (their client id and refresh tokens printed)
  npm run serve -- --port <n>                the client API on this port (default 0: a free one)
  npm run serve -- --items <n> --seed <n>    the account "default" holds n items (default ${DEFAULT_ITEM_COUNT}), another tree
  ${ENV.baseUrl}=<url> npm run serve
                                             against a real provider (${ENV.revisionField} names the revision
                                             inside an item, default "revision"); its tables are kept in
                                             .local/serve-provider between runs

The client API accepts any signature, or none, and listens on 127.0.0.1 only. Nothing touches AWS:
DynamoDB, S3, SQS and KMS run locally. Ctrl-C stops every server and process it started.`;

export interface ServeIo {
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream;
  env: NodeJS.ProcessEnv;
}

/** The command line's options, as parseArgs reads them (test/docs holds the docs to them). */
export const SERVE_OPTIONS = { port: { type: 'string' }, items: { type: 'string' }, seed: { type: 'string' }, help: { type: 'boolean', short: 'h' } } as const;

type Options = { port?: string; items?: string; seed?: string; help?: boolean };

/** What is served: the simulator of the given size, or a real provider. */
type Provider = { kind: 'simulator'; itemCount: number; seed: number } | { kind: 'real'; baseUrl: string; revisionField: string };

export async function main(argv: string[], io: ServeIo, stopped: Promise<unknown>): Promise<number> {
  let values: Options;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: SERVE_OPTIONS,
      allowPositionals: false,
      strict: true,
    }));
  } catch (error) {
    io.stderr.write(`serve: ${(error as Error).message}\nRun with --help for usage.\n`);
    return 2;
  }
  if (values.help) {
    io.stdout.write(`${USAGE}\n`);
    return 0;
  }
  let port: number;
  let provider: Provider;
  try {
    port = portOf(values.port);
    provider = providerOf(values, io.env);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.stderr.write(`serve: ${error.message}\n`);
    return 2;
  }
  const java = missingJava();
  if (java !== undefined) {
    io.stderr.write(`serve: ${java}\n`);
    return 1;
  }
  const output: Writer = { write: (text) => void io.stdout.write(text), isTTY: false };
  const outcome = await serve(provider, port, output, stopped);
  output.write(outcome.problems.length === 0 ? 'Stopped: every server and process it started.\n' : 'Stopped, after a failure (above).\n');
  return outcome.problems.length === 0 ? 0 : 1;
}

function portOf(given: string | undefined): number {
  if (given === undefined) return 0;
  const port = Number(given);
  if (!/^\d+$/.test(given) || port > 65_535) throw new UsageError('--port must be a whole number from 0 to 65535 (0: a free one)');
  return port;
}

function providerOf(values: Options, env: NodeJS.ProcessEnv): Provider {
  if (!env[ENV.baseUrl]?.trim()) return { kind: 'simulator', ...simulatorSize(values) };
  if (values.items !== undefined || values.seed !== undefined) {
    throw new UsageError(`--items and --seed are for the simulated provider; unset ${ENV.baseUrl} to use it`);
  }
  const { baseUrl, revisionField } = providerSettings(env);
  return { kind: 'real', baseUrl, revisionField };
}

/** The run built as `npm start` builds it, kept running until `stopped`. */
function serve(provider: Provider, port: number, output: Writer, stopped: Promise<unknown>) {
  let screen: Screen | undefined;
  const onAnswer = (answer: LocalApiAnswer): void => {
    const { route, connection } = describeRoute({ method: answer.method, rawPath: answer.rawPath });
    screen?.line(`   ${route === 'none' ? `${answer.method} (no route)` : route}${connection !== undefined ? ` [${connection}]` : ''} → ${answer.status}, ${answer.ms} ms`);
  };
  const keep = async (run: LocalRun, intro: (run: LocalRun) => Promise<void>): Promise<void> => {
    screen = run.screen;
    const kept = keepRunning(run, (line) => run.screen.line(`   ${line}`));
    try {
      await intro(run);
      await stopped;
      run.screen.line('Stopping: the event sources, the schedules, the client API, DynamoDB Local, s3rver, the emulator and the provider...');
    } finally {
      await kept.stop();
    }
  };
  const cwd = process.cwd();
  if (provider.kind === 'simulator') {
    const { itemCount, seed } = provider;
    let simulator: ProviderSimulator | undefined;
    const plan: RunPlan = {
      dataDir: join(cwd, '.local', 'serve'),
      inMemory: false,
      fresh: true,
      revisionField: 'revision',
      ...simulatorSystem({ told: true }),
      output,
      quiet: false,
      api: { port, onAnswer },
      provider: async () => {
        simulator = await startSimulator({ itemCount, seed, revisionField: 'revision' });
        return { baseUrl: simulator.baseUrl, close: () => simulator!.close() };
      },
    };
    return withLocalRun(plan, (run) => keep(run, async () => printSimulatorIntro(run, simulator!, seed)));
  }
  const freshnessHours = systemConfig({ baseUrl: provider.baseUrl }).freshnessHours;
  const plan: RunPlan = {
    dataDir: join(cwd, '.local', 'serve-provider'),
    inMemory: false,
    fresh: false,
    revisionField: provider.revisionField,
    // Longer than one invocation can take against a real provider, so a record is never delivered twice at once.
    visibilityTimeoutSeconds: 30,
    // A pass as deployed (freshnessHours), not one a minute of the developer's real account.
    tuning: { reconcilerFreshnessHours: freshnessHours },
    output,
    quiet: false,
    api: { port, onAnswer },
    provider: async () => ({ baseUrl: provider.baseUrl, close: async () => undefined }),
  };
  return withLocalRun(plan, (run) => keep(run, async () => printProviderIntro(run, provider.baseUrl, provider.revisionField)));
}

/** What runs, in a few lines (the reconciler's pace from the function's own environment). */
function printRunning(run: LocalRun): void {
  const { screen, system } = run;
  const freshness = Number(run.handlers.reconciler.environment[ENV.freshnessHours]);
  const reconciler = freshness === 0 ? 'each pass right after the last' : `a pass every ${freshness} h`;
  screen.line(
    `   running                the item sync on the sync and reconcile queues${system.config.discovery ? ' (discovery on)' : ''}, the token refresher every ${system.deployment.schedule.refresherEveryMinutes} min,`,
  );
  screen.line(`                          the reconciler every minute (${reconciler}), the change-events function and the changes writer on the tables' streams, the eraser`);
  screen.line(`   handler logs           ${display(run.logFile)} (JSON lines, as in CloudWatch)`);
  screen.line();
  screen.line(`Client API: ${run.api.url}`);
  screen.line('   It accepts any signature, or none (locally nothing checks one; deployed, IAM does), and listens on 127.0.0.1 only.');
  screen.line();
}

function printSimulatorIntro(run: LocalRun, simulator: ProviderSimulator, seed: number): void {
  const { screen } = run;
  const api = run.api.url;
  screen.line('content-sync, local system kept running: the deployed handlers against a simulated provider and local AWS services, on 127.0.0.1');
  screen.line(
    `   provider simulator     ${simulator.baseUrl}, three accounts (${CONNECTIONS.map((c) => `${c} ${simulator.account(c).itemCount} items`).join(', ')}; seed ${seed}), rate limit ${LOCAL_PROVIDER_LIMIT} requests/s for them all`,
  );
  const storage = run.system.storage.dynamodbStorage === 'disk' ? `data in ${display(run.dataDir)}, made anew at each start` : 'in memory';
  screen.line(`   DynamoDB Local, s3rver, the SQS and KMS emulator: ${storage}`);
  printRunning(run);
  screen.line(`Onboard an account: PUT its connection with the simulator's client id "${simulator.clientId}" and the account's refresh token.`);
  screen.line("   These refresh tokens are the simulator's fakes, made for this run; each works for one PUT (the simulator rotates it at its first use):");
  const width = Math.max(...CONNECTIONS.map((c) => c.length));
  for (const connection of CONNECTIONS) {
    const account = simulator.account(connection);
    const large = largeFileOf(accountItems(simulator, connection));
    const held = connection === DEFAULT_CONNECTION && large !== undefined ? `; ${large} is too large for a row: its GET answers an itemUrl` : '';
    screen.line(`   ${connection.padEnd(width)}  ${account.refreshToken}  root ${rootOf(simulator, connection)}${held}`);
  }
  const first = simulator.account(DEFAULT_CONNECTION);
  const root = rootOf(simulator, DEFAULT_CONNECTION);
  screen.line(`   $ curl -X PUT ${api}connections/${DEFAULT_CONNECTION} -H 'content-type: application/json' -d '{"clientId": "${first.clientId}", "refreshToken": "${first.refreshToken}"}'`);
  screen.line(`   $ curl -X POST ${api}connections/${DEFAULT_CONNECTION}/items -H 'content-type: application/json' -d '{"ids": ["${root}"]}'   (the root: discovery brings its tree)`);
  screen.line(`   $ curl ${api}connections/${DEFAULT_CONNECTION}/items/${root}`);
  screen.line(`   $ curl ${api}connections/${DEFAULT_CONNECTION}/changes`);
  screen.line('Ctrl-C stops it, and every server and process it started. Requests as they are answered:');
}

async function printProviderIntro(run: LocalRun, baseUrl: string, revisionField: string): Promise<void> {
  const { screen, system } = run;
  const api = run.api.url;
  const storage = system.storage.dynamodbStorage === 'disk' ? `kept in ${display(run.dataDir)} between runs` : 'in memory';
  screen.line(`content-sync, local system kept running against ${baseUrl}`);
  screen.line(`   revision field         ${revisionField}`);
  screen.line(`   DynamoDB Local, s3rver, the SQS and KMS emulator on 127.0.0.1: the tables and objects ${storage}`);
  printRunning(run);
  screen.line('Connections kept from earlier runs:');
  await listConnections(run);
  screen.line('Onboard a connection: PUT your client id and refresh token (put them in variables first; a token is never printed here):');
  screen.line(
    `   $ curl -X PUT ${api}connections/${DEFAULT_CONNECTION} -H 'content-type: application/json' -d "{\\"clientId\\": \\"$CLIENT_ID\\", \\"refreshToken\\": \\"$REFRESH_TOKEN\\"}"`,
  );
  screen.line(`   $ curl -X POST ${api}connections/${DEFAULT_CONNECTION}/items -H 'content-type: application/json' -d '{"ids": ["<id>"]}'`);
  screen.line('Ctrl-C stops it, and every server and process it started. Requests as they are answered:');
}
