import { Command } from '@commander-js/extra-typings';
import { SECRET_NAME } from '../backends/request.js';
import { EXIT } from '../errors.js';
import { planFileOf } from '../plan/printPlan.js';
import { type RunPlan, redactPlan } from '../plan/runPlan.js';
import { prepareRun } from '../session/prepare.js';
import type { PreparedRun } from '../session/target.js';
import { describeEngine } from '../sim/describe.js';
import { describeScenario } from '../workload/scenarios.js';
import { printNotice, printProblems, printWarnings, runAction } from './common.js';
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
      for (const n of prepared.notices) printNotice('plan', n);
      // commander's own defaults (html true from --no-html) are not the user's: run fills them.
      const chosen = Object.fromEntries(
        Object.entries(merged).filter(
          ([k, v]) => !(cmd.getOptionValueSource(k) === 'default' && runOptions[k] === v),
        ),
      );
      const file = planFileOf(chosen, redactPlan(prepared.plan));
      // YAML is loaded only here, so that other commands start without it.
      const { Document } = await import('yaml');
      const doc = new Document(file);
      doc.commentBefore = planComment(prepared, prepared.plan)
        .map((line) => ` ${line}`)
        .join('\n');
      process.stdout.write(doc.toString({ lineWidth: 0 }));
      return EXIT.ok;
    }),
  );
}

/** What the plan file alone does not say: the server it runs against, each scenario in words. */
function planComment(prepared: PreparedRun, plan: RunPlan): string[] {
  const server =
    plan.url !== undefined
      ? redactPlan(plan).url
      : `the built-in simulator, ${prepared.engine ? describeEngine(prepared.engine) : 'default'}, in ${prepared.simulate ? 'virtual time (--simulate)' : 'real time'}${prepared.timeScale !== undefined ? ` at --time-scale ${prepared.timeScale}` : ''}`;
  return [
    'infergauge plan: run it with infergauge run --plan FILE',
    `server: ${server}`,
    ...Object.keys(plan.headers)
      .filter((k) => SECRET_NAME.test(k))
      .map(
        (k) =>
          `header ${k} left out (a secret): give it with --header, or a key with --api-key-env`,
      ),
    ...(typeof plan.proxy === 'string' && plan.proxy.includes('@')
      ? ['proxy credentials left out (a secret): give them with --proxy or in HTTPS_PROXY']
      : []),
    ...plan.scenarios.map((s) => `scenario ${describeScenario(s)}`),
  ].map((line) => line.replace(/[\p{Cc}]/gu, ' '));
}
