/**
 * DynamoDB as the bench and the soak see it: dynalite is real (over HTTP); `instrumentDynamo` adds a
 * middleware in the client's `deserialize` step, below the SDK's retry middleware, that counts every
 * request that reaches the table and every successful write (with the row state it stored), and can
 * inject throttling (ProvisionedThroughputExceededException / ThrottlingException, which the SDK
 * retries with its own backoff), BatchGetItem UnprocessedKeys, and lost write acknowledgements (the
 * write is applied, then the caller sees a time-out and the SDK sends it again).
 *
 * A TransactWriteItems returns no rows: the rows it stored are the ones the harness's dynalite
 * reports for its ClientRequestToken when it commits (dynalite-commits.ts; the client asks a dynalite
 * in a child process for them), each items-table row recorded once per commit. The SDK sends a
 * transaction whose answer was lost again with the same token, and dynalite answers it without
 * applying it again: a success after the commit was reported is that replay, not a write. A
 * cancellation with a ConditionalCheckFailed reason counts as a conditional failure. `conflictRate`
 * cancels a share of them with a TransactionConflict reason, as DynamoDB cancels a transaction that
 * meets another on an item (the harness's dynalite makes it wait instead).
 */
import {
  DynamoDBServiceException,
  ProvisionedThroughputExceededException,
  TransactionCanceledException,
  type AttributeValue,
  type DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import { notCommitted, REPORT_COMMIT_HEADER, watchCommit, type CommitWatch, type CommittedTransaction, type Row } from './dynalite-commits.js';

type AnyInput = Record<string, unknown>;
/** The HTTP request, in the `deserialize` step (serialized: the SDK has filled the ClientRequestToken). */
interface SentRequest {
  headers: Record<string, string>;
  body?: unknown;
}
type Handler = (args: { input: AnyInput; request?: SentRequest }) => Promise<{ output: AnyInput; response: unknown }>;
type Middleware = (next: Handler, context: { commandName?: string }) => Handler;

interface Stack {
  middlewareStack: { add(middleware: Middleware, options: { step: string; priority?: string; name: string }): void };
}

function commandName(context: { commandName?: string }): string {
  return (context.commandName ?? '').replace(/Command$/, '');
}

/** A successful write as the table stored it: `live:<revision>` or `deleted:<revision>`. */
export interface RecordedWrite {
  id: string;
  state: string;
  operation: 'PutItem' | 'UpdateItem' | 'TransactWriteItems';
}

/** A transaction the meter saw sent: its commit's watch, and the commit once reported. */
interface SentTransaction {
  watch: CommitWatch;
  commit?: CommittedTransaction;
}
/** Transactions remembered by token (a token's attempts all come within the SDK's retries). */
const TRANSACTIONS_KEPT = 10_000;
/** The items table's key (infra/storage/storage.ts): a committed write on a table keyed so is an items-table row. */
const ITEMS_TABLE_KEY = 'connection,id';

export interface DynamoChaos {
  random: () => number;
  /** Fraction of requests refused with a throttling error before they reach the table. */
  throttleRate: number;
  /** Fraction of successful BatchGetItem answers with some keys moved to UnprocessedKeys. */
  unprocessedRate: number;
  /** Fraction of successful writes whose answer is lost (the SDK sees a time-out and re-sends). */
  lostAckRate: number;
  /** Fraction of TransactWriteItems cancelled, before they reach the table, with one action's reason TransactionConflict. */
  conflictRate?: number;
}

/** Counters shared by every client instrumented with it. */
export class DynamoMeter {
  /** Requests that reached the table, by operation (SDK re-tries included; injected throttles not). */
  readonly requests: Record<string, number> = {};
  readonly conditionalFailures: Record<string, number> = {};
  readonly writes: RecordedWrite[] = [];
  /**
   * The `itemObject` keys of rows replaced by a write whose answer was lost (the soak reports how
   * many; the writer knows them from the row it read, and deletes their objects as after any write).
   */
  readonly lostAckReplacedObjectKeys: string[] = [];
  readonly injected = { throttled: 0, unprocessedResponses: 0, unprocessedKeys: 0, lostAcks: 0, conflicts: 0 };
  /** TransactWriteItems by ClientRequestToken. */
  readonly transactions = new Map<string, SentTransaction>();

  reset(): void {
    for (const key of Object.keys(this.requests)) delete this.requests[key];
    for (const key of Object.keys(this.conditionalFailures)) delete this.conditionalFailures[key];
    this.writes.length = 0;
    this.lostAckReplacedObjectKeys.length = 0;
    this.injected.throttled = 0;
    this.injected.unprocessedResponses = 0;
    this.injected.unprocessedKeys = 0;
    this.injected.lostAcks = 0;
    this.injected.conflicts = 0;
    for (const sent of this.transactions.values()) sent.watch.stop();
    this.transactions.clear();
  }

  totalRequests(): number {
    return Object.values(this.requests).reduce((sum, n) => sum + n, 0);
  }
}

const WRITES = new Set(['PutItem', 'UpdateItem']);

export function instrumentDynamo(client: DynamoDBClient, meter: DynamoMeter, chaos?: DynamoChaos): DynamoDBClient {
  const middleware: Middleware = (next, context) => async (args) => {
    const operation = commandName(context);
    if (chaos && chaos.throttleRate > 0 && chaos.random() < chaos.throttleRate) {
      meter.injected.throttled += 1;
      if (chaos.random() < 0.5) {
        throw new ProvisionedThroughputExceededException({
          message: 'The level of configured provisioned throughput for the table was exceeded (injected)',
          $metadata: { httpStatusCode: 400 },
        });
      }
      throw new DynamoDBServiceException({
        name: 'ThrottlingException',
        $fault: 'client',
        message: 'Throughput exceeds the current capacity of your table or index (injected)',
        $metadata: { httpStatusCode: 400 },
      });
    }
    if (operation === 'TransactWriteItems' && chaos?.conflictRate && chaos.random() < chaos.conflictRate) {
      meter.injected.conflicts += 1;
      throw conflict((args.input['TransactItems'] as unknown[] | undefined)?.length ?? 0, chaos.random);
    }
    if (operation === 'UpdateItem' && args.input['ReturnValues'] === undefined) {
      // Ask for the row as written, to record its state; the adapter ignores the extra output.
      args = { ...args, input: { ...args.input, ReturnValues: 'ALL_NEW' } };
    }
    meter.requests[operation] = (meter.requests[operation] ?? 0) + 1;
    const token = operation === 'TransactWriteItems' ? tokenOf(args.request) : undefined;
    const sent = token === undefined ? undefined : sentTransaction(meter, token);
    if (sent && args.request) args.request.headers[REPORT_COMMIT_HEADER] = '1';
    // A transaction already committed when this attempt was sent: its success is a replay.
    const replay = sent?.commit !== undefined;
    let result: { output: AnyInput; response: unknown };
    try {
      result = await next(args);
    } catch (error) {
      const name = (error as { name?: string }).name ?? '';
      if (name === 'ConditionalCheckFailedException' || conditionCancelled(error)) {
        meter.conditionalFailures[operation] = (meter.conditionalFailures[operation] ?? 0) + 1;
      }
      if (sent && !sent.commit && notCommitted(error)) {
        sent.watch.stop();
        meter.transactions.delete(token!);
      }
      throw error;
    }
    if (sent && !replay) {
      const commit = sent.commit ?? (await sent.watch.committed());
      if (chaos && chaos.lostAckRate > 0 && chaos.random() < chaos.lostAckRate) {
        meter.injected.lostAcks += 1;
        // The rows it replaced are in its commit (a transaction returns none).
        for (const write of commit.writes) {
          const replaced = write.keyNames.join(',') === ITEMS_TABLE_KEY ? objectKeyOf(write.oldImage) : undefined;
          if (replaced !== undefined) meter.lostAckReplacedObjectKeys.push(replaced);
        }
        throw lostAnswer();
      }
    }
    if (WRITES.has(operation)) {
      const write = recordedWrite(operation as RecordedWrite['operation'], args.input, result.output);
      if (write) meter.writes.push(write);
      if (chaos && chaos.lostAckRate > 0 && chaos.random() < chaos.lostAckRate) {
        meter.injected.lostAcks += 1;
        // A PutItem's Attributes are the row it replaced (ReturnValues ALL_OLD); an UpdateItem's, the row as written.
        const replaced = operation === 'PutItem' ? objectKeyOf(result.output['Attributes'] as Row | undefined) : undefined;
        if (replaced !== undefined) meter.lostAckReplacedObjectKeys.push(replaced);
        throw lostAnswer();
      }
    }
    if (operation === 'BatchGetItem' && chaos && chaos.unprocessedRate > 0 && chaos.random() < chaos.unprocessedRate) {
      moveToUnprocessed(result.output, args.input, chaos.random, meter);
    }
    return result;
  };
  (client as unknown as Stack).middlewareStack.add(middleware, { step: 'deserialize', priority: 'high', name: 'benchDynamoMeter' });
  return client;
}

/** DynamoDB's cancellation of a transaction that met another one on the item of one of its actions (a random one). */
function conflict(actions: number, random: () => number): TransactionCanceledException {
  const at = Math.floor(random() * actions);
  const reasons = Array.from({ length: actions }, (_, i) => (i === at ? { Code: 'TransactionConflict', Message: 'Transaction is ongoing for the item' } : { Code: 'None' }));
  const message = `Transaction cancelled, please refer cancellation reasons for specific reasons [${reasons.map((reason) => reason.Code).join(', ')}] (injected)`;
  return new TransactionCanceledException({ message, Message: message, CancellationReasons: reasons, $metadata: { httpStatusCode: 400 } });
}

/** What the SDK sees when a write's answer is lost: a time-out, which it retries (a transaction with the same token). */
function lostAnswer(): Error {
  const error = new Error('socket hang up after the write (injected: the answer was lost)') as Error & { code: string; $metadata: object };
  error.name = 'TimeoutError';
  error.code = 'ECONNRESET';
  error.$metadata = {};
  return error;
}

/** The `itemObject` key of a row (an items-table row of an item too large for a row). */
function objectKeyOf(row: Row | Record<string, AttributeValue> | undefined): string | undefined {
  const itemObject = row?.['itemObject'] as AttributeValue | undefined;
  return itemObject?.M?.['key']?.S;
}

/**
 * The ClientRequestToken of a serialized TransactWriteItems (bytes, or text): the SDK writes it last;
 * the key with a string value is the request's member (an attribute value is an object, and a key
 * inside a string is escaped). Only the bytes around it are decoded.
 */
function tokenOf(request: SentRequest | undefined): string | undefined {
  const body = request?.body;
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body instanceof Uint8Array ? Buffer.from(body.buffer, body.byteOffset, body.byteLength) : undefined;
  const at = bytes?.lastIndexOf('"ClientRequestToken":');
  if (bytes === undefined || at === undefined || at < 0) return undefined;
  const match = /^"ClientRequestToken":("(?:[^"\\]|\\.)*")/.exec(bytes.subarray(at, at + 512).toString('utf8'));
  return match ? (JSON.parse(match[1]!) as string) : undefined;
}

