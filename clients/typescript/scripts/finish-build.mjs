/**
 * The last step of `npm run build`: what tsc does not emit, copied into dist. The generated types
 * (src/schema.d.ts and its parts in src/schema/: tsc emits no declaration file for one that is
 * already one, and dist/index.d.ts imports them), and the OpenAPI document they were generated from (exported as
 * `@content-sync/client/openapi.json`).
 */
import { copyFileSync, cpSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const at = (path) => fileURLToPath(new URL(path, import.meta.url));
copyFileSync(at('../src/schema.d.ts'), at('../dist/schema.d.ts'));
cpSync(at('../src/schema'), at('../dist/schema'), { recursive: true });
copyFileSync(at('../../../docs/openapi.json'), at('../dist/openapi.json'));
