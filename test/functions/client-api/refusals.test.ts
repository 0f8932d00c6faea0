/**
 * The client API's refusals (contract, "The client API"; docs/client-api.md, "Errors"), the handler
 * built as deployed over DynamoDB Local, the local KMS model and a mocked SQS: each refused request gets
 * its status, its code and a sentence that quotes neither the refused value nor a token; it writes
 * nothing (both tables read raw before and after) and sends nothing.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ApiHarness, requestLine, token, TOKEN_MARK, type Answer, type Request } from './harness.js';

const api = new ApiHarness();
const RT = token('acme-0001');

beforeAll(() => api.start());
afterAll(async () => {
  for (const text of [...api.answered, ...api.written]) expect(text).not.toContain(TOKEN_MARK);
  await api.close();
});
beforeEach(async () => {
  await api.reset();
  // A connection to refuse things for: every refusal must leave its row as it is.
  expect((await api.put('acme', { clientId: 'client-1', refreshToken: RT })).status).toBe(200);
  api.sqsMock.resetHistory();
  api.clock.advance(60_000);
});

interface Refusal {
  status: number;
  code: string;
  message: string;
  rejected?: Array<{ index: number; reason: string }>;
  /** What the answer must not hold: the refused value, in every spelling it was sent in. */
  notQuoting?: string[];
}

/** Sends a request that must be refused, and checks the refusal, that nothing was written or sent. */
async function refused(request: Request, refusal: Refusal): Promise<Answer> {
  const before = await api.tablesNow();
  const answer = await api.call(request);
  expect({ status: answer.status, body: answer.body }).toEqual({
    status: refusal.status,
    body: { error: { code: refusal.code, message: refusal.message }, ...(refusal.rejected ? { rejected: refusal.rejected } : {}) },
  });
  expect(answer.headers).toEqual({ 'content-type': 'application/json' });
  for (const value of refusal.notQuoting ?? []) expect(answer.text).not.toContain(value);
  expect(answer.text).not.toContain(TOKEN_MARK);
  expect(await api.tablesNow()).toEqual(before);
  expect(api.sqsMock.calls()).toHaveLength(0);
  expect(requestLine(answer)).toMatchObject({ level: 'INFO', message: 'request', method: request.method, status: refusal.status });
  expect(answer.logs.filter((line) => line['level'] === 'ERROR')).toEqual([]);
  return answer;
}

const bad = (message: string, notQuoting: string[] = []): Refusal => ({ status: 400, code: 'bad-request', message, notQuoting });
const putAcme = (body: unknown, headers?: Record<string, string | undefined>): Request => ({ method: 'PUT', path: '/connections/acme', body, ...(headers ? { headers } : {}) });
const items = (body: unknown, headers?: Record<string, string | undefined>): Request => ({ method: 'POST', path: '/connections/acme/items', body, ...(headers ? { headers } : {}) });

