/**
 * DynamoDB as the bench and the soak see it: dynalite is real (over HTTP); `instrumentDynamo` adds a
 * middleware in the client's `deserialize` step, below the SDK's retry middleware, that counts every
 * request that reaches the table and every successful write (with the row state it stored), and can
 * inject throttling (ProvisionedThroughputExceededException / ThrottlingException, which the SDK
 * retries with its own backoff), BatchGetItem UnprocessedKeys, and lost write acknowledgements (the
 * write is applied, then the caller sees a time-out and the SDK sends it again).
 */
import { DynamoDBServiceException, ProvisionedThroughputExceededException, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';

type AnyInput = Record<string, unknown>;
type Handler = (args: { input: AnyInput }) => Promise<{ output: AnyInput; response: unknown }>;
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
  operation: 'PutItem' | 'UpdateItem';
}

export interface DynamoChaos {
  random: () => number;
  /** Fraction of requests refused with a throttling error before they reach the table. */
  throttleRate: number;
  /** Fraction of successful BatchGetItem answers with some keys moved to UnprocessedKeys. */
  unprocessedRate: number;
  /** Fraction of successful writes whose answer is lost (the SDK sees a time-out and re-sends). */
  lostAckRate: number;
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
  readonly injected = { throttled: 0, unprocessedResponses: 0, unprocessedKeys: 0, lostAcks: 0 };

  reset(): void {
    for (const key of Object.keys(this.requests)) delete this.requests[key];
    for (const key of Object.keys(this.conditionalFailures)) delete this.conditionalFailures[key];
    this.writes.length = 0;
    this.lostAckReplacedObjectKeys.length = 0;
    this.injected.throttled = 0;
    this.injected.unprocessedResponses = 0;
    this.injected.unprocessedKeys = 0;
    this.injected.lostAcks = 0;
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
    if (operation === 'UpdateItem' && args.input['ReturnValues'] === undefined) {
      // Ask for the row as written, to record its state; the adapter ignores the extra output.
      args = { ...args, input: { ...args.input, ReturnValues: 'ALL_NEW' } };
    }
    meter.requests[operation] = (meter.requests[operation] ?? 0) + 1;
    let result: { output: AnyInput; response: unknown };
    try {
      result = await next(args);
    } catch (error) {
      if ((error as { name?: string }).name === 'ConditionalCheckFailedException') {
        meter.conditionalFailures[operation] = (meter.conditionalFailures[operation] ?? 0) + 1;
      }
      throw error;
    }
    if (WRITES.has(operation)) {
      const write = recordedWrite(operation as RecordedWrite['operation'], args.input, result.output);
      if (write) meter.writes.push(write);
      if (chaos && chaos.lostAckRate > 0 && chaos.random() < chaos.lostAckRate) {
        meter.injected.lostAcks += 1;
        // A PutItem's Attributes are the row it replaced (ReturnValues ALL_OLD); an UpdateItem's, the row as written.
        const replaced = operation === 'PutItem' ? (result.output['Attributes'] as Record<string, AttributeValue> | undefined)?.['itemObject']?.M?.['key']?.S : undefined;
        if (replaced !== undefined) meter.lostAckReplacedObjectKeys.push(replaced);
        const error = new Error('socket hang up after the write (injected: the answer was lost)') as Error & { code: string; $metadata: object };
        error.name = 'TimeoutError';
        error.code = 'ECONNRESET';
        error.$metadata = {};
        throw error;
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
