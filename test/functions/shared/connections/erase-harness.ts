/**
 * The erase's tests' world (erase.test.ts here, test/functions/connection-eraser/eraser.test.ts):
 * DynamoDB Local and s3rver on 127.0.0.1, and for each test a connections table, an items table and an
 * items bucket of its own; connections put as the client API puts them (tokens sealed), rows and
 * objects written as the item sync writes them, and readers of what is left.
 *
 * The standard world (`seed`): two connections, `acme` and `other`, with rows of the same ids; an
 * imported row of acme naming a key outside every `items/<connection>/` prefix, one naming a key
 * under other's prefix, one naming a key under the prefix of a connection the table does not hold;
 * objects under `items/acme/`, `items/other/`, `items/acmeX/` and `legacy/`.
 */
import { BatchWriteItemCommand, GetItemCommand, PutItemCommand, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, beforeEach } from 'vitest';
import { startLocalDynamo, type LocalDynamoDb } from '../../../../dev/fakes/local-dynamo.js';
import { ensureItemsTable, readTable } from '../../../../dev/fakes/items-table.js';
import { startS3, type LocalS3 } from '../../../../dev/fakes/s3.js';
import { fromAttributeValue } from '../../../../functions/item-sync/adapters/dynamodb-item-store.js';
import { AwsItemsEraser, type ItemsEraserDeps } from '../../../../functions/shared/adapters/items-eraser.js';
import { DynamoDbConnectionStore } from '../../../../functions/shared/adapters/dynamodb-connection-store.js';
import type { EraseRequest } from '../../../../functions/shared/connections/erase.js';
import { NO_TOKENS } from '../../../../functions/shared/connections/sealing.js';
import { testSealing, type TestSealing } from '../../../support/sealer.js';

export const NOW = Date.parse('2026-11-24T10:00:00.000Z');
/** The safety wait at the default sync time-out and token cache (eraseSettleSeconds(60, 60)). */
export const SETTLE_SECONDS = 150;
/** A padding that makes four rows fill one 1 MB Query page (DynamoDB Local counts sizes as DynamoDB does). */
export const PAGE_QUARTER = 300_000;

export const iso = (ms: number): string => new Date(ms).toISOString();

/** A clock that moves only when told. */
export class TestClock {
  constructor(public ms: number = NOW) {}
  now(): Date {
    return new Date(this.ms);
  }
}

/** The acme and other rows and objects `seed` writes, and what an erase of acme leaves of them. */
export const SEEDED = {
  rows: ['acme/fil-1', 'acme/fil-2', 'acme/imported', 'acme/orphan', 'acme/to-other', 'other/fil-1', 'other/fil-2', 'other/y'],
  objects: [
    'items/acme/deep/z.json',
    'items/acme/fil-1.json',
    'items/acme/fil-2.json',
    'items/acmeX/fil-1.json',
    'items/gone/q.json',
    'items/other/fil-1.json',
    'items/other/y.json',
    'legacy/kept.json',
    'legacy/x.json',
  ],
  /** The keys acme's rows name that are its own, in the order its Query returns them (by id): what its one page's deleteKeys gets. */
  acmeOwnKeys: ['items/acme/fil-1.json', 'items/acme/fil-2.json', 'legacy/x.json', 'items/gone/q.json'],
  rowsAfter: ['other/fil-1', 'other/fil-2', 'other/y'],
  /** The changes tables' rows (`<connection>/<seq>`, seq 0 the head): acme's 3 changes and other's 2. */
  changes: ['acme/0', 'acme/1', 'acme/2', 'acme/3', 'other/0', 'other/1', 'other/2'],
  changesAfter: ['other/0', 'other/1', 'other/2'],
  objectsAfter: ['items/acmeX/fil-1.json', 'items/other/fil-1.json', 'items/other/y.json', 'legacy/kept.json'],
  /** acme's rows (5) and objects (its 3 under items/acme/, legacy/x.json, items/gone/q.json). */
  rowsDeleted: 5,
  objectsDeleted: 5,
} as const;

