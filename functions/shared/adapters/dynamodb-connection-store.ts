/**
 * The connections table (CONNECTIONS_TABLE_NAME) as the ConnectionStore port: one row per
 * connection, partition key `connection` (S), the attributes docs/connections.md lists. Every write
 * that must not cross another is conditional:
 * - the refresh lease: the status is `active` (or `failing` when asked) and no unexpired lease;
 * - a refresh's result: the credentialsVersion the refresh used is still stored (so credentials the
 *   operator replaced meanwhile are never overwritten, and a rotated refresh token is written with
 *   the access token in one write); the status is set only from `active`/`failing`, so a connection
 *   the operator paused while a refresh ran stays paused; the lease is released only by its owner
 *   (a refresh that outlived its lease writes its result and leaves the next holder's lease);
 * - a status change: from the statuses the caller allows;
 * - the row's deletion (purge): only while the connection is `removed`.
 * Tokens are sealed before every write and opened after every read that returns them (the Sealer:
 * functions/shared/connections/sealing.ts); a scan (`list`, `page`) opens none. A sealed value that
 * can never be opened is read as such (`refreshTokenUnreadable`, an access token as none), never
 * thrown; a lease taken on a row whose tokens cannot be opened for now (the key out) is released.
 * AWS failures are re-thrown without values: a TransientError for throttling, 5xx and network
 * failures; a ConfigError naming the setting for a table that does not exist or may not be used;
 * an Error naming the operation otherwise.
 */
import {
  ConditionalCheckFailedException,
  DeleteItemCommand,
  GetItemCommand,
  ScanCommand,
  UpdateItemCommand,
  type AttributeValue,
  type DynamoDBClient,
  type UpdateItemCommandInput,
} from '@aws-sdk/client-dynamodb';
import { CONNECTIONS_TABLE_KEY, type ConnectionListing, type ConnectionRecord, type ConnectionStatus, type EraseProgress } from '../connections/connection.js';
import type { ConnectionPage, ConnectionStore } from '../connections/ports.js';
import { isSealed, SealError, stampOf, type Sealer } from '../connections/sealing.js';
import { eraseValue, toListing } from './connection-rows.js';

export { toListing } from './connection-rows.js';
import { ENV } from '../config.js';
import { ConfigError, TransientError } from '../errors.js';

type Row = Record<string, AttributeValue>;
type Lease = Awaited<ReturnType<ConnectionStore['takeRefreshLease']>>;

/** AWS error names that may pass on a later try. */
const TRANSIENT_NAMES = new Set([
  'ProvisionedThroughputExceededException',
  'ThrottlingException',
  'RequestLimitExceeded',
  'InternalServerError',
  'ServiceUnavailable',
  'LimitExceededException',
  'TransactionConflictException',
  'TimeoutError',
]);
/** AWS error names that say the table cannot be used as configured. */
const CONFIG_NAMES = new Set(['ResourceNotFoundException', 'AccessDeniedException', 'UnrecognizedClientException']);

/** How often a conditional write is tried again when the status or the lease changed under it. */
const RESULT_WRITE_ROUNDS = 5;

export interface DynamoDbConnectionStoreOptions {
  /** Seals every token written and opens every token read. */
  sealer: Sealer;
  /** What names the table in errors: the variable (default CONNECTIONS_TABLE_NAME) or the CLI's flag. */
  setting?: string;
}

export class DynamoDbConnectionStore implements ConnectionStore {
  private readonly setting: string;
  private readonly sealer: Sealer;

  constructor(
    private readonly client: DynamoDBClient,
    readonly tableName: string,
    options: DynamoDbConnectionStoreOptions,
  ) {
    this.setting = options.setting ?? ENV.connectionsTableName;
    this.sealer = options.sealer;
  }

  async get(connection: string, options: { consistent?: boolean } = {}): Promise<ConnectionRecord | undefined> {
    const row = await this.getRow(connection, options.consistent ?? false);
    return row ? this.opened(row) : undefined;
  }

