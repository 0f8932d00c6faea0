/** Structured JSON logs and CloudWatch embedded-format metrics, as every function uses them. */
import { Console } from 'node:console';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { METRICS_NAMESPACE } from './metric-names.js';

export interface ObservabilityOptions {
  /** Where the JSON lines go instead of standard output and error (a local run's log file). */
  output?: NodeJS.WritableStream;
}

export function createLogger(serviceName: string, options: ObservabilityOptions = {}): Logger {
  const logger = new Logger({ serviceName });
  if (options.output) useConsole(logger, consoleOn(options.output));
  return logger;
}

export function createMetrics(serviceName: string, options: ObservabilityOptions = {}): Metrics {
  if (!options.output) return new Metrics({ namespace: METRICS_NAMESPACE, serviceName });
  const console = consoleOn(options.output);
  const metrics = new Metrics({ namespace: METRICS_NAMESPACE, serviceName, logger: console });
  useConsole(metrics, console);
  return metrics;
}

/** A Console writing both streams to `output`; `trace` without a stack, as Powertools has it. */
function consoleOn(output: NodeJS.WritableStream): Console {
  const console = new Console({ stdout: output, stderr: output });
  console.trace = (...args: unknown[]) => console.log(...args);
  return console;
}

/**
 * Powertools' Logger and Metrics print through a Console of their own, made on process.stdout and
 * process.stderr, and take no other destination: this replaces that Console (their `console`
 * field). The local run's tests read the log file, so a Powertools change here fails them.
 */
function useConsole(utility: Logger | Metrics, console: Console): void {
  Object.assign(utility, { console });
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
