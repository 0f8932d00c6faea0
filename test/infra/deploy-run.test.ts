/**
 * The deploy-time run's code as it is deployed: infra/token-refresher/deploy-run-handler.ts compiled to the inline
 * CommonJS of the template (it uses the Lambda runtime's SDK, so it is run here with a stand-in
 * LambdaClient): it invokes the refresher synchronously with {"trigger":"deploy"}, passes a
 * `skipped` or `refreshed` answer, and throws (failing the deploy) when the refresher fails.
 */
import { describe, expect, it } from 'vitest';
import { DEPLOY_RUN_CODE } from '../../infra/token-refresher/deploy-run.js';

interface Invocation {
  FunctionName: string;
  InvocationType: string;
  Payload: Uint8Array;
}

function load(answer: { Payload?: Uint8Array; FunctionError?: string } | Error) {
  const sent: Invocation[] = [];
  class InvokeCommand {
    constructor(readonly input: Invocation) {}
  }
  class LambdaClient {
    async send(command: InvokeCommand) {
      sent.push(command.input);
      if (answer instanceof Error) throw answer;
      return answer;
    }
  }
  const fakeRequire = (name: string) => {
    if (name !== '@aws-sdk/client-lambda') throw new Error(`unexpected require ${name}`);
    return { LambdaClient, InvokeCommand };
  };
  const module = { exports: {} as { handler?: () => Promise<string> } };
  const previous = process.env.REFRESHER_FUNCTION_NAME;
  process.env.REFRESHER_FUNCTION_NAME = 'refresher-fn';
  new Function('require', 'exports', 'module', DEPLOY_RUN_CODE)(fakeRequire, module.exports, module);
  const run = async () => {
    try {
      return await module.exports.handler!();
    } finally {
      if (previous === undefined) delete process.env.REFRESHER_FUNCTION_NAME;
      else process.env.REFRESHER_FUNCTION_NAME = previous;
    }
  };
  return { run, sent };
}

const bytes = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

describe('deploy-time run', () => {
  it('invokes the refresher synchronously with {"trigger":"deploy"} and passes a skip', async () => {
    const { run, sent } = load({ Payload: bytes({ status: 'skipped', reason: 'credentials not configured' }) });
    await expect(run()).resolves.toContain('"skipped"');
    expect(sent).toHaveLength(1);
    expect(sent[0]!.FunctionName).toBe('refresher-fn');
    expect(sent[0]!.InvocationType).toBe('RequestResponse');
    expect(JSON.parse(Buffer.from(sent[0]!.Payload).toString('utf8'))).toEqual({ trigger: 'deploy' });
  });

  it('passes a refresh', async () => {
    const { run } = load({ Payload: bytes({ status: 'refreshed', refreshedAt: '2026-01-01T00:00:00.000Z', rotated: false }) });
    await expect(run()).resolves.toContain('"refreshed"');
  });

  it('fails (and with it the deploy) when the refresher fails', async () => {
    const { run } = load({ FunctionError: 'Unhandled', Payload: bytes({ errorType: 'ProviderError', errorMessage: 'getToken: HTTP 401' }) });
    await expect(run()).rejects.toThrow(/token refresher failed at deploy time: .*getToken: HTTP 401/);
  });

  it('fits in an inline ZipFile (4096 bytes) and loads only the runtime SDK', () => {
    expect(Buffer.byteLength(DEPLOY_RUN_CODE, 'utf8')).toBeLessThanOrEqual(4096);
    expect([...DEPLOY_RUN_CODE.matchAll(/require\(["']([^"']+)["']\)/g)].map((match) => match[1])).toEqual(['@aws-sdk/client-lambda']);
  });

  it('fails when the refresher cannot be invoked', async () => {
    const { run } = load(new Error('AccessDeniedException'));
    await expect(run()).rejects.toThrow('AccessDeniedException');
  });
});
