import { PlanError, parseRunPlan, type RunPlanInput } from '../../src/plan/runPlan.js';

/** The problems parseRunPlan names for `input` (none when it reads). */
export function planProblems(input: RunPlanInput): string[] {
  try {
    parseRunPlan(input);
  } catch (err) {
    if (err instanceof PlanError) return err.problems;
    throw err;
  }
  return [];
}