describe('PUT bodies', () => {
  const lineBreak = `${token('line')}\nmore`;
  const spaced = `${token('space')} more`;
  const wide = `${token('wide')}✓`;

  it.each<[string, Request, Refusal]>([
    ['malformed JSON', putAcme(`{"clientId": "client-1", "refreshToken": "${RT}"`), bad('the body is not well-formed JSON in UTF-8', [RT])],
    ['a body that is an array', putAcme([{ clientId: 'client-1', refreshToken: RT }]), bad('the body must be a JSON object', [RT])],
    ['a body that is null', putAcme('null'), bad('the body must be a JSON object')],
    ['a body that is a string', putAcme(JSON.stringify(RT)), bad('the body must be a JSON object', [RT])],
    ['no body', { method: 'PUT', path: '/connections/acme' }, bad('this route takes a JSON body with clientId and refreshToken')],
    ['an empty body', putAcme(''), bad('this route takes a JSON body with clientId and refreshToken')],
    ['no clientId', putAcme({ refreshToken: RT }), bad('the body lacks clientId', [RT])],
    ['no refreshToken', putAcme({ clientId: 'client-1' }), bad('the body lacks refreshToken')],
    ['an empty object', putAcme({}), bad('the body lacks clientId and refreshToken')],
    ['an extra field', putAcme({ clientId: 'client-1', refreshToken: RT, accessToken: 'at-api-0001' }), bad('the body may hold only clientId, refreshToken; it holds 1 other field', [RT, 'accessToken', 'at-api-0001'])],
    ['two extra fields', putAcme({ clientId: 'client-1', refreshToken: RT, a: 1, b: 2 }), bad('the body may hold only clientId, refreshToken; it holds 2 other fields')],
    ['a clientId that is a number', putAcme({ clientId: 42, refreshToken: RT }), bad('clientId must be a string', [RT, '42'])],
    ['a clientId that is null', putAcme({ clientId: null, refreshToken: RT }), bad('clientId must be a string', [RT])],
    ['a refreshToken that is an array', putAcme({ clientId: 'client-1', refreshToken: [RT] }), bad('refreshToken must be a string', [RT])],
    ['a refreshToken that is an object', putAcme({ clientId: 'client-1', refreshToken: { value: RT } }), bad('refreshToken must be a string', [RT])],
    [
      'a refresh token with a line break',
      putAcme({ clientId: 'client-1', refreshToken: lineBreak }),
      bad(`refreshToken: the refresh token holds whitespace or a control character at position ${lineBreak.indexOf('\n') + 1} (it is not shown)`, [lineBreak, token('line')]),
    ],
    [
      'a refresh token with a space',
      putAcme({ clientId: 'client-1', refreshToken: spaced }),
      bad(`refreshToken: the refresh token holds whitespace or a control character at position ${spaced.indexOf(' ') + 1} (it is not shown)`, [spaced, token('space')]),
    ],
    [
      'a refresh token with a character beyond U+00FF',
      putAcme({ clientId: 'client-1', refreshToken: wide }),
      bad(`refreshToken: the refresh token holds a character beyond U+00FF at position ${wide.length}, which an HTTP header cannot carry (it is not shown)`, [wide, token('wide')]),
    ],
    ['an empty refresh token', putAcme({ clientId: 'client-1', refreshToken: '' }), bad('refreshToken: the refresh token is empty (it is not shown)')],
    [
      'a refresh token over 8,192 characters',
      putAcme({ clientId: 'client-1', refreshToken: token('long-').padEnd(8193, 'x') }),
      bad('refreshToken: the refresh token is 8193 characters long; the limit is 8192 (it is not shown)', [token('long-')]),
    ],
    ['an empty client id', putAcme({ clientId: '   ', refreshToken: RT }), bad('clientId: the client id is empty', [RT])],
    ['a client id with a control character', putAcme({ clientId: 'acct\u0007one', refreshToken: RT }), bad('clientId: the client id holds a control character', [RT, 'acct'])],
    ['a client id over 256 characters', putAcme({ clientId: 'c'.repeat(257), refreshToken: RT }), bad('clientId: the client id is 257 characters long; the limit is 256', [RT, 'c'.repeat(257)])],
    ['a body that is not UTF-8', { ...putAcme(Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x7d])), base64: true }, bad('the body is not well-formed JSON in UTF-8')],
  ])('%s: 400 bad-request', async (_name, request, refusal) => {
    await refused(request, refusal);
  });

  it.each<[string, Record<string, string | undefined>]>([
    ['text/plain', { 'content-type': 'text/plain' }],
    ['form-encoded', { 'content-type': 'application/x-www-form-urlencoded' }],
    ['application/jsonx', { 'content-type': 'application/jsonx' }],
    ['an empty Content-Type', { 'content-type': '' }],
    ['no Content-Type at all', { 'content-type': undefined }],
  ])('a body sent as %s: 400 bad-request', async (_name, headers) => {
    await refused(putAcme({ clientId: 'client-1', refreshToken: RT }, headers), bad('the body must be JSON, sent with Content-Type: application/json', [RT]));
  });

  it('a body over 1 MiB: 413 too-large, whatever its type', async () => {
    const json = JSON.stringify({ clientId: 'client-1', refreshToken: RT });
    const body = json.slice(0, -1) + ' '.repeat(1024 * 1024 + 1 - Buffer.byteLength(json)) + '}';
    expect(Buffer.byteLength(body)).toBe(1024 * 1024 + 1);
    const tooLarge: Refusal = { status: 413, code: 'too-large', message: 'the body is 1048577 bytes; the limit is 1048576 bytes (1 MiB)', notQuoting: [RT] };
    await refused(putAcme(body), tooLarge);
    await refused(putAcme(body, { 'content-type': 'text/plain' }), tooLarge);
    await refused({ ...items(Buffer.alloc(2 * 1024 * 1024, 0x20)), base64: true }, { ...tooLarge, message: 'the body is 2097152 bytes; the limit is 1048576 bytes (1 MiB)' });
  });
});

