/**
 * Lambda entry point of the item sync: configuration, AWS clients, the provider client and the
 * connections' access layer once per container.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import { loadSyncConfig } from '../shared/config.js';
import { createConnectionAccess } from '../shared/connections/access.js';
import { SYNC_SERVICE } from '../shared/metric-names.js';
import { createLogger } from '../shared/observability.js';
import { systemClock } from '../shared/ports.js';
import { HttpProviderClient } from '../shared/provider/provider-client.js';
import { createSyncHandler } from './app.js';
import { withoutSdkLogger } from '../shared/adapters/sdk-client.js';

const config = loadSyncConfig();
// Created once per container and reused across invocations.
const dynamodbClient = withoutSdkLogger(new DynamoDBClient({}));
const sqsClient = withoutSdkLogger(new SQSClient({}));
// The KMS client and its commands (tokens are sealed) are a module of its own, loaded at the first
// token opened (the literal is KMS_CLIENT_MODULE: lazy-modules.ts); then kept for the container's life.
const kms = async () => (await import('./adapters/kms-client.js')).createKmsApi();
const provider = new HttpProviderClient(config.provider);
// At INFO and above, each invocation's `record done` lines (DEBUG) are printed only if it logs an error.
const logger = createLogger(SYNC_SERVICE, { logLevel: config.logLevel, bufferDebug: true });
// Each connection's gate and token (its cache, refresh on demand and after a 401): the connections table.
const connections = createConnectionAccess({ config, dynamodb: dynamodbClient, kms, provider, clock: systemClock, logger });

export const handler = createSyncHandler({ config, dynamodb: dynamodbClient, sqs: sqsClient, connections, provider, logger });
