/**
 * `npm run connections`: the operator's CLI for a deployment's connections (docs/connections.md).
 *
 *   <refresh token> | npm run connections -- add <id> --client-id <client id>
 *   npm run connections -- list [--json]
 *   npm run connections -- pause <id> | resume <id>
 *   npm run connections -- remove <id> [--purge] [--yes]
 *   npm run connections -- mend-changes <id> [--retention-days <days>]
 *   npm run connections -- import-items --from-table <old items table>
 *
 * The deployment's tables and bucket come from the flags, else from the variables the functions
 * read (CONNECTIONS_TABLE_NAME, ITEMS_TABLE_NAME, ITEMS_BUCKET_NAME), else from the stateful stack's
 * outputs (`--stage <stage>` or `--stack <name>`, default ContentSyncStateful: tools/stack-outputs.ts).
 * AWS clients use the SDK's standard configuration; the S3 client addresses the bucket path-style
 * when an endpoint is set (AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL), as a local endpoint needs. Exit
 * status: 0 done, 1 failed (a stack that cannot be read among them), 2 usage error. The commands
 * are in commands.ts; `runCli` is exported for the tests.
 */
import { parseArgs } from 'node:util';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import { KMSClient } from '@aws-sdk/client-kms';
import { DynamoDbConnectionStore } from '../../functions/shared/adapters/dynamodb-connection-store.js';
import { AwsItemsEraser } from '../../functions/shared/adapters/items-eraser.js';
import { kmsApi } from '../../functions/shared/adapters/kms-api.js';
import { KmsDataKeys } from '../../functions/shared/adapters/kms-data-keys.js';
import { NO_TOKENS, TokenSealer, type Sealer } from '../../functions/shared/connections/sealing.js';
import { DynamoDbCursorStore } from '../../functions/reconciler/adapters/dynamodb-cursor-store.js';
import { CHANGES_RETENTION_DAYS_RANGE, ENV } from '../../functions/shared/config.js';
import { MEND_SETTLED_AFTER_MS } from '../../functions/shared/changes/mend.js';
import { NUMBER_RULES } from '../../infra/context.js';
import { connectionIdProblem } from '../../functions/shared/connections/connection.js';
import type { ConnectionStore } from '../../functions/shared/connections/ports.js';
import { systemClock, type Clock } from '../../functions/shared/ports.js';
import {
  addConnection,
  CliFailure,
  importOldItems,
  listConnections,
  mendChanges,
  pauseConnection,
  removeConnection,
  resumeConnection,
  sealConnections,
  UsageError,
  type CliIo,
  type CommandContext,
} from './commands.js';
import { DEFAULT_STACK, describeStackOutputs, OUTPUT_KEYS, stackReadFailure, statefulStackName, type StackOutputs } from '../stack-outputs.js';
import { runWhenMain } from '../cli-main.js';

export { PURGE_SETTLE_SECONDS, type CliIo } from './commands.js';

/** `changesRetentionDays`'s default (infra/context.ts): mend-changes' when nothing else says it. */
const CHANGES_RETENTION_FALLBACK = NUMBER_RULES.changesRetentionDays.fallback;

