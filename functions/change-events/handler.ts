/** Lambda entry point of the change-events function: configuration, the EventBridge and DynamoDB clients once per container. */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { createChangeEventsHandler } from './app.js';
import { loadChangeEventsConfig } from '../shared/config.js';
import { withoutSdkLogger } from '../shared/adapters/sdk-client.js';

const config = loadChangeEventsConfig();
// Created once per container and reused across invocations.
const eventbridgeClient = withoutSdkLogger(new EventBridgeClient({}));
const dynamodbClient = withoutSdkLogger(new DynamoDBClient({}));

export const handler = createChangeEventsHandler({ config, eventbridge: eventbridgeClient, dynamodb: dynamodbClient });
