import { afterAll, inject } from 'vitest';
import { RUN_ENDPOINT_VARIABLE } from '../dev/fakes/local-aws.js';
import { removeSynthDir } from './support/shared-modules.js';

// The run's DynamoDB Local (test/support/dynamodb-global.ts), for dev/fakes/local-dynamo.ts.
process.env[RUN_ENDPOINT_VARIABLE] = inject('dynamodbEndpoint');

// Runs after every test file, shared modules or not (test/support/shared-modules.ts).
afterAll(removeSynthDir);
