/**
 * The order the test files start in (vitest.config.mts `sequence.sequencer`). vitest runs every
 * project's files from one queue, and a worker that shares its modules is kept for the next file only
 * when that file is of the same project: so each project's files stay together, in PROJECT_ORDER.
 * Without a record of earlier runs (a fresh clone, as CI runs) vitest starts the larger files first;
 * but the simulations, the local run, the files that start their own servers and those that
 * synthesize or bundle the app are small files that run for half a minute or more. Started last, one
 * of them runs alone at the end of the run with the other CPU idle. So the projects of a few long
 * files start first and the one of many short files last, and within each project the files of
 * LONG_FIRST start first, the longest first, then the others in vitest's order.
 */
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Files that run long for their size (paths from the repository's root), the longest of a fresh
 * clone's run first: within a project, a file starts before those matched by a later pattern.
 */
export const LONG_FIRST: readonly RegExp[] = [
  /^test\/dev\/local\/story\.test\.ts$/,
  /^test\/dev\/local\/cli\.test\.ts$/,
  /^test\/dev\/sim\/pace-scenarios\.test\.ts$/,
  /^test\/dev\/fakes\/dynamodb-local\.test\.ts$/,
  /^test\/dev\/sim\/changes-scenario\.test\.ts$/,
  /^test\/dev\/sim\/scope-scenarios\.test\.ts$/,
  /^test\/dev\/sim\//,
  /^test\/dev\/local\//,
  /^test\/dev\/bench\//,
  /^test\/infra\/cli\.test\.ts$/,
  /^test\/infra\/stateless-stack\.test\.ts$/,
  /^test\/infra\/bundles\.test\.ts$/,
  /^test\/infra\/reconciler\.test\.ts$/,
];

/**
 * The projects (vitest.config.mts), in the order they start: those of a few long files first (the
 * CLI's synth and the app's synth and bundles), the one of the many short files last, where they
 * fill the run's end. A project not named here starts after these.
 */
export const PROJECT_ORDER: readonly string[] = ['synth-isolated', 'synth', 'isolated', 'shared'];

export function longFirst<T>(files: readonly T[], projectOf: (file: T) => string, pathOf: (file: T) => string): T[] {
  const position = (project: string): number => (PROJECT_ORDER.includes(project) ? PROJECT_ORDER.indexOf(project) : PROJECT_ORDER.length);
  const long = (file: T): number => {
    const index = LONG_FIRST.findIndex((pattern) => pattern.test(pathOf(file)));
    return index === -1 ? LONG_FIRST.length : index;
  };
  const rank = (file: T): number => position(projectOf(file)) * (LONG_FIRST.length + 1) + long(file);
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
