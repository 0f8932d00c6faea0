/**
 * The storage a bench's world runs the sync against, shared by the bench and the soak: dynalite
 * with the items table and s3rver with the items bucket, and one close for everything the world
 * holds open (the output capture, the handlers' SDK clients, the provider simulator, dynalite and
 * s3rver).
 */
import type { OutputCapture } from '../../fakes/capture-output.js';
import { startDynalite, type Dynalite } from '../../fakes/dynalite.js';
import { startS3, type LocalS3 } from '../../fakes/s3.js';
import type { ProviderSimulator } from '../../simulator/provider-simulator.js';

/** What the world already holds when its storage starts; `close` releases it too. */
export interface WorldHeld {
  sim: ProviderSimulator;
  capture: OutputCapture;
  /** The handlers' SDK clients (destroyed on close); the world adds to it as it makes them. */
  clients: Array<{ destroy(): void }>;
}

export interface StorageOptions {
  /** dynalite in a child process (another core) or in this one. */
  where: 'in-process' | 'child';
  table: string;
  bucket: string;
}

export interface WorldStorage {
  dynalite: Dynalite;
  s3: LocalS3;
  /** Stops the capture, destroys the clients, closes the simulator, dynalite and s3rver. */
  close(): Promise<void>;
}

/**
 * Starts dynalite (no proxy) with the items table and s3rver with the items bucket. When that
 * fails, whatever was started and everything `held` is released before the error is thrown.
 */
export async function startStorage(held: WorldHeld, options: StorageOptions): Promise<WorldStorage> {
  let dynalite: Dynalite | undefined;
  let s3: LocalS3 | undefined;
  const close = async (): Promise<void> => {
    held.capture.stop();
    for (const client of held.clients) client.destroy();
    await held.sim.close();
    await dynalite?.close();
    await s3?.close();
  };
  try {
    dynalite = await startDynalite({ where: options.where, proxy: false });
    await dynalite.createItemsTable(options.table);
    s3 = await startS3();
    await s3.createBucket(options.bucket);
    return { dynalite, s3, close };
  } catch (error) {
    await close();
    throw error;
  }
}
