import { writeFileSync } from 'node:fs';
import { Command } from '@commander-js/extra-typings';
import { EXIT } from '../errors.js';
import type { FitKey } from '../sim/calibrationFile.js';
import { printProblems, printWarnings, runAction } from './common.js';
import { addEngineFlags } from './engineFlags.js';

export function calibrateCommand(): Command {
  const command = new Command('calibrate')
    .description(
      "Fit the simulator to one server's measured runs (run, sweep and probe directories): each run is replayed in virtual time with its own requests and load, and the efficiencies and overheads fitted to its median TTFT, TPOT and throughput. Writes calibration.json for --calibration on sim, run --simulate, sweep --simulate, capacity and probe; prints each run's error, in the fit and predicted from the others.",
    )
    .argument('[dirs...]', 'results directories of one server (runs, sweeps, probes)')
    .option('--model <preset|config.json>', "the served model (default: the runs' simulator's)")
    .option(
      '--fit <list>',
      'parameters to fit (default: all): mbu, mfu or mfu-8bit, step-overhead-ms, per-seq-overhead-us, frontend-latency-ms; one given as a flag is held at its value',
    )
    .option(
      '--steps <dir>',
      "a step probe of the same server (`probe prefill --batches 1 --min-input 1 --max-input 511`) whose responses report the server's prompt time (llama-server, Ollama): its measured step times replace the roofline's at the sizes it spans, and its front end (TTFT less that time) is held; not a fit point (repeatable)",
      (dir: string, dirs: string[]) => [...dirs, dir],
      [] as string[],
    )
    .option(
      '--hold-unidentified',
      "hold a parameter the runs cannot identify at the engine's value (with a warning) instead of refusing",
    )
    .option('--max-requests <n>', 'requests of each run replayed, the first sent (default: 500)')
    .option('--out <file>', 'where to write the calibration (default: calibration.json)')
    .option('--json', 'print calibration.json to stdout instead of the tables')
    .option('--suggest', 'print the measurements to take (with --url), and nothing else')
    .option('--url <url>', 'with --suggest: the server to measure');
  addEngineFlags(command as unknown as Command<[], Record<string, unknown>>, undefined, [
    'calibration',
  ]);
  command.action((dirs, options) =>
    runAction('calibrate', () => calibrateAction(dirs, options as CalibrateFlags)),
  );
  return command as unknown as Command;
}

type CalibrateFlags = Record<string, unknown> & {
  fit?: string;
  steps?: string[];
  holdUnidentified?: boolean;
  maxRequests?: string;
  out?: string;
  json?: boolean;
  suggest?: boolean;
  url?: string;
};

async function calibrateAction(dirs: string[], o: CalibrateFlags): Promise<number> {
  const [
    { calibrate },
    { CalibrationRefused },
    { fitFlag },
    { renderCalibration, calibrationPlan },
    { calibrateProgressOutput },
  ] = await Promise.all([
    import('../session/calibrate.js'),
    import('../sim/calibrate.js'),
    import('../sim/calibrationFile.js'),
    import('../report/calibrationText.js'),
    import('../session/calibrateProgress.js'),
  ]);
  if (o.suggest) {
    process.stdout.write(`${calibrationPlan(o.url)}\n`);
    return EXIT.ok;
  }
  if (dirs.length === 0) {
    return printProblems('calibrate', [
      'give the results directories of the runs to fit (or --suggest for what to measure)',
    ]);
  }
  let result: Awaited<ReturnType<typeof calibrate>>;
  const progress = calibrateProgressOutput({
    redraw: process.stderr.isTTY === true,
    write: (text) => process.stderr.write(text),
  });
  try {
    result = await calibrate(dirs, {
      flags: o,
      ...(o.fit !== undefined ? { fit: o.fit } : {}),
      ...(o.maxRequests !== undefined ? { maxRequests: o.maxRequests } : {}),
      ...(o.steps?.length ? { steps: o.steps } : {}),
      ...(o.holdUnidentified ? { holdUnidentified: true } : {}),
      onProgress: progress.report,
    });
  } catch (err) {
    if (err instanceof CalibrationRefused) {
      return printProblems('calibrate', err.problems, 'cannot calibrate');
    }
    throw err;
  } finally {
    progress.end();
  }
  printWarnings('calibrate', result.warnings);
  const out = o.out ?? 'calibration.json';
  const text = `${JSON.stringify(result.file, null, 2)}\n`;
  writeFileSync(out, text);
  if (o.json) process.stdout.write(text);
  else {
    const engine =
      result.engineFrom === 'manifests'
        ? `${result.engine} (as the runs' manifests recorded it)`
        : result.engine;
    process.stdout.write(
      renderCalibration(result.file, engine, result.wallS, (k) => fitFlag(k as FitKey)),
    );
    process.stdout.write(
      `Wrote ${out}: use it with --calibration ${out} on sim, run --simulate, sweep --simulate, capacity and probe.\n`,
    );
  }
  return EXIT.ok;
}