  async view(connection: string, options: { consistent?: boolean } = {}): Promise<ConnectionListing | undefined> {
    const row = await this.getRow(connection, options.consistent ?? false);
    return row ? toListing(row) : undefined;
  }

  async *list(): AsyncIterable<ConnectionListing> {
    let start: Row | undefined;
    do {
      const page = await this.send('Scan', () => this.client.send(new ScanCommand({ TableName: this.tableName, ExclusiveStartKey: start })));
      for (const row of page.Items ?? []) {
        const listing = toListing(row);
        if (listing) yield listing;
      }
      start = page.LastEvaluatedKey;
    } while (start);
  }

  async page(options: { status?: ConnectionStatus; limit: number; after?: string }): Promise<ConnectionPage> {
    const connections: ConnectionListing[] = [];
    let start: Row | undefined = options.after === undefined ? undefined : this.key(options.after);
    const values: Row = options.status === undefined ? {} : { ':status': { S: options.status } };
    do {
      const page = await this.send('Scan', () =>
        this.client.send(
          new ScanCommand({
            TableName: this.tableName,
            ExclusiveStartKey: start,
            Limit: Math.max(options.limit - connections.length, 1),
            FilterExpression: options.status === undefined ? 'attribute_exists(#status)' : '#status = :status',
            ExpressionAttributeNames: { '#status': 'status' },
            ...(options.status === undefined ? {} : { ExpressionAttributeValues: values }),
          }),
        ),
      );
      for (const row of page.Items ?? []) {
        const listing = toListing(row);
        if (listing) connections.push(listing);
      }
      start = page.LastEvaluatedKey;
    } while (start && connections.length < options.limit);
    // The last connection returned is where the next page starts (Scan takes any item's key).
    const last = connections.at(-1);
    return { connections, ...(start && last ? { after: last.connection } : {}) };
  }

  async requestErase(connection: string, erase: { startedAt: string; notBefore: string }): Promise<'written' | 'requested' | 'missing' | 'conflict'> {
    const written = await this.conditional('UpdateItem', {
      TableName: this.tableName,
      Key: this.key(connection),
      UpdateExpression: 'SET #erase = :erase, updatedAt = :at',
      ConditionExpression: '#status = :removed AND attribute_not_exists(#erase)',
      ExpressionAttributeNames: { '#status': 'status', '#erase': 'erase' },
      ExpressionAttributeValues: {
        ':removed': { S: 'removed' },
        ':at': { S: erase.startedAt },
        ':erase': eraseValue({ state: 'waiting', startedAt: erase.startedAt, notBefore: erase.notBefore, rowsDeleted: 0, objectsDeleted: 0 }),
      },
    });
    if (written) return 'written';
    const current = await this.view(connection, { consistent: true });
    if (!current) return 'missing';
    return current.status === 'removed' && current.erase ? 'requested' : 'conflict';
  }

  async updateErase(connection: string, progress: EraseProgress): Promise<boolean> {
    return this.conditional('UpdateItem', {
      TableName: this.tableName,
      Key: this.key(connection),
      UpdateExpression: 'SET #erase = :erase',
      ConditionExpression: '#status = :removed AND #erase.startedAt = :startedAt',
      ExpressionAttributeNames: { '#status': 'status', '#erase': 'erase' },
      ExpressionAttributeValues: { ':removed': { S: 'removed' }, ':startedAt': { S: progress.startedAt }, ':erase': eraseValue(progress) },
    });
  }