/** The transaction with `token`, watched from its first attempt: its commit records its items-table rows. */
function sentTransaction(meter: DynamoMeter, token: string): SentTransaction {
  const known = meter.transactions.get(token);
  if (known) return known;
  const sent: SentTransaction = {
    watch: watchCommit(token, (commit) => {
      sent.commit = commit;
      for (const write of commit.writes) {
        const id = write.newImage?.['id']?.['S'];
        if (write.keyNames.join(',') !== ITEMS_TABLE_KEY || typeof id !== 'string') continue;
        const row = write.newImage!;
        meter.writes.push({ id, state: `${row['deleted']?.['BOOL'] ? 'deleted' : 'live'}:${String(row['revision']?.['S'] ?? '?')}`, operation: 'TransactWriteItems' });
      }
    }),
  };
  meter.transactions.set(token, sent);
  for (const [old, kept] of meter.transactions) {
    if (meter.transactions.size <= TRANSACTIONS_KEPT) break;
    kept.watch.stop();
    meter.transactions.delete(old);
  }
  return sent;
}

/** A TransactionCanceledException with a ConditionalCheckFailed reason. */
function conditionCancelled(error: unknown): boolean {
  const cancelled = error as { name?: string; CancellationReasons?: Array<{ Code?: string }> };
  return cancelled.name === 'TransactionCanceledException' && (cancelled.CancellationReasons ?? []).some((reason) => reason.Code === 'ConditionalCheckFailed');
}

