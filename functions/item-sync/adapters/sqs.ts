/**
 * SQS adapters of the item sync: the dead-letter sink (SendMessageBatch to DEAD_LETTER_QUEUE_URL),
 * the re-sends of waiting records (SendMessageBatch to the source queue), the visibility port
 * (ChangeMessageVisibilityBatch on the source queue for rate-limited records) and the discovery
 * sink (SendMessageBatch to RECONCILE_QUEUE_URL: a folder's children, in the background lane). What is sent carries
 * the record's connection as its MessageGroupId (fair queues: shared/sync-queue.ts), when its body
 * named one that could be read.
 *
 * The source queue's URL is asked of SQS (GetQueueUrl with the name and account from the record's
 * eventSourceARN), once per queue per container, rather than built from the ARN: the answer comes
 * from the client's own endpoint configuration, so it is right for AWS_ENDPOINT_URL_SQS in local
 * runs, for FIPS, dual-stack and VPC endpoints and for partitions other than aws.
 */
import { ChangeMessageVisibilityBatchCommand, GetQueueUrlCommand, type SendMessageBatchRequestEntry, type SQSClient } from '@aws-sdk/client-sqs';
import { resendPolicy, sendMessageBatch, type EntryFailure, type ResendOptions, type ResendPolicy } from '../../shared/adapters/sqs-batch.js';
import { forEachLimited } from '../../shared/limited.js';
import { BACKGROUND_LANE, BACKLOG_LANE, LANE_ATTRIBUTE, messageGroupIdOf, RECONCILE_PASS_ATTRIBUTE } from '../../shared/sync-queue.js';
import type { BackgroundLane, DeadLetter, DeadLetterSink, MessageRequeue, MessageVisibility, PostponeRequest, RequeueRequest } from '../ports.js';

/** Entries per SendMessageBatch / ChangeMessageVisibilityBatch call (SQS's limit). */
const BATCH_ENTRIES = 10;

/** SendMessageBatch calls of one folder's children in flight at once. */
export const DISCOVERY_CALLS_IN_FLIGHT = 10;
/** Payload of one SendMessageBatch call, bodies and attributes together (SQS's classic limit: 256 KiB). */
const BATCH_BYTES = 256 * 1024;
/** The `error` attribute is a sentence; keep it readable in the console. */
const MAX_REASON_CHARS = 1_000;

/** Sends per entry that SQS refuses for a reason that may pass (SenderFault false), and the waits between. */
export type SqsDeadLetterSinkOptions = ResendOptions;

type Failure = { sourceMessageId: string; error: string };

export class SqsDeadLetterSink implements DeadLetterSink {
  private readonly resend: ResendPolicy;

  constructor(
    private readonly client: SQSClient,
    readonly queueUrl: string,
    options: SqsDeadLetterSinkOptions = {},
  ) {
    this.resend = resendPolicy(options);
  }

  /**
   * Sends the letters; returns those that could not be sent. Entries SQS refuses for a reason that
   * may pass are sent again, a bounded number of times (shared/adapters/sqs-batch.ts). A call that
   * throws has already been retried by the SDK: its letters are not sent.
   */
  async send(letters: readonly DeadLetter[]): Promise<Failure[]> {
    const failed: Failure[] = [];
    for (const chunk of chunkLetters(letters)) {
      await sendMessageBatch(this.client, this.queueUrl, chunk, {
        entry: (letter, position) => deadLetterEntry(letter, `m${position}`),
        ...this.resend,
        onCallError: () => 'give-up',
        onSent: () => undefined,
        onFailed: (letter, failure) => void failed.push({ sourceMessageId: letter.sourceMessageId, error: failureText(failure) }),
      });
    }
    return failed;
  }
}

/**
 * Ids sent to the background lane, the reconcile queue (RECONCILE_QUEUE_URL), as a backfill is
 * (`npm run enqueue -- --backfill`): a folder's children (`lane` = `background`: the item sync takes
 * them as the pace's sweep, after users' ids) or a users' batch's backlog (`lane` = `backlog`).
 * Body `{"connection", "id"}`, the connection as the MessageGroupId (fair queues). SendMessageBatch
 * of 10; entries refused for a reason that may pass are sent again (bounded); a call that throws has
 * already been retried by the SDK.
 */
export class SqsBackgroundLane implements BackgroundLane {
  private readonly resend: ResendPolicy;

  constructor(
    private readonly client: SQSClient,
    readonly queueUrl: string,
    options: ResendOptions = {},
    /** The `lane` attribute's value: `background`, or `backlog` for a users' backlog moved there. */
    private readonly lane: string = BACKGROUND_LANE,
  ) {
    this.resend = resendPolicy(options);
  }

