/**
 * Every function's metrics (functions/shared/observability.ts createMetrics): namespace ContentSync,
 * dimension `service`, and `stage` beside it only in a deployment with a stage (CONTENT_SYNC_STAGE).
 */
import { PassThrough } from 'node:stream';
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { describe, expect, it } from 'vitest';
import { jsonLines } from '../../../dev/fakes/capture-output.js';
import { createMetrics } from '../../../functions/shared/observability.js';

/** The EMF documents `createMetrics(service, { stage })` prints for one count of `ItemsFetched`. */
function publishOne(stage: string | undefined): unknown[] {
  const output = new PassThrough();
  let text = '';
  output.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
  const metrics = createMetrics('item-sync', { output, stage });
  metrics.addMetric('ItemsFetched', MetricUnit.Count, 3);
  metrics.publishStoredMetrics();
  return jsonLines(text).map((line) => {
    const document = line as { _aws: { Timestamp: unknown } };
    expect(typeof document._aws.Timestamp).toBe('number');
    return { ...document, _aws: { ...document._aws, Timestamp: 'T' } };
  });
}

describe('createMetrics', () => {
  it('without a stage: dimension service alone, as before stages existed', () => {
    expect(publishOne(undefined)).toEqual([
      {
        _aws: { Timestamp: 'T', CloudWatchMetrics: [{ Namespace: 'ContentSync', Dimensions: [['service']], Metrics: [{ Name: 'ItemsFetched', Unit: 'Count' }] }] },
        service: 'item-sync',
        ItemsFetched: 3,
      },
    ]);
  });

  it('with a stage: dimensions service and stage, on every metric', () => {
    expect(publishOne('staging')).toEqual([
      {
        _aws: { Timestamp: 'T', CloudWatchMetrics: [{ Namespace: 'ContentSync', Dimensions: [['service', 'stage']], Metrics: [{ Name: 'ItemsFetched', Unit: 'Count' }] }] },
        service: 'item-sync',
        stage: 'staging',
        ItemsFetched: 3,
      },
    ]);
  });
});