export const USAGE = `Usage:
  <refresh token> | npm run connections -- add <id> --client-id <client id>
  npm run connections -- list [--json]
  npm run connections -- pause <id>
  npm run connections -- resume <id>
  npm run connections -- remove <id> [--purge] [--yes]
  npm run connections -- mend-changes <id> [--retention-days <days>]
  npm run connections -- seal
  npm run connections -- import-items --from-table <old items table>

Manages the connections of a deployment: one per account that authorized the client application.

Commands:
  add <id> --client-id <client id>
        Add a connection, or replace its credentials (status back to active, refresh health
        reset: that is how a failing connection recovers). The refresh token is read from
        standard input (surrounding whitespace trimmed); at a terminal it is typed, not shown.
  list [--json]
        Every connection: status, refresh health (last success, last failure and its reason,
        consecutive failures), ids known, last write, last reconciliation pass (the latest ended
        pass that started after the connection was added: every id it held then was checked
        again). --json: the same as JSON (never a token).
  pause <id>
        Its messages wait (nothing is lost) until it is resumed.
  resume <id>
        A paused connection is synced again. A failing one is not paused: add it again with new
        credentials.
  remove <id> [--purge] [--yes]
        Its messages are dead-lettered from now on; its tokens are deleted. --purge also deletes
        its rows in the items table, its objects in the items bucket and then its row in the
        connections table, after you type the connection id to confirm (--yes: without asking).
  mend-changes <id> [--retention-days <days>]
        Append to a paused or failing connection's changes feed the changes it lacks (records
        the changes writer could not number, alarmed): each row written more than ${MEND_SETTLED_AFTER_MS / 3_600_000} hours ago
        and within the feed's retention is compared with its id's last change. Run twice, it
        appends nothing more. --retention-days: changesRetentionDays, when the feed keeps no
        change that says it (default ${CHANGES_RETENTION_FALLBACK} or ${ENV.changesRetentionDays}).
  seal
        Upgrade from a deployment that stored tokens in clear: seal every token still stored in
        clear under the connections key (rows written since the upgrade are sealed already).
  import-items --from-table <old items table>
        Upgrade from a one-account deployment: copy every row of the old items table (key id)
        into the items table as the connection "default"; a row already written is kept, a row
        whose id is not an item id (over 1,024 bytes in UTF-8, say) is refused (exit 1).

Where the deployment is (a flag, else the variable, else the stack's output):
  --connections-table <name>   ${ENV.connectionsTableName}   ${OUTPUT_KEYS.connectionsTable}
  --connections-key <arn>      ${ENV.connectionsKeyArn}   ${OUTPUT_KEYS.connectionsKey}   (add, seal: seals tokens)
  --items-table <name>         ${ENV.itemsTableName}   ${OUTPUT_KEYS.itemsTable}   (remove --purge, mend-changes, import-items)
  --items-bucket <name>        ${ENV.itemsBucketName}  ${OUTPUT_KEYS.itemsBucket}  (remove --purge)
  --changes-table <name>       ${ENV.changesTableName}  ${OUTPUT_KEYS.changesTable}  (remove --purge, mend-changes)
  --control-table <name>       ${ENV.controlTableName}  ${OUTPUT_KEYS.controlTable}  (list: the last passes)
  --stage <stage>              the deployment whose stateful stack's outputs are read
                               (${DEFAULT_STACK}-<stage>; default ${DEFAULT_STACK})
  --stack <name>               the stateful stack whose outputs are read, by its name

A connection id is 1-64 characters of A-Z a-z 0-9 . _ -
AWS region, credentials and endpoints come from the SDK's standard configuration (AWS_REGION,
AWS_PROFILE, AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_S3...). Nothing printed holds a token.
Exit status: 0 done, 1 failed (an unknown connection, an AWS error, a stack that cannot be read...),
2 usage error.`;

export interface CliDeps {
  dynamodb?: DynamoDBClient;
  s3?: S3Client;
  kms?: KMSClient;
  /** The connections table; default the DynamoDB adapter over `dynamodb`, its tokens sealed under the connections key. */
  store?: ConnectionStore;
  /** Where the variables are read; default process.env. */
  env?: NodeJS.ProcessEnv;
  /** The stateful stack's outputs; default CloudFormation DescribeStacks. */
  stackOutputs?: StackOutputs;
  clock?: Clock;
  sleep?: (ms: number) => Promise<void>;
}

