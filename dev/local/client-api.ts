/**
 * The client API on a loopback port, as the local run serves it (docs/development.md, "The client
 * API locally"): a Node HTTP server on 127.0.0.1 that hands each request to the API's own handler
 * (functions/client-api/app.ts, built from the deployment's environment) as API Gateway's HTTP API
 * would (payload 2.0: the raw path, the raw query string, the headers, the body in base64), and its
 * answer back. Locally nothing signs or checks a request: in AWS every route is authorized by IAM.
 * Bodies over API Gateway's 10 MB are refused with 413 before the handler, as API Gateway does.
 * On a free port unless given one (`npm run serve -- --port N`); each answer can be reported
 * (method, path, status, time: serve prints one line a request, never a body or a header).
 *
 * Also what the local story does with it: put a connection's credentials, read one, erase one, each
 * printed as the curl line a developer would type (never a token).
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import type { ApiHandler } from '../system/functions.js';
import type { Screen } from './screen.js';

/** API Gateway's payload limit (HTTP API): larger bodies never reach the function. */
const GATEWAY_MAX_BODY_BYTES = 10 * 1024 * 1024;

export interface LocalApi {
  /** `http://127.0.0.1:<port>/` */
  readonly url: string;
  close(): Promise<void>;
}

/** One answer of the local API: the request's method and path (without its query), the status, how long it took. */
export interface LocalApiAnswer {
  method: string;
  rawPath: string;
  status: number;
  ms: number;
}

export interface LocalApiOptions {
  /** The port on 127.0.0.1; default 0, a free one. */
  port?: number;
  /** Called once each request has been answered. */
  onAnswer?: (answer: LocalApiAnswer) => void;
}

export async function startLocalApi(handler: ApiHandler, options: LocalApiOptions = {}): Promise<LocalApi> {
  const server: Server = createServer((request, response) => {
    const started = Date.now();
    const reported = (status: number): void =>
      options.onAnswer?.({ method: request.method ?? 'GET', rawPath: (request.url ?? '/').split('?', 1)[0]!, status, ms: Date.now() - started });
    void (async () => {
      const body = await readBody(request);
      if (body === undefined) {
        response.writeHead(413, { 'content-type': 'application/json' }).end(JSON.stringify({ message: 'Request Entity Too Large' }));
        reported(413);
        return;
      }
      const answer = await handler(eventOf(request, body));
      response.writeHead(answer.statusCode ?? 200, (answer.headers ?? {}) as Record<string, string>).end(answer.body ?? '');
      reported(answer.statusCode ?? 200);
    })().catch((error: unknown) => {
      response.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ message: `local API: ${(error as Error).message}` }));
      reported(500);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function readBody(request: IncomingMessage): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > GATEWAY_MAX_BODY_BYTES) return undefined;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** The request as API Gateway's HTTP API hands it to the function (payload format 2.0). */
export function eventOf(request: IncomingMessage, body: Buffer): APIGatewayProxyEventV2 {
  const url = request.url ?? '/';
  const at = url.indexOf('?');
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.headers)) if (value !== undefined) headers[name.toLowerCase()] = Array.isArray(value) ? value.join(',') : value;
  const method = request.method ?? 'GET';
  const rawPath = at < 0 ? url : url.slice(0, at);
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath,
    rawQueryString: at < 0 ? '' : url.slice(at + 1),
    headers,
    requestContext: {
      accountId: '000000000000',
      apiId: 'local',
      domainName: '127.0.0.1',
      domainPrefix: '127',
      http: { method, path: rawPath, protocol: 'HTTP/1.1', sourceIp: '127.0.0.1', userAgent: headers['user-agent'] ?? '' },
      requestId: `local-${Date.now()}`,
      routeKey: '$default',
      stage: '$default',
      time: new Date().toISOString(),
      timeEpoch: Date.now(),
    },
    isBase64Encoded: true,
    ...(body.length > 0 ? { body: body.toString('base64') } : {}),
  } as APIGatewayProxyEventV2;
}

/** One request to the local API, printed as the curl line that makes it (a token shown as its variable). */
export async function callApi(
  api: LocalApi,
  screen: Screen,
  request: { method: string; path: string; body?: Record<string, unknown>; shownBody?: string },
): Promise<{ status: number; body: Record<string, unknown> }> {
  const target = `${api.url}${request.path.replace(/^\//, '')}`;
  const data = request.body === undefined ? '' : ` -H 'content-type: application/json' -d '${request.shownBody ?? JSON.stringify(request.body)}'`;
  screen.line(`   $ curl -X ${request.method} ${target}${data}`);
  const response = await fetch(target, {
    method: request.method,
    ...(request.body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(request.body) }),
  });
  const body = (await response.json()) as Record<string, unknown>;
  return { status: response.status, body };
}
