/**
 * Where a deployment is, from its stateful stack's outputs (CloudFormation DescribeStacks): what the
 * operator CLIs read when no flag or variable names a table, a bucket or a queue. The stack is
 * named by `--stage <stage>` (functions/shared/stage.ts: `ContentSyncStateful-<stage>`, the default
 * `ContentSyncStateful`) or, for a stack of another name, `--stack <name>`. Read once per run, and
 * only when needed.
 */
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { stackNames, stageProblem } from '../functions/shared/stage.js';

/** The stack's outputs by OutputKey; throws when the stack cannot be read. */
export type StackOutputs = (stackName: string) => Promise<Record<string, string>>;

/** The stateful stack's name as `cdk deploy` creates it without a stage. */
export const DEFAULT_STACK = stackNames(undefined).stateful;

/** The outputs that name what the CLIs use. */
export const OUTPUT_KEYS = {
  connectionsTable: 'ConnectionsTableName',
  connectionsKey: 'ConnectionsKeyArn',
  itemsTable: 'ItemsTableName',
  itemsBucket: 'ItemsBucketName',
  changesTable: 'ChangesTableName',
  controlTable: 'ControlTableName',
  queue: 'QueueUrl',
  reconcileQueue: 'ReconcileQueueUrl',
} as const;

/**
 * The stateful stack `--stage` or `--stack` names (DEFAULT_STACK when neither does), or the usage
 * mistake: both given, or a stage that breaks the rule of the context key `stage`.
 */
export function statefulStackName(options: { stage?: string | undefined; stack?: string | undefined }): { stackName: string } | { problem: string } {
  const stage = options.stage?.trim();
  const stack = options.stack?.trim();
  if (options.stage !== undefined && options.stack !== undefined) return { problem: 'give --stage or --stack, not both' };
  if (stage !== undefined) {
    const problem = stageProblem(stage);
    return problem === undefined ? { stackName: stackNames(stage).stateful } : { problem: `--stage: ${problem}` };
  }
  return { stackName: stack || DEFAULT_STACK };
}

/**
 * Why the stack could not be read, in full: the error's name and message (DescribeStacks' errors
 * name the stack, the region or the credentials at fault; none holds a token of ours).
 */
export function stackReadFailure(stackName: string, error: unknown): string {
  const e = error instanceof Error ? error : new Error(String(error));
  return `reading the stack ${stackName} failed: ${e.name}: ${e.message}`;
}

/** DescribeStacks with the SDK's standard configuration (AWS_REGION, AWS_PROFILE, AWS_ENDPOINT_URL_CLOUDFORMATION...). */
export const describeStackOutputs: StackOutputs = async (stackName) => {
  const client = new CloudFormationClient({});
  try {
    const out = await client.send(new DescribeStacksCommand({ StackName: stackName }));
    const outputs: Record<string, string> = {};
    for (const output of out.Stacks?.[0]?.Outputs ?? []) {
      if (output.OutputKey && output.OutputValue !== undefined) outputs[output.OutputKey] = output.OutputValue;
    }
    return outputs;
  } finally {
    client.destroy();
  }
};
