/**
 * The functions the tables' streams feed in the local run, as in AWS, each the real function (its
 * handler built from its deployed environment: dev/system/functions.ts) through Lambda's DynamoDB
 * event source mapping on the wall clock (dev/system/event-sources.ts startStreamEventSource): the
 * change-events function, fed by both tables' streams (the items table's: item change events and
 * each connection's `idsKnown` and `lastWriteAt`; the connections table's: the account lifecycle
 * events), and the changes writer, fed by the items table's (each connection's changes feed). The bus is
 * answered in process: every PutEvents entry is accepted and kept, in the order put, and the run
 * prints the lifecycle events among them (`event ConnectionAdded acme (none → active)`) after the
 * step that caused them, once the streams have been read through.
 */
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { isLifecycleEvent } from '../../functions/change-events/lifecycle.js';
import type { BusEvent, LifecycleEvent } from '../../functions/change-events/ports.js';
import { CHANGE_EVENTS_SERVICE, CHANGES_WRITER_SERVICE } from '../../functions/shared/metric-names.js';
import { changesWriterEventSourceDeployment } from '../../infra/deployment.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION, withoutSdkLogger } from '../fakes/local-aws.js';
import { startStreamEventSource, type StreamEventSource } from '../system/event-sources.js';
import type { Observability } from '../system/observability.js';
import type { LocalSystem } from '../system/system.js';

/** One entry the function put on the bus, as EventBridge received it. */
export interface PutEntry {
  eventBusName: string | undefined;
  source: string | undefined;
  event: BusEvent;
}

export interface LocalChangeEvents {
  /** Every entry put so far, in order. */
  readonly entries: readonly PutEntry[];
  /** The account lifecycle events put so far, in order. */
  lifecycle(): LifecycleEvent[];
  /** The change-events function's event sources (the items table's, the connections table's), then the changes writer's. */
  readonly sources: readonly StreamEventSource[];
  /** Resolves once every event source has read its stream through: what the tables wrote before the call has reached the functions. */
  readThrough(): Promise<void>;
  /** What went wrong: batches the event sources gave up on. */
  problems(): string[];
  stop(): Promise<void>;
}

type AnyInput = Record<string, unknown>;

/** An EventBridge client answered in process: every PutEvents entry accepted at once and handed to `put`. */
export function inProcessEventBridge(put: (entry: PutEntry) => void): EventBridgeClient {
  const client = withoutSdkLogger(new EventBridgeClient({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS }));
  let next = 0;
  client.middlewareStack.add(
    ((_next: unknown, context: { commandName?: string }) => async (args: { input: AnyInput }) => {
      if (context.commandName !== 'PutEventsCommand') throw new Error(`the local bus answers PutEvents only, not ${context.commandName}`);
      const entries = (args.input['Entries'] ?? []) as Array<Record<string, unknown>>;
      const results = entries.map((entry) => {
        put({
          eventBusName: entry['EventBusName'] as string | undefined,
          source: entry['Source'] as string | undefined,
          event: { detailType: entry['DetailType'], detail: JSON.parse(String(entry['Detail'])) } as BusEvent,
        });
        return { EventId: `local-event-${(next += 1)}` };
      });
      return { output: { FailedEntryCount: 0, Entries: results, $metadata: { httpStatusCode: 200 } }, response: {} };
    }) as never,
    { step: 'initialize', priority: 'high', name: 'localEventBus' },
  );
  return client;
}

/**
 * The functions and their three event sources, started before the run writes anything. `fresh`: the
 * tables are new, so the mappings start at the oldest record (TRIM_HORIZON, as deployed); a table
 * kept from an earlier run starts after what its stream holds (that run's mapping announced it).
 */
export async function startChangeEvents(system: LocalSystem, observability: (service: string) => Observability, fresh: boolean): Promise<LocalChangeEvents> {
  const entries: PutEntry[] = [];
  const eventbridge = inProcessEventBridge((entry) => entries.push(entry));
  const fn = system.changeEvents({ eventbridge, ...observability(CHANGE_EVENTS_SERVICE) });
  const startingPosition = fresh ? 'TRIM_HORIZON' : 'LATEST';
  const sources: StreamEventSource[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(sources.map((source) => source.stop()));
    eventbridge.destroy();
  };
  try {
    for (const table of ['items', 'connections'] as const) sources.push(await startStreamEventSource(system, table, { fn, startingPosition }));
    const writer = system.changesWriter(observability(CHANGES_WRITER_SERVICE));
    sources.push(await startStreamEventSource(system, 'items', { fn: writer, deployment: changesWriterEventSourceDeployment(), startingPosition }));
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    entries,
    lifecycle: () => entries.map((entry) => entry.event).filter(isLifecycleEvent),
    sources,
    readThrough: async () => void (await Promise.all(sources.map((source) => source.readThrough()))),
    problems: () =>
      sources.flatMap((source) =>
        source.discarded.map(
          (batch) =>
            `${source === sources[2] ? 'changes writer' : 'change events'}: ${batch.records} records of ${batch.table}'s stream (${batch.firstSequence} to ${batch.lastSequence}) given up after the deployed retries: ${batch.reason}`,
        ),
      ),
    stop,
  };
}

/** An event as the local run prints it: its type, its connection, its status change, its reason. */
export function describeLifecycleEvent(event: LifecycleEvent): string {
  const { detail } = event;
  return `${event.detailType} ${detail.connection} (${detail.previousStatus ?? 'none'} → ${detail.status ?? 'none'})${detail.reason !== undefined ? `: ${detail.reason}` : ''}`;
}
