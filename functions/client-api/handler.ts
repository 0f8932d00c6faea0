/** Lambda entry point of the client API: configuration and AWS clients once per container. */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { KMSClient } from '@aws-sdk/client-kms';
import { SQSClient } from '@aws-sdk/client-sqs';
import { loadApiConfig } from '../shared/client-config.js';
import { createApiHandler } from './app.js';
import { withoutSdkLogger } from '../shared/adapters/sdk-client.js';

const config = loadApiConfig();
// Created once per container and reused across invocations.
const dynamodbClient = withoutSdkLogger(new DynamoDBClient({}));
const kmsClient = withoutSdkLogger(new KMSClient({}));
const sqsClient = withoutSdkLogger(new SQSClient({}));

export const handler = createApiHandler({ config, dynamodb: dynamodbClient, kms: kmsClient, sqs: sqsClient });
