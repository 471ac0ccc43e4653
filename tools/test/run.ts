/**
 * `npm test`: the whole suite, side by side, with nothing less tested.
 *
 * 1. What takes minutes on a fresh machine (llama-server's build, Debian's chromium) starts
 *    first, in a background process at the lowest CPU priority (tools/test/prepare.ts): the
 *    test files run beside it, and those that need it wait for it.
 * 2. tsc compiles the tree once (incrementally) into .test-build/ (tools/test/suite.ts): the
 *    files run compiled, as users run dist/, without tsx's loader in every process.
 * 3. The files run side by side through node:test's run(), the slowest of the last run first.
 *    Files whose assertions are about time call runAlone() (test/helpers/alone.ts): they run
 *    after all the others, one at a time, this script passing the turn.
 * 4. At the end: the suite's wall time and its five slowest files. With --budget-s, the run
 *    fails when the suite took longer than that (plus llama-server's build, when it built one).
 *
 *   npm test [-- [--concurrency N] [--budget-s S] [--test-name-pattern P] [files...]]
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import {
  createWriteStream,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  writeFileSync,
} from 'node:fs';
import { setPriority } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { finished } from 'node:stream/promises';
import { run } from 'node:test';
import { spec } from 'node:test/reporters';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { procStat } from '../../bench/processCpu.js';
import type { Prepared } from './prepare.js';
import {
  buildTests,
  compiledPath,
  REPO,
  readJsonLines,
  sourcePath,
  type TimingLine,
  testFiles,
} from './suite.js';

/**
 * Files at once. Most of them wait on sockets, timers and the processes they start as much as
 * they compute, so four keep two cores busy; more only slow each other down.
 */
const DEFAULT_CONCURRENCY = 4;

const ARTIFACTS = join(REPO, 'test-artifacts');
const TIMINGS = join(ARTIFACTS, 'test-timings.jsonl');
/** Each file's last wall time, kept across runs (a run of a few files updates only those). */
const HISTORY = join(ARTIFACTS, 'test-durations.json');
/** Whose turn it is among the files that run alone (read by test/helpers/alone.ts). */
const TURN = join(ARTIFACTS, 'test-turn');
const REPORTER = fileURLToPath(new URL('./reporter.mjs', import.meta.url));

function usage(message: string): never {
  process.stderr.write(`npm test: ${message}\n`);
  process.exit(2);
}

const parsed = (() => {
  try {
    return parseArgs({
      options: {
        concurrency: { type: 'string', default: String(DEFAULT_CONCURRENCY) },
        'budget-s': { type: 'string' },
        'test-name-pattern': { type: 'string', multiple: true, default: [] },
      },
      allowPositionals: true,
    });
  } catch (err) {
    return usage(
      `${(err as Error).message}; usage: npm test -- [--concurrency N] [--budget-s S] [--test-name-pattern P] [files...]`,
    );
  }
})();
const concurrency = Number(parsed.values.concurrency);
if (!Number.isInteger(concurrency) || concurrency < 1) {
  usage('--concurrency must be a whole number of files at once, e.g. --concurrency 4');
}
const budgetS =
  parsed.values['budget-s'] === undefined ? undefined : Number(parsed.values['budget-s']);
if (budgetS !== undefined && !(budgetS > 0)) {
  usage('--budget-s must be a number of seconds, e.g. --budget-s 720');
}

interface TestFile {
  /** The test's source, test/.../x.test.ts. */
  source: string;
  /** Its compiled copy, which runs. */
  path: string;
  /** Starts llama-server (tools/llama/build, server) or Debian's chromium: prepare.ts. */
  needsLlamaServer: boolean;
  needsChromium: boolean;
  /** Calls runAlone(): runs after the others, one at a time. */
  alone: boolean;
}

function classify(source: string): TestFile {
  let text: string;
  try {
    text = readFileSync(source, 'utf8');
  } catch {
    usage(`${source}: no such test file`);
  }
  if (!source.endsWith('.test.ts')) usage(`${source}: not a test file (test/.../*.test.ts)`);
  return {
    source: realpathSync(source),
    path: compiledPath(realpathSync(source)),
    needsLlamaServer: /tools\/llama\/(build|server)\.js/.test(text),
    needsChromium: text.includes('helpers/browser'),
    alone: text.includes('await runAlone(import.meta.url)'),
  };
}

