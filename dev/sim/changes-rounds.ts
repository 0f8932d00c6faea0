/**
 * The changes scenario's work and hazards (changes-scenario.ts):
 *
 * - `Rounds`: each round, every item of every account changes once at the provider (round 0: every
 *   item is new; later rounds: a share of the live items is deleted, the items deleted in the round
 *   before come back with a new revision, the others get a new revision), then users send every id
 *   (`{"connection","id"}`, in a seeded shuffle). A share of the ids is sent twice, the copy about a
 *   batch later (two containers race on the row), and a share of the
 *   messages is delivered twice by SQS (a duplicate copy, as at-least-once delivery makes).
 * - `syncFaults`: an invocation of the sync that fails after its work (every `failEvery`-th: its
 *   batch comes back after its visibility time-out), lost write answers below the SDK's retries
 *   (dev/fakes/dynamo-meter.ts), the sync's and the changes writer's; an invocation of the changes
 *   writer that fails after its work (every `writerFailEvery`-th: its stream batch comes again);
 *   stream batches lost by the change-events function's event source.
 * - `writeAttempts`: how many requests one row write took (the most, and how many writes took more
 *   than one), told from the row each request carries.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoMeter } from '../fakes/dynamo-meter.js';
import { mulberry32 } from '../simulator/random.js';
import type { SimulatorItem } from '../simulator/provider-types.js';
import type { SimSystem, SyncFaults } from './system.js';

export interface RoundShares {
  /** Share of the live items deleted each round (back the next round). */
  deletes: number;
  /** Share of the ids users send twice. */
  sentTwice: number;
  /** Share of the messages SQS delivers twice. */
  sqsDuplicates: number;
}

export interface RoundCounts {
  rounds: number;
  messages: number;
  sentTwice: number;
  sqsDuplicates: number;
  /** Changes made at the provider: every item once a round. */
  changesMade: number;
}

export class Rounds {
  readonly counts: RoundCounts = { rounds: 0, messages: 0, sentTwice: 0, sqsDuplicates: 0, changesMade: 0 };
  private readonly random: () => number;
  /** Items deleted at the provider in the last round, by connection (they come back in the next). */
  private deleted = new Map<string, SimulatorItem[]>();

  constructor(
    private readonly system: SimSystem,
    private readonly shares: RoundShares,
    private readonly batchSize: number,
    seed: number,
  ) {
    this.random = mulberry32(seed ^ 0x5eed);
  }

  /** The next round: every item changed once at the provider, then every id sent. */
  next(): void {
    const { provider } = this.system;
    const first = this.counts.rounds === 0;
    const ids: Array<[string, string]> = [];
    const deletedNow = new Map<string, SimulatorItem[]>();
    for (const connection of this.system.connectionIds) {
      const account = provider.account(connection);
      const live = account.itemIds();
      const back = this.deleted.get(connection) ?? [];
      const gone: SimulatorItem[] = [];
      if (!first) {
        for (const id of live) {
          if (this.random() < this.shares.deletes) {
            gone.push(account.getItem(id)!);
            account.deleteItem(id);
          } else {
            account.bumpRevision(id);
          }
        }
        for (const item of back) {
          account.setItem(item);
          account.bumpRevision(item.id);
        }
      }
      deletedNow.set(connection, gone);
      for (const id of live) ids.push([connection, id]);
      for (const item of back) ids.push([connection, item.id]);
      this.counts.changesMade += live.length + (first ? 0 : back.length);
    }
    this.deleted = deletedNow;
    this.counts.rounds += 1;
    this.send(ids);
  }

  /** Each id once, a share twice (the copy about a batch later), in a seeded shuffle; a share duplicated by SQS. */
  private send(ids: Array<[string, string]>): void {
    for (let i = ids.length - 1; i > 0; i -= 1) {
      const j = Math.floor(this.random() * (i + 1));
      [ids[i], ids[j]] = [ids[j]!, ids[i]!];
    }
    const messages: Array<{ order: number; body: string }> = [];
    ids.forEach(([connection, id], i) => {
      const body = JSON.stringify({ connection, id });
      messages.push({ order: i, body });
      if (this.random() < this.shares.sentTwice) {
        this.counts.sentTwice += 1;
        messages.push({ order: i + this.batchSize + Math.floor(this.random() * this.batchSize) + 0.5, body });
      }
    });
    messages.sort((a, b) => a.order - b.order);
    const { sqs, queueUrl } = this.system;
    for (const { body } of messages) {
      const sent = sqs.send(queueUrl, { body });
      if (this.random() < this.shares.sqsDuplicates) {
        this.counts.sqsDuplicates += 1;
        sqs.duplicate(queueUrl, sent, 1 + Math.floor(this.random() * 3 * this.batchSize));
      }
    }
    this.counts.messages += messages.length;
  }
}