  async putCredentials(input: { connection: string; clientId: string; refreshToken: string; at: string }): Promise<'created' | 'replaced' | 'erasing'> {
    const sealed = await this.sealer.seal(input.connection, input.refreshToken);
    let output;
    try {
      output = await this.client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: this.key(input.connection),
          UpdateExpression:
            'SET clientId = :clientId, #status = :active, refreshToken = :refreshToken, ' +
            'credentialsVersion = if_not_exists(credentialsVersion, :zero) + :one, consecutiveFailures = :zero, ' +
            'createdAt = if_not_exists(createdAt, :at), updatedAt = :at, credentialsAt = :at ' +
            'REMOVE accessToken, refreshedAt, lastSuccessAt, lastFailureAt, lastFailureReason, leaseOwner, leaseUntil, #erase',
          // Not while its erase runs (it would delete what the connection writes next).
          ConditionExpression: 'attribute_not_exists(#erase) OR #erase.#state <> :running',
          ExpressionAttributeNames: { '#status': 'status', '#erase': 'erase', '#state': 'state' },
          ExpressionAttributeValues: {
            ':clientId': { S: input.clientId },
            ':active': { S: 'active' },
            ':refreshToken': { S: sealed },
            ':zero': { N: '0' },
            ':one': { N: '1' },
            ':at': { S: input.at },
            ':running': { S: 'running' },
          },
          ReturnValues: 'UPDATED_OLD',
        }),
      );
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return 'erasing';
      throw this.failure('UpdateItem', error);
    }
    // A row the change-events function made (ids known, no credentials) is not a connection yet.
    return output.Attributes?.['status']?.S !== undefined ? 'replaced' : 'created';
  }

  async setStatus(connection: string, to: ConnectionStatus, from: readonly ConnectionStatus[], at: string): Promise<'written' | 'missing' | 'conflict'> {
    const values: Row = { ':to': { S: to }, ':at': { S: at } };
    from.forEach((status, i) => (values[`:from${i}`] = { S: status }));
    // Removal deletes the tokens and raises credentialsVersion: a refresh still running cannot write them back.
    const update =
      to === 'removed'
        ? 'SET #status = :to, updatedAt = :at, credentialsVersion = if_not_exists(credentialsVersion, :zero) + :one REMOVE refreshToken, accessToken, refreshedAt, leaseOwner, leaseUntil'
        : 'SET #status = :to, updatedAt = :at';
    if (to === 'removed') Object.assign(values, { ':zero': { N: '0' }, ':one': { N: '1' } });
    if (from.length === 0) throw new Error('setStatus needs at least one status to change from');
    const written = await this.conditional('UpdateItem', {
      TableName: this.tableName,
      Key: this.key(connection),
      UpdateExpression: update,
      ConditionExpression: `#status IN (${from.map((_, i) => `:from${i}`).join(', ')})`,
      ExpressionAttributeNames: { '#status': 'status' },
      ExpressionAttributeValues: values,
    });
    if (written) return 'written';
    return (await this.getRow(connection, true)) ? 'conflict' : 'missing';
  }

  async delete(connection: string, erase?: { startedAt: string }): Promise<'deleted' | 'conflict' | 'missing'> {
    try {
      await this.client.send(
        new DeleteItemCommand({
          TableName: this.tableName,
          Key: this.key(connection),
          ConditionExpression: erase === undefined ? '#status = :removed' : '#status = :removed AND #erase.startedAt = :startedAt',
          ExpressionAttributeNames: { '#status': 'status', ...(erase === undefined ? {} : { '#erase': 'erase' }) },
          ExpressionAttributeValues: { ':removed': { S: 'removed' }, ...(erase === undefined ? {} : { ':startedAt': { S: erase.startedAt } }) },
        }),
      );
      return 'deleted';
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw this.failure('DeleteItem', error);
    }
    return (await this.getRow(connection, true)) ? 'conflict' : 'missing';
  }

  async takeRefreshLease(connection: string, lease: { owner: string; until: number; now: number; includeFailing?: boolean }): Promise<Lease> {
    const statuses = lease.includeFailing ? ['active', 'failing'] : ['active'];
    for (let round = 1; ; round++) {
      let taken: Row | undefined;
      try {
        const output = await this.client.send(
          new UpdateItemCommand({
            TableName: this.tableName,
            Key: this.key(connection),
            UpdateExpression: 'SET leaseOwner = :owner, leaseUntil = :until',
            ConditionExpression: `#status IN (${statuses.map((_, i) => `:s${i}`).join(', ')}) AND (attribute_not_exists(leaseUntil) OR leaseUntil < :now)`,
            ExpressionAttributeNames: { '#status': 'status' },
            ExpressionAttributeValues: {
              ':owner': { S: lease.owner },
              ':until': { N: String(lease.until) },
              ':now': { N: String(lease.now) },
              ...Object.fromEntries(statuses.map((status, i) => [`:s${i}`, { S: status }])),
            },
            ReturnValues: 'ALL_NEW',
          }),
        );
        taken = output.Attributes;
      } catch (error) {
        if (!(error instanceof ConditionalCheckFailedException)) throw this.failure('UpdateItem', error);
      }
      if (taken) return { kind: 'taken', record: await this.leased(connection, lease.owner, taken) };
      // Why not: read the row as it is now (its tokens opened only if the lease is this caller's).
      const row = await this.getRow(connection, true);
      const record = row ? toListing(row) : undefined;
      if (!record) return { kind: 'missing' };
      if (!statuses.includes(record.status)) return { kind: 'not-refreshable', status: record.status };
      // A write DynamoDB applied whose answer was lost, sent again by the SDK, meets the lease it took:
      // the lease is this caller's (else nobody would refresh the connection until it ran out).
      if (record.refreshLease?.owner === lease.owner) return { kind: 'taken', record: await this.leased(connection, lease.owner, row!) };
      if (record.refreshLease && record.refreshLease.until >= lease.now) return { kind: 'held', until: record.refreshLease.until };
      // The lease was released between the two requests: try again, a few times.
      if (round >= RESULT_WRITE_ROUNDS) return { kind: 'held', until: lease.now };
    }
  }

  async completeRefresh(input: {
    connection: string;
    owner: string;
    credentialsVersion: number;
    accessToken: string;
    refreshedAt: string;
    rotatedRefreshToken?: string;
  }): Promise<{ kind: 'written'; status: ConnectionStatus; accessTokenStamp: string } | { kind: 'conflict' }> {
    const set = ['accessToken = :accessToken', 'refreshedAt = :refreshedAt', 'lastSuccessAt = :refreshedAt', 'consecutiveFailures = :zero', 'updatedAt = :refreshedAt'];
    const accessToken = await this.sealer.seal(input.connection, input.accessToken);
    const values: Row = { ':accessToken': { S: accessToken }, ':refreshedAt': { S: input.refreshedAt }, ':zero': { N: '0' } };
    if (input.rotatedRefreshToken !== undefined) {
      set.push('refreshToken = :refreshToken', 'credentialsVersion = credentialsVersion + :one');
      values[':refreshToken'] = { S: await this.sealer.seal(input.connection, input.rotatedRefreshToken) };
      values[':one'] = { N: '1' };
    }
    const written = await this.writeResult(input.connection, input.credentialsVersion, input.owner, set, values, 'active');
    return written === undefined ? { kind: 'conflict' } : { kind: 'written', status: written.status ?? 'active', accessTokenStamp: stampOf(accessToken) };
  }

  async failRefresh(input: { connection: string; owner: string; credentialsVersion: number; at: string; reason: string; refused: boolean }): Promise<'written' | 'conflict'> {
    const set = ['lastFailureAt = :at', 'lastFailureReason = :reason', 'consecutiveFailures = if_not_exists(consecutiveFailures, :zero) + :one', 'updatedAt = :at'];
    const values: Row = { ':at': { S: input.at }, ':reason': { S: input.reason.slice(0, 1000) || 'unknown' }, ':zero': { N: '0' }, ':one': { N: '1' } };
    const written = await this.writeResult(input.connection, input.credentialsVersion, input.owner, set, values, input.refused ? 'failing' : undefined);
    return written === undefined ? 'conflict' : 'written';
  }

  async releaseRefreshLease(connection: string, owner: string): Promise<void> {
    await this.conditional('UpdateItem', {
      TableName: this.tableName,
      Key: this.key(connection),
      UpdateExpression: 'REMOVE leaseOwner, leaseUntil',
      ConditionExpression: 'leaseOwner = :owner',
      ExpressionAttributeValues: { ':owner': { S: owner } },
    });
  }

  async sealClearTokens(connection: string): Promise<number> {
    const row = await this.getRow(connection, true);
    let sealed = 0;
    for (const name of ['refreshToken', 'accessToken']) {
      const clear = row?.[name]?.S;
      if (clear === undefined || isSealed(clear)) continue;
      const written = await this.conditional('UpdateItem', {
        TableName: this.tableName,
        Key: this.key(connection),
        UpdateExpression: 'SET #token = :sealed',
        ConditionExpression: '#token = :clear',
        ExpressionAttributeNames: { '#token': name },
        ExpressionAttributeValues: { ':sealed': { S: await this.sealer.seal(connection, clear) }, ':clear': { S: clear } },
      });
      if (written) sealed += 1;
    }
    return sealed;
  }

  async markUsed(connection: string, at: string): Promise<void> {
    await this.conditional('UpdateItem', {
      TableName: this.tableName,
      Key: this.key(connection),
      UpdateExpression: 'SET lastUsedAt = :at',
      ConditionExpression: 'attribute_exists(#status) AND (attribute_not_exists(lastUsedAt) OR lastUsedAt < :at)',
      ExpressionAttributeNames: { '#status': 'status' },
      ExpressionAttributeValues: { ':at': { S: at } },
    });
  }

  /**
   * A refresh's result, conditional on `credentialsVersion`: written (with the status the row was
   * left with, when known), or undefined when the version is no longer the one the refresh used
   * (`conflict`). With `status`, the status is set too while it is `active` or `failing`; a
   * connection in another status (paused while the refresh ran) gets the result and keeps its status. The lease is released only while
   * `owner` holds it; otherwise the result is written and the lease left as it is. A condition that
   * fails is read again: only a changed version is a conflict; a changed status or lease is written
   * over again, a few rounds, then a TransientError (the caller tries again).
   */
  private async writeResult(
    connection: string,
    version: number,
    owner: string,
    set: string[],
    values: Row,
    status: ConnectionStatus | undefined,
  ): Promise<{ status?: ConnectionStatus } | undefined> {
    // What the row held when last read: none yet, so the usual case (active or failing, our lease) first.
    let seen: ConnectionStatus | undefined;
    let holder = true;
    for (let round = 1; round <= RESULT_WRITE_ROUNDS; round++) {
      const conditions = ['credentialsVersion = :version'];
      const setting = [...set];
      const expressionValues: Row = { ...values, ':version': { N: String(version) }, ':owner': { S: owner } };
      let leftWith: ConnectionStatus | undefined = seen;
      if (status !== undefined) {
        if (seen === undefined || seen === 'active' || seen === 'failing') {
          conditions.push('#status IN (:active, :failing)');
          setting.push('#status = :status');
          Object.assign(expressionValues, { ':status': { S: status }, ':active': { S: 'active' }, ':failing': { S: 'failing' } });
          leftWith = status;
        } else {
          conditions.push('#status = :seen');
          expressionValues[':seen'] = { S: seen };
        }
      }
      conditions.push(holder ? 'leaseOwner = :owner' : '(attribute_not_exists(leaseOwner) OR leaseOwner <> :owner)');
      const written = await this.conditional('UpdateItem', {
        TableName: this.tableName,
        Key: this.key(connection),
        UpdateExpression: `SET ${setting.join(', ')}${holder ? ' REMOVE leaseOwner, leaseUntil' : ''}`,
        ConditionExpression: conditions.join(' AND '),
        ...(status !== undefined ? { ExpressionAttributeNames: { '#status': 'status' } } : {}),
        ExpressionAttributeValues: expressionValues,
      });
      // Without `status` and before any read, the status it was left with is not known (not needed either).
      if (written) return leftWith === undefined ? {} : { status: leftWith };
      const currentRow = await this.getRow(connection, true);
      const current = currentRow ? toListing(currentRow) : undefined;
      if (!current || current.credentialsVersion !== version) return undefined;
      seen = current.status;
      holder = current.refreshLease?.owner === owner;
    }
    throw new TransientError(
      `DynamoDB UpdateItem on the connections table ${this.tableName}: the connection's status or refresh lease changed under ${RESULT_WRITE_ROUNDS} result writes in a row`,
    );
  }

  /** The row of a lease just taken, its tokens opened; a failure to open them releases the lease (the key out: it is not held for nothing). */
  private async leased(connection: string, owner: string, row: Row): Promise<ConnectionRecord> {
    let record: ConnectionRecord | undefined;
    try {
      record = await this.opened(row);
    } catch (error) {
      await this.releaseRefreshLease(connection, owner).catch(() => undefined);
      throw error;
    }
    if (!record) throw new Error(`the connections table's row of a connection lacks its credentials (UpdateItem)`);
    return record;
  }

  /**
   * The row as a record, its tokens opened. A sealed value that can never be opened (a SealError) is
   * not thrown: a refresh token so is `refreshTokenUnreadable` (its refresh turns the connection
   * `failing`), an access token so is read as none (refreshed). Any other failure (the key out, KMS
   * failing) is thrown.
   */
  private async opened(row: Row): Promise<ConnectionRecord | undefined> {
    const listing = toListing(row);
    if (!listing) return undefined;
    const connection = listing.connection;
    const refreshToken = row['refreshToken']?.S;
    const accessToken = row['accessToken']?.S;
    const openOrNone = async (stored: string): Promise<string | undefined> => {
      try {
        return await this.sealer.open(connection, stored);
      } catch (error) {
        if (error instanceof SealError) return undefined;
        throw error;
      }
    };
    const openedRefresh = refreshToken === undefined ? '' : await openOrNone(refreshToken);
    const openedAccess = accessToken === undefined ? undefined : await openOrNone(accessToken);
    const { accessTokenStamp, ...rest } = listing;
    return {
      ...(openedAccess === undefined ? rest : listing),
      refreshToken: openedRefresh ?? '',
      ...(openedRefresh === undefined ? { refreshTokenUnreadable: true as const } : {}),
      ...(openedAccess !== undefined ? { accessToken: openedAccess } : {}),
    };
  }

  private async getRow(connection: string, consistent: boolean): Promise<Row | undefined> {
    const output = await this.send('GetItem', () =>
      this.client.send(new GetItemCommand({ TableName: this.tableName, Key: this.key(connection), ConsistentRead: consistent })),
    );
    return output.Item;
  }

  /** An UpdateItem whose condition may fail: true when written, false when the condition failed. */
  private async conditional(operation: string, input: UpdateItemCommandInput): Promise<boolean> {
    try {
      await this.client.send(new UpdateItemCommand(input));
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw this.failure(operation, error);
    }
  }

  private async send<T>(operation: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      throw this.failure(operation, error);
    }
  }

  private key(connection: string): Row {
    return { [CONNECTIONS_TABLE_KEY]: { S: connection } };
  }

  /** The error to throw for an AWS failure: its name and status only, never the request's values. */
  private failure(operation: string, error: unknown): Error {
    const { name, $metadata, code } = (error ?? {}) as { name?: string; $metadata?: { httpStatusCode?: number }; code?: string };
    const status = $metadata?.httpStatusCode;
    const what = `${name ?? 'Error'}${code && code !== name ? ` ${code}` : ''}${status !== undefined ? `, HTTP ${status}` : ''}`;
    const message = `DynamoDB ${operation} on the connections table ${this.tableName} failed (${what})`;
    if (name !== undefined && CONFIG_NAMES.has(name)) {
      return new ConfigError(this.setting, `${message}: check that the table exists and may be used`);
    }
    if ((name !== undefined && TRANSIENT_NAMES.has(name)) || status === undefined || status >= 500) return new TransientError(message);
    return new Error(message);
  }
}
