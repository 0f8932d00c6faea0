/**
 * The sync queue's redrive policy: how often SQS may hand a record to the sync function before the
 * queue moves it to the dead-letter queue. No imports, so the CDK app and the development harness
 * use it without loading the functions.
 */
export const MAX_RECEIVE_COUNT = 5;
