/**
 * `npm start`: the local run.
 *
 *   npm start                                   the main job on embedded defaults (no AWS, no network):
 *                                               three connections added through the client API (a PUT
 *                                               each), synced from their roots, checked, and the
 *                                               application's copy from the changes feed
 *   npm run tour                                the whole tour (npm start -- --tour): also changes synced
 *                                               again, one connection revoked mid-run and recovered (its
 *                                               new credentials put through the client API), the
 *                                               reconciler's pass, an erase (a DELETE through the client API)
 *   npm start -- --items 1000 --seed 7          a bigger or different simulated provider
 *   PROVIDER_BASE_URL=https://… npm start -- id1 id2     sync these ids from a real provider into the
 *                                               local table (ids from standard input when none are given)
 *
 * Real-provider credentials (credentials.ts): CONTENT_SYNC_CLIENT_ID and CONTENT_SYNC_REFRESH_TOKEN,
 * or the file `.local/credentials.json` ({"clientId": "...", "refreshToken": "..."}; git ignores
 * `.local/`); the run adds them as the connection `default` with the operator CLI.
 * Exit status: 0 when the run behaved as expected, 1 otherwise, 2 on a usage error.
 */
import { main } from './start-command.js';

main(process.argv.slice(2)).then(
  (status) => {
    process.exitCode = status;
  },
  (error: unknown) => {
    process.stderr.write(`start: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}\n`);
    process.exitCode = 1;
  },
);
