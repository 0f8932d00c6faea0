/**
 * `npm run serve`: the local system kept running, for an application to be built against its
 * client API (serve-command.ts), until Ctrl-C.
 *
 *   npm run serve                               the client API on 127.0.0.1 (its URL printed), the sync,
 *                                               the token refresher, the reconciler and the changes feed,
 *                                               against the provider simulator's three accounts (their
 *                                               client id and fake refresh tokens printed)
 *   npm run serve -- --port 8080                the client API on this port (default: a free one)
 *   npm run serve -- --items 1000 --seed 7      a bigger or different simulated provider
 *   PROVIDER_BASE_URL=https://… npm run serve   against a real provider
 *
 * The first SIGINT or SIGTERM stops every server and child process it started (DynamoDB Local's JVM
 * among them) and exits 0; a second one exits at once (status 130), DynamoDB Local's JVM killed on
 * the way out (dev/fakes/dynamodb-local.ts). A signal within SAME_INTERRUPT_MS of the first is that
 * one again: the tsx command (`npm run serve` runs it) passes a terminal's Ctrl-C on to this process
 * when this process has not told it within 30 ms that it got the Ctrl-C itself. (npm exits 130
 * after a Ctrl-C whatever its script's status.) Exit status: 0 once stopped, 1 when the system could
 * not start or failed, 2 on a usage error.
 */
import { main } from './serve-command.js';

/** How soon after the first signal another is taken for the same interrupt, relayed; ms. */
const SAME_INTERRUPT_MS = 1_000;

let requestStop: (signal: NodeJS.Signals) => void = () => undefined;
const stopped = new Promise<NodeJS.Signals>((resolve) => (requestStop = resolve));
let firstSignalAt: number | undefined;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (firstSignalAt === undefined) {
      firstSignalAt = Date.now();
      requestStop(signal);
    } else if (Date.now() - firstSignalAt >= SAME_INTERRUPT_MS) {
      process.stderr.write(`serve: ${signal} again: stopping at once\n`);
      process.exit(130);
    }
  });
}

main(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env }, stopped).then(
  (status) => process.exit(status),
  (error: unknown) => {
    process.stderr.write(`serve: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}\n`);
    process.exit(1);
  },
);
