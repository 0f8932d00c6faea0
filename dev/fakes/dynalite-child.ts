/**
 * dynalite in a child process (dynalite.ts, `where: 'child'`), started with tsx: its settings as JSON
 * in the first argument; it checks key sizes in bytes (dynalite-key-sizes.ts) and has
 * TransactWriteItems (dynalite-transactions.ts), listens on 127.0.0.1 (ephemeral port), writes
 * `PORT <port>` on standard output, sends its parent (over the IPC channel) the commits of the
 * transactions whose request asked for it (dynalite-commits.ts), and exits when its parent closes
 * its standard input or disconnects.
 */
import type { DynaliteOptions } from 'dynalite';
import { onCommit } from './dynalite-commits.js';
import { checkKeySizesInBytes } from './dynalite-key-sizes.js';
import { dynaliteWithTransactions } from './dynalite-transactions.js';

checkKeySizesInBytes();
const settings = JSON.parse(process.argv[2] ?? '{}') as DynaliteOptions;
const server = dynaliteWithTransactions(settings);
// Sent before the answer is written: the parent reads the commits in commit order.
onCommit((commit) => {
  if (commit.reportAsked) process.send?.(commit);
});
server.on('error', (error) => {
  console.error(String(error));
  process.exit(1);
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`PORT ${typeof address === 'object' && address !== null ? address.port : ''}\n`);
});
process.on('disconnect', () => process.exit(0));
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
