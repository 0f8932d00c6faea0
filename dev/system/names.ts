/**
 * The local resources' names: what the stacks name with CloudFormation, a run names itself. The
 * queues' URLs and ARNs come from the SQS backend once the queues exist (queues.ts).
 */
export interface LocalNames {
  readonly itemsTable: string;
  readonly itemsBucket: string;
  readonly controlTable: string;
  /** Each connection's changes feed (infra/storage/changes-table.ts). */
  readonly changesTable: string;
  readonly syncQueue: string;
  readonly syncDeadLetterQueue: string;
  readonly reconcileQueue: string;
  readonly reconcileDeadLetterQueue: string;
  readonly eraseQueue: string;
  readonly eraseDeadLetterQueue: string;
  readonly connectionsTable: string;
  readonly eventBus: string;
}

/** Every name from one prefix (`content-sync-bench` → `content-sync-bench-items`...). */
export function localNames(prefix: string): LocalNames {
  return {
    itemsTable: `${prefix}-items`,
    itemsBucket: `${prefix}-items`,
    controlTable: `${prefix}-control`,
    changesTable: `${prefix}-changes`,
    syncQueue: `${prefix}-sync-queue`,
    syncDeadLetterQueue: `${prefix}-sync-dlq`,
    reconcileQueue: `${prefix}-reconcile-queue`,
    reconcileDeadLetterQueue: `${prefix}-reconcile-dlq`,
    eraseQueue: `${prefix}-erase-queue`,
    eraseDeadLetterQueue: `${prefix}-erase-dlq`,
    connectionsTable: `${prefix}-connections`,
    eventBus: `${prefix}-change-events`,
  };
}
