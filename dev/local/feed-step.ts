/**
 * The client application's own copy of each connection, kept from the client API as docs/changes.md
 * says: a snapshot when the connection is added (`GET /connections/{c}/items`, page by page, and its
 * `changesCursor`), then, at the end of the story, the changes feed from that cursor, both read with
 * the typed client of clients/typescript (unsigned: the local API checks no signature; pages of
 * 1,000), each change applied by revision. Checked: every connection's copy equals its rows in the
 * items table (ids, revisions, tombstones), after every write of the whole story: discovery,
 * changes, deletions, the revoked account's wait, the reconciler's pass.
 */
import { createClient, type ContentSyncClient } from '../../clients/typescript/src/index.js';
import type { LocalRun } from './local-run.js';
import { readRows } from './passes.js';

/** A connection's copy: each id's revision, or `deleted`. */
export interface Mirror {
  items: Map<string, string>;
  /** Where its feed continues. */
  cursor: string;
}

/** Each connection's snapshot, read through the client API with the typed client. */
export async function takeSnapshots(run: LocalRun, connections: readonly string[]): Promise<Map<string, Mirror>> {
  const mirrors = new Map<string, Mirror>();
  for (const connection of connections) {
    const items = new Map<string, string>();
    try {
      let cursor = undefined as string | undefined;
      for await (const row of client(run).snapshot(connection, { limit: 1000, onCursor: (page) => void (cursor ??= page.changesCursor) })) {
        items.set(row.id, row.deleted ? 'deleted' : row.revision);
      }
      if (cursor === undefined) throw new Error(`the snapshot of connection "${connection}" answered no changesCursor`);
      run.screen.line(`     ${connection}: ${items.size} items in its snapshot; its feed continues from its changesCursor`);
      mirrors.set(connection, { items, cursor });
    } catch (error) {
      run.problems.push(`snapshot of ${connection}: ${(error as Error).message}`);
    }
  }
  return mirrors;
}

/** The feed of each connection from its mirror's cursor, applied, and each copy checked against the table. */
export async function feedStep(run: LocalRun, mirrors: Map<string, Mirror>, step: number): Promise<void> {
  const { screen, problems } = run;
  screen.line(`${step}. The application's copy of each connection: its snapshot from step 1, then its changes feed from there (GET /connections/{c}/changes)`);
  const rows = await readRows(run);
  for (const [connection, mirror] of mirrors) {
    let read = 0;
    const counts = new Map<string, number>();
    for await (const change of client(run).changes(connection, { after: mirror.cursor, limit: 1000, onCursor: (next) => void (mirror.cursor = next) })) {
      read += 1;
      counts.set(change.change, (counts.get(change.change) ?? 0) + 1);
      mirror.items.set(change.id, change.change === 'deleted' ? 'deleted' : change.revision);
    }
    const table = new Map<string, string>();
    for (const row of rows.values()) if (row.connection === connection) table.set(row.id, row.deleted ? 'deleted' : (row.revision ?? ''));
    const differ = [...new Set([...table.keys(), ...mirror.items.keys()])].filter((id) => table.get(id) !== mirror.items.get(id));
    screen.line(
      `     ${connection}: ${read} changes (${[...counts].map(([kind, n]) => `${n} ${kind}`).join(', ') || 'none'}); its copy ${differ.length === 0 ? `equals its ${table.size} rows` : `differs from its rows on ${differ.length} ids`}`,
    );
    if (differ.length > 0) problems.push(`feed: ${connection}'s copy from its snapshot and changes differs from its rows on ${differ.length} ids (first: ${differ.slice(0, 3).join(', ')})`);
    if (read === 0) problems.push(`feed: ${connection} read no change, though the story wrote its rows`);
  }
}

/** The typed client on the local API's URL, unsigned: the local API checks no signature. */
const client = (run: LocalRun): ContentSyncClient => createClient({ baseUrl: run.api.url, signer: false });