describe('connection ids in the path', () => {
  const ids: Array<[string, string, string, string[]]> = [
    ['..', '..', 'the connection id may not be made of dots only', []],
    ['.', '.', 'the connection id may not be made of dots only', []],
    ['65 characters', 'a'.repeat(65), 'the connection id is 65 characters long; the limit is 64', ['a'.repeat(65)]],
    ['a b, percent-encoded', 'a%20b', 'the connection id may hold only the characters A-Z a-z 0-9 . _ -', ['a b', 'a%20b']],
    ['a/b, as %2F', 'a%2Fb', 'the connection id may hold only the characters A-Z a-z 0-9 . _ -', ['a/b', 'a%2Fb']],
    ['a non-ASCII letter', 'caf%C3%A9', 'the connection id may hold only the characters A-Z a-z 0-9 . _ -', ['café', 'caf%C3%A9']],
  ];
  const requests = (segment: string): Request[] => [
    { method: 'PUT', path: `/connections/${segment}`, body: { clientId: 'client-1', refreshToken: RT } },
    { method: 'GET', path: `/connections/${segment}` },
    { method: 'DELETE', path: `/connections/${segment}` },
    { method: 'DELETE', path: `/connections/${segment}`, query: 'erase=true' },
    { method: 'POST', path: `/connections/${segment}/pause` },
    { method: 'POST', path: `/connections/${segment}/resume` },
    { method: 'POST', path: `/connections/${segment}/items`, body: { ids: ['fil-1'] } },
    { method: 'GET', path: `/connections/${segment}/items` },
    { method: 'GET', path: `/connections/${segment}/changes` },
  ];

  it.each(ids)('%s: 400 bad-request on every route', async (_name, segment, message, notQuoting) => {
    for (const request of requests(segment)) await refused(request, bad(message, [...notQuoting, RT]));
  });

  it('a segment that is not percent-encoded UTF-8: 400 bad-request', async () => {
    for (const segment of ['%E2%9C', '%zz', 'a%']) {
      for (const request of requests(segment)) await refused(request, bad('a path segment is not well-formed percent-encoded UTF-8', [segment]));
    }
  });
});

describe('unknown routes: 404 not-found', () => {
  const anyRoute = 'no route %s for that path: the routes are listed in docs/client-api.md';
  it.each<[string, string, string]>([
    ['GET', '/nope', anyRoute],
    ['GET', '/', anyRoute],
    ['GET', '/Connections/acme', anyRoute],
    // GET of the snapshot, of the feed and of one item are routes (changes.test.ts, items.test.ts); another method is not.
    ['POST', '/connections/acme/changes', 'no route POST /connections/{connection}/changes: it takes GET'],
    ['POST', '/connections/acme/items/fil-1', 'no route POST /connections/{connection}/items/{id}: it takes GET'],
    ['POST', '/connections/acme/pause/now', anyRoute],
    ['POST', '/connections/acme/stop', anyRoute],
    ['PATCH', '/connections/acme', 'no route PATCH /connections/{connection}: it takes PUT, GET, DELETE'],
    ['POST', '/connections/acme', 'no route POST /connections/{connection}: it takes PUT, GET, DELETE'],
    ['POST', '/connections', 'no route POST /connections: it takes GET'],
    ['DELETE', '/connections', 'no route DELETE /connections: it takes GET'],
    ['GET', '/connections/acme/pause', 'no route GET /connections/{connection}/pause: it takes POST'],
    ['PUT', '/connections/acme/resume', 'no route PUT /connections/{connection}/resume: it takes POST'],
    ['GET', '/connections//acme', 'no route has an empty path segment'],
  ])('%s %s', async (method, path, message) => {
    const answer = await refused({ method, path }, { status: 404, code: 'not-found', message: message.replace('%s', method) });
    expect(requestLine(answer)['route']).toBeDefined();
  });

  it('an unknown route with a body is 404 too, its body not read', async () => {
    await refused({ method: 'POST', path: '/nope', body: `{"refreshToken": "${RT}"` }, { status: 404, code: 'not-found', message: anyRoute.replace('%s', 'POST'), notQuoting: [RT] });
  });
});

