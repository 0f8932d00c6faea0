/**
 * One deployment among several in an account and region (docs/stacks.md, "A second deployment: a
 * stage"): the rule a stage name follows and the stack names it gives. The context key `stage`
 * (infra/context.ts) and the operator CLIs' `--stage` (tools/) both use these two functions, so a
 * name the synth accepts is one the CLIs accept, and both find the same stacks. The functions check
 * the stage they are given (CONTENT_SYNC_STAGE, functions/shared/config.ts) with stageProblem too.
 *
 * No imports: the CLIs and the functions load this without aws-cdk-lib.
 */

/** The stack names of the deployment without a stage; a stage's are these with `-<stage>`. */
export const DEFAULT_STACK_NAMES = {
  stateful: 'ContentSyncStateful',
  stateless: 'ContentSyncStateless',
} as const;

/** The stack names (CloudFormation) of one deployment. */
export interface StackNames {
  readonly stateful: string;
  readonly stateless: string;
}

/** 1 to 20 of `a-z 0-9 -`: short enough for every name derived from the stack names. */
export const STAGE_PATTERN = /^[a-z0-9-]{1,20}$/;

/** Why `stage` is not a stage name, or undefined when it is one. */
export function stageProblem(stage: string): string | undefined {
  if (STAGE_PATTERN.test(stage)) return undefined;
  return `must be 1 to 20 of a-z 0-9 - (it names the stacks ${stackNames('<stage>').stateful} and ${stackNames('<stage>').stateless}), got "${stage}"`;
}

/** The stacks of the deployment named `stage`; without one, DEFAULT_STACK_NAMES. */
export function stackNames(stage: string | undefined): StackNames {
  if (stage === undefined) return DEFAULT_STACK_NAMES;
  return { stateful: `${DEFAULT_STACK_NAMES.stateful}-${stage}`, stateless: `${DEFAULT_STACK_NAMES.stateless}-${stage}` };
}