  async send(connection: string, ids: readonly string[]): Promise<Array<{ id: string; error: string }>> {
    const failed: Array<{ id: string; error: string }> = [];
    const chunks: string[][] = [];
    for (let start = 0; start < ids.length; start += BATCH_ENTRIES) chunks.push(ids.slice(start, start + BATCH_ENTRIES));
    // A large folder's children in parallel calls: 10,000 children are 1,000 calls, within the batch's time.
    await forEachLimited(chunks, DISCOVERY_CALLS_IN_FLIGHT, async (chunk) => {
      await sendMessageBatch(this.client, this.queueUrl, chunk, {
        entry: (id, position) => ({
          Id: `m${position}`,
          MessageBody: JSON.stringify({ connection, id }),
          MessageGroupId: messageGroupIdOf(connection),
          MessageAttributes: { [LANE_ATTRIBUTE]: { DataType: 'String', StringValue: this.lane } },
        }),
        ...this.resend,
        onCallError: () => 'give-up',
        onSent: () => undefined,
        onFailed: (id, failure) => void failed.push({ id, error: failureText(failure) }),
      });
    });
    return failed;
  }
}

function deadLetterEntry(letter: DeadLetter, id: string): SendMessageBatchRequestEntry {
  return {
    Id: id,
    MessageBody: letter.body,
    ...(letter.connection !== undefined ? { MessageGroupId: messageGroupIdOf(letter.connection) } : {}),
    MessageAttributes: {
      error: { DataType: 'String', StringValue: attributeText(letter.reason, MAX_REASON_CHARS) },
      sourceMessageId: { DataType: 'String', StringValue: letter.sourceMessageId },
    },
  };
}

function failureText(failure: EntryFailure): string {
  switch (failure.kind) {
    case 'refused':
      return `${failure.code ?? 'error'}: ${failure.message ?? ''}`.trim();
    case 'unanswered':
      return 'not acknowledged by SQS';
    case 'call-failed':
      return `SendMessageBatch failed: ${(failure.error as Error).name}: ${(failure.error as Error).message}`;
    case 'stopped':
      return 'not sent';
  }
}

/** Queue ARN → its URL (GetQueueUrl), once per container. A failed look-up is forgotten and tried again next time. */
export class QueueUrls {
  private readonly urls = new Map<string, Promise<string>>();

  constructor(private readonly client: SQSClient) {}

  of(queueArn: string): Promise<string> {
    let url = this.urls.get(queueArn);
    if (!url) {
      url = this.lookUp(queueArn);
      this.urls.set(queueArn, url);
      url.catch(() => this.urls.delete(queueArn));
    }
    return url;
  }

  private async lookUp(queueArn: string): Promise<string> {
    const { account, name } = parseQueueArn(queueArn);
    const output = await this.client.send(new GetQueueUrlCommand({ QueueName: name, QueueOwnerAWSAccountId: account }));
    if (!output.QueueUrl) throw new Error(`GetQueueUrl returned no URL for ${queueArn}`);
    return output.QueueUrl;
  }
}

/** Groups requests by source queue, with its URL or why it could not be found. */
async function byQueue<T extends { queueArn: string; messageId: string }>(
  urls: QueueUrls,
  requests: readonly T[],
  failed: Array<{ messageId: string; error: string }>,
): Promise<Array<{ queueUrl: string; group: T[] }>> {
  const groups = new Map<string, T[]>();
  for (const request of requests) {
    const group = groups.get(request.queueArn);
    if (group) group.push(request);
    else groups.set(request.queueArn, [request]);
  }
  const out: Array<{ queueUrl: string; group: T[] }> = [];
  for (const [queueArn, group] of groups) {
    try {
      out.push({ queueUrl: await urls.of(queueArn), group });
    } catch (cause) {
      const error = `finding the queue URL of ${queueArn} failed: ${(cause as Error).name}: ${(cause as Error).message}`;
      for (const request of group) failed.push({ messageId: request.messageId, error });
    }
  }
  return out;
}

/**
 * Sends a waiting record again to its own queue with DelaySeconds, and the message attribute
 * `postponements` (Number): a new message, with a fresh receive count, so that waiting never uses
 * up maxReceiveCount. A background record keeps its lane (`lane` = `background` or `backlog`) and a reconciler's
 * its `reconcilePass`; each keeps its connection as its MessageGroupId. Entries SQS refuses for a
 * reason that may pass are sent again (bounded).
 */
export class SqsMessageRequeue implements MessageRequeue {
  private readonly resend: ResendPolicy;

  constructor(
    private readonly client: SQSClient,
    private readonly urls: QueueUrls,
    options: SqsDeadLetterSinkOptions = {},
  ) {
    this.resend = resendPolicy(options);
  }

