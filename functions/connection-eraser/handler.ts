/** Lambda entry point of the eraser: configuration and AWS clients once per container. */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import { loadEraserConfig } from '../shared/client-config.js';
import { createEraserHandler } from './app.js';
import { withoutSdkLogger } from '../shared/adapters/sdk-client.js';

const config = loadEraserConfig();
// Created once per container and reused across invocations.
const dynamodbClient = withoutSdkLogger(new DynamoDBClient({}));
// The S3 client is a module of its own (lazy-modules.ts), loaded when an erase first deletes objects.
const s3Client = async () => (await import('./adapters/s3-client.js')).createS3Client();
const sqsClient = withoutSdkLogger(new SQSClient({}));

export const handler = createEraserHandler({ config, dynamodb: dynamodbClient, s3: s3Client, sqs: sqsClient });
