/**
 * The test run's one DynamoDB Local (vitest global setup): started once on 127.0.0.1, in memory,
 * before any test file; its endpoint handed to every worker (test/setup.ts puts it where
 * dev/fakes/local-dynamo.ts looks); stopped when the run ends, passed or failed. Each test file
 * makes its own tables, in a namespace of its own.
 *
 * Without Java the run stops here, at once, with the one line that names Java 17 and how to install it.
 */
import '../../dev/system/sdk-notice.js';
import type { TestProject } from 'vitest/node';
import { JavaMissingError, startDynamoDbLocal } from '../../dev/fakes/dynamodb-local.js';

declare module 'vitest' {
  export interface ProvidedContext {
    dynamodbEndpoint: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  let server;
  try {
    // The suite's requests are many and varied, over minutes: the first compiler tier only (ServerOptions.jit).
    server = await startDynamoDbLocal({ jit: 'quick' });
  } catch (error) {
    if (error instanceof JavaMissingError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
  project.provide('dynamodbEndpoint', server.endpoint);
  return () => server.close();
}