function readHistory(): Record<string, number> {
  try {
    return JSON.parse(readFileSync(HISTORY, 'utf8')) as Record<string, number>;
  } catch {
    return {};
  }
}

/**
 * The order files start in. First the others, by last wall time, longest first (a file never
 * timed goes by its folder: processes and servers before pure functions), so that no long file
 * starts last; then those that run alone, those that need nothing from prepare.ts first (the
 * rest may wait for its build).
 */
function ordered(files: TestFile[]): { others: TestFile[]; alone: TestFile[] } {
  const history = readHistory();
  const guessS = (f: TestFile) => (/[/\\]test[/\\]unit[/\\]/.test(f.source) ? 1 : 5);
  const lastS = (f: TestFile) => history[relative(REPO, f.source)] ?? guessS(f);
  const waits = (f: TestFile) => (f.needsLlamaServer || f.needsChromium ? 1 : 0);
  return {
    others: files.filter((f) => !f.alone).sort((a, b) => lastS(b) - lastS(a)),
    alone: files.filter((f) => f.alone).sort((a, b) => waits(a) - waits(b)),
  };
}

/** The processes below `pid` (Linux's /proc; none elsewhere), deepest first. */
function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  const entries = existsSync('/proc') ? readdirSync('/proc').filter((e) => /^\d+$/.test(e)) : [];
  for (const entry of entries) {
    const ppid = Number(procStat(Number(entry))?.[1]);
    children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
  }
  const below = (p: number): number[] => (children.get(p) ?? []).flatMap((c) => [...below(c), c]);
  return below(pid);
}

