/**
 * @content-sync/client: a typed client of content-sync's client API (docs/client-api.md), SigV4-
 * signed with the AWS SDK's default credential chain, with iterators over every list, retries and
 * time-outs. The package's README shows it in use.
 */
export {
  createClient,
  type CallOptions,
  type Change,
  type ChangesPage,
  type ClientOptions,
  type ConnectionCredentials,
  type ConnectionStatus,
  type ConnectionsPage,
  type ConnectionView,
  type ContentSyncClient,
  type ErasingConnectionView,
  type Item,
  type Lane,
  type PageOptions,
  type RemovedConnectionView,
  type SendResult,
  type SnapshotCursors,
  type SnapshotPage,
} from './client.js';
export { API_ERROR_CODES, ContentSyncError, type ApiErrorCode, type ErrorCode, type GatewayErrorCode, type RejectedId, type TransportErrorCode } from './errors.js';
export { regionOfUrl, type Credentials, type CredentialsProvider, type RequestSigner, type SigningRequest } from './signing.js';
export { DEFAULT_BACKOFF, DEFAULT_RETRIES, DEFAULT_TIMEOUT_MS, type Backoff, type Fetch, type Sleep } from './transport.js';
export type { components, paths } from './schema.js';
