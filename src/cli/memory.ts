import { Command } from '@commander-js/extra-typings';
import { EXIT } from '../errors.js';
import { checkedFlagNumber } from '../flagNumber.js';
import { printProblems, printWarnings, useColor } from './common.js';
import { addEngineFlags } from './engineFlags.js';

/** The engine settings that shape a memory plan (the rest only shape the step loop). */
const MEMORY_ENGINE_FLAGS = [
  'gpu',
  'gpuSpec',
  'enginePersonality',
  'engineVersion',
  'tp',
  'dtype',
  'kvCacheDtype',
  'gpuMemoryUtilization',
  'memFractionStatic',
  'kvCacheFreeGpuMemFraction',
  'blockSize',
  'maxNumBatchedTokens',
  'maxNumSeqs',
];

export function memoryCommand(): Command {
  const command = new Command('memory')
    .description(
      'Analytic memory footprint of a served model: weights, KV cache, activations, overhead; the concurrency that fits at a context length (vLLM rule), where KV overtakes the weights, the smallest GPU that fits.',
    )
    .option(
      '--model <preset|config.json>',
      'model preset or Hugging Face config.json',
      'llama-3-8b',
    )
    .option(
      '--context <tokens>',
      "tokens per sequence, prompt + output (default: the model's context)",
    )
    .option('--batch <n>', 'sequences held at once at that context', '1')
    .option('--json', 'print the report as JSON')
    .action(async (o) => {
      process.exitCode = await memory(o);
    });
  return addEngineFlags(
    command as unknown as Command<[], Record<string, unknown>>,
    MEMORY_ENGINE_FLAGS,
  );
}

async function memory(o: Record<string, string | boolean | undefined>): Promise<number> {
  // Loaded when the command is chosen, so that other commands start without them.
  const [
    { memoryReport },
    { describeQuestion, renderMemory },
    { memoryQuestion },
    { engineFromFlags },
  ] = await Promise.all([
    import('../memory/report.js'),
    import('../report/memoryText.js'),
    import('../sim/engineModel.js'),
    import('../sim/options.js'),
  ]);
  const problems: string[] = [];
  const wholeNumber = (flag: string, value: string | boolean | undefined) =>
    checkedFlagNumber(
      value,
      { min: 1, integer: true },
      problems,
      `${flag} must be a whole number >= 1 (got "${String(value)}")`,
    );
  const batch = wholeNumber('--batch', o.batch) ?? 1;
  const context = wholeNumber('--context', o.context);
  const built = engineFromFlags(o.model as string, o);
  problems.push(...built.problems);
  if (problems.length > 0 || !built.engine) return printProblems('memory', problems);
  printWarnings('memory', built.warnings);
  const question = memoryQuestion(built.engine, {
    ...(context ? { contextTokens: context } : {}),
    batch,
    budgetGiven: o.maxNumBatchedTokens !== undefined || o.maxNumSeqs !== undefined,
  });
  const { model } = question;
  if (question.contextTokens > model.maxContext) {
    printWarnings('memory', [
      `--context ${question.contextTokens} is beyond ${model.name}'s trained context (${model.maxContext})`,
    ]);
  }
  const report = memoryReport(question);
  if (o.json) {
    process.stdout.write(
      `${JSON.stringify({ question: describeQuestion(question), ...report }, null, 2)}\n`,
    );
  } else {
    process.stdout.write(`${renderMemory(question, report, useColor(process.stdout))}\n`);
  }
  return EXIT.ok;
}