function startPrepare(
  files: TestFile[],
): { child: ChildProcess; result: Promise<Prepared | undefined> } | undefined {
  const flags = [
    ...(files.some((f) => f.needsLlamaServer) ? ['--llama-server'] : []),
    ...(files.some((f) => f.needsChromium) ? ['--chromium'] : []),
  ];
  if (flags.length === 0) return undefined;
  const script = fileURLToPath(new URL('./prepare.ts', import.meta.url));
  const command = [process.execPath, '--import', 'tsx', script, ...flags];
  // Behind the tests: SCHED_IDLE (chrt), inherited by the compilers it starts, runs only on a
  // core no test wants and gives way at once when a test wakes, so that a test timing
  // milliseconds does not wait for a compiler's time slice. Where chrt is missing, the lowest
  // nice value. In this process's session on purpose: Linux's autogroup schedules each session
  // as one, and nice or SCHED_IDLE would then count only inside a session of the build's own.
  const idle = spawnSync('chrt', ['--idle', '0', 'true']).status === 0;
  const child = spawn(
    idle ? 'chrt' : command[0],
    idle ? ['--idle', '0', ...command] : command.slice(1),
    {
      cwd: REPO,
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  if (!idle && child.pid !== undefined) setPriority(child.pid, 19);
  let stdout = '';
  child.stdout?.on('data', (d: Buffer) => {
    stdout += d.toString();
  });
  const result = new Promise<Prepared | undefined>((done) =>
    child.once('close', () => {
      try {
        done(JSON.parse(stdout.trim().split('\n').pop() ?? '') as Prepared);
      } catch {
        done(undefined);
      }
    }),
  );
  return { child, result };
}

/**
 * Runs the files through node:test's run(), which starts them in the order given (`node --test`
 * sorts them by name), with the spec reporter on stdout and the timing reporter into TIMINGS,
 * and gives the turn to the files that run alone, one after another, once every file before
 * them has finished. Resolves to the exit code `node --test` would give.
 */
async function runFiles(
  others: TestFile[],
  alone: TestFile[],
): Promise<{ code: number; turnAtMs: Map<string, number> }> {
  writeFileSync(TURN, '');
  // Each file's process gets this environment, and this process's flags: none of tsx's (the
  // files are compiled), but source maps, so that a failure's stack names the .ts lines.
  process.env.INFERGAUGE_TEST_TURN = TURN;
  process.execArgv.splice(0, process.execArgv.length, '--enable-source-maps');
  const patterns = parsed.values['test-name-pattern'];
  const stream = run({
    files: [...others, ...alone].map((f) => f.path),
    concurrency,
    ...(patterns.length > 0 ? { testNamePatterns: patterns } : {}),
  });
  const done = new Set<string>();
  const turnAtMs = new Map<string, number>();
  let next = 0;
  const passTurn = () => {
    const busy = [...others, ...alone.slice(0, next)].some((f) => !done.has(f.path));
    if (busy || next >= alone.length) return;
    const file = alone[next++].path;
    turnAtMs.set(file, Date.now());
    writeFileSync(TURN, file);
  };
  passTurn();
  stream.on('test:complete', (data) => {
    if (data.nesting !== 0 || data.name !== data.file || data.file === undefined) return;
    done.add(data.file);
    passTurn();
  });
  let failed = false;
  stream.on('test:diagnostic', (data) => {
    // The summary's own lines (no file): what node --test's exit code is made of.
    if (data.file === undefined && /^(fail|cancelled) [1-9]/.test(data.message)) failed = true;
  });
  const timings = (await import(pathToFileURL(REPORTER).href)) as {
    default: (source: AsyncIterable<unknown>) => AsyncGenerator<string>;
  };
  const specOut = stream.compose(new spec());
  specOut.pipe(process.stdout, { end: false });
  await Promise.all([
    finished(specOut),
    finished(stream.compose(timings.default).pipe(createWriteStream(TIMINGS))),
  ]);
  return { code: failed ? 1 : 0, turnAtMs };
}

const startedMs = Date.now();
mkdirSync(ARTIFACTS, { recursive: true });
const files = (
  parsed.positionals.length > 0 ? parsed.positionals.map((f) => resolve(f)) : testFiles()
).map(classify);
const prepare = startPrepare(files);
const { others, alone } = ordered(files);
let code: number;
let turnAtMs = new Map<string, number>();
try {
  await buildTests();
  ({ code, turnAtMs } = await runFiles(others, alone));
} catch (err) {
  process.stderr.write(`${(err as Error).message}\n`);
  code = 1;
}
if (prepare && prepare.child.exitCode === null && prepare.child.pid !== undefined) {
  // Only when the files that needed it stopped early: its work (and its compilers') is of no
  // use now.
  for (const pid of [...descendants(prepare.child.pid), prepare.child.pid]) {
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      // gone already
    }
  }
}
const prepared = await prepare?.result;
const wallS = (Date.now() - startedMs) / 1000;

// A file that ran alone is timed from its turn: before that it only waited.
const timings = readJsonLines<TimingLine>(TIMINGS)
  .filter((t) => t.kind === 'file')
  .map((t) => {
    const turn = turnAtMs.get(t.file);
    return turn === undefined ? t : { ...t, durationS: (t.endedAtMs - turn) / 1000 };
  });
const history = readHistory();
for (const t of timings)
  history[relative(REPO, sourcePath(t.file))] = Math.round(t.durationS * 10) / 10;
writeFileSync(HISTORY, `${JSON.stringify(history, null, 2)}\n`);

const builtS = prepared?.llamaServer?.builtS;
const lines = [
  '',
  ...(prepared?.llamaServer?.error
    ? [`llama-server could not be built: ${prepared.llamaServer.error}`]
    : []),
  ...(prepared?.chromium?.error
    ? [`chromium could not be installed: ${prepared.chromium.error}`]
    : []),
  `test suite: ${wallS.toFixed(0)} s wall, ${files.length} files (${alone.length} alone, at the end), ${concurrency} at a time${builtS === undefined ? '' : `; llama-server built beside them in ${builtS.toFixed(0)} s`}`,
  'slowest files (start to end, beside the others; those alone from their turn):',
  ...timings
    .sort((a, b) => b.durationS - a.durationS)
    .slice(0, 5)
    .map((t) => `  ${t.durationS.toFixed(1).padStart(6)} s  ${relative(REPO, sourcePath(t.file))}`),
];
if (budgetS !== undefined) {
  const limitS = budgetS + (builtS ?? 0);
  const within = wallS <= limitS;
  lines.push(
    `time budget: ${within ? 'within' : 'OVER'} ${limitS.toFixed(0)} s (${budgetS} s${builtS === undefined ? '' : ' + the build'})`,
  );
  if (!within && code === 0) code = 1;
}
process.stdout.write(`${lines.join('\n')}\n`);
process.exitCode = code;