describe('the snapshot and the changes feed (their full tests: changes.test.ts)', () => {
  const notKnown: Refusal = { status: 404, code: 'not-found', message: 'connection "nobody" is not known' };

  /** The refusal, and nothing written to the changes table either. */
  async function refusedReading(request: Request, refusal: Refusal, route: string): Promise<void> {
    const before = await api.dynamo.scan(api.changesTable);
    const answer = await refused(request, refusal);
    expect(await api.dynamo.scan(api.changesTable)).toEqual(before);
    expect(requestLine(answer)['route']).toBe(route);
  }

  it('GET /connections/{connection}/items of an unknown connection: 404 not-found', async () => {
    await refusedReading({ method: 'GET', path: '/connections/nobody/items' }, notKnown, 'GET /connections/{connection}/items');
  });

  it('GET /connections/{connection}/changes of an unknown connection: 404 not-found', async () => {
    await refusedReading({ method: 'GET', path: '/connections/nobody/changes' }, notKnown, 'GET /connections/{connection}/changes');
  });

  it('a malformed snapshot cursor: 400 bad-request, the cursor not quoted', async () => {
    await refusedReading(
      { method: 'GET', path: '/connections/acme/items', query: 'cursor=garbage' },
      bad("the cursor is not one this API gave for this connection's snapshot: pass the previous page's cursor as it was", ['garbage']),
      'GET /connections/{connection}/items',
    );
  });

  it('a malformed feed cursor: 400 bad-request, the cursor not quoted', async () => {
    await refusedReading(
      { method: 'GET', path: '/connections/acme/changes', query: 'after=garbage' },
      bad("the cursor is not one this API gave for this connection: pass a cursor from this connection's changes or snapshot as it was", ['garbage']),
      'GET /connections/{connection}/changes',
    );
  });
});

describe('GET /connections parameters', () => {
  const limit = 'limit must be a whole number from 1 to 1000';
  const status = 'status must be one of active, paused, failing, removed';
  const cursor = 'the cursor is not one this API gave: pass the cursor of the previous page as it was';
  const encoded = (value: unknown): string => Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
  it.each<[string, string, string, string[]]>([
    ['limit=0', 'limit=0', limit, []],
    ['limit=1001', 'limit=1001', limit, ['1001']],
    ['limit=abc', 'limit=abc', limit, ['abc']],
    ['limit=-1', 'limit=-1', limit, ['-1']],
    ['limit=1.5', 'limit=1.5', limit, ['1.5']],
    ['an empty limit', 'limit=', limit, []],
    ['limit=99999999', 'limit=99999999', limit, ['99999999']],
    ['status=bogus', 'status=bogus', status, ['bogus']],
    ['status=Active', 'status=Active', status, ['Active']],
    ['an empty status', 'status=', status, []],
    ['an unknown parameter', 'state=active', 'GET /connections takes the parameters status, limit and cursor only: not "state"', ['active']],
    ['two unknown parameters', 'limit=2&page=2&sort=name', 'GET /connections takes the parameters status, limit and cursor only: not "page", "sort"', ['name']],
    ['a cursor not given by the API', 'cursor=garbage', cursor, ['garbage']],
    ['an empty cursor', 'cursor=', cursor, []],
    ['a cursor of another version', `cursor=${encoded({ v: 2, after: 'acme' })}`, cursor, []],
    ['a cursor without its connection', `cursor=${encoded({ v: 1 })}`, cursor, []],
    ['a cursor naming no connection id', `cursor=${encoded({ v: 1, after: '../x' })}`, 'the cursor is not one this API gave', ['../x']],
  ])('%s: 400 bad-request', async (_name, query, message, notQuoting) => {
    await refused({ method: 'GET', path: '/connections', query }, bad(message, notQuoting));
  });
});

