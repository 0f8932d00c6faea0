/** Lambda entry point of the token refresher: configuration and AWS clients once per container. */
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { loadRefresherConfig } from '../shared/config.js';
import { createRefresherHandler } from './app.js';

const config = loadRefresherConfig();
// Created once per container and reused across invocations.
const secretsClient = new SecretsManagerClient({});

export const handler = createRefresherHandler({ config, secrets: secretsClient });