/** The command line's options, as parseArgs reads them (test/docs holds the docs to them). */
export const OPTIONS = {
  'client-id': { type: 'string' },
  json: { type: 'boolean' },
  purge: { type: 'boolean' },
  yes: { type: 'boolean', short: 'y' },
  'from-table': { type: 'string' },
  'connections-table': { type: 'string' },
  'connections-key': { type: 'string' },
  'items-table': { type: 'string' },
  'items-bucket': { type: 'string' },
  'changes-table': { type: 'string' },
  'control-table': { type: 'string' },
  'retention-days': { type: 'string' },
  stage: { type: 'string' },
  stack: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Option = keyof typeof OPTIONS;
type Values = Partial<Record<Option, string | boolean>>;

/** The options every command takes: which deployment, and --help. */
export const DEPLOYMENT_OPTIONS: readonly Option[] = ['stage', 'stack', 'help'];

/** The options each command takes, beyond the deployment's and --help. */
export const COMMANDS: Record<string, { id: boolean; options: Option[] }> = {
  add: { id: true, options: ['client-id', 'connections-table', 'connections-key'] },
  list: { id: false, options: ['json', 'connections-table', 'control-table'] },
  pause: { id: true, options: ['connections-table'] },
  resume: { id: true, options: ['connections-table'] },
  remove: { id: true, options: ['purge', 'yes', 'connections-table', 'items-table', 'items-bucket', 'changes-table'] },
  'mend-changes': { id: true, options: ['retention-days', 'connections-table', 'items-table', 'changes-table'] },
  seal: { id: false, options: ['connections-table', 'connections-key'] },
  'import-items': { id: false, options: ['from-table', 'items-table'] },
};

/** Runs the CLI; returns the exit status. */
export async function runCli(argv: string[], io: CliIo = process, deps: CliDeps = {}): Promise<number> {
  try {
    const parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
    const values = parsed.values as Values;
    if (values.help || parsed.positionals.length === 0) {
      io[values.help ? 'stdout' : 'stderr'].write(`${USAGE}\n`);
      return values.help ? 0 : 2;
    }
    const [command, ...rest] = parsed.positionals;
    await dispatch(command!, rest, values, io, deps);
    return 0;
  } catch (error) {
    const e = error as Error;
    if (e instanceof UsageError || (e as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      io.stderr.write(`connections: ${e.message}\nRun with --help for usage.\n`);
      return 2;
    }
    io.stderr.write(`connections: ${e instanceof CliFailure ? '' : `${e.name}: `}${e.message}\n`);
    return 1;
  }
}

async function dispatch(command: string, args: string[], values: Values, io: CliIo, deps: CliDeps): Promise<void> {
  const spec = COMMANDS[command];
  if (!spec) throw new UsageError(`unknown command "${command}"; the commands are ${Object.keys(COMMANDS).join(', ')}`);
  for (const option of Object.keys(values) as Option[]) {
    if (!DEPLOYMENT_OPTIONS.includes(option) && !spec.options.includes(option)) throw new UsageError(`${command} takes no --${option}`);
  }
  if (args.length !== (spec.id ? 1 : 0)) throw new UsageError(spec.id ? `${command} takes one connection id` : `${command} takes no arguments`);
  const id = args[0];
  if (id !== undefined) {
    const problem = connectionIdProblem(id);
    if (problem !== undefined) throw new UsageError(`bad connection id: ${problem}`);
  }
  const env = deps.env ?? process.env;
  const stack = statefulStackName({ stage: values.stage as string | undefined, stack: values.stack as string | undefined });
  if ('problem' in stack) throw new UsageError(stack.problem);
  const { stackName } = stack;
  let outputs: Promise<Record<string, string>> | undefined;
  const readOutputs = (): Promise<Record<string, string>> => (outputs ??= (deps.stackOutputs ?? describeStackOutputs)(stackName));
  /**
   * A setting from its flag, else its variable, else the stack's output; else why it is not known,
   * and whether that is the stack failing to be read (`failed`: an AWS error, not a usage mistake).
   * Settings are found before a refresh token is read: no error here can hold one.
   */
  const find = async (flag: Option, variable: string, outputKey: string, what: string): Promise<{ value: string } | { problem: string; failed: boolean }> => {
    const value = (values[flag] as string | undefined)?.trim() || env[variable]?.trim();
    if (value) return { value };
    let fromStack: string | undefined;
    let why = `the stack ${stackName} has no output ${outputKey}`;
    let failed = false;
    try {
      fromStack = (await readOutputs())[outputKey]?.trim();
    } catch (error) {
      why = stackReadFailure(stackName, error);
      failed = true;
    }
    if (!fromStack) return { problem: `${what} is not known: give --${flag}, set ${variable}, or name the deployment with --stage or --stack (${why})`, failed };
    return { value: fromStack };
  };
  const setting = async (flag: Option, variable: string, outputKey: string, what: string): Promise<string> => {
    const found = await find(flag, variable, outputKey, what);
    if ('problem' in found) throw found.failed ? new CliFailure(found.problem) : new UsageError(found.problem);
    return found.value;
  };
  let dynamodb: DynamoDBClient | undefined = deps.dynamodb;
  const dynamoClient = (): DynamoDBClient => (dynamodb ??= new DynamoDBClient({}));
  let s3: S3Client | undefined = deps.s3;
  let store: ConnectionStore | undefined;
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  // Settings are found before anything is read or written.
  const connectionsTable = command !== 'import-items' && !deps.store
    ? await setting('connections-table', ENV.connectionsTableName, OUTPUT_KEYS.connectionsTable, 'the connections table')
    : 'the connections table';
  // Only `add` and `seal` seal a token (and `add` opens the stored one to compare): the key, before the token is read.
  let sealer: Sealer = NO_TOKENS;
  if ((command === 'add' || command === 'seal') && !deps.store) {
    const keyArn = await setting('connections-key', ENV.connectionsKeyArn, OUTPUT_KEYS.connectionsKey, 'the connections key');
    sealer = new TokenSealer(new KmsDataKeys(kmsApi(deps.kms ?? new KMSClient({})), keyArn));
  }
  // Only `list` reads the reconciler's cursor; without a control table it lists all but the last passes.
  const controlTable = command === 'list' ? await find('control-table', ENV.controlTableName, OUTPUT_KEYS.controlTable, 'the control table') : undefined;
  const context: CommandContext = {
    io,
    store: () => (store ??= deps.store ?? new DynamoDbConnectionStore(dynamoClient(), connectionsTable, { sealer, setting: `--connections-table or ${ENV.connectionsTableName}` })),
    dynamodb: dynamoClient,
    items: (targets) =>
      new AwsItemsEraser({ dynamodb: dynamoClient(), s3: (s3 ??= new S3Client(s3ClientConfig(env))), itemsTable: targets.itemsTable, itemsBucket: targets.itemsBucket, changesTable: targets.changesTable, sleep }),
    clock: deps.clock ?? systemClock,
    sleep,
    reconcileCursor:
      controlTable === undefined ? 'not asked for' : 'problem' in controlTable ? controlTable.problem : () => new DynamoDbCursorStore(dynamoClient(), controlTable.value).read(),
  };

  switch (command) {
    case 'add': {
      const clientId = values['client-id'] as string | undefined;
      if (clientId === undefined) throw new UsageError('add needs --client-id <client id>');
      return addConnection(context, id!, clientId);
    }
    case 'list':
      return listConnections(context, values.json === true);
    case 'pause':
      return pauseConnection(context, id!);
    case 'resume':
      return resumeConnection(context, id!);
    case 'remove': {
      if (values.yes && !values.purge) throw new UsageError('--yes goes with --purge');
      const purge = values.purge
        ? {
            itemsTable: await setting('items-table', ENV.itemsTableName, OUTPUT_KEYS.itemsTable, 'the items table'),
            itemsBucket: await setting('items-bucket', ENV.itemsBucketName, OUTPUT_KEYS.itemsBucket, 'the items bucket'),
            changesTable: await setting('changes-table', ENV.changesTableName, OUTPUT_KEYS.changesTable, 'the changes table'),
            connectionsTable,
          }
        : undefined;
      return removeConnection(context, id!, { ...(purge ? { purge } : {}), yes: values.yes === true });
    }
    case 'mend-changes': {
      const text = ((values['retention-days'] as string | undefined) ?? env[ENV.changesRetentionDays] ?? String(CHANGES_RETENTION_FALLBACK)).trim();
      const retentionDays = Number(text);
      const { min, max } = CHANGES_RETENTION_DAYS_RANGE;
      if (!/^\d+$/.test(text) || retentionDays < min || retentionDays > max) {
        throw new UsageError(`--retention-days (or ${ENV.changesRetentionDays}) must be a whole number of days from ${min} to ${max}`);
      }
      return mendChanges(context, id!, {
        itemsTable: await setting('items-table', ENV.itemsTableName, OUTPUT_KEYS.itemsTable, 'the items table'),
        changesTable: await setting('changes-table', ENV.changesTableName, OUTPUT_KEYS.changesTable, 'the changes table'),
        retentionDays,
      });
    }
    case 'seal':
      return sealConnections(context);
    case 'import-items': {
      const fromTable = (values['from-table'] as string | undefined)?.trim();
      if (!fromTable) throw new UsageError('import-items needs --from-table <old items table>');
      const itemsTable = await setting('items-table', ENV.itemsTableName, OUTPUT_KEYS.itemsTable, 'the items table');
      if (fromTable === itemsTable) throw new UsageError('--from-table names the items table itself: give the old one-account table');
      return importOldItems(context, fromTable, itemsTable);
    }
  }
}

/**
 * The S3 client's settings: with an endpoint set by the SDK's standard variables (AWS_ENDPOINT_URL_S3,
 * else AWS_ENDPOINT_URL; unless AWS_IGNORE_CONFIGURED_ENDPOINT_URLS), that endpoint, path-style.
 */
export function s3ClientConfig(env: NodeJS.ProcessEnv): S3ClientConfig {
  if (env[ENV.ignoreConfiguredEndpointUrls]?.trim().toLowerCase() === 'true') return {};
  const endpoint = env[ENV.s3EndpointUrl]?.trim() || env[ENV.endpointUrl]?.trim();
  return endpoint ? { endpoint, forcePathStyle: true } : {};
}

runWhenMain(import.meta.url, 'connections', (argv) => runCli(argv));
