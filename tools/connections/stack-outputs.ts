/**
 * Where the deployment is, from its stateful stack's outputs (CloudFormation DescribeStacks): the
 * connections CLI's last resort when neither a flag nor a variable names a table or the bucket.
 * Read once per run, and only when needed.
 */
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';

/** The stack's outputs by OutputKey; throws when the stack cannot be read. */
export type StackOutputs = (stackName: string) => Promise<Record<string, string>>;

/** The stateful stack's name as `cdk deploy` creates it (infra/content-sync-app.ts STACK_NAMES.stateful). */
export const DEFAULT_STACK = 'ContentSyncStateful';

/** The outputs that name what the CLI uses. */
export const OUTPUT_KEYS = {
  connectionsTable: 'ConnectionsTableName',
  itemsTable: 'ItemsTableName',
  itemsBucket: 'ItemsBucketName',
  controlTable: 'ControlTableName',
} as const;

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
