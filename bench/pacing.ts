/**
 * Open-loop pacing at thousands of requests a second (issue 51): infergauge's CLI sends constant
 * arrivals (32 tokens in, 8 out) to the fake OpenAI server (bench/fake-server/, C, one thread)
 * pinned to one core, the client pinned to another, and reports per rate what the run's own
 * summary measured:
 *
 * - schedule lag p50 / p99 / max: sentAt - scheduledAt over the records (summary
 *   latency.queueDelayMs: the backlog before the pool, the pool wait and any connection set-up);
 * - send slip p99: how late the pacer itself woke for an arrival (clientHealth.sendSlipMs);
 * - achieved send rate (clientHealth.achievedRatePerS, from the records' sentAt);
 * - client CPU per request: the process's CPU (all threads) over the load, over the requests
 *   sent, in µs; event-loop delay p99; the client-health verdict.
 *
 * Each point runs `--repeats` times (repeats outermost, so a slow drift of the machine spreads
 * over every point); the table gives the median and the range.
 *
 * The first --warmup-s seconds of arrivals are `--warmup` requests, outside the figures: the
 * first ~100 ms of a process run its code cold (interpreted, then compiled) and open its first
 * connections, and at these rates that start alone is over 1 % of a few seconds' arrivals.
 *
 *   npm run bench:pacing -- [--rates 1000,3000,5000] [--duration-s 3] [--warmup-s 1] [--repeats 3]
 *     [--workers 1,0] [--cli dist/cli/main.js] [--pin-server 0] [--pin-client 1] [--out DIR]
 *
 * `--cli` runs another build (a worktree at another commit) for paired comparisons.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { prepareHarness, startFakeServer } from './fake-server/fakeServer.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const MODEL = 'fake-model';

interface Options {
  rates: number[];
  durationS: number;
  /** Seconds of arrivals sent as `--warmup` before the measured ones (the start's transient). */
  warmupS: number;
  repeats: number;
  workers: string[];
  cli: string;
  pinServer: string | undefined;
  pinClient: string | undefined;
  out: string;
}

function usage(message: string): never {
  process.stderr.write(`pacing: ${message}\n`);
  process.exit(2);
}

function parseOptions(): Options {
  const { values } = parseArgs({
    options: {
      rates: { type: 'string', default: '1000,3000,5000' },
      'duration-s': { type: 'string', default: '3' },
      'warmup-s': { type: 'string', default: '1' },
      repeats: { type: 'string', default: '3' },
      workers: { type: 'string', default: '1,0' },
      cli: { type: 'string', default: join(ROOT, 'dist/cli/main.js') },
      'pin-server': { type: 'string', default: '0' },
      'pin-client': { type: 'string', default: '1' },
      out: { type: 'string' },
    },
    strict: true,
  });
  const positive = (name: string, text: string) => {
    const n = Number(text);
    if (!Number.isFinite(n) || n <= 0) usage(`${name}: expected a positive number, got "${text}"`);
    return n;
  };
  const pin = (text: string) => (text === 'none' ? undefined : text);
  return {
    rates: values.rates.split(',').map((r) => positive('--rates', r)),
    durationS: positive('--duration-s', values['duration-s']),
    warmupS: Number(values['warmup-s']),
    repeats: Math.round(positive('--repeats', values.repeats)),
    workers: values.workers.split(',').map((w) => w.trim()),
    cli: resolve(values.cli),
    pinServer: pin(values['pin-server']),
    pinClient: pin(values['pin-client']),
    out:
      values.out ?? join(ROOT, '.bench-out/pacing', new Date().toISOString().replace(/[:.]/g, '-')),
  };
}

/** One run's figures. */
interface Row {
  rate: number;
  workers: string;
  repeat: number;
  requests: number;
  failed: number;
  lagP50Ms: number;
  lagP99Ms: number;
  lagMaxMs: number;
  slipP99Ms: number;
  achievedRatePerS: number;
  cpuUsPerRequest: number;
  loopDelayP99Ms: number;
  verdict: string;
}