export interface EraseWorld {
  readonly dynamo: LocalDynamoDb;
  readonly db: DynamoDBClient;
  readonly s3: LocalS3;
  readonly s3Client: S3Client;
  readonly sealing: TestSealing;
  readonly connectionsTable: string;
  readonly itemsTable: string;
  readonly changesTable: string;
  readonly bucket: string;
  /** The store as the client API has it: it seals the tokens it writes. */
  store(): DynamoDbConnectionStore;
  /** The store as the eraser has it: it opens and seals no token. */
  eraserStore(): DynamoDbConnectionStore;
  /** The real ItemsEraser on this test's table and bucket. */
  itemsEraser(overrides?: Partial<ItemsEraserDeps>): AwsItemsEraser;
  /** Puts the connection as the client API does (active, its token sealed); the store's answer ('erasing': refused, nothing written). */
  put(connection: string, refreshToken: string, at?: number): Promise<'created' | 'replaced' | 'erasing'>;
  /** Removes the connection at `removedAt` and asks for its erase, as ConnectionOperations.erase does. */
  removeForErase(connection: string, removedAt: number, settleSeconds?: number): Promise<EraseRequest>;
  /** A row of the items table; `key`: its itemObject; `pad`: characters of padding. */
  itemRow(connection: string, id: string, options?: { key?: string; pad?: number }): Promise<void>;
  /** Many rows at once (BatchWriteItem), each naming `keyOf(id)` when given. */
  itemRows(connection: string, ids: readonly string[], keyOf?: (id: string) => string): Promise<void>;
  putObject(key: string): Promise<void>;
  /** Many objects, a few PutObject at a time. */
  putObjects(keys: readonly string[]): Promise<void>;
  /** Every row of the items table, `<connection>/<id>`, sorted. */
  rows(): Promise<string[]>;
  /** A changes log of `count` changes (and its head) for the connection. */
  changeRows(connection: string, count: number): Promise<void>;
  /** Every row of the changes table, `<connection>/<seq>`, sorted. */
  changes(): Promise<string[]>;
  /** Every object key in the bucket, sorted. */
  objects(): Promise<string[]>;
  /** The connection's row, unmarshalled (undefined: no row). */
  row(connection: string): Promise<Record<string, unknown> | undefined>;
  /** The `erase` attribute of the connection's row, unmarshalled. */
  eraseOf(connection: string): Promise<unknown>;
  /** The standard world: acme and other, their rows and objects (SEEDED). */
  seed(): Promise<void>;
}

