/**
 * The account lifecycle events of the local run. In AWS the connections table's stream feeds the
 * change-events function, which maps each record with functions/change-events/lifecycle.ts and puts
 * the event on the bus; the local run runs no change-events function. So it reads the connections table after
 * each step (a Scan), compares each row with the one it read before, and hands the change to the
 * same mapping as a stream record would carry it (old and new images): the events printed are the
 * ones the function would publish for those writes. Two writes of one row between two reads show as
 * one change: the deployed stream has every write.
 */
import { ScanCommand, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { lifecycleOf } from '../../functions/change-events/lifecycle.js';
import type { LifecycleEvent, StreamImage, StreamRecord } from '../../functions/change-events/ports.js';

type Row = Record<string, AttributeValue>;

export class LifecycleWatch {
  private rows = new Map<string, Row>();
  /** Every event seen, in order. */
  readonly events: LifecycleEvent[] = [];

  constructor(
    private readonly dynamodb: DynamoDBClient,
    private readonly table: string,
  ) {}

  /** Reads the table; returns the events of what changed since the last read (and keeps them in `events`). */
  async poll(): Promise<LifecycleEvent[]> {
    const now = new Map<string, Row>();
    let start: Row | undefined;
    do {
      const page = await this.dynamodb.send(new ScanCommand({ TableName: this.table, ConsistentRead: true, ExclusiveStartKey: start }));
      for (const row of page.Items ?? []) now.set(row['connection']!.S!, row);
      start = page.LastEvaluatedKey;
    } while (start);
    const found: LifecycleEvent[] = [];
    const see = (record: StreamRecord): void => {
      const event = lifecycleOf(record, { now: () => Date.now() });
      if (event) found.push(event);
    };
    for (const [connection, row] of now) {
      const before = this.rows.get(connection);
      if (before === undefined) see(record('INSERT', connection, undefined, row));
      else if (JSON.stringify(before) !== JSON.stringify(row)) see(record('MODIFY', connection, before, row));
    }
    for (const [connection, row] of this.rows) if (!now.has(connection)) see(record('REMOVE', connection, row, undefined));
    this.rows = now;
    this.events.push(...found);
    return found;
  }
}

function record(eventName: 'INSERT' | 'MODIFY' | 'REMOVE', connection: string, oldImage: Row | undefined, newImage: Row | undefined): StreamRecord {
  return {
    eventName,
    dynamodb: {
      Keys: { connection: { S: connection } } as StreamImage,
      ...(oldImage ? { OldImage: oldImage as StreamImage } : {}),
      ...(newImage ? { NewImage: newImage as StreamImage } : {}),
      ApproximateCreationDateTime: Math.floor(Date.now() / 1000),
    },
  };
}

/** An event as the local run prints it: its type, its connection, its status change, its reason. */
export function describeLifecycleEvent(event: LifecycleEvent): string {
  const { detail } = event;
  return `${event.detailType} ${detail.connection} (${detail.previousStatus ?? 'none'} → ${detail.status ?? 'none'})${detail.reason !== undefined ? `: ${detail.reason}` : ''}`;
}
