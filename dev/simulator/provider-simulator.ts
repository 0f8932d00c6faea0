/**
 * A stand-in for the content provider's HTTP API, served by a real node:http server on 127.0.0.1
 * with an ephemeral port: the provider model (provider-model.ts: accounts with their own tokens and
 * items, programmable faults, rate limit) behind HTTP. Used by the integration tests, the local run
 * and the bench and soak. Its controls are the model's methods (addAccount, revokeAccount,
 * reauthorizeAccount, account(id).setItem, addFault, ...), called in process; there is no control
 * endpoint.
 *
 *   GET {prefix}/getToken?client_id=<id>   Authorization: bearer <refresh token>
 *   GET {prefix}/items/<one percent-encoded segment>   Authorization: Bearer <access token>
 *
 * Routing works on the raw request target (req.url, never normalised): `/items/..%2FgetToken` is the
 * item `../getToken`, and `/items/../getToken` (two raw segments) is no route at all.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { listenOnLoopback } from '../fakes/loopback.js';
import { ProviderModel, type Pending, type ProviderAnswer, type ProviderModelOptions } from './provider-model.js';

export { DEFAULT_ACCOUNT, ProviderAccount } from './provider-model.js';
export type {
  AccountCounters,
  AccountOptions,
  Fault,
  FaultRule,
  RateLimit,
  ReauthorizeOptions,
  RecordedRequest,
  SimulatorItem,
  SimulatorOptions,
} from './provider-model.js';

export class ProviderSimulator extends ProviderModel {
  readonly baseUrl: string;

  private readonly server: Server;
  private readonly timers = new Set<NodeJS.Timeout>();
  private closing: Promise<void> | undefined;

  private constructor(server: Server, port: number, options: ProviderModelOptions) {
    super(options);
    this.server = server;
    this.baseUrl = `http://127.0.0.1:${port}${this.prefix}`;
  }

  static async start(options: ProviderModelOptions = {}): Promise<ProviderSimulator> {
    // Long ids percent-encode to long request lines; allow more than the 16 KiB default.
    const server = createServer({ maxHeaderSize: 64 * 1024 });
    // A little longer than the usual client idle time-out (undici: 4 s), so the server is not the one
    // closing a pooled connection just as the client reuses it.
    server.keepAliveTimeout = 30_000;
    const sim = new ProviderSimulator(server, await listenOnLoopback(server), options);
    server.on('request', (req: IncomingMessage, res: ServerResponse) => sim.onRequest(req, res));
    return sim;
  }

  /** Stops listening, cancels pending delays and destroys every open socket (hanging ones included). */
  close(): Promise<void> {
    if (!this.closing) {
      this.closing = new Promise<void>((resolve) => {
        this.server.close(() => resolve());
        for (const timer of this.timers) clearTimeout(timer);
        this.timers.clear();
        // Every connection, hanging requests included (not only idle ones).
        this.server.closeAllConnections();
      });
    }
    return this.closing;
  }

  private later(ms: number, fn: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      fn();
    }, ms);
    this.timers.add(timer);
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    const pending = this.receive({
      method: req.method ?? 'GET',
      rawUrl: req.url ?? '',
      ...(req.headers.authorization !== undefined ? { authorization: req.headers.authorization } : {}),
    });
    req.resume(); // discard any request body
    req.on('error', () => undefined);
    res.on('error', () => undefined);
    if (pending.fault?.kind === 'hang') return;
    const act = (): void => {
      if (this.closing) return;
      this.write(req, res, pending);
    };
    if (pending.waitMs > 0) this.later(pending.waitMs, act);
    else act();
  }

  private write(req: IncomingMessage, res: ServerResponse, pending: Pending): void {
    let answer: ProviderAnswer;
    try {
      answer = this.respond(pending);
    } catch (error) {
      answer = {
        kind: 'response',
        status: 500,
        body: JSON.stringify({ error: { code: 500, message: `simulator error: ${String(error)}` } }),
        contentType: 'application/json; charset=utf-8',
        headers: {},
      };
      pending.record.status = 500;
    }
    if (answer.kind === 'drop') {
      req.socket.destroy();
      return;
    }
    if (answer.kind === 'hang') return;
    if (res.headersSent || res.writableEnded || res.destroyed || res.socket?.destroyed !== false) {
      pending.record.status = 0; // the client is gone: nothing was written
      delete pending.record.respondedAt;
      return;
    }
    const noBody = answer.status === 204 || answer.status === 304;
    const buffer = noBody ? undefined : typeof answer.body === 'string' ? Buffer.from(answer.body, 'utf8') : answer.body;
    res.statusCode = answer.status;
    if (buffer) {
      res.setHeader('Content-Type', answer.contentType);
      res.setHeader('Content-Length', buffer.length);
    }
    res.setHeader('Cache-Control', 'no-store');
    for (const [name, value] of Object.entries(answer.headers)) res.setHeader(name, value);
    res.end(buffer);
  }
}
