import { Command } from '@commander-js/extra-typings';
import { EXIT } from '../errors.js';
import { type RunPlan, redactPlan } from '../plan/runPlan.js';
import { prepareRun } from '../session/prepare.js';
import type { PreparedRun } from '../session/target.js';
import { describeEngine } from '../sim/describe.js';
import { formatLengthDistribution } from '../workload/distributions.js';
import { describeScenario } from '../workload/scenarios.js';
import { printProblems, printWarnings, runAction } from './common.js';
import { addRunOptions, withPlanFile } from './run.js';

/**
 * `infergauge plan --print`: what `run` would do with these options and plan file, without
 * sending anything; `--schema` prints the plan file's JSON schema.
 */
export function planCommand(): Command {
  const command = addRunOptions(
    new Command('plan').description(
      "Show the effective plan of a run (plan file and flags merged, defaults filled in) without running it; or the plan file's JSON schema.",
    ),
  )
    .option('--print', 'print the effective plan as YAML (the default)')
    .option('--schema', "print the plan file's JSON schema");
  return command.action((options, cmd) =>
    runAction('plan', async () => {
      const o = options as Record<string, unknown>;
      if (o.schema) {
        const { planJsonSchema } = await import('../plan/planFile.js');
        process.stdout.write(`${JSON.stringify(planJsonSchema(), null, 2)}\n`);
        return EXIT.ok;
      }
      const { print: _print, schema: _schema, ...runOptions } = o;
      const merged = await withPlanFile(runOptions, cmd, 'plan');
      if (!merged) return EXIT.invalidOptions;
      const prepared = prepareRun(merged);
      if (prepared.problems.length > 0 || !prepared.plan) {
        return printProblems('plan', prepared.problems);
      }
      printWarnings('plan', prepared.warnings);
      // YAML is loaded only here, so that other commands start without it.
      const { stringify } = await import('yaml');
      process.stdout.write(stringify(effectivePlan(prepared, prepared.plan)));
      return EXIT.ok;
    }),
  );
}

/** The plan as `run` would carry it out, secrets redacted, each scenario spelled out. */
function effectivePlan(prepared: PreparedRun, runPlan: RunPlan) {
  const plan = redactPlan(runPlan);
  return {
    ...plan,
    scenarios: plan.scenarios.map((s) => ({
      name: s.name,
      'input-tokens': formatLengthDistribution(s.input),
      'output-tokens': formatLengthDistribution(s.output),
      ...(s.sharedPrefixTokens ? { 'shared-prefix': s.sharedPrefixTokens } : {}),
      summary: describeScenario(s),
    })),
    server:
      plan.url !== undefined
        ? plan.url
        : {
            builtInSimulator: prepared.engine ? describeEngine(prepared.engine) : 'default',
            mode: prepared.simulate ? 'virtual time (--simulate)' : 'real time',
            ...(prepared.timeScale !== undefined ? { timeScale: prepared.timeScale } : {}),
          },
  };
}
