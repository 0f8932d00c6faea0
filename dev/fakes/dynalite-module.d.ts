/** dynalite ships no types; only what dynalite.ts uses. */
declare module 'dynalite' {
  import type { Server } from 'node:http';

  export interface DynaliteOptions {
    createTableMs?: number;
    deleteTableMs?: number;
    updateTableMs?: number;
    maxItemSizeKb?: number;
    path?: string;
  }

  export default function dynalite(options?: DynaliteOptions): Server;
}
