/**
 * A `fetch` that reaches the provider model in process, in virtual time: the real provider client
 * (functions/shared/provider/provider-client.ts) runs unchanged over it. Latency and delay faults are virtual
 * timers; a dropped connection rejects as undici does ("fetch failed"); a hang waits until the
 * request is aborted.
 */
import type { ProviderModel } from '../simulator/provider-model.js';
import type { VirtualClock } from './virtual-clock.js';

export function modelFetch(model: ProviderModel, clock: VirtualClock): typeof fetch {
  return async (input, init) => {
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    const headers = new Headers(init?.headers);
    const authorization = headers.get('authorization');
    const pending = model.receive({
      method: init?.method ?? 'GET',
      rawUrl: `${url.pathname}${url.search}`,
      ...(authorization !== null ? { authorization } : {}),
    });
    if (pending.waitMs > 0) await clock.sleep(pending.waitMs);
    const answer = model.respond(pending);
    switch (answer.kind) {
      case 'drop':
        throw new TypeError('fetch failed', { cause: Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }) });
      case 'hang':
        return new Promise<Response>((_, reject) => {
          const signal = init?.signal;
          signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
        });
      case 'response':
        return new Response(answer.status === 204 ? null : answer.body, {
          status: answer.status,
          headers: { 'content-type': answer.contentType, ...answer.headers },
        });
    }
  };
}
