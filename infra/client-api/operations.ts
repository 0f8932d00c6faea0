/**
 * The client API's operations (docs/client-api.md; docs/operations.md): its dashboard row, the
 * API's requests, 4xx and 5xx (429 throttling and 403 refused signatures among the 4xx) with its
 * latency, and the function behind it. No alarm: a 4xx is the caller's to fix, and the function's
 * failures are 5xx answers the application sees at once.
 */
import { Duration } from 'aws-cdk-lib';
import type * as apigwv2 from 'aws-cdk-lib/aws-apigatewayv2';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type { DashboardRow } from '../operations/dashboard.js';

export interface ClientApiOperationsProps {
  readonly fn: lambda.IFunction;
  /** The API's `$default` stage: its metrics (AWS/ApiGateway, dimensions ApiId and Stage). */
  readonly stage: apigwv2.IHttpStage;
}

export interface ClientApiOperations {
  /** One row. */
  readonly rows: DashboardRow[];
}

export function clientApiOperations(props: ClientApiOperationsProps): ClientApiOperations {
  const period = Duration.minutes(5);
  const { fn, stage } = props;
  return {
    rows: [
      [
        new cloudwatch.GraphWidget({
          title: 'Client API requests',
          width: 12,
          left: [
            stage.metricCount({ period, statistic: 'Sum', label: 'Requests' }),
            stage.metricClientError({ period, statistic: 'Sum', label: '4xx' }),
            stage.metricServerError({ period, statistic: 'Sum', label: '5xx' }),
          ],
          leftYAxis: { min: 0 },
          right: [stage.metricLatency({ period, statistic: 'p95', label: 'Latency p95 (ms)' })],
          rightYAxis: { min: 0 },
        }),
        new cloudwatch.GraphWidget({
          title: 'Client API function',
          width: 12,
          left: [
            fn.metricInvocations({ period, statistic: 'Sum' }),
            fn.metricErrors({ period, statistic: 'Sum' }),
            fn.metricThrottles({ period, statistic: 'Sum' }),
          ],
          leftYAxis: { min: 0 },
          right: [fn.metricDuration({ period, statistic: 'p95' })],
          rightYAxis: { min: 0 },
        }),
      ],
    ],
  };
}
