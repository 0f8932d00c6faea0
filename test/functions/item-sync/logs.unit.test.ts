/**
 * What the item sync logs per record at each log level (POWERTOOLS_LOG_LEVEL, the context key
 * `logLevel`), and the buffer of an invocation's DEBUG lines that an error prints (mocked clients,
 * unit-harness.ts). In Lambda every invocation has its own `_X_AMZN_TRACE_ID`: the buffer's key.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ScriptedProvider, item, providerError } from './helpers.js';
import { TOKEN_1, TOKEN_2, build, harness, run, useHarness } from './unit-harness.js';

useHarness();

const TRACE_1 = 'Root=1-6745d2a0-0123456789abcdef01234567;Parent=53995c3f42cd8ad8;Sampled=1';
const TRACE_2 = 'Root=1-6745d2a1-89abcdef0123456789abcdef;Parent=53995c3f42cd8ad9;Sampled=1';

beforeEach(() => {
  vi.stubEnv('_X_AMZN_TRACE_ID', TRACE_1);
  harness.connections.add('paused-co', { gate: { kind: 'wait', reason: 'connection "paused-co" is paused', seconds: 300 } });
});

afterEach(() => {
  vi.unstubAllEnvs();
});

/** Two ids done (created), one waiting (its connection paused), one retried (503, one attempt). */
const provider = () =>
  new ScriptedProvider().on('a', item('a', 1)).on('b', item('b', 1)).on('down', providerError('transient', 503));
const MIXED = ['a', '{"connection":"paused-co","id":"p"}', 'down', 'b'];

/** The per-record lines, as [message, messageId, itemId, result or reason]. */
function recordLines(logs: Array<Record<string, unknown>>): unknown[][] {
  return logs
    .filter((line) => String(line['message']).startsWith('record '))
    .map((line) => [line['message'], line['messageId'], line['itemId'], line['result'] ?? line['reason']]);
}

function expectNoToken(output: string): void {
  expect(output).not.toContain(TOKEN_1);
  expect(output).not.toContain(TOKEN_2);
}

describe('at INFO (the default)', () => {
  it('logs no `record done`; a record that waits or is retried still logs why, at INFO and WARN', async () => {
    const { logs, output, result } = await run(build(provider(), { env: { SYNC_FETCH_ATTEMPTS: '1' } }), MIXED);

    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: 'm3' }] });
    expect(recordLines(logs)).toEqual([
      ['record postponed', 'm2', 'p', 'connection "paused-co" is paused'],
      ['record will be retried', 'm3', 'down', expect.stringContaining('503')],
    ]);
    expect(logs.find((line) => line['message'] === 'record postponed')).toMatchObject({ level: 'INFO', connection: 'paused-co' });
    expect(logs.find((line) => line['message'] === 'record will be retried')).toMatchObject({ level: 'WARN', connection: 'default' });
    expect(logs.find((line) => line['message'] === 'batch done')).toMatchObject({ level: 'INFO', records: 4, retried: 1, postponed: 1 });
    expect(output).not.toContain('record done');
    expectNoToken(output);
  });

  it('prints the records done of an invocation that dead-letters a record: before the error line, as they were logged', async () => {
    const { logs, output } = await run(build(provider()), ['a', '', 'b']);

    expect(recordLines(logs)).toEqual([
      ['record done', 'm1', 'a', 'created'],
      ['record done', 'm3', 'b', 'created'],
      ['record dead-lettered', 'm2', undefined, expect.any(String)],
    ]);
    expect(logs.filter((line) => line['message'] === 'record done').map((line) => line['level'])).toEqual(['DEBUG', 'DEBUG']);
    expect(logs.find((line) => line['message'] === 'record dead-lettered')).toMatchObject({ level: 'ERROR', bodyLength: 0 });
    expect(logs.find((line) => line['message'] === 'record done')).toMatchObject({ connection: 'default', xray_trace_id: '1-6745d2a0-0123456789abcdef01234567' });
    expectNoToken(output);
  });

  it('does not print them for a record retried (WARN): only an error does', async () => {
    const { logs, output } = await run(build(provider(), { env: { SYNC_FETCH_ATTEMPTS: '1' } }), ['a', 'down']);

    expect(recordLines(logs)).toEqual([['record will be retried', 'm2', 'down', expect.stringContaining('503')]]);
    expect(output).not.toContain('record done');
  });

  it('keeps nothing from one invocation for the next: an error prints only its own invocation’s records done', async () => {
    const handler = build(provider());
    const first = await run(handler, ['a', 'b']);
    expect(first.output).not.toContain('record done');

    // The same trace id (the buffer's key) on purpose: the handler clears the buffer itself at the end of each invocation.
    const second = await run(handler, ['', 'b']);
    expect(recordLines(second.logs)).toEqual([
      ['record done', 'm2', 'b', 'created'],
      ['record dead-lettered', 'm1', undefined, expect.any(String)],
    ]);

    vi.stubEnv('_X_AMZN_TRACE_ID', TRACE_2);
    const third = await run(handler, ['']);
    expect(recordLines(third.logs)).toEqual([['record dead-lettered', 'm1', undefined, expect.any(String)]]);
  });
});

describe('at DEBUG (context key logLevel DEBUG)', () => {
  it('logs every record’s line, `record done` with its result, as it comes (nothing held back), and no token', async () => {
    const { logs, output } = await run(build(provider(), { env: { SYNC_FETCH_ATTEMPTS: '1', POWERTOOLS_LOG_LEVEL: 'DEBUG' } }), MIXED);

    expect(recordLines(logs)).toEqual([
      ['record done', 'm1', 'a', 'created'],
      ['record done', 'm4', 'b', 'created'],
      ['record postponed', 'm2', 'p', 'connection "paused-co" is paused'],
      ['record will be retried', 'm3', 'down', expect.stringContaining('503')],
    ]);
    expect(logs.find((line) => line['message'] === 'record done')).toMatchObject({ level: 'DEBUG', service: 'item-sync', connection: 'default' });
    expectNoToken(output);
  });
});

describe('at WARN', () => {
  it('logs neither `record done` nor `record postponed`, but the retried record with its reason', async () => {
    const { logs, output } = await run(build(provider(), { env: { SYNC_FETCH_ATTEMPTS: '1', POWERTOOLS_LOG_LEVEL: 'WARN' } }), MIXED);

    expect(recordLines(logs)).toEqual([['record will be retried', 'm3', 'down', expect.stringContaining('503')]]);
    expect(logs.find((line) => line['message'] === 'batch done')).toBeUndefined();
    expectNoToken(output);
  });
});