function recordedWrite(operation: RecordedWrite['operation'], input: AnyInput, output: AnyInput): RecordedWrite | undefined {
  if (operation === 'PutItem') {
    const item = input['Item'] as Record<string, AttributeValue> | undefined;
    const id = item?.['id']?.S;
    if (id === undefined) return undefined;
    return { id, state: `${item?.['deleted']?.BOOL ? 'deleted' : 'live'}:${item?.['revision']?.S ?? ''}`, operation };
  }
  const row = output['Attributes'] as Record<string, AttributeValue> | undefined;
  const id = row?.['id']?.S ?? (input['Key'] as Record<string, AttributeValue> | undefined)?.['id']?.S;
  if (id === undefined) return undefined;
  return { id, state: `${row?.['deleted']?.BOOL ? 'deleted' : 'live'}:${row?.['revision']?.S ?? '?'}`, operation };
}

/** Moves a random part (at least one) of the answered keys to UnprocessedKeys, as a throttled table does. */
function moveToUnprocessed(output: AnyInput, input: AnyInput, random: () => number, meter: DynamoMeter): void {
  const requestItems = input['RequestItems'] as Record<string, { Keys: Array<Record<string, AttributeValue>> } & AnyInput>;
  const responses = (output['Responses'] ?? {}) as Record<string, Array<Record<string, AttributeValue>>>;
  const unprocessed: Record<string, AnyInput> = {};
  for (const [table, request] of Object.entries(requestItems)) {
    const keys = request.Keys;
    if (keys.length === 0) continue;
    const count = Math.max(1, Math.floor(random() * keys.length));
    const moved = new Set(keys.slice(keys.length - count).map((key) => key['id']?.S));
    responses[table] = (responses[table] ?? []).filter((row) => !moved.has(row['id']?.S));
    unprocessed[table] = { ...request, Keys: keys.slice(keys.length - count) };
    meter.injected.unprocessedKeys += count;
  }
  meter.injected.unprocessedResponses += 1;
  output['Responses'] = responses;
  output['UnprocessedKeys'] = unprocessed;
}
