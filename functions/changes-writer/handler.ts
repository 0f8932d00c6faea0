/** Lambda entry point of the changes writer: configuration and the DynamoDB client once per container. */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { createChangesWriterHandler } from './app.js';
import { loadChangesWriterConfig } from '../shared/config.js';
import { withoutSdkLogger } from '../shared/adapters/sdk-client.js';

const config = loadChangesWriterConfig();
// Created once per container and reused across invocations.
const dynamodbClient = withoutSdkLogger(new DynamoDBClient({}));

export const handler = createChangesWriterHandler({ config, dynamodb: dynamodbClient });
