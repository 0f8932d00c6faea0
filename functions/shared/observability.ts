/** Structured JSON logs and CloudWatch embedded-format metrics, as every function uses them. */
import { Console } from 'node:console';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import type { LogLevel } from './config.js';
import { METRICS_NAMESPACE, STAGE_DIMENSION } from './metric-names.js';

export interface ObservabilityOptions {
  /** Where the JSON lines go instead of standard output and error (a local run's log file). */
  output?: NodeJS.WritableStream;
}

export interface LoggerOptions extends ObservabilityOptions {
  /** The level; left out, Powertools reads POWERTOOLS_LOG_LEVEL (default INFO). */
  logLevel?: LogLevel;
  /**
   * Above DEBUG: keep each invocation's DEBUG lines in a buffer instead of dropping them, and print
   * them (before the error line) when the invocation logs an error. Needs `logLevel`; at DEBUG the
   * lines are printed as they come and nothing is buffered.
   */
  bufferDebug?: boolean;
}

/**
 * The most bytes of DEBUG lines one invocation keeps (Powertools' `maxBytes`, per X-Ray trace id,
 * that is per invocation): about 2,300 `record done` lines, a batch of 2,000 records with room to
 * spare. Beyond it the oldest lines go first, and the flush says that some were left out.
 */
export const DEBUG_BUFFER_MAX_BYTES = 1024 * 1024;

/**
 * Powertools' Logger of `serviceName`. With `bufferDebug` above DEBUG, Powertools' log buffer:
 * lines at DEBUG are kept per invocation (by `_X_AMZN_TRACE_ID`, which Lambda sets for each
 * invocation; without it they are dropped as usual) and printed, as they were logged, the moment
 * the invocation logs at ERROR. The caller clears the buffer at the end of each invocation
 * (`logger.clearBuffer()`), so nothing is carried into the next one.
 */
export function createLogger(serviceName: string, options: LoggerOptions = {}): Logger {
  const { logLevel, bufferDebug } = options;
  const buffering = bufferDebug === true && logLevel !== undefined && logLevel !== 'DEBUG';
  const logger = new Logger({
    serviceName,
    ...(logLevel !== undefined ? { logLevel } : {}),
    ...(buffering ? { logBufferOptions: { maxBytes: DEBUG_BUFFER_MAX_BYTES, bufferAtVerbosity: 'DEBUG', flushOnErrorLog: true } } : {}),
  });
  if (options.output) useConsole(logger, consoleOn(options.output));
  return logger;
}

export interface MetricsOptions extends ObservabilityOptions {
  /**
   * The deployment's stage (CONTENT_SYNC_STAGE): every metric then carries the dimension `stage`
   * beside `service`. Undefined: `service` alone.
   */
  stage?: string | undefined;
}

/** Powertools' Metrics of `serviceName` in namespace ContentSync: dimension `service`, and `stage` when given. */
export function createMetrics(serviceName: string, options: MetricsOptions = {}): Metrics {
  const common = {
    namespace: METRICS_NAMESPACE,
    serviceName,
    ...(options.stage === undefined ? {} : { defaultDimensions: { [STAGE_DIMENSION]: options.stage } }),
  };
  if (!options.output) return new Metrics(common);
  const console = consoleOn(options.output);
  const metrics = new Metrics({ ...common, logger: console });
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
