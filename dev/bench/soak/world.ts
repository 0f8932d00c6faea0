/**
 * The soak's world as its phases see it (setup.ts builds it): the provider simulator and what the
 * soak does to it, the local system as deployed (dev/system) with its queues, tables (the
 * connections table holding the connection `default`) and bucket, the sync's instances and two
 * token refreshers, and what the run counts.
 */
import type { SyncHandler } from '../../../functions/item-sync/app.js';
import type { OutputCapture } from '../../fakes/capture-output.js';
import type { DynamoMeter } from '../../fakes/dynamo-meter.js';
import type { LocalDynamoDb } from '../../fakes/local-dynamo.js';
import type { CallCounts } from '../../fakes/in-process-aws.js';
import type { LocalS3 } from '../../fakes/s3.js';
import type { SqsModel } from '../../fakes/sqs-model.js';
import type { ProviderSimulator, SimulatorItem } from '../../simulator/provider-simulator.js';
import type { BuiltFunction } from '../../system/functions.js';
import { localNames } from '../../system/names.js';
import type { LocalSystem } from '../../system/system.js';
import type { BadMessage } from './bad-messages.js';
import type { SoakOptions } from './options.js';
import type { ProviderTally } from './provider-tally.js';

export const NAMES = localNames('content-sync-soak');

/** The field that makes an item too large for a row: about 450 KB of text (over DynamoDB's 400 KB). */
export const LARGE_FIELD = 'transcript';

export function largeText(seed: number): string {
  return `transcript ${seed}: `.padEnd(450 * 1024, 'All work and no play. ');
}

/** Faults injected into the handlers' AWS calls, as counted when they happen. */
export interface InjectedFaults {
  deadLetterSendFailures: number;
  visibilityChangeFailures: number;
  /** The containers' reads of the connections table refused (throttling, above the SDK's retries). */
  connectionReadFailures: number;
  s3PutFailures: number;
  s3DeleteFailures: number;
}

export interface TokenStats {
  rotations: number;
  /** Refresher runs that threw (the connections table could not be scanned) and were run again. */
  refresherFailures: number;
  revocations: number;
  /** Refresher runs, and what their refreshes of the connection came to (two run at each rotation). */
  refresherRuns: number;
  refreshed: number;
  /** Refreshes that met the other's lease (`busy`) or found the credentials changed under them. */
  skipped: number;
  /** getToken failed for now (the provider's 503s): the connection stays active, the next use tries again. */
  failed: number;
}

export interface SoakWorld {
  o: SoakOptions;
  startedAt: Date;
  /** Date.now() when the soak began. */
  t0: number;
  tree: SimulatorItem[];
  sim: ProviderSimulator;
  bad: BadMessage[];
  /** Every token the provider issued (rotated refresh tokens included). */
  tokens: Set<string>;
  tally: ProviderTally;
  capture: OutputCapture;
  /** A progress line, around the capture. */
  say(line: string): void;
  dynamo: LocalDynamoDb;
  /** s3rver with the items bucket; `s3.client()` makes clients that reach it. */
  s3: LocalS3;
  /** Files that carry the large field now (the change feed makes some cross the row limit). */
  large: Set<string>;
  sqs: SqsModel;
  queueUrl: string;
  deadLetterQueueUrl: string;
  injected: InjectedFaults;
  /** SQS calls of the containers; requests to the connections table (containers and refreshers) by operation. */
  calls: { sqs: CallCounts; connections: CallCounts };
  meter: DynamoMeter;
  /** The local system the soak runs. */
  system: LocalSystem;
  /** One sync container per instance. */
  instances: Array<BuiltFunction<SyncHandler>>;
  tokenStats: TokenStats;
  /**
   * Runs two token refreshers at once, as two schedules' runs that overlap: the lease lets one
   * getToken through (each run is tried again at once if its scan fails, as the scheduler would).
   */
  refresh(trigger: string): Promise<void>;
  /**
   * Makes the connection's stored access token an old one (its `refreshedAt` moved back past the
   * refresh age): the refreshers find it due, and a container that meets it refused refreshes it
   * on demand. The soak runs in minutes; a token would otherwise always be fresh.
   */
  ageAccessToken(): Promise<void>;
  close(): Promise<void>;
}
