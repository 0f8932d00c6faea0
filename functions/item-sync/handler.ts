/** Lambda entry point of the item sync: configuration and AWS clients once per container. */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import { loadSyncConfig } from '../shared/config.js';
import { createSyncHandler } from './app.js';

const config = loadSyncConfig();
// Created once per container and reused across invocations.
const dynamodbClient = new DynamoDBClient({});
const sqsClient = new SQSClient({});
const secretsClient = new SecretsManagerClient({});

export const handler = createSyncHandler({ config, dynamodb: dynamodbClient, sqs: sqsClient, secrets: secretsClient });