export interface FaultRates {
  /** Every this-th invocation of the sync fails after its work (0: none). */
  failEvery: number;
  lostAcks: number;
  /** Every this-th invocation of the changes writer fails after its work (0: none). */
  writerFailEvery: number;
  lostStreamBatches: number;
}

export interface InjectedFaults {
  faults: SyncFaults;
  dynamo: DynamoMeter;
  /** The changes writer's injected DynamoDB faults. */
  writerDynamo: DynamoMeter;
  /** Invocations of the sync failed after their work. */
  failedInvocations: () => number;
}

/** The faults, seeded; each counted where it is injected (the stream's in its count). */
export function syncFaults(rates: FaultRates, seed: number): InjectedFaults {
  const random = mulberry32(seed ^ 0xfa017);
  const dynamo = new DynamoMeter();
  const writerDynamo = new DynamoMeter();
  let invocations = 0;
  let failed = 0;
  let writerInvocations = 0;
  const faults: SyncFaults = {
    dynamo: { meter: dynamo, chaos: { random, throttleRate: 0, unprocessedRate: 0, lostAckRate: rates.lostAcks } },
    writerDynamo: { meter: writerDynamo, chaos: { random, throttleRate: 0, unprocessedRate: 0, lostAckRate: rates.lostAcks } },
    writerFailsAfterWork: () => rates.writerFailEvery > 0 && (writerInvocations += 1) % rates.writerFailEvery === 0,
    invocation: (handler) => async (event, context) => {
      const answer = await handler(event, context);
      invocations += 1;
      if (rates.failEvery > 0 && invocations % rates.failEvery === 0) {
        failed += 1;
        throw new Error('the invocation failed after its work (injected: its answer never reached the event source)');
      }
      return answer;
    },
    loseStreamBatch: () => random() < rates.lostStreamBatches,
  };
  return { faults, dynamo, writerDynamo, failedInvocations: () => failed };
}

type AnyInput = Record<string, unknown>;
type Next = (args: { input: AnyInput }) => Promise<unknown>;
type Attribute = { S?: string; N?: string };

/** The requests each row write took: watched on the sync's clients (`observe.syncDynamo`). */
export class WriteAttempts {
  private readonly attempts = new Map<string, number>();
  most = 0;
  /** Row writes that took more than one request. */
  retried = 0;

  watch(client: DynamoDBClient): void {
    client.middlewareStack.add(
      ((next: Next, context: { commandName?: string }) => (args: { input: AnyInput }) => {
        if (context.commandName === 'PutItemCommand' || context.commandName === 'UpdateItemCommand') this.count(args.input);
        return next(args);
      }) as never,
      { step: 'initialize', priority: 'low', name: 'writeAttempts' },
    );
  }

  private count(input: AnyInput): void {
    const item = input['Item'] as Record<string, Attribute> | undefined;
    const keyOf = input['Key'] as Record<string, Attribute> | undefined;
    const values = input['ExpressionAttributeValues'] as Record<string, Attribute> | undefined;
    // Only the items table's rows (the sync's client writes the control table's pace row too).
    if (item ? item['id'] === undefined : keyOf?.['id'] === undefined) return;
    const key = item
      ? `${item['connection']?.S}\u0000${item['id']?.S}\u0000${item['revision']?.S}\u0000${item['syncedAt']?.S}`
      : `${keyOf?.['connection']?.S}\u0000${keyOf?.['id']?.S}\u0000deleted\u0000${values?.[':syncedAt']?.S}`;
    const n = (this.attempts.get(key) ?? 0) + 1;
    this.attempts.set(key, n);
    if (n === 2) this.retried += 1;
    if (n > this.most) this.most = n;
    // Keep the map bounded: a row write's attempts all come within moments (the SDK's retries of
    // one call), so the latest 5,000 writes are enough to count them.
    if (this.attempts.size > 5_000) for (const old of [...this.attempts.keys()].slice(0, 2_500)) this.attempts.delete(old);
  }
}
