/**
 * The local run, in process: the deployed handlers against the provider simulator, dynalite, s3rver
 * and the local AWS emulator. The whole story completes and the table ends equal to the provider
 * (the large items through the items bucket), the last changes found by the reconciler's pass
 * alone; a story that goes wrong says so; the real-provider
 * mode syncs the ids it is given. No token is ever printed.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runAgainstProvider, runLocalStory, type Writer } from '../../../dev/local/story.js';
import { itemJson } from '../../../functions/item-sync/item-writer.js';
import { parseJson } from '../../../functions/shared/json.js';
import type { ItemRow } from '../../../dev/fakes/items-table.js';
import { generateItemTree } from '../../../dev/simulator/item-tree.js';
import { ProviderSimulator } from '../../../dev/simulator/provider-simulator.js';

const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'content-sync-local-'));
  dirs.push(dir);
  return dir;
}

function recorder(): Writer & { text: () => string } {
  let text = '';
  return { write: (chunk) => void (text += chunk), isTTY: false, text: () => text };
}

/** Every token the simulator issued or accepted (refresh and access tokens), from what it received. */
function tokensSeen(simulator: ProviderSimulator, initialRefreshToken: string): string[] {
  const tokens = new Set<string>([initialRefreshToken, simulator.refreshToken]);
  for (const request of simulator.requests) {
    const token = /^\s*bearer\s+(\S+)/i.exec(request.authorization ?? '')?.[1];
    if (token) tokens.add(token);
  }
  return [...tokens];
}

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('runLocalStory', () => {
  it('runs the whole story and ends with the table equal to the provider', async () => {
    const dataDir = tempDir();
    const output = recorder();
    let simulator: ProviderSimulator | undefined;
    let initialRefreshToken = '';
    const endpointBefore = process.env.AWS_ENDPOINT_URL_SQS;

    const result = await runLocalStory({
      itemCount: 60,
      seed: 7,
      dataDir,
      output,
      onSimulatorStarted: (sim) => {
        simulator = sim;
        initialRefreshToken = sim.refreshToken;
      },
    });

    expect(result.problems).toEqual([]);
    expect(result.ok).toBe(true);
    expect(result.dynamodbStorage).toBe('disk');
    expect(existsSync(join(dataDir, 'dynamodb'))).toBe(true);

    // Counts per pass: 60 created; then 3 new revisions, 2 deletions and 1 new item among 61 ids;
    // then, with no id sent, the reconciler's pass over the 61 rows: 2 new revisions and 1 restored
    // item (updated), 1 deletion.
    expect(result.passes).toHaveLength(3);
    expect(result.passes[0]).toMatchObject({ name: 'initial sync', ids: 60, created: 60, updated: 0, unchanged: 0, deleted: 0, deadLettered: 0, drained: true });
    // The 429 with Retry-After is waited out within the invocation (the provider pace), not retried.
    expect(result.passes[0]!.retried).toBe(0);
    expect(result.providerLoad[0]!.rateLimited).toBeGreaterThanOrEqual(1);
    expect(result.providerLoad.map((load) => load.name)).toEqual(['initial sync', 'after changes', 'reconciliation']);
    expect(result.passes[1]).toMatchObject({ name: 'after changes', ids: 61, created: 1, updated: 3, unchanged: 55, deleted: 2, deadLettered: 0, drained: true });
    expect(result.passes[2]).toMatchObject({ name: 'reconciliation', ids: 61, created: 0, updated: 3, unchanged: 57, deleted: 1, deadLettered: 0, drained: true });
    // One tick sends every row's id (tombstones included: the restored item was one) and ends pass 1.
    expect(result.reconciler).toMatchObject({ pass: 1, ticks: 1, idsSent: 61, restored: 1 });
    expect(result.reconciler!.passSeconds).toBeGreaterThanOrEqual(0);
    expect(result.reconciler!.elapsedMs).toBe(result.passes[2]!.elapsedMs);
    // The provider saw one request per row in the pass, nothing more.
    expect(result.providerLoad[2]!.requests - result.providerLoad[2]!.rateLimited).toBe(61);
    expect(result.providerItems).toBe(59);
    expect(result.tableRows).toBe(61);

    // The table snapshot against the simulator's own state, independently of the story's check.
    const rows = JSON.parse(readFileSync(result.snapshotFile, 'utf8')) as ItemRow[];
    const byId = new Map(rows.map((row) => [row.id, row]));
    const providerIds = simulator!.itemIds();
    expect(providerIds).toHaveLength(59);
    for (const id of providerIds) {
      const item = simulator!.getItem(id)!;
      const row = byId.get(id);
      expect(row, id).toBeDefined();
      expect(row!.deleted ?? false).toBe(false);
      expect(row!.revision).toBe(String(item.revision));
      expect(row!.type).toBe(item.type);
      if (row!.itemObject === undefined) {
        expect(row!.item).toEqual(item);
      } else {
        // Too large for a row: the row points to the object holding the item's JSON (size and SHA-256 of those bytes).
        const bytes = Buffer.from(itemJson(parseJson(JSON.stringify(item)) as Record<string, unknown>), 'utf8');
        expect(row!.item).toBeUndefined();
        expect(row!.itemObject).toEqual({
          key: expect.stringMatching(/^items\/[0-9a-f]{64}\/\d+\/[0-9a-f]{64}-[0-9a-f]{16}\.json$/),
          size: bytes.byteLength,
          sha256: createHash('sha256').update(bytes).digest('hex'),
        });
        expect(bytes.byteLength).toBeGreaterThan(400 * 1024);
      }
      expect(Date.parse(row!.syncedAt!)).not.toBeNaN();
    }
    // One item grew past the row limit in the changes and lives in the items bucket; the one that started there is back inline.
    expect(rows.filter((row) => row.itemObject !== undefined)).toHaveLength(1);
    const tombstones = rows.filter((row) => !providerIds.includes(row.id));
    expect(tombstones).toHaveLength(2);
    for (const row of tombstones) expect(row.deleted).toBe(true);

    // What it printed: a summary per pass, the verdict, and never a token.
    const printed = output.text();
    expect(printed).toMatch(/fil-\d+: over DynamoDB's 400 KB row limit, stored whole in the items bucket/);
    expect(printed).toMatch(/\(1 read from the items bucket, which holds no other object\)/);
    expect(printed).toMatch(/pass +ids +created +updated +unchanged +deleted +retried +dead-lettered +time/);
    expect(printed).toMatch(/initial sync +60 +60 +0 +0 +0 +\d+ +0 /);
    expect(printed).toMatch(/after changes +61 +1 +3 +55 +2 +0 +0 /);
    expect(printed).toMatch(/5\. Change the provider again and send no id: 2 new revisions \(fil-\d+, fil-\d+\), 1 deletion \(fil-\d+\), 1 deleted item restored \(fil-\d+\)/);
    expect(printed).toMatch(/reconciliation +61 +0 +3 +57 +1 +0 +0 /);
    expect(printed).toMatch(/\nReconciler: pass 1, 61 ids sent in 1 tick \(the pass took [\d.]+ s\); the sync checked them all in [\d.]+ m?s, 1 deleted item restored\n/);
    expect(printed).toMatch(/reconciliation: 61 provider requests, [\d.]+\/s, \d+ answered 429/);
    expect(printed).toMatch(/Provider pace: [\d.]+ requests\/s now; /);
    expect(printed).toMatch(/initial sync: \d+ provider requests, [\d.]+\/s, \d+ answered 429/);
    expect(printed).toContain('OK: the table matches the provider');
    expect(printed).toContain('handlers.log');
    const log = readFileSync(result.logFile, 'utf8');
    expect(log).toContain('"service":"item-sync"');
    expect(log).toContain('"service":"token-refresher"');
    // The reconciler ran as deployed: its tick's report and its metrics (EMF) are in the log.
    const ticks = log
      .split('\n')
      .filter((line) => line.includes('"service":"reconciler"') && line.includes('"message":"tick done"'))
      .map((line) => JSON.parse(line) as { state: string; enqueued: number; pass: number; passIds: number });
    expect(ticks).toEqual([expect.objectContaining({ state: 'ended', enqueued: 61, pass: 1, passIds: 61 })]);
    expect(log).toContain('"IdsEnqueued"');
    const tokens = tokensSeen(simulator!, initialRefreshToken);
    expect(tokens.length).toBeGreaterThanOrEqual(4); // two refresh tokens rotated, two access tokens
    for (const token of tokens) {
      expect(printed).not.toContain(token);
      expect(log).not.toContain(token);
      expect(readFileSync(result.snapshotFile, 'utf8')).not.toContain(token);
    }

    // The environment it set for the handlers is put back.
    expect(process.env.AWS_ENDPOINT_URL_SQS).toBe(endpointBefore);
  }, 90_000);

  it('reports a story that did not go as expected, and why', async () => {
    const output = recorder();
    const result = await runLocalStory({
      itemCount: 20,
      seed: 3,
      dataDir: tempDir(),
      inMemory: true,
      output,
      onSimulatorStarted: (sim) => {
        sim.addFault({ endpoint: 'items', itemId: 'fil-0004', fault: { kind: 'status', status: 403 } });
      },
    });
    expect(result.ok).toBe(false);
    expect(result.dynamodbStorage).toBe('memory');
    expect(result.passes[0]).toMatchObject({ created: 19, deadLettered: 1 });
    expect(result.problems).toEqual(
      expect.arrayContaining([
        'initial sync: expected 0 dead-lettered, counted 1',
        expect.stringMatching(/^fil-0004: not in the table$/),
        expect.stringMatching(/^dead-lettered \{"id":"fil-0004"\}: .*HTTP 403/),
      ]),
    );
    expect(output.text()).toContain('FAILED: the run did not behave as expected');
  }, 90_000);
});

describe('runAgainstProvider', () => {
  it('syncs the given ids into the local table and hands back a rotated refresh token without printing it', async () => {
    const items = generateItemTree({ count: 5, seed: 11, revisionField: 'meta.rev' });
    const provider = await ProviderSimulator.start({ items, rotateRefreshToken: true, revisionField: 'meta.rev', prefix: '/v1' });
    const initialRefreshToken = provider.refreshToken;
    const output = recorder();
    const rotatedTo: string[] = [];
    try {
      const result = await runAgainstProvider({
        baseUrl: provider.baseUrl,
        credentials: { clientId: provider.clientId, refreshToken: provider.refreshToken },
        ids: ['fil-0002', 'fld-0001', 'does-not-exist', 'fil-0002'],
        revisionField: 'meta.rev',
        dataDir: tempDir(),
        output,
        onRefreshTokenRotated: (token) => {
          rotatedTo.push(token);
          return 'saved the new refresh token';
        },
      });
      expect(result.problems).toEqual([]);
      expect(result.ok).toBe(true);
      expect(result.rotated).toBe(true);
      expect(rotatedTo).toEqual([provider.refreshToken]);
      expect(result.pass).toMatchObject({ ids: 3, created: 2, unchanged: 1, deadLettered: 0 });
      const meta = (id: string) => (provider.getItem(id)!.meta as { rev: number }).rev;
      expect(result.rows).toEqual([
        { id: 'fil-0002', revision: String(meta('fil-0002')), type: 'file' },
        { id: 'fld-0001', revision: String(meta('fld-0001')), type: 'folder' },
      ]);
      const printed = output.text();
      expect(printed).toContain('revision field         meta.rev');
      expect(printed).toContain(`"fil-0002": file, revision ${meta('fil-0002')}`);
      expect(printed).toContain('"does-not-exist": no row');
      expect(printed).toContain('saved the new refresh token');
      for (const token of tokensSeen(provider, initialRefreshToken)) expect(printed).not.toContain(token);
    } finally {
      await provider.close();
    }
  });

  it('fails clearly when the provider refuses the credentials', async () => {
    const provider = await ProviderSimulator.start({ items: generateItemTree({ count: 3, seed: 1 }) });
    const output = recorder();
    try {
      const result = await runAgainstProvider({
        baseUrl: provider.baseUrl,
        credentials: { clientId: provider.clientId, refreshToken: 'rt-wrong-token-value' },
        ids: ['fil-0002'],
        revisionField: 'revision',
        dataDir: tempDir(),
        inMemory: true,
        output,
      });
      expect(result.ok).toBe(false);
      expect(result.problems.join('\n')).toMatch(/getToken.*HTTP 401/);
      expect(output.text()).toMatch(/FAILED: .*HTTP 401/);
      expect(output.text()).not.toContain('rt-wrong-token-value');
    } finally {
      await provider.close();
    }
  });
});
