/**
 * The one place that fixes how every content-sync Lambda function is built and run: Node.js 22 on
 * arm64, an ESM bundle (minified, with source maps, the AWS SDK bundled in but for the credential
 * sources Lambda never uses: see LAMBDA_UNUSED_CREDENTIAL_SOURCES), X-Ray tracing when asked, its own log
 * group with the retention of the context key `logRetentionDays`, and its own role that may write to
 * that log group and nothing else until the stack grants more. No physical names.
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Duration, RemovalPolicy, Validations, type Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { LogLevel, NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { ENV, type LogLevel as FunctionLogLevel } from '../../functions/shared/config.js';
import type { FunctionDeployment, SqsEventSourceDeployment } from '../deployment.js';
import type { SqsEventSourceProps } from 'aws-cdk-lib/aws-lambda-event-sources';

/** The repository root, for entry paths and the lock file (independent of the working directory). */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Lets the ESM bundle load CommonJS dependencies that call `require` for Node built-ins. */
export const ESM_REQUIRE_BANNER =
  "import { createRequire as __contentSyncCreateRequire } from 'node:module'; const require = __contentSyncCreateRequire(import.meta.url);";

/**
 * Left out of the bundles (esbuild `--external`), the one exception to bundling the AWS SDK. The
 * SDK clients' default credential chain tries the environment first and loads every other source
 * with a dynamic `import()` only when the ones before it found nothing: SSO, shared config files,
 * credential_process, a web identity token file, then container and instance metadata. Lambda puts
 * the function's credentials in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 * AWS_SESSION_TOKEN), so these are never loaded there; bundled, they and the STS, SSO and sign-in
 * clients they use were over a quarter of each bundle. Should one ever be needed, the import
 * resolves to the Node.js runtime's own SDK. Static imports of these would fail at load:
 * test/infra/bundles.test.ts checks that the bundles import them dynamically only.
 */
export const LAMBDA_UNUSED_CREDENTIAL_SOURCES: readonly string[] = [
  '@aws-sdk/credential-provider-sso',
  '@aws-sdk/credential-provider-ini',
  '@aws-sdk/credential-provider-process',
  '@aws-sdk/credential-provider-web-identity',
  '@aws-sdk/credential-provider-http',
  '@smithy/credential-provider-imds',
];

export interface ContentSyncFunctionProps {
  /** Entry file relative to the repository root, e.g. `functions/token-refresher/handler.ts`. */
  readonly entry: string;
  /** Powertools service name; also the `service` dimension of the function's metrics. */
  readonly serviceName: string;
  /**
   * The context key `stage`: set as CONTENT_SYNC_STAGE only when given, and then every metric of the
   * function carries the dimension `stage` too (functions/shared/observability.ts).
   */
  readonly stage: string | undefined;
  readonly description: string;
  /** Powertools' log level (POWERTOOLS_LOG_LEVEL): the context key `logLevel`. */
  readonly logLevel: FunctionLogLevel;
  /** Days its log group keeps its logs: the context key `logRetentionDays` (a value CloudWatch Logs allows). */
  readonly logRetentionDays: number;
  readonly memorySize: number;
  readonly timeout: Duration;
  /** X-Ray active tracing (the context key `tracing`); off: no trace is recorded and the role has no X-Ray action. */
  readonly tracing: boolean;
  /** Contract variables; POWERTOOLS_*, NODE_OPTIONS and CONTENT_SYNC_STAGE are added here. */
  readonly environment: Record<string, string>;
  /**
   * Modules the function loads only when it needs them: `import()` paths as written in the entry's
   * folder (`./adapters/x.js`, of `./adapters/x.ts`). Each is left out of index.mjs and bundled on
   * its own, with the same options, at that path next to it (see lazyModuleCommands).
   */
  readonly lazyModules?: readonly string[];
}

/** A function's deployed memory, time-out, tracing and environment (infra/deployment.ts) as ContentSyncFunction props. */
export function functionProps(deployment: FunctionDeployment): Pick<ContentSyncFunctionProps, 'memorySize' | 'timeout' | 'tracing' | 'environment'> {
  return {
    memorySize: deployment.memoryMb,
    tracing: deployment.tracing,
    timeout: Duration.seconds(deployment.timeoutSeconds),
    environment: { ...deployment.environment },
  };
}

