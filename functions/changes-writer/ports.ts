/**
 * The changes writer's own port (the changes table's is functions/shared/changes/sequencer.ts
 * `ChangesLogWriter`): the connections table as far as it asks of it. The adapter is
 * adapters/dynamodb-erase-state.ts.
 */

/** Whether a connection's changes may still be numbered: not once its erase runs (its log is being deleted), nor without its row. */
export interface ConnectionGate {
  open(connection: string): Promise<boolean>;
}
