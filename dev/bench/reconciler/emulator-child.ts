/**
 * The SQS emulator in a process of its own, for the reconciler bench: so that the invocation's
 * process does its own work only (its CPU time is what a Lambda invocation would spend). Creates
 * the queue, prints `{"endpoint", "queueUrl"}` as one line, empties the queue every 200 ms (the
 * item sync's side, as fast as can be), and exits when its standard input closes.
 */
import { AwsEmulator } from '../../fakes/aws-emulator.js';
import { LOCAL_REGION } from '../../fakes/local-aws.js';

const emulator = await AwsEmulator.start({ region: LOCAL_REGION });
const queueUrl = emulator.sqs.createQueue('bench-reconcile');
setInterval(() => emulator.sqs.purge(queueUrl), 200);
process.stdout.write(`${JSON.stringify({ endpoint: emulator.endpoint, queueUrl })}\n`);
process.stdin.on('end', () => void emulator.close().then(() => process.exit(0)));
process.stdin.resume();
