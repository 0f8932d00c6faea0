/**
 * The local story's last step: one account leaves, and the client application erases its data
 * through the client API (`DELETE /connections/{connection}?erase=true`, 202 at once). The erase
 * queue's message comes after the safety wait (LOCAL_ERASE_SETTLE_SECONDS locally), the eraser
 * takes it as its event source would (one message an invocation; a message it sends back is taken
 * again), then `GET` answers 404. Checked: the connection's rows and objects are gone, every other
 * connection's rows are as they were, and the lifecycle events say `ConnectionRemoved` then
 * `ConnectionErased`.
 */
import { DeleteMessageCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { sqsEvent } from '../fakes/lambda.js';
import { callApi } from './client-api.js';
import { showLifecycle, type LocalRun } from './local-run.js';
import { idsByConnection, readRows } from './passes.js';

/** Erase messages the step takes at most (a message the eraser sends back is one more). */
const MAX_ERASE_MESSAGES = 10;

export async function eraseConnectionStep(run: LocalRun, connection: string, step: number): Promise<void> {
  const { screen, problems, system } = run;
  screen.line(`${step}. ${connection} leaves: the application erases its data through the client API; the eraser deletes its rows, objects and row`);
  const before = idsByConnection(await readRows(run));
  const objectsBefore = await objectCount(run, connection);
  const asked = await callApi(run.api, screen, { method: 'DELETE', path: `connections/${encodeURIComponent(connection)}?erase=true` });
  const erase = asked.body['erase'] as { state?: string } | undefined;
  screen.line(`     ${asked.status}: ${connection} ${String(asked.body['status'])}, erase ${erase?.state ?? 'none'}`);
  if (asked.status !== 202 || erase?.state !== 'waiting') problems.push(`erase: DELETE ?erase=true answered ${asked.status} with erase ${erase?.state ?? 'none'}, expected 202 waiting`);
  await showLifecycle(run);

  const queue = system.queues.erase;
  let taken = 0;
  for (let round = 0; round < MAX_ERASE_MESSAGES * 3 && taken < MAX_ERASE_MESSAGES; round++) {
    const received = await run.clients.sqs.send(new ReceiveMessageCommand({ QueueUrl: queue.url, WaitTimeSeconds: 1, MaxNumberOfMessages: 1 }));
    const message = received.Messages?.[0];
    if (!message) {
      if ((await callApi(run.api, screen, { method: 'GET', path: `connections/${encodeURIComponent(connection)}` })).status === 404) break;
      continue;
    }
    taken += 1;
    const eraser = run.handlers.eraser;
    const result = await eraser.handler(sqsEvent([message], queue.arn), system.context(eraser));
    if (result.batchItemFailures.length > 0) problems.push(`erase: the eraser failed on its message (handler logs: erase failed)`);
    else await run.clients.sqs.send(new DeleteMessageCommand({ QueueUrl: queue.url, ReceiptHandle: message.ReceiptHandle! }));
  }
  const after = await callApi(run.api, screen, { method: 'GET', path: `connections/${encodeURIComponent(connection)}` });
  screen.line(`     ${after.status}: ${after.status === 404 ? 'no such connection any more' : JSON.stringify(after.body)}`);
  if (after.status !== 404) problems.push(`erase: GET /connections/${connection} answered ${after.status} after the erase, expected 404`);
  await showLifecycle(run);

  const rows = idsByConnection(await readRows(run));
  const objectsAfter = await objectCount(run, connection);
  screen.line(
    `   ${connection}: ${before.get(connection)?.length ?? 0} rows and ${objectsBefore} objects before, ${rows.get(connection)?.length ?? 0} and ${objectsAfter} after; ` +
      `the others: ${[...before.keys()].filter((c) => c !== connection).map((c) => `${c} ${rows.get(c)?.length ?? 0} rows`).join(', ')} (as before)`,
  );
  if ((rows.get(connection)?.length ?? 0) > 0 || objectsAfter > 0) problems.push(`erase: ${connection} still has ${rows.get(connection)?.length ?? 0} rows and ${objectsAfter} objects`);
  for (const [other, ids] of before) {
    if (other !== connection && (rows.get(other)?.length ?? 0) !== ids.length) problems.push(`erase: ${other} had ${ids.length} rows, now ${rows.get(other)?.length ?? 0}`);
  }
  const events = run.changeEvents.lifecycle().filter((event) => event.detail.connection === connection).map((event) => event.detailType);
  if (events.at(-2) !== 'ConnectionRemoved' || events.at(-1) !== 'ConnectionErased') {
    problems.push(`erase: ${connection}'s last lifecycle events are ${events.slice(-2).join(', ') || 'none'}, expected ConnectionRemoved, ConnectionErased`);
  }
}

async function objectCount(run: LocalRun, connection: string): Promise<number> {
  let count = 0;
  let token: string | undefined;
  do {
    const page = await run.clients.s3.send(new ListObjectsV2Command({ Bucket: run.system.names.itemsBucket, Prefix: `items/${connection}/`, ContinuationToken: token }));
    count += page.KeyCount ?? 0;
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  return count;
}