describe('DELETE ?erase=', () => {
  it.each(['maybe', 'TRUE', '1', '', 'false'])('erase=%s: 400 bad-request, nothing removed, nothing sent', async (value) => {
    await refused(
      { method: 'DELETE', path: '/connections/acme', query: `erase=${value}` },
      bad('erase must be true (leave it out to remove the connection without erasing it)', value === '' ? [] : [value]),
    );
  });
});

describe('a query parameter a route does not take: 400 naming each, never its value; nothing changed', () => {
  const long = `x${'y'.repeat(60)}`;
  it.each<[string, Request, string]>([
    ['DELETE ?erse=true (a typo of erase: not a plain removal)', { method: 'DELETE', path: '/connections/acme', query: 'erse=true' }, 'DELETE /connections/{connection} takes the parameter erase only: not "erse"'],
    ['DELETE ?erase=true&purge=true', { method: 'DELETE', path: '/connections/acme', query: 'erase=true&purge=true' }, 'DELETE /connections/{connection} takes the parameter erase only: not "purge"'],
    ['GET a connection ?verbose=1', { method: 'GET', path: '/connections/acme', query: 'verbose=1' }, 'GET /connections/{connection} takes no query parameter: not "verbose"'],
    ['PUT ?force=true', { ...putAcme({ clientId: 'client-2', refreshToken: token('other') }), query: 'force=true' }, 'PUT /connections/{connection} takes no query parameter: not "force"'],
    ['POST pause ?until=tomorrow', { method: 'POST', path: '/connections/acme/pause', query: 'until=tomorrow' }, 'POST /connections/{connection}/pause takes no query parameter: not "until"'],
    ['POST resume ?now=1', { method: 'POST', path: '/connections/acme/resume', query: 'now=1' }, 'POST /connections/{connection}/resume takes no query parameter: not "now"'],
    ['POST items ?lane=background', { ...items({ ids: ['fil-1'] }), query: 'lane=background' }, 'POST /connections/{connection}/items takes no query parameter: not "lane"'],
    ['GET an item ?version=2', { method: 'GET', path: '/connections/acme/items/fil-1', query: 'version=2' }, 'GET /connections/{connection}/items/{id} takes no query parameter: not "version"'],
    ['GET the changes ?from=1&to=2', { method: 'GET', path: '/connections/acme/changes', query: 'from=1&to=2' }, 'GET /connections/{connection}/changes takes the parameters after and limit only: not "from", "to"'],
    ['GET the snapshot ?after=x', { method: 'GET', path: '/connections/acme/items', query: 'after=x' }, 'GET /connections/{connection}/items takes the parameters cursor and limit only: not "after"'],
    ['a long name, cut', { method: 'GET', path: '/connections/acme', query: `${long}=1` }, `GET /connections/{connection} takes no query parameter: not "${long.slice(0, 40)}…"`],
  ])('%s', async (_name, request, message) => {
    await refused(request, bad(message, ['tomorrow', 'background', long]));
  });
});

