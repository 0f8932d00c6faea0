/** Lambda entry point of the token refresher: configuration and AWS clients once per container. */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { KMSClient } from '@aws-sdk/client-kms';
import { loadRefresherConfig } from '../shared/config.js';
import { createRefresherHandler } from './app.js';
import { withoutSdkLogger } from '../shared/adapters/sdk-client.js';

const config = loadRefresherConfig();
// Created once per container and reused across invocations.
const dynamodbClient = withoutSdkLogger(new DynamoDBClient({}));
const kmsClient = withoutSdkLogger(new KMSClient({}));

export const handler = createRefresherHandler({ config, dynamodb: dynamodbClient, kms: kmsClient });
