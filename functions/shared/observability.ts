/** Structured JSON logs and CloudWatch embedded-format metrics, as every function uses them. */
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { METRICS_NAMESPACE } from './metric-names.js';


export function createLogger(serviceName: string): Logger {
  return new Logger({ serviceName });
}

export function createMetrics(serviceName: string): Metrics {
  return new Metrics({ namespace: METRICS_NAMESPACE, serviceName });
}

/** A loggable summary of an error: name, message and the chain of causes' names and messages. No stack, no values. */
export function describeError(error: unknown): { name: string; message: string; causes?: string[] } {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error) };
  const causes: string[] = [];
  let cause = (error as { cause?: unknown }).cause;
  for (let depth = 0; cause instanceof Error && depth < 5; depth++) {
    causes.push(`${cause.name}: ${cause.message}`);
    cause = (cause as { cause?: unknown }).cause;
  }
  return { name: error.name, message: error.message, ...(causes.length ? { causes } : {}) };
}
