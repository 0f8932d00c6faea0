/**
 * The eraser's operations (docs/connections.md, "Erase"; docs/operations.md): one alarm, a message
 * in the erase dead-letter queue (an erase that failed every run: the connection's data is not
 * gone); and its dashboard row, the erase queue with its dead-letter queue, and the function. The
 * alarm is made on the alarm topic by infra/operations.
 */
import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type { WorkQueueResources } from '../constructs/queues.js';
import { eraseQueueDeployment } from '../deployment.js';
import type { AlarmDefinition } from '../operations/alarms.js';
import type { DashboardRow } from '../operations/dashboard.js';

export interface EraserOperationsProps {
  readonly fn: lambda.IFunction;
  /** The erase queue and its dead-letter queue. */
  readonly queues: WorkQueueResources;
}

export interface EraserOperations {
  readonly alarms: AlarmDefinition[];
  /** One row. */
  readonly rows: DashboardRow[];
}

export function eraserOperations(props: EraserOperationsProps): EraserOperations {
  const { fn, queues } = props;
  const period = Duration.minutes(5);
  const alarms: AlarmDefinition[] = [
    {
      id: 'EraseDeadLetterQueueAlarm',
      props: {
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
        alarmDescription:
          `An erase is waiting in the erase dead-letter queue: the eraser failed it ${eraseQueueDeployment().maxReceiveCount} runs in a row, so that connection's data is not (all) gone. ` +
          'Its message names the connection; read the eraser logs for why, fix, then redrive to the erase queue (docs/connections.md, "Erase").',
        metric: queues.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ period, statistic: 'Maximum' }),
        threshold: 1,
        evaluationPeriods: 1,
      },
    },
  ];
  const rows: DashboardRow[] = [
    [
      new cloudwatch.GraphWidget({
        title: 'Erase queue',
        width: 12,
        left: [
          queues.queue.metricApproximateNumberOfMessagesVisible({ period, statistic: 'Maximum' }),
          queues.queue.metricApproximateNumberOfMessagesNotVisible({ period, statistic: 'Maximum' }),
          queues.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ period, statistic: 'Maximum', label: 'Erase dead-letter queue' }),
        ],
        leftYAxis: { min: 0 },
        right: [queues.queue.metricApproximateAgeOfOldestMessage({ period, statistic: 'Maximum' })],
        rightYAxis: { min: 0 },
      }),
      new cloudwatch.GraphWidget({
        title: 'Connection eraser function',
        width: 12,
        left: [fn.metricInvocations({ period, statistic: 'Sum' }), fn.metricErrors({ period, statistic: 'Sum' })],
        leftYAxis: { min: 0 },
        right: [fn.metricDuration({ period, statistic: 'Maximum' })],
        rightYAxis: { min: 0 },
      }),
    ],
  ];
  return { alarms, rows };
}