/** A work queue's event source as deployed (infra/deployment.ts) as SqsEventSource props. */
export function sqsEventSourceProps(deployment: SqsEventSourceDeployment): SqsEventSourceProps {
  return {
    batchSize: deployment.batchSize,
    ...(deployment.maxBatchingWindowSeconds === undefined ? {} : { maxBatchingWindow: Duration.seconds(deployment.maxBatchingWindowSeconds) }),
    reportBatchItemFailures: deployment.reportBatchItemFailures,
    maxConcurrency: deployment.maxConcurrency,
  };
}

export class ContentSyncFunction extends Construct {
  readonly function: NodejsFunction;
  readonly role: iam.Role;
  readonly logGroup: logs.LogGroup;
  /** X-Ray active tracing on (its role may then write traces: a wildcard resource). */
  readonly tracing: boolean;

  constructor(scope: Construct, id: string, props: ContentSyncFunctionProps) {
    super(scope, id);
    this.tracing = props.tracing;

    this.logGroup = new logs.LogGroup(this, 'LogGroup', {
      retention: props.logRetentionDays as logs.RetentionDays,
      // Logs belong to the stateless stack: tearing it down removes them (they expire anyway).
      removalPolicy: RemovalPolicy.DESTROY,
    });

    // Our own role instead of the AWSLambdaBasicExecutionRole managed policy: it may write to this
    // function's log group only.
    this.role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: `Execution role of the ${props.serviceName} function`,
    });
    this.role.addToPolicy(
      new iam.PolicyStatement({
        sid: 'WriteOwnLogs',
        actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
        resources: [this.logGroup.logGroupArn],
      }),
    );

    this.function = new NodejsFunction(this, 'Function', {
      entry: `${REPO_ROOT}${props.entry}`,
      handler: 'handler',
      projectRoot: REPO_ROOT,
      depsLockFilePath: `${REPO_ROOT}package-lock.json`,
      description: props.description,
      runtime: lambda.Runtime.NODEJS_22_X,
      architecture: lambda.Architecture.ARM_64,
      memorySize: props.memorySize,
      timeout: props.timeout,
      tracing: props.tracing ? lambda.Tracing.ACTIVE : lambda.Tracing.DISABLED,
      role: this.role,
      logGroup: this.logGroup,
      environment: {
        ...props.environment,
        POWERTOOLS_SERVICE_NAME: props.serviceName,
        POWERTOOLS_LOG_LEVEL: props.logLevel,
        NODE_OPTIONS: '--enable-source-maps',
        // Without a stage, no variable: the metrics keep `service` alone, as before stages existed.
        ...(props.stage === undefined ? {} : { [ENV.stage]: props.stage }),
      },
      bundling: {
        format: OutputFormat.ESM,
        target: 'node22',
        platform: 'node',
        mainFields: ['module', 'main'],
        banner: ESM_REQUIRE_BANNER,
        minify: true,
        sourceMap: true,
        // Stack traces need file names and lines, not the sources: keeps the asset small.
        sourcesContent: false,
        // Bundle the AWS SDK too: the functions run the exact versions they were tested with (but
        // for the credential sources Lambda never loads).
        externalModules: [...LAMBDA_UNUSED_CREDENTIAL_SOURCES, ...(props.lazyModules ?? [])],
        // Warnings and errors only: keeps `cdk synth` quiet.
        logLevel: LogLevel.WARNING,
        ...(props.lazyModules?.length
          ? {
              commandHooks: {
                beforeBundling: () => [],
                beforeInstall: () => [],
                afterBundling: (inputDir: string, outputDir: string) =>
                  props.lazyModules!.flatMap((module) => lazyModuleCommands(inputDir, outputDir, dirname(props.entry), module)),
              },
            }
          : {}),
      },
    });
  }

  /** Adds one statement (its own sid) to the function's role. */
  allow(statement: iam.PolicyStatementProps): void {
    this.role.addToPolicy(new iam.PolicyStatement(statement));
  }
}

