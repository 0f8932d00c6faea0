/**
 * The connection gate as the changes writer asks it with each batch: a connection found open is
 * taken as open for `keptMs` after the read that found it so (CHANGES_WRITER_OPEN_KEPT_MS), by this
 * container; one found closed is read again each time (it opens again when the connection is put
 * again, and its first changes must then be numbered). At most `limit` connections are kept, the
 * one stored longest ago dropped first. No I/O of its own.
 */
import { BoundedMap } from '../shared/bounded-map.js';
import type { ConnectionGate } from './ports.js';

/** Connections a container keeps, at most: every connection of a large deployment. */
export const KEPT_OPEN_LIMIT = 10_000;

export class KeptOpenGate implements ConnectionGate {
  private readonly openAt: BoundedMap<string, number>;

  constructor(
    private readonly inner: ConnectionGate,
    private readonly now: () => number,
    private readonly keptMs: number,
    limit: number = KEPT_OPEN_LIMIT,
  ) {
    this.openAt = new BoundedMap(limit);
  }

  async open(connection: string): Promise<boolean> {
    const at = this.openAt.get(connection);
    if (at !== undefined && this.now() - at < this.keptMs) return true;
    const readAt = this.now();
    const open = await this.inner.open(connection);
    if (open) this.openAt.set(connection, readAt);
    else this.openAt.delete(connection);
    return open;
  }
}
