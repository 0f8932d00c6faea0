/** The account, region and credentials every fake AWS service and client of the harness uses. */
export const LOCAL_ACCOUNT_ID = '000000000000';
export const LOCAL_REGION = 'eu-west-1';
/** Dummy credentials: the fakes ignore signatures, but the SDK wants something to sign with. */
export const LOCAL_CREDENTIALS = { accessKeyId: 'local', secretAccessKey: 'local' } as const;
