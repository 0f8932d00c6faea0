/** Lambda entry point of the token refresher: configuration and AWS clients once per container. */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { loadRefresherConfig } from '../shared/config.js';
import { createRefresherHandler } from './app.js';

const config = loadRefresherConfig();
// Created once per container and reused across invocations.
const dynamodbClient = new DynamoDBClient({});

export const handler = createRefresherHandler({ config, dynamodb: dynamodbClient });
