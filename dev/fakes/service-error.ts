/**
 * An AWS service error as the fakes raise it: the HTTP emulator turns it into the JSON error reply
 * the SDK parses, the in-process clients into the SDK's own exception.
 */
export class ServiceError extends Error {
  constructor(
    /** The error's name (`__type`): `QueueDoesNotExist`, `ResourceNotFoundException`... */
    readonly type: string,
    message: string,
    readonly status = 400,
    /** SQS only: the `x-amzn-query-error` code (`AWS.SimpleQueueService.NonExistentQueue`). */
    readonly queryCode?: string,
  ) {
    super(message);
    this.name = type;
  }

  /** True when SQS would say the sender is at fault (a 4xx). */
  get senderFault(): boolean {
    return this.status < 500;
  }
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
