/** The account, region and credentials every fake AWS service and client of the harness uses. */
export const LOCAL_ACCOUNT_ID = '000000000000';
export const LOCAL_REGION = 'eu-west-1';
/** Dummy credentials: the fakes ignore signatures, but the SDK wants something to sign with. */
export const LOCAL_CREDENTIALS = { accessKeyId: 'local', secretAccessKey: 'local' } as const;
/**
 * The variable that names the run's shared DynamoDB Local (`http://127.0.0.1:<port>`): set by
 * test/setup.ts from the test run's global setup, read by local-dynamo.ts. Here, in a module that
 * imports nothing, so that a test file that never reaches DynamoDB does not load the SDK for it.
 */
export const RUN_ENDPOINT_VARIABLE = 'CONTENT_SYNC_TEST_DYNAMODB_ENDPOINT';

/** The harness's clients are built as the functions build theirs: without the SDK's logger middleware. */
export { SDK_LOGGER_MIDDLEWARE, withoutSdkLogger } from '../../functions/shared/adapters/sdk-client.js';
