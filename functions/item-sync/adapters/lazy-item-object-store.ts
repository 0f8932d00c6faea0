/**
 * The items bucket, loaded on first use: the S3 adapter and its client (s3-item-object-store.ts)
 * are imported when the first item too large for a row comes (or, with discovery on, the first
 * large folder's previous copy is read), once per container. A failed load
 * is a TransientError (the record is retried) and is tried again next time.
 */
import { TransientError } from '../../shared/errors.js';
import type { ItemObjectStore } from '../ports.js';

export class LazyItemObjectStore implements ItemObjectStore {
  private loading: Promise<ItemObjectStore> | undefined;

  constructor(private readonly load: () => Promise<ItemObjectStore>) {}

  async put(key: string, body: Uint8Array, sha256: string): Promise<void> {
    return (await this.store()).put(key, body, sha256);
  }

  async delete(key: string): Promise<void> {
    return (await this.store()).delete(key);
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    return (await this.store()).get(key);
  }

  private store(): Promise<ItemObjectStore> {
    this.loading ??= this.load().catch((cause: unknown) => {
      this.loading = undefined;
      throw new TransientError(`the items bucket's adapter could not be loaded (${(cause as Error)?.message ?? String(cause)})`, { cause });
    });
    return this.loading;
  }
}

