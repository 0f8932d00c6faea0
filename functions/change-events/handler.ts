/** Lambda entry point of the change-events function: configuration and the EventBridge client once per container. */
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { createChangeEventsHandler } from './app.js';
import { loadChangeEventsConfig } from '../shared/config.js';

const config = loadChangeEventsConfig();
// Created once per container and reused across invocations.
const eventbridgeClient = new EventBridgeClient({});

export const handler = createChangeEventsHandler({ config, eventbridge: eventbridgeClient });
