/**
 * DynamoDB as the bench and the soak see it: DynamoDB Local is real (over HTTP); `instrumentDynamo`
 * adds a middleware in the client's `deserialize` step, below the SDK's retry middleware, that
 * counts every request that reaches the table and every successful write (with the row state it
 * stored), and can inject throttling (ProvisionedThroughputExceededException / ThrottlingException,
 * which the SDK retries with its own backoff), BatchGetItem UnprocessedKeys, and lost write
 * acknowledgements (the write is applied, then the caller sees a time-out and the SDK sends it
 * again).
 *
 * A TransactWriteItems returns no rows, and needs none here: a committed transaction stored its Put
 * items as sent, and an Update as the sync sends it (markDeleted: `deleted` set, the revision its
 * condition compared kept). The meter knows which attempt committed, since it is the one that loses
 * answers: the first attempt of a ClientRequestToken that DynamoDB answers with success. The SDK
 * sends a transaction whose answer was lost again with the same token, and DynamoDB answers it
 * without applying it again: a later success with that token is that replay, not a write. A
 * cancellation with a ConditionalCheckFailed reason counts as a conditional failure.
 * `conflictRate` cancels a share of them with a TransactionConflict reason, as DynamoDB cancels a
 * transaction that meets another on an item (DynamoDB Local, answering one request at a time on
 * loopback, seldom does).
 */
import {
  DynamoDBServiceException,
  ProvisionedThroughputExceededException,
  TransactionCanceledException,
  type AttributeValue,
  type DynamoDBClient,
} from '@aws-sdk/client-dynamodb';

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

