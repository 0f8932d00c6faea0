/**
 * What the provider simulator saw during the soak, counted as it goes: its list of requests is
 * emptied at every tally (a long run would hold millions of them). A request still unanswered
 * stays in the list for the next tally, unless it is the final one. The getToken requests' times
 * are kept (a few dozen): whether two were ever in flight at once.
 */
import type { ProviderSimulator } from '../../simulator/provider-simulator.js';

export interface ProviderFigures {
  itemRequests: number;
  tokenRequests: number;
  /** Item requests by status (or fault kind when unanswered). */
  byStatus: Record<string, number>;
  tokenByStatus: Record<string, number>;
  serverErrors: number;
  rateLimited: number;
  unauthorized: number;
  dropped: number;
  slow: number;
  hung: number;
}

export class ProviderTally {
  readonly figures: ProviderFigures = {
    itemRequests: 0,
    tokenRequests: 0,
    byStatus: {},
    tokenByStatus: {},
    serverErrors: 0,
    rateLimited: 0,
    unauthorized: 0,
    dropped: 0,
    slow: 0,
    hung: 0,
  };

  /** Every getToken request: when it arrived and when it was answered (undefined: never). */
  readonly tokenIntervals: Array<[number, number | undefined]> = [];

  constructor(private readonly sim: ProviderSimulator) {}

  take(final: boolean): void {
    const keep = [];
    const f = this.figures;
    for (const request of this.sim.requests) {
      const over = request.status !== 0 || request.fault === 'drop' || request.fault === 'hang' || final;
      if (!over) {
        keep.push(request);
        continue;
      }
      const status = request.status === 0 ? (request.fault ?? 'unanswered') : String(request.status);
      if (request.endpoint === 'token') {
        this.tokenIntervals.push([request.receivedAt ?? 0, request.respondedAt]);
        f.tokenRequests += 1;
        f.tokenByStatus[status] = (f.tokenByStatus[status] ?? 0) + 1;
        continue;
      }
      f.itemRequests += 1;
      f.byStatus[status] = (f.byStatus[status] ?? 0) + 1;
      if (request.status >= 500) f.serverErrors += 1;
      if (request.status === 429) f.rateLimited += 1;
      if (request.status === 401) f.unauthorized += 1;
      if (request.fault === 'drop') f.dropped += 1;
      if (request.fault === 'delay') f.slow += 1;
      if (request.fault === 'hang') f.hung += 1;
    }
    this.sim.requests.length = 0;
    this.sim.requests.push(...keep);
  }
}
