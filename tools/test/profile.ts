/**
 * Where the test suite's time goes, file by file: each file runs alone, compiled as `npm test`
 * runs it (tools/test/suite.ts), and this prints its wall time, its CPU (its own process and
 * everything it started), the time it only waited (timers, paced servers), the command-line
 * and simulator processes it started and what they cost, the CPU of what is not Node
 * (llama-server, a compiler, a browser), the llama-server build and start, and its slowest
 * tests. Rerun it after a change to see what moved.
 *
 *   npm run test:profile [-- --top 20] [-- test/cli/cli.test.ts ...]
 *
 * Linux only (/proc/self/stat). Beside other work the CPU figures hold; the wall times do not.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { reapedChildrenCpuS } from '../../bench/processCpu.js';
import {
  BUILD,
  buildTests,
  compiledPath,
  REPO,
  readJsonLines,
  type TimingLine,
  testFiles,
} from './suite.js';

const { values, positionals } = parseArgs({
  options: { top: { type: 'string', default: '15' } },
  allowPositionals: true,
});
const top = Number(values.top);

const TRACE_HOOK = fileURLToPath(new URL('./trace-process.cjs', import.meta.url));
const REPORTER = fileURLToPath(new URL('./reporter.mjs', import.meta.url));

interface ProcessLine {
  pid: number;
  ppid: number;
  argv: string[];
  wallMs: number;
  cpuMs: number;
}
interface StepLine {
  step: string;
  wallMs: number;
}

interface FileProfile {
  file: string;
  passed: boolean;
  wallS: number;
  cpuS: number;
  cli: { count: number; cpuS: number };
  sims: { count: number; cpuS: number };
  nonNodeCpuS: number;
  steps: Map<string, { count: number; wallS: number }>;
  slowest: TimingLine[];
}

async function profileFile(file: string): Promise<FileProfile> {
  const dir = mkdtempSync(join(tmpdir(), 'ig-profile-'));
  const tracePath = join(dir, 'trace.jsonl');
  const timingsPath = join(dir, 'timings.jsonl');
  const cpuBefore = reapedChildrenCpuS();
  const started = performance.now();
  const runner = spawn(
    process.execPath,
    [
      '--enable-source-maps',
      '--test',
      `--test-reporter=${REPORTER}`,
      `--test-reporter-destination=${timingsPath}`,
      compiledPath(file),
    ],
    {
      cwd: REPO,
      env: {
        ...process.env,
        INFERGAUGE_TEST_TRACE: tracePath,
        NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require ${TRACE_HOOK}`.trim(),
      },
      stdio: 'ignore',
    },
  );
  await new Promise((resolve) => runner.once('close', resolve));
  const wallS = (performance.now() - started) / 1000;
  const cpuS = reapedChildrenCpuS() - cpuBefore;
  const trace = readJsonLines<ProcessLine & StepLine>(tracePath);
  const timings = readJsonLines<TimingLine>(timingsPath);
  rmSync(dir, { recursive: true, force: true });

  const processes = trace.filter((l) => l.pid !== undefined) as ProcessLine[];
  const cli = { count: 0, cpuS: 0 };
  const sims = { count: 0, cpuS: 0 };
  for (const p of processes) {
    const script = p.argv[0] ?? '';
    // The simulator runs as `sim` of the command line, or as the session's own child process.
    const simChild = /[/\\]session[/\\]simulatorChild\.[jt]s$/.test(script);
    if (!simChild && !/[/\\]cli[/\\]main\.[jt]s$/.test(script)) continue;
    const bucket = simChild || p.argv[1] === 'sim' ? sims : cli;
    bucket.count += 1;
    bucket.cpuS += p.cpuMs / 1000;
  }
  const nodeCpuS = processes.reduce((sum, p) => sum + p.cpuMs / 1000, 0);
  const steps = new Map<string, { count: number; wallS: number }>();
  for (const l of trace as StepLine[]) {
    if (l.step === undefined) continue;
    const s = steps.get(l.step) ?? { count: 0, wallS: 0 };
    s.count += 1;
    s.wallS += l.wallMs / 1000;
    steps.set(l.step, s);
  }
  return {
    file,
    passed: runner.exitCode === 0 && timings.every((t) => t.passed),
    wallS,
    cpuS,
    cli,
    sims,
    // Processes killed outright write no line; their CPU lands here too.
    nonNodeCpuS: Math.max(0, cpuS - nodeCpuS),
    steps,
    slowest: timings
      .filter((t) => t.kind === 'test')
      .sort((a, b) => b.durationS - a.durationS)
      .slice(0, 3),
  };
}

/** Median CPU seconds of starting the command line (`--version`) with these arguments. */
function startupCpuS(args: string[]): number {
  const samples = [0, 1, 2].map(() => {
    const before = reapedChildrenCpuS();
    execFileSync(process.execPath, [...args, '--version'], { cwd: REPO, stdio: 'ignore' });
    return reapedChildrenCpuS() - before;
  });
  return samples.sort((a, b) => a - b)[1];
}

const s = (x: number) => x.toFixed(1);

await buildTests();
const files = positionals.length > 0 ? positionals.map((f) => resolve(f)) : testFiles();
const profiles: FileProfile[] = [];
for (const [i, file] of files.entries()) {
  process.stderr.write(`[${i + 1}/${files.length}] ${relative(REPO, file)}\n`);
  profiles.push(await profileFile(file));
}

const total = (f: (p: FileProfile) => number) => profiles.reduce((sum, p) => sum + f(p), 0);
const rows = [...profiles].sort((a, b) => b.wallS - a.wallS).slice(0, top);
const lines = [
  `${files.length} files, one at a time: ${s(total((p) => p.wallS))} s wall, ${s(total((p) => p.cpuS))} s CPU, ${s(total((p) => Math.max(0, p.wallS - p.cpuS)))} s only waiting`,
  `command-line processes: ${total((p) => p.cli.count)} (${s(total((p) => p.cli.cpuS))} s CPU); simulator processes: ${total((p) => p.sims.count)} (${s(total((p) => p.sims.cpuS))} s CPU)`,
  `start-up of one command-line process: ${startupCpuS(['--import', 'tsx', join(REPO, 'src/cli/main.ts')]).toFixed(2)} s CPU through tsx, ${startupCpuS([join(BUILD, 'src/cli/main.js')]).toFixed(2)} s compiled`,
  '',
  `the ${rows.length} slowest files:`,
  '  wall s   CPU s  waits s  CLI n/CPU s  sims n/CPU s  non-Node CPU s  file',
];
for (const p of rows) {
  lines.push(
    `${s(p.wallS).padStart(8)}${s(p.cpuS).padStart(8)}${s(Math.max(0, p.wallS - p.cpuS)).padStart(9)}${`${p.cli.count}/${s(p.cli.cpuS)}`.padStart(13)}${`${p.sims.count}/${s(p.sims.cpuS)}`.padStart(14)}${s(p.nonNodeCpuS).padStart(16)}  ${relative(REPO, p.file)}${p.passed ? '' : '  (FAILED)'}`,
  );
  for (const [step, v] of p.steps)
    lines.push(`${''.padStart(61)}${step}: ${v.count} x, ${s(v.wallS)} s`);
  for (const t of p.slowest) lines.push(`${''.padStart(61)}${s(t.durationS)} s  ${t.name}`);
}
process.stdout.write(`${lines.join('\n')}\n`);
if (profiles.some((p) => !p.passed)) process.exitCode = 1;
