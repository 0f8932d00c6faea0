/** Where results go and what machine produced them. */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';

/** The repository root (dev/bench/support/../../../). */
export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
/** Git-ignored results folder. */
export const BENCH_DIR = `${REPO_ROOT}.bench`;

export interface MachineInfo {
  date: string;
  node: string;
  platform: string;
  cpuModel: string;
  cpus: number;
  memoryGiB: number;
  /** `git describe`-style: the commit measured, `-dirty` when the tree had changes. */
  commit: string;
  summary: string;
}

export function machineInfo(now: Date = new Date()): MachineInfo {
  const cpuModel = cpuModelName();
  const count = cpus().length;
  const memoryGiB = Math.round((totalmem() / 2 ** 30) * 10) / 10;
  const date = now.toISOString();
  const commit = gitCommit();
  return {
    date,
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    cpuModel,
    cpus: count,
    memoryGiB,
    commit,
    summary:
      `${date.slice(0, 16).replace('T', ' ')} UTC · ${cpuModel} · ${count} CPUs (nproc) · ${memoryGiB} GiB · ` +
      `Node.js ${process.version} · ${process.platform} ${process.arch} · commit ${commit}`,
  };
}

function cpuModelName(): string {
  try {
    const match = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'));
    if (match?.[1]) return match[1].trim();
  } catch {
    // not Linux
  }
  return cpus()[0]?.model?.trim() || 'unknown CPU';
}

function gitCommit(): string {
  try {
    const git = (...args: string[]): string => execFileSync('git', args, { cwd: REPO_ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const head = git('rev-parse', '--short', 'HEAD');
    return git('status', '--porcelain', '--untracked-files=no') === '' ? head : `${head}-dirty`;
  } catch {
    return 'unknown';
  }
}

export function timestampForFile(date: Date): string {
  return date.toISOString().replace(/[:.]/g, '-');
}
