/**
 * A connection's view (contract, "The client API"): what the client API answers and `npm run
 * connections -- list --json` prints of a connection, never a token. Built from its row (no token
 * opened) and the reconciler's cursor:
 * - `refresh`: its refresh health;
 * - `idsKnown`, `lastWriteAt`: kept by the change-events function;
 * - `lastPassAt`: when its last reconciliation pass ended (last-pass.ts: the latest ended pass that
 *   started after the connection was added; every id it held then was checked again in it);
 * - `fresh`: that pass ended within `freshnessHours`. Passes follow each other, each checking every
 *   known id once within `freshnessHours` (docs/reconciliation.md): a connection whose last pass
 *   ended longer ago than that has ids the reconciler has not kept to its schedule, or was added
 *   after the last pass began. Always false when reconciliation is off (`freshnessHours` 0).
 * - `erase`: an erase asked for, and how far it is.
 */
import type { Cursor } from '../../reconciler/ports.js';
import type { ConnectionListing, ConnectionStatus, EraseState } from './connection.js';
import { lastPassOf } from './last-pass.js';

export interface ConnectionView {
  connection: string;
  clientId: string;
  status: ConnectionStatus;
  refresh: { lastSuccessAt?: string; lastFailureAt?: string; lastFailureReason?: string; consecutiveFailures: number };
  idsKnown?: number;
  lastWriteAt?: string;
  lastPassAt?: string;
  fresh: boolean;
  createdAt: string;
  updatedAt: string;
  erase?: { state: EraseState; startedAt: string; rowsDeleted: number; objectsDeleted: number };
}

export interface ViewContext {
  /** The reconciler's cursor; undefined when there is none (no pass yet, or reconciliation off). */
  cursor: Cursor | undefined;
  /** Context `freshnessHours`; 0: reconciliation is off. */
  freshnessHours: number;
  /** Epoch ms. */
  now: number;
}

export function connectionView(listing: ConnectionListing, context: ViewContext): ConnectionView {
  const { health } = listing;
  const lastPass = context.freshnessHours > 0 ? lastPassOf(listing.createdAt, context.cursor) : undefined;
  const fresh = lastPass !== undefined && context.now - Date.parse(lastPass.endedAt) <= context.freshnessHours * 3_600_000;
  return {
    connection: listing.connection,
    clientId: listing.clientId,
    status: listing.status,
    refresh: {
      ...(health.lastSuccessAt !== undefined ? { lastSuccessAt: health.lastSuccessAt } : {}),
      ...(health.lastFailureAt !== undefined ? { lastFailureAt: health.lastFailureAt } : {}),
      ...(health.lastFailureReason !== undefined ? { lastFailureReason: health.lastFailureReason } : {}),
      consecutiveFailures: health.consecutiveFailures,
    },
    ...(listing.idsKnown !== undefined ? { idsKnown: listing.idsKnown } : {}),
    ...(listing.lastWriteAt !== undefined ? { lastWriteAt: listing.lastWriteAt } : {}),
    ...(lastPass !== undefined ? { lastPassAt: lastPass.endedAt } : {}),
    fresh,
    createdAt: listing.createdAt,
    updatedAt: listing.updatedAt,
    ...(listing.erase !== undefined
      ? { erase: { state: listing.erase.state, startedAt: listing.erase.startedAt, rowsDeleted: listing.erase.rowsDeleted, objectsDeleted: listing.erase.objectsDeleted } }
      : {}),
  };
}
