/**
 * The order the test files start in (vitest.config.mts `sequence.sequencer`). vitest's own order
 * keeps each project's files together, and without a record of earlier runs (a fresh clone, as CI
 * runs) starts the larger files first; the simulations, the local run and the files that start their
 * own servers are small files that run for a minute. Started last, one of them runs alone at the
 * end of the run with the other CPU idle. So, within each project, the files of LONG_FIRST start
 * first, then the others in vitest's order.
 */
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/** Files that run long for their size (paths from the repository's root). */
export const LONG_FIRST: readonly RegExp[] = [/^test\/dev\/sim\//, /^test\/dev\/local\//, /^test\/dev\/bench\//, /^test\/dev\/fakes\/dynamodb-local\.test\.ts$/];

export function longFirst<T>(files: readonly T[], projectOf: (file: T) => string, pathOf: (file: T) => string): T[] {
  const projects = [...new Set(files.map(projectOf))];
  const rank = (file: T): number => projects.indexOf(projectOf(file)) * 2 + (LONG_FIRST.some((pattern) => pattern.test(pathOf(file))) ? 0 : 1);
  // Array.prototype.sort is stable: within a rank, vitest's order.
  return [...files].sort((a, b) => rank(a) - rank(b));
}

export default class LongFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    return longFirst(
      await super.sort(files),
      (file) => file.project.name,
      (file) => file.moduleId.slice(root.length + 1).split('\\').join('/'),
    );
  }
}
