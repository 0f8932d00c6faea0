/**
 * Where the functions' logs and metrics go in the local system: nowhere (a scenario counts what
 * happens itself), to counters of lines and bytes (the real Powertools logger and metrics, for the
 * log ingestion a simulation prices), or to a stream (the local run's log file). Left out, the
 * functions write to standard output as in Lambda.
 */
import { Writable } from 'node:stream';
import { createLogger, createMetrics } from '../../functions/shared/observability.js';

export interface Observability {
  logger: ReturnType<typeof createLogger>;
  metrics: ReturnType<typeof createMetrics>;
}

export interface LogCount {
  lines: number;
  bytes: number;
}

/** The real logger and metrics of `service`, both writing to `stream`. */
export function streamObservability(service: string, stream: Writable): Observability {
  return { logger: createLogger(service, { output: stream }), metrics: createMetrics(service, { output: stream }) };
}

/** The real logger and metrics of `service`, counting lines and bytes by log message (EMF metric documents as `EMF metrics`). */
export function countingObservability(service: string, counts: Record<string, LogCount>): Observability {
  const output = new Writable({
    write(chunk: Buffer | string, _encoding, callback) {
      const text = typeof chunk === 'string' ? chunk : chunk.toString('utf8');
      for (const line of text.split('\n')) {
        if (line === '') continue;
        const key = line.includes('"_aws"') ? 'EMF metrics' : (/"message":"((?:[^"\\]|\\.)*)"/.exec(line)?.[1] ?? 'other');
        const count = (counts[key] ??= { lines: 0, bytes: 0 });
        count.lines += 1;
        count.bytes += Buffer.byteLength(line) + 1;
      }
      callback();
    },
  });
  return streamObservability(service, output);
}

/** A logger and metrics that keep nothing. */
export function quietObservability(): Observability {
  const noop = (): void => undefined;
  const logger = { debug: noop, info: noop, warn: noop, error: noop, addContext: noop, appendKeys: noop, clearBuffer: noop } as unknown as Observability['logger'];
  const metrics = { addMetric: noop, publishStoredMetrics: noop, addDimension: noop } as unknown as Observability['metrics'];
  return { logger, metrics };
}