  async requeue(requests: readonly RequeueRequest[]): Promise<Array<{ messageId: string; error: string }>> {
    const failed: Array<{ messageId: string; error: string }> = [];
    for (const { queueUrl, group } of await byQueue(this.urls, requests, failed)) {
      for (let start = 0; start < group.length; start += BATCH_ENTRIES) {
        await sendMessageBatch(this.client, queueUrl, group.slice(start, start + BATCH_ENTRIES), {
          entry: (request, position) => ({
            Id: `m${position}`,
            MessageBody: request.body,
            DelaySeconds: request.delaySeconds,
            ...(request.connection !== undefined ? { MessageGroupId: messageGroupIdOf(request.connection) } : {}),
            MessageAttributes: {
              [POSTPONEMENTS_ATTRIBUTE]: { DataType: 'Number', StringValue: String(request.postponements) },
              ...(request.reconcilePass !== undefined
                ? { [RECONCILE_PASS_ATTRIBUTE]: { DataType: 'Number', StringValue: String(request.reconcilePass) } }
                : {}),
              ...(request.background === true
                ? { [LANE_ATTRIBUTE]: { DataType: 'String', StringValue: request.backlog === true ? BACKLOG_LANE : BACKGROUND_LANE } }
                : {}),
            },
          }),
          ...this.resend,
          onCallError: () => 'give-up',
          onSent: () => undefined,
          onFailed: (request, failure) => void failed.push({ messageId: request.messageId, error: failureText(failure) }),
        });
      }
    }
    return failed;
  }
}

/** The message attribute that counts a message's postponements (the outage schedule grows with it). */
export const POSTPONEMENTS_ATTRIBUTE = 'postponements';
/** The message attributes the reconciler sets (the pass; the lane, which backfills set too). One definition, shared with the senders. */
export { BACKGROUND_LANE, BACKLOG_LANE, LANE_ATTRIBUTE, RECONCILE_PASS_ATTRIBUTE };

export class SqsMessageVisibility implements MessageVisibility {
  constructor(
    private readonly client: SQSClient,
    private readonly urls: QueueUrls = new QueueUrls(client),
  ) {}

  async postpone(requests: readonly PostponeRequest[]): Promise<Array<{ messageId: string; error: string }>> {
    const failed: Array<{ messageId: string; error: string }> = [];
    for (const { queueUrl, group } of await byQueue(this.urls, requests, failed)) {
      for (let start = 0; start < group.length; start += BATCH_ENTRIES) {
        const chunk = group.slice(start, start + BATCH_ENTRIES);
        try {
          const output = await this.client.send(
            new ChangeMessageVisibilityBatchCommand({
              QueueUrl: queueUrl,
              Entries: chunk.map((request, index) => ({
                Id: `m${index}`,
                ReceiptHandle: request.receiptHandle,
                VisibilityTimeout: request.delaySeconds,
              })),
            }),
          );
          for (const failure of output.Failed ?? []) {
            const request = chunk[Number(failure.Id?.slice(1))];
            if (request) failed.push({ messageId: request.messageId, error: `${failure.Code ?? 'error'}: ${failure.Message ?? ''}`.trim() });
          }
        } catch (cause) {
          const error = `ChangeMessageVisibilityBatch failed: ${(cause as Error).name}: ${(cause as Error).message}`;
          for (const request of chunk) failed.push({ messageId: request.messageId, error });
        }
      }
    }
    return failed;
  }
}

/** `arn:<partition>:sqs:<region>:<account>:<name>`. */
export function parseQueueArn(arn: string): { region: string; account: string; name: string } {
  const parts = arn.split(':');
  if (parts.length !== 6 || parts[0] !== 'arn' || parts[2] !== 'sqs' || !parts[3] || !parts[4] || !parts[5]) {
    throw new Error(`not an SQS queue ARN: ${arn}`);
  }
  return { region: parts[3], account: parts[4], name: parts[5] };
}

/**
 * Text SQS accepts in a message attribute (XML 1.0 characters: tab, LF, CR, U+0020–U+D7FF,
 * U+E000–U+FFFD, U+10000–U+10FFFF), shortened to `max` characters. Anything else becomes \uXXXX.
 */
export function attributeText(text: string, max: number): string {
  const safe = text.replace(
    /[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\u{10000}-\u{10ffff}]/gu,
    (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
  const chars = [...safe];
  return chars.length > max ? `${chars.slice(0, max - 1).join('')}…` : safe;
}

/** Chunks of at most 10 letters and about 256 KiB (a letter bigger than that goes alone). */
function chunkLetters(letters: readonly DeadLetter[]): DeadLetter[][] {
  const chunks: DeadLetter[][] = [];
  let current: DeadLetter[] = [];
  let bytes = 0;
  for (const letter of letters) {
    const size =
      Buffer.byteLength(letter.body, 'utf8') +
      Buffer.byteLength(letter.sourceMessageId, 'utf8') +
      Math.min(Buffer.byteLength(letter.reason, 'utf8'), MAX_REASON_CHARS * 4) +
      64; // attribute names and data types
    if (current.length > 0 && (current.length >= BATCH_ENTRIES || bytes + size > BATCH_BYTES)) {
      chunks.push(current);
      current = [];
      bytes = 0;
    }
    current.push(letter);
    bytes += size;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}
