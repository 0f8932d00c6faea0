/** Lambda entry point of the reconciler: configuration and AWS clients once per container. */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import { loadReconcilerConfig } from '../shared/config.js';
import { createReconcilerHandler } from './app.js';
import { withoutSdkLogger } from '../shared/adapters/sdk-client.js';

const config = loadReconcilerConfig();
// Created once per container and reused across invocations.
const dynamodbClient = withoutSdkLogger(new DynamoDBClient({}));
const sqsClient = withoutSdkLogger(new SQSClient({}));

export const handler = createReconcilerHandler({ config, dynamodb: dynamodbClient, sqs: sqsClient });