/** A transaction the meter saw sent: whether an attempt of it has committed. */
interface SentTransaction {
  committed: boolean;
}
/** Transactions remembered by token (a token's attempts all come within the SDK's retries). */
const TRANSACTIONS_KEPT = 10_000;
/** The errors that say a transaction did not commit (no other attempt of its request will). */
const NOT_COMMITTED = new Set(['TransactionCanceledException', 'ValidationException', 'ResourceNotFoundException', 'IdempotentParameterMismatchException']);

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
    meter.requests[operation] = (meter.requests[operation] ?? 0) + 1;
    const token = operation === 'TransactWriteItems' ? tokenOf(args.request) : undefined;
    const sent = token === undefined ? undefined : sentTransaction(meter, token);
    // A transaction already committed when this attempt was sent: its success is a replay.
    const replay = sent?.committed === true;
    let result: { output: AnyInput; response: unknown };
    try {
      result = await next(args);
    } catch (error) {
      const name = (error as { name?: string }).name ?? '';
      if (name === 'ConditionalCheckFailedException' || conditionCancelled(error)) {
        meter.conditionalFailures[operation] = (meter.conditionalFailures[operation] ?? 0) + 1;
      }
      if (sent && !sent.committed && NOT_COMMITTED.has(name)) meter.transactions.delete(token!);
      throw error;
    }
    if (sent && !replay) {
      // This attempt committed: its items-table rows are stored.
      sent.committed = true;
      const actions = transactionWrites(args.input);
      for (const action of actions) if (action.write) meter.writes.push(action.write);
      if (chaos && chaos.lostAckRate > 0 && chaos.random() < chaos.lostAckRate) {
        meter.injected.lostAcks += 1;
        // The rows it replaced are named by its conditions (a transaction returns none).
        for (const action of actions) if (action.replacedObjectKey !== undefined) meter.lostAckReplacedObjectKeys.push(action.replacedObjectKey);
        throw lostAnswer();
      }
    }
    if (WRITES.has(operation)) {
      const write = recordedWrite(operation as RecordedWrite['operation'], args.input, result.output);
      if (write) meter.writes.push(write);
      if (chaos && chaos.lostAckRate > 0 && chaos.random() < chaos.lostAckRate) {
        meter.injected.lostAcks += 1;
        // A PutItem's Attributes are the row it replaced (ReturnValues ALL_OLD); an UpdateItem's, the row as written.
        const replaced = operation === 'PutItem' ? objectKeyOf(result.output['Attributes'] as Record<string, AttributeValue> | undefined) : undefined;
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
  // Before the request is built: an UpdateItem asks for the row as written, to record its state (the
  // adapter ignores the extra output).
  const askRow: Middleware = (next, context) => (args) =>
    next(commandName(context) === 'UpdateItem' && args.input['ReturnValues'] === undefined ? { ...args, input: { ...args.input, ReturnValues: 'ALL_NEW' } } : args);
  (client as unknown as Stack).middlewareStack.add(askRow, { step: 'initialize', priority: 'high', name: 'benchDynamoMeterRow' });
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
function objectKeyOf(row: Record<string, AttributeValue> | undefined): string | undefined {
  return row?.['itemObject']?.M?.['key']?.S;
}

/**
 * The ClientRequestToken of a serialized TransactWriteItems (bytes, or text): the SDK writes it last;
 * the key with a string value is the request's member (an attribute value is an object, and a key
 * inside a string is escaped). Only the bytes around it are decoded.
 */
export function tokenOf(request: SentRequest | undefined): string | undefined {
  const body = request?.body;
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body instanceof Uint8Array ? Buffer.from(body.buffer, body.byteOffset, body.byteLength) : undefined;
  const at = bytes?.lastIndexOf('"ClientRequestToken":');
  if (bytes === undefined || at === undefined || at < 0) return undefined;
  const match = /^"ClientRequestToken":("(?:[^"\\]|\\.)*")/.exec(bytes.subarray(at, at + 512).toString('utf8'));
  return match ? (JSON.parse(match[1]!) as string) : undefined;
}

/** The transaction with `token`, remembered from its first attempt. */
function sentTransaction(meter: DynamoMeter, token: string): SentTransaction {
  const known = meter.transactions.get(token);
  if (known) return known;
  const sent: SentTransaction = { committed: false };
  meter.transactions.set(token, sent);
  for (const old of meter.transactions.keys()) {
    if (meter.transactions.size <= TRANSACTIONS_KEPT) break;
    meter.transactions.delete(old);
  }
  return sent;
}

interface TransactAction {
  TableName?: string;
  Item?: Record<string, AttributeValue>;
  Key?: Record<string, AttributeValue>;
  UpdateExpression?: string;
  ConditionExpression?: string;
  ExpressionAttributeNames?: Record<string, string>;
  ExpressionAttributeValues?: Record<string, AttributeValue>;
}

/**
 * A committed transaction's items-table writes, in the order of its actions: the row each stored,
 * and the `itemObject` key of the row it replaced when its condition names it. An items-table row is
 * keyed by `connection` and `id`; a changes-table row (a change, the head) has a `seq`.
 */
function transactionWrites(input: AnyInput): Array<{ write?: RecordedWrite; replacedObjectKey?: string }> {
  const actions = (input['TransactItems'] ?? []) as Array<{ Put?: TransactAction; Update?: TransactAction }>;
  return actions.map((action) => {
    const member = action.Put ?? action.Update;
    const row = action.Put ? member?.Item : member?.Key;
    const id = row?.['id']?.S;
    if (!member || !row || id === undefined || row['connection'] === undefined || row['seq'] !== undefined) return {};
    const replacedObjectKey = comparedObjectKey(member);
    const state = action.Put ? `${row['deleted']?.BOOL ? 'deleted' : 'live'}:${row['revision']?.S ?? ''}` : updatedState(member);
    return { write: { id, state, operation: 'TransactWriteItems' }, ...(replacedObjectKey !== undefined ? { replacedObjectKey } : {}) };
  });
}

/** The value a condition compares a name path with (`#a.#b = :v`, or `#a = :v`), by the path's attribute names. */
function compared(member: TransactAction, path: string[]): AttributeValue | undefined {
  const names = member.ExpressionAttributeNames ?? {};
  const pattern = /((?:#\w+)(?:\.#\w+)*)\s*=\s*(:\w+)/g;
  for (const match of (member.ConditionExpression ?? '').matchAll(pattern)) {
    const resolved = match[1]!.split('.').map((name) => names[name]);
    if (resolved.join('.') === path.join('.')) return member.ExpressionAttributeValues?.[match[2]!];
  }
  return undefined;
}

/** The object key of the row a write replaces, when its condition compares `itemObject.key`. */
function comparedObjectKey(member: TransactAction): string | undefined {
  return compared(member, ['itemObject', 'key'])?.S;
}

/** An Update's row as stored: deleted when it sets `deleted` true; its revision the one its condition compared (an Update keeps it). */
function updatedState(member: TransactAction): string {
  const names = member.ExpressionAttributeNames ?? {};
  const values = member.ExpressionAttributeValues ?? {};
  let deleted = false;
  let revision: string | undefined = compared(member, ['revision'])?.S;
  for (const match of (member.UpdateExpression ?? '').matchAll(/(#\w+)\s*=\s*(:\w+)/g)) {
    const name = names[match[1]!];
    const value = values[match[2]!];
    if (name === 'deleted') deleted = value?.BOOL === true;
    if (name === 'revision' && value?.S !== undefined) revision = value.S;
  }
  return `${deleted ? 'deleted' : 'live'}:${revision ?? '?'}`;
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