describe('POST /connections/{connection}/items bodies', () => {
  it.each<[string, Request, Refusal]>([
    ['ids not an array', items({ ids: 'fil-1' }), bad('ids must be an array of item ids', ['fil-1'])],
    ['ids an object', items({ ids: { 0: 'fil-1' } }), bad('ids must be an array of item ids', ['fil-1'])],
    ['ids null', items({ ids: null }), bad('ids must be an array of item ids')],
    ['no ids', items({ lane: 'users' }), bad('the body lacks ids')],
    ['ids empty', items({ ids: [] }), bad('ids is empty: send at least one id')],
    ['over 1,000 ids', items({ ids: Array.from({ length: 1001 }, (_, i) => `fil-${i}`) }), bad('ids holds 1001 ids; the limit is 1000 a request')],
    ['an extra field', items({ ids: ['fil-1'], priority: 'high' }), bad('the body may hold only ids, lane; it holds 1 other field', ['priority', 'high'])],
    ['lane bogus', items({ ids: ['fil-1'], lane: 'bogus' }), bad('lane must be one of users, background', ['bogus'])],
    ['lane Users', items({ ids: ['fil-1'], lane: 'Users' }), bad('lane must be one of users, background', ['Users'])],
    ['lane a number', items({ ids: ['fil-1'], lane: 1 }), bad('lane must be one of users, background')],
    ['a body that is an array', items([['fil-1']]), bad('the body must be a JSON object', ['fil-1'])],
    ['malformed JSON', items('{"ids": ["fil-1"'), bad('the body is not well-formed JSON in UTF-8', ['fil-1'])],
    ['a wrong Content-Type', items({ ids: ['fil-1'] }, { 'content-type': 'text/plain' }), bad('the body must be JSON, sent with Content-Type: application/json')],
    ['no body', { method: 'POST', path: '/connections/acme/items' }, bad('this route takes a JSON body with ids')],
  ])('%s: 400 bad-request, nothing sent', async (_name, request, refusal) => {
    await refused(request, refusal);
  });

  it('any refused id refuses them all: 400 with each bad index and why, nothing sent, no id quoted', async () => {
    const ids: unknown[] = ['fil-1', 'x'.repeat(1025), 'tab\there', 42, null, '', ['fil-2'], 'fil-3', 'bad\uffffid', { id: 'fil-4' }, 'é'.repeat(513), 'nul\u0000id', 'zq\ud800'];
    const answer = await refused(items({ ids }), {
      status: 400,
      code: 'bad-request',
      message: '11 of the 13 ids cannot be sent; nothing was sent',
      rejected: [
        { index: 1, reason: 'the item id is 1025 bytes long in UTF-8; the limit is 1024 bytes' },
        { index: 2, reason: 'the item id contains a control character (U+0009) at position 3' },
        { index: 3, reason: 'the id is number, not a string' },
        { index: 4, reason: 'the id is null, not a string' },
        { index: 5, reason: 'the item id is empty' },
        { index: 6, reason: 'the id is an array, not a string' },
        { index: 8, reason: 'the item id contains U+FFFF at position 3, which SQS cannot carry' },
        { index: 9, reason: 'the id is object, not a string' },
        { index: 10, reason: 'the item id is 1026 bytes long in UTF-8; the limit is 1024 bytes' },
        { index: 11, reason: 'the item id contains a control character (U+0000) at position 3' },
        { index: 12, reason: 'the item id is not well-formed Unicode (a lone surrogate)' },
      ],
      notQuoting: ['fil-1', 'fil-2', 'fil-3', 'fil-4', 'xxxxxxxx', 'tab', 'éé', 'zq'],
    });
    expect(requestLine(answer)).toMatchObject({ route: 'POST /connections/{connection}/items', connection: 'acme' });
  });

  it('the ids are checked before the connection: bad ids to an unknown connection are 400, to a removed one 400', async () => {
    const rejected = [{ index: 0, reason: 'the item id is empty' }];
    await refused({ method: 'POST', path: '/connections/nobody/items', body: { ids: [''] } }, { status: 400, code: 'bad-request', message: '1 of the 1 ids cannot be sent; nothing was sent', rejected });
  });
});

describe('a body where a route takes none: 400 bad-request', () => {
  it.each<[string, Request]>([
    ['GET /connections/{connection}', { method: 'GET', path: '/connections/acme', body: {} }],
    ['GET /connections', { method: 'GET', path: '/connections', body: { status: 'active' } }],
    ['DELETE /connections/{connection}', { method: 'DELETE', path: '/connections/acme', body: {} }],
    ['DELETE ?erase=true', { method: 'DELETE', path: '/connections/acme', query: 'erase=true', body: { erase: true } }],
    ['POST pause', { method: 'POST', path: '/connections/acme/pause', body: {} }],
    ['POST resume', { method: 'POST', path: '/connections/acme/resume', body: ' ' }],
    ['GET with a token in its body', { method: 'GET', path: '/connections/acme', body: { refreshToken: RT } }],
  ])('%s', async (_name, request) => {
    await refused(request, bad('this route takes no body', [RT]));
  });
});
