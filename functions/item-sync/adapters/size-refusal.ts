/**
 * DynamoDB's refusal of a row for its size, and only that: ValidationException "Item size has
 * exceeded the maximum allowed size" (PutItem, BatchWriteItem), "Item size to update has exceeded
 * the maximum allowed size" (UpdateItem), or a transaction cancelled for it (the row's reason a
 * ValidationError with that message).
 * Other refusals speak of sizes too ("Size of hashkey has exceeded…", "Aggregated size of all range
 * keys has exceeded…" for a key over its limit) and are not about the row's size.
 */
export const ITEM_SIZE_REFUSAL = /\bItem size (?:to update )?has exceeded the maximum allowed size\b/i;

/**
 * The name of the changes writer's error for a transaction DynamoDB cancelled for its row's size.
 * Told by name: the writer is a module of its own in the bundle, so its classes are not the index's.
 */
export const ROW_TOO_LARGE = 'RowTooLarge';

export function isSizeRefusal(error: unknown): boolean {
  const name = (error as { name?: string })?.name;
  const message = String((error as { message?: string })?.message ?? '');
  return name === ROW_TOO_LARGE || (name === 'ValidationException' && ITEM_SIZE_REFUSAL.test(message));
}
