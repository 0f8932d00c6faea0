/**
 * The AWS SDK clients as the functions build them, once per container: without the SDK's logger
 * middleware. With no logger configured (none is: the functions log through Powertools), the SDK
 * still builds a redacted copy of every request and every answer for one, on every call: a walk of
 * the whole input and output (a SendMessageBatch's ten bodies, a BatchGetItem's hundred rows) that
 * nothing reads. The harness's clients are built the same way (dev/fakes/local-aws.ts).
 */

/** The SDK's logger middleware, by the name it registers. */
export const SDK_LOGGER_MIDDLEWARE = 'loggerMiddleware';

/** `client` without the SDK's logger middleware. */
export function withoutSdkLogger<T extends { middlewareStack: { remove(name: string): boolean } }>(client: T): T {
  client.middlewareStack.remove(SDK_LOGGER_MIDDLEWARE);
  return client;
}
