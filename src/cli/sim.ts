import { Command } from '@commander-js/extra-typings';
import { renderPresets } from '../report/presetsText.js';
import { simulatorOptionsFromFlags } from '../sim/simulatorOptions.js';
import { printWarnings } from './common.js';
import { addEngineFlags, addSimFlags } from './engineFlags.js';

export function simCommand(): Command {
  const command = new Command('sim')
    .description(
      'Run the built-in simulated OpenAI-compatible server: a vLLM-like engine on a modelled GPU (ground truth at GET /debug/truth, Prometheus at GET /metrics).',
    )
    .option('--list', 'list model and GPU presets and exit');
  addSimFlags(command as unknown as Command<[], Record<string, unknown>>, { port: 8000 });
  addEngineFlags(command as unknown as Command<[], Record<string, unknown>>);
  return command.action(async (flags) => {
    const o = flags as Record<string, unknown>;
    if (o.list) {
      process.stdout.write(`${renderPresets()}\n`);
      return;
    }
    const fail = (message: string) => {
      process.stderr.write(`infergauge sim: ${message}\n`);
      process.exitCode = 2;
    };
    // The one reading of the flags, shared with the simulator that `infergauge run` starts.
    const { options, problems } = simulatorOptionsFromFlags(o);
    if (problems.length > 0) return fail(`invalid options\n  - ${problems.join('\n  - ')}`);
    // Loaded when the command is chosen, so that other commands start without it.
    const { startSimulator } = await import('../sim/simulator.js');
    let sim: Awaited<ReturnType<typeof startSimulator>>;
    try {
      sim = await startSimulator(options);
    } catch (err) {
      return fail((err as Error).message);
    }
    printWarnings('sim', sim.warnings);
    const stop = () => {
      void sim.stop().then(() => process.exit(0));
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
    process.stdout.write(`infergauge sim: serving ${sim.model} at ${sim.url}: ${sim.banner}\n`);
  });
}