/** Starts DynamoDB Local and s3rver for the file; a table pair and a bucket of its own for each test. */
export function useEraseWorld(): EraseWorld {
  let dynamo: LocalDynamoDb;
  let db: DynamoDBClient;
  let s3: LocalS3;
  let s3Client: S3Client;
  let connectionsTable = '';
  let itemsTable = '';
  let changesTable = '';
  let bucket = '';
  let n = 0;
  const sealing = testSealing();

  beforeAll(async () => {
    dynamo = await startLocalDynamo({ proxy: false });
    db = dynamo.client();
    s3 = await startS3();
    s3Client = s3.client();
  });

  afterAll(async () => {
    db?.destroy();
    s3Client?.destroy();
    await dynamo?.close();
    await s3?.close();
  });

  beforeEach(async () => {
    n += 1;
    connectionsTable = `connections-${n}`;
    itemsTable = `items-${n}`;
    changesTable = `changes-${n}`;
    bucket = `content-sync-items-${n}`;
    await dynamo.createConnectionsTable(connectionsTable);
    await ensureItemsTable(db, itemsTable);
    await dynamo.createChangesTable(changesTable);
    await s3.createBucket(bucket);
  });

  const world: EraseWorld = {
    get dynamo() {
      return dynamo;
    },
    get db() {
      return db;
    },
    get s3() {
      return s3;
    },
    get s3Client() {
      return s3Client;
    },
    sealing,
    get connectionsTable() {
      return connectionsTable;
    },
    get itemsTable() {
      return itemsTable;
    },
    get changesTable() {
      return changesTable;
    },
    get bucket() {
      return bucket;
    },
    store: () => new DynamoDbConnectionStore(db, connectionsTable, { sealer: sealing.sealer }),
    eraserStore: () => new DynamoDbConnectionStore(db, connectionsTable, { sealer: NO_TOKENS }),
    itemsEraser: (overrides = {}) =>
      new AwsItemsEraser({ dynamodb: db, s3: s3Client, itemsTable, itemsBucket: bucket, changesTable, sleep: async () => undefined, ...overrides }),
    async put(connection, refreshToken, at = NOW - 3_600_000) {
      return world.store().putCredentials({ connection, clientId: `client-${connection}`, refreshToken, at: iso(at) });
    },
    async removeForErase(connection, removedAt, settleSeconds = SETTLE_SECONDS) {
      const store = world.store();
      const startedAt = iso(removedAt);
      if ((await store.setStatus(connection, 'removed', ['active', 'paused', 'failing'], startedAt)) !== 'written') throw new Error(`${connection} was not removed`);
      if ((await store.requestErase(connection, { startedAt, notBefore: iso(removedAt + settleSeconds * 1000) })) !== 'written') throw new Error(`${connection}: no erase asked`);
      return { connection, startedAt };
    },
    async itemRow(connection, id, options = {}) {
      await db.send(new PutItemCommand({ TableName: itemsTable, Item: rowItem(connection, id, options) }));
    },
    async itemRows(connection, ids, keyOf) {
      for (let i = 0; i < ids.length; i += 25) {
        const requests = ids.slice(i, i + 25).map((id) => ({ PutRequest: { Item: rowItem(connection, id, keyOf ? { key: keyOf(id) } : {}) } }));
        const output = await db.send(new BatchWriteItemCommand({ RequestItems: { [itemsTable]: requests } }));
        if (Object.keys(output.UnprocessedItems ?? {}).length > 0) throw new Error('DynamoDB Local left writes unprocessed');
      }
    },
    async changeRows(connection, count) {
      const head = { connection: { S: connection }, seq: { N: '0' }, head: { N: String(count) }, epoch: { S: `epoch-${connection}` } };
      await db.send(new PutItemCommand({ TableName: changesTable, Item: head }));
      for (let seq = 1; seq <= count; seq++) {
        const change = { connection: { S: connection }, seq: { N: String(seq) }, change: { S: 'created' }, id: { S: `fil-${seq}` }, revision: { S: '1' }, syncedAt: { S: iso(NOW) }, expiresAt: { N: String(NOW / 1000 + 86_400) } };
        await db.send(new PutItemCommand({ TableName: changesTable, Item: change }));
      }
    },
    async changes() {
      const rows = await dynamo.scan(changesTable);
      return rows.map((row) => `${row['connection']?.S}/${row['seq']?.N}`).sort();
    },
    async putObject(key) {
      await s3Client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: '{}' }));
    },
    async putObjects(keys) {
      for (let i = 0; i < keys.length; i += 25) await Promise.all(keys.slice(i, i + 25).map((key) => world.putObject(key)));
    },
    async rows() {
      return [...(await readTable(db, itemsTable)).keys()].sort();
    },
    async objects() {
      return [...(await s3.listObjects(bucket)).keys()].sort();
    },
    async row(connection) {
      const output = await db.send(new GetItemCommand({ TableName: connectionsTable, Key: { connection: { S: connection } }, ConsistentRead: true }));
      return output.Item ? (fromAttributeValue({ M: output.Item }) as Record<string, unknown>) : undefined;
    },
    async eraseOf(connection) {
      return (await world.row(connection))?.['erase'];
    },
    async seed() {
      await world.put('acme', 'rt-acme-secret-1');
      await world.put('other', 'rt-other-secret-1');
      await world.itemRow('acme', 'fil-1', { key: 'items/acme/fil-1.json' });
      await world.itemRow('acme', 'fil-2', { key: 'items/acme/fil-2.json' });
      // Imported from a one-account table: its key is outside every items/<connection>/ prefix.
      await world.itemRow('acme', 'imported', { key: 'legacy/x.json' });
      // Under the prefix of a connection the table does not hold: acme's own.
      await world.itemRow('acme', 'orphan', { key: 'items/gone/q.json' });
      // Under other's prefix (copied, or written wrong): that object is other's.
      await world.itemRow('acme', 'to-other', { key: 'items/other/y.json' });
      await world.itemRow('other', 'fil-1', { key: 'items/other/fil-1.json' });
      await world.itemRow('other', 'fil-2');
      await world.itemRow('other', 'y', { key: 'items/other/y.json' });
      for (const key of SEEDED.objects) await world.putObject(key);
      await world.changeRows('acme', 3);
      await world.changeRows('other', 2);
    },
  };
  return world;
}

function rowItem(connection: string, id: string, options: { key?: string; pad?: number }): Record<string, AttributeValue> {
  return {
    connection: { S: connection },
    id: { S: id },
    type: { S: 'file' },
    revision: { S: '1' },
    ...(options.key !== undefined ? { itemObject: { M: { key: { S: options.key }, size: { N: '2' }, sha256: { S: 'x' } } } } : {}),
    ...(options.pad !== undefined ? { pad: { S: 'p'.repeat(options.pad) } } : {}),
  };
}
