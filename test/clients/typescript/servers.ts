/**
 * Small HTTP servers on 127.0.0.1 (port 0) for the client's tests: each keeps every request as it
 * arrived (method, raw URL, headers, body) and answers what the test's function says, or never
 * answers at all (a hung server, for the time-outs).
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  method: string;
  /** The request target as sent: path and query, percent-encoded. */
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export interface Reply {
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
}

export interface TestServer {
  /** `http://127.0.0.1:<port>/` */
  url: string;
  received: Received[];
  close(): Promise<void>;
}

/** A server that answers each request with `reply(request, n)` (n from 0), or never when it answers 'hang'. */
export async function startServer(reply: (request: Received, n: number) => Reply | 'hang'): Promise<TestServer> {
  const received: Received[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const got: Received = { method: request.method ?? '', url: request.url ?? '', headers: request.headers, body: Buffer.concat(chunks) };
      received.push(got);
      const answer = reply(got, received.length - 1);
      if (answer === 'hang') return;
      const text = answer.body === undefined ? '' : typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body);
      response.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers }).end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
