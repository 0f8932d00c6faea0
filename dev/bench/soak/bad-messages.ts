/**
 * The soak's deliberately bad messages: each must end in the dead-letter queue with its reason, and
 * nothing else may. Some need the provider to misbehave for their id (`setup`).
 */
import { setAtPath } from '../../simulator/item-tree.js';
import type { ProviderSimulator, SimulatorItem } from '../../simulator/provider-simulator.js';

export interface ExpectedDeadLetter {
  /** What the message is, for the report. */
  what: string;
  /** The dead-letter reason (the `error` attribute) it must carry. */
  expected: RegExp;
}

export interface BadMessage extends ExpectedDeadLetter {
  body: string;
  setup?: (sim: ProviderSimulator) => void;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The soak's PROVIDER_MAX_RESPONSE_BYTES: smaller than the default, so that an item over it stays cheap to serve. */
export const SOAK_MAX_RESPONSE_BYTES = 2 * 1024 * 1024;

/** The deliberately bad messages of a soak, and the dead-letter reason each must get. */
export function badMessages(revisionField: string): BadMessage[] {
  const field = escapeRegExp(revisionField);
  const itemWithout = (id: string, extra: Record<string, unknown>): SimulatorItem => ({ id, type: 'file', name: `${id}.txt`, ...extra });
  return [
    { what: 'body: broken JSON', body: '{"id": "fil-broken"', expected: /starts with "\{" but is not valid JSON/ },
    { what: 'body: no "id"', body: '{"itemId": "fil-0002"}', expected: /has no "id"/ },
    { what: 'body: "id" is a number', body: '{"id": 42}', expected: /"id" is a number, not a string/ },
    { what: 'id: empty', body: '{"id": ""}', expected: /the item id is empty/ },
    { what: 'id: blank bare body', body: '   \n', expected: /the item id is empty/ },
    { what: 'id: control character', body: JSON.stringify({ id: 'fil-\u0007-bell' }), expected: /control character \(U\+0007\)/ },
    { what: 'id: 600 "é" (1,200 bytes in UTF-8)', body: JSON.stringify({ id: 'é'.repeat(600) }), expected: /1200 bytes long in UTF-8; the limit is 1024 bytes/ },
    { what: 'id: lone surrogate', body: '{"id": "fil-\\ud800"}', expected: /lone surrogate/ },
    { what: 'id: ".." (not a path segment)', body: '{"id": ".."}', expected: /cannot be sent as a URL path segment/ },
    { what: 'connection: unknown', body: '{"connection": "nobody", "id": "fil-0002"}', expected: /unknown connection "nobody"/ },
    { what: 'connection: a number', body: '{"connection": 42, "id": "fil-0002"}', expected: /the connection is number, not a string/ },
    {
      what: 'provider: 400 for the id',
      body: '{"id": "bad-http-400"}',
      expected: /cannot serve this item as asked.*HTTP 400/,
      setup: (sim) => sim.addFault({ endpoint: 'items', itemId: 'bad-http-400', fault: { kind: 'status', status: 400 } }),
    },
    {
      what: 'provider: 403 for the id',
      body: 'bad-http-403',
      expected: /cannot serve this item as asked.*HTTP 403/,
      setup: (sim) => sim.addFault({ endpoint: 'items', itemId: 'bad-http-403', fault: { kind: 'status', status: 403 } }),
    },
    {
      what: 'provider: 200 that is not JSON',
      body: '{"id": "bad-not-json"}',
      expected: /not an item.*not JSON/,
      setup: (sim) =>
        sim.addFault({ endpoint: 'items', itemId: 'bad-not-json', fault: { kind: 'body', rawBody: '<html>maintenance</html>', contentType: 'text/html' } }),
    },
    {
      what: 'item: no revision',
      body: '{"id": "bad-no-revision"}',
      expected: new RegExp(`no value at the revision field "${field}"`),
      setup: (sim) => sim.setItem(itemWithout('bad-no-revision', {})),
    },
    {
      what: 'item: names another id',
      body: '  bad-other-id  ',
      expected: /answered with another item/,
      setup: (sim) => sim.setItem(withRevision(itemWithout('someone-else', {}), revisionField, 3), 'bad-other-id'),
    },
    {
      what: 'item: larger than PROVIDER_MAX_RESPONSE_BYTES',
      body: '{"id": "bad-too-large"}',
      expected: new RegExp(`^the provider cannot serve this item as asked \\(getItem: the response body exceeds ${SOAK_MAX_RESPONSE_BYTES} bytes; HTTP 200\\)$`),
      setup: (sim) => sim.setItem(withRevision(itemWithout('bad-too-large', { content: 'x'.repeat(SOAK_MAX_RESPONSE_BYTES + 1024) }), revisionField, 1)),
    },
    {
      what: 'item: unknown type',
      body: '{"id": "bad-type"}',
      expected: /has type "symlink"/,
      setup: (sim) => sim.setItem({ ...withRevision(itemWithout('bad-type', {}), revisionField, 1), type: 'symlink' } as unknown as SimulatorItem),
    },
  ];
}

/** A copy of the item with the revision at the dot path `revisionField`. */
export function withRevision(item: SimulatorItem, revisionField: string, revision: number): SimulatorItem {
  const copy = structuredClone(item) as unknown as Record<string, unknown>;
  setAtPath(copy, revisionField, revision);
  return copy as unknown as SimulatorItem;
}