/** Why a traced content-sync function's role holds a wildcard resource: X-Ray's two actions have no other. */
export const XRAY_WILDCARD_REASON =
  'X-Ray tracing: xray:PutTraceSegments and xray:PutTelemetryRecords support no resource-level permissions.';

/**
 * The cdk-nag findings a content-sync function has, acknowledged: its runtime (AwsSolutions-L1) and,
 * when its role holds a wildcard resource (X-Ray's when traced; `otherWildcards` says why else), that
 * (AwsSolutions-IAM5).
 */
export function acknowledgeFunctionFindings(fn: ContentSyncFunction, otherWildcards?: string): void {
  Validations.of(fn.function).acknowledge({
    id: 'AwsSolutions-L1',
    reason: 'Node.js 22 is the runtime the project targets and tests for; moving to a newer runtime is a deliberate, tested change.',
  });
  const reasons = [...(fn.tracing ? [XRAY_WILDCARD_REASON] : []), ...(otherWildcards !== undefined ? [otherWildcards] : [])];
  if (reasons.length > 0) Validations.of(fn.role).acknowledge({ id: 'AwsSolutions-IAM5[Resource::*]', reason: reasons.join(' ') });
}

/**
 * The shell commands that bundle one lazily loaded module next to index.mjs: esbuild with the
 * options the function's own bundle gets (ESM, node22, minified, source map without sources, the
 * createRequire banner, the SDK inside but for the credential sources Lambda never uses), to
 * `<outputDir>/<module>`, with a package.json that makes `.js` files in its folder ES modules.
 */
export function lazyModuleCommands(inputDir: string, outputDir: string, entryDir: string, module: string): string[] {
  if (!/^\.\/[\w./-]+\.js$/.test(module) || module.includes('..')) {
    throw new Error(`lazy module ${module}: expected a path like ./folder/name.js under the entry's folder`);
  }
  const source = join(inputDir, entryDir, module.replace(/\.js$/, '.ts'));
  const outfile = join(outputDir, module);
  const esbuild = join(inputDir, 'node_modules', '.bin', 'esbuild');
  const args = [
    '--bundle',
    source,
    '--target=node22',
    '--platform=node',
    '--format=esm',
    `--outfile=${outfile}`,
    '--minify',
    '--sourcemap',
    '--sources-content=false',
    ...LAMBDA_UNUSED_CREDENTIAL_SOURCES.map((name) => `--external:${name}`),
    '--log-level=warning',
    `--banner:js=${ESM_REQUIRE_BANNER}`,
    '--main-fields=module,main',
  ];
  return [
    `mkdir -p ${shellQuote(dirname(outfile))}`,
    `printf '%s' '{"type":"module"}' > ${shellQuote(join(dirname(outfile), 'package.json'))}`,
    [esbuild, ...args].map(shellQuote).join(' '),
  ];
}

function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

/**
 * A role of the stack's own that lets EventBridge Scheduler (of this account only) invoke `target`,
 * with cdk-nag's one finding on it (LambdaInvoke's grant on the function's ARN:*) acknowledged.
 * `name` says which function, as in "the token refresher".
 */
export function addSchedulerInvokeRole(stack: Stack, id: string, target: ContentSyncFunction, name: string): iam.Role {
  const role = new iam.Role(stack, id, {
    assumedBy: new iam.ServicePrincipal('scheduler.amazonaws.com', {
      conditions: { StringEquals: { 'aws:SourceAccount': stack.account } },
    }),
    description: `Lets EventBridge Scheduler invoke the ${name}`,
  });
  const functionLogicalId = stack.getLogicalId(target.function.node.defaultChild as lambda.CfnFunction);
  Validations.of(role).acknowledge({
    id: `AwsSolutions-IAM5[Resource::<${functionLogicalId}.Arn>:*]`,
    reason: `LambdaInvoke's grant: lambda:InvokeFunction on the ${name} and its versions/aliases (ARN:*), that one function only.`,
  });
  return role;
}