async function runOnce(
  rate: number,
  workers: string,
  repeat: number,
  binary: string,
  options: Options,
): Promise<Row> {
  const dir = join(options.out, `r${rate}-w${workers}-${repeat + 1}`);
  mkdirSync(dir, { recursive: true });
  const server = await startFakeServer({
    binary,
    ttftMs: 0,
    itlMs: 0,
    tokensPerEvent: 1,
    model: MODEL,
    statsPath: join(dir, 'server-stats.bin'),
    cpus: options.pinServer,
  });
  const argv = [
    options.cli,
    'run',
    '--url',
    `http://127.0.0.1:${server.port}`,
    '--endpoint',
    'completions',
    '--model',
    MODEL,
    '--input-tokens',
    '32',
    '--output-tokens',
    '8',
    '--ignore-eos',
    '--rate',
    String(rate),
    '--arrival',
    'constant',
    '--duration',
    String(options.durationS),
    '--warmup',
    String(Math.round(rate * options.warmupS)),
    '--out',
    dir,
    '--no-server-metrics',
    '--no-html',
    '--json',
    ...(workers === 'default' ? [] : ['--workers', workers]),
  ];
  const command = options.pinClient
    ? ['taskset', ['-c', options.pinClient, process.execPath, ...argv]]
    : [process.execPath, argv];
  const run = spawnSync(command[0] as string, command[1] as string[], {
    encoding: 'utf8',
    maxBuffer: 1 << 28,
  });
  await server.stop();
  writeFileSync(join(dir, 'client.log'), `${run.stdout}\n${run.stderr}`);
  if (run.status !== 0) {
    throw new Error(`client exited ${run.status}: ${run.stderr.trim().split('\n').slice(-3)}`);
  }
  const s = JSON.parse(readFileSync(join(dir, 'summary.json'), 'utf8'));
  const h = s.clientHealth;
  const lag = s.latency.queueDelayMs;
  // The CPU is over the whole load, warm-up included: so is the count it is shared by.
  const sent = s.requests.completed + s.requests.failed + s.requests.warmup;
  // userS + systemS are the whole process (main thread and workers) over the load.
  const cpuS = h.cpu.userS + h.cpu.systemS;
  return {
    rate,
    workers,
    repeat,
    requests: sent,
    failed: s.requests.failed,
    lagP50Ms: lag.p50,
    lagP99Ms: lag.p99,
    lagMaxMs: lag.max,
    slipP99Ms: h.sendSlipMs?.p99 ?? Number.NaN,
    achievedRatePerS: h.achievedRatePerS ?? Number.NaN,
    cpuUsPerRequest: (cpuS / sent) * 1e6,
    loopDelayP99Ms: h.eventLoopDelayMs.p99,
    verdict: h.clientLimited
      ? `client-limited: ${(h.causes ?? h.reasons).join('; ')}`
      : h.nearLimit
        ? 'ok (near a limit)'
        : 'ok',
  };
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** "median (min-max)" at `digits`. */
function spread(values: number[], digits: number): string {
  const f = (v: number) => v.toFixed(digits);
  if (values.length === 1) return f(values[0]);
  return `${f(median(values))} (${f(Math.min(...values))}-${f(Math.max(...values))})`;
}

function report(rows: Row[], options: Options): string {
  const header = [
    'rate/s',
    'workers',
    'lag p50 ms',
    'lag p99 ms',
    'lag max ms',
    'slip p99 ms',
    'achieved/s',
    'CPU us/req',
    'loop p99 ms',
    'verdicts',
  ];
  const lines = [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`];
  for (const rate of options.rates) {
    for (const workers of options.workers) {
      const runs = rows.filter((r) => r.rate === rate && r.workers === workers);
      if (runs.length === 0) continue;
      const pick = (f: (r: Row) => number, digits: number) => spread(runs.map(f), digits);
      const verdicts = [...new Set(runs.map((r) => r.verdict))]
        .map((v) => `${runs.filter((r) => r.verdict === v).length}x ${v}`)
        .join('; ');
      lines.push(
        `| ${[
          rate,
          workers,
          pick((r) => r.lagP50Ms, 2),
          pick((r) => r.lagP99Ms, 2),
          pick((r) => r.lagMaxMs, 1),
          pick((r) => r.slipP99Ms, 2),
          pick((r) => r.achievedRatePerS, 0),
          pick((r) => r.cpuUsPerRequest, 0),
          pick((r) => r.loopDelayP99Ms, 2),
          verdicts,
        ].join(' | ')} |`,
      );
    }
  }
  return lines.join('\n');
}

async function main(): Promise<void> {
  const options = parseOptions();
  if (!existsSync(options.cli)) usage(`${options.cli} is missing: run \`npm run -s build\` first`);
  const binary = prepareHarness(options.pinServer, usage);
  mkdirSync(options.out, { recursive: true });
  const rows: Row[] = [];
  for (let repeat = 0; repeat < options.repeats; repeat++) {
    for (const rate of options.rates) {
      for (const workers of options.workers) {
        const row = await runOnce(rate, workers, repeat, binary, options);
        rows.push(row);
        process.stderr.write(
          `${rate}/s workers ${workers} #${repeat + 1}: lag p99 ${row.lagP99Ms.toFixed(2)} ms, ${row.achievedRatePerS.toFixed(0)}/s, ${row.cpuUsPerRequest.toFixed(0)} us/req, ${row.verdict}\n`,
        );
      }
    }
  }
  writeFileSync(
    join(options.out, 'pacing.json'),
    `${JSON.stringify({ options, rows }, null, 2)}\n`,
  );
  process.stdout.write(
    `${report(rows, options)}\n\nraw runs: ${join(options.out, 'pacing.json')}\n`,
  );
}

await main();
