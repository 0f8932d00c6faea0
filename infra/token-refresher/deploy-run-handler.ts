/**
 * The deploy-time run (a CDK trigger runs it during every deploy that changes it): invokes the
 * token refresher synchronously with `{"trigger":"deploy"}` and fails, and with it the deploy, when
 * the refresher fails. The refresher itself answers `skipped` while the credentials secret still
 * holds the placeholder.
 *
 * Shipped as inline code (see ./deploy-run.ts): compiled to CommonJS without bundling, so
 * `@aws-sdk/client-lambda` is the Node.js runtime's own SDK (a devDependency here for its types).
 * Reads REFRESHER_FUNCTION_NAME from its environment (infra/deployment.ts, deployRunDeployment).
 */
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';

/** The refresher's answer is logged and returned up to this many characters. */
const MAX_RESULT_CHARS = 2000;

const client = new LambdaClient({ maxAttempts: 8 });

export async function handler(): Promise<string> {
  const out = await client.send(
    new InvokeCommand({
      FunctionName: process.env['REFRESHER_FUNCTION_NAME'],
      InvocationType: 'RequestResponse',
      Payload: Buffer.from(JSON.stringify({ trigger: 'deploy' })),
    }),
  );
  const text = out.Payload ? Buffer.from(out.Payload).toString('utf8').slice(0, MAX_RESULT_CHARS) : '';
  if (out.FunctionError) throw new Error(`token refresher failed at deploy time: ${text}`);
  console.log(JSON.stringify({ message: 'token refresher ran at deploy time', result: text }));
  return text;
}
