/**
 * Client overhead and timing error of the real engine against the built-in simulator.
 *
 * The simulator runs in a child process (spawnSimulator) so that the client has its own event
 * loop and core, as in `infergauge run`. For each ITL, tokens-per-event, worker count and
 * closed-loop concurrency, the engine's worker threads (as `infergauge run --workers N`) send a
 * fixed number of requests; the row reports what the client achieved, what it cost in CPU, and
 * how far its TTFT, TPOT and ITL are from the simulator's ground truth (/debug/truth).
 * `--pin-server 0 --pin-client 1-3` pins the processes with taskset, so the figures are the
 * client's own cores'.
 *
 *   node --import tsx bench/client-overhead.ts [--levels 1,4,16] [--itl-ms 0,1] [--seconds 3]
 *     [--workers 1,2] [--tokens-per-event 1,8] [--pin-server 0 --pin-client 1]
 *     [--requests N] [--output-tokens 256] [--input-tokens 16]
 */
import { execFileSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { BACKENDS } from '../src/backends/index.js';
import { createRunClock } from '../src/loadgen/clock.js';
import { type LoadgenResult, runLoadgen } from '../src/loadgen/run.js';
import { wholeRun } from '../src/loadgen/shard.js';
import { runWorkers, type WorkerJob } from '../src/loadgen/workers.js';
import { percentileOfSorted } from '../src/metrics/distribution.js';
import type { RequestRecord } from '../src/record.js';
import { type SimulatorProcess, spawnSimulator } from '../src/session/simulator.js';
import type { TruthRecord } from '../src/sim/server.js';
import { fetchTruthTimeline, resetTruth } from '../src/sim/truth.js';
import { loadWorkload } from '../src/workload/workload.js';

const MODEL = 'sim-llama-3-8b';

/**
 * Rough rates used only to size each level so it lasts about `--seconds`; measured on a 2-core
 * machine with the simulator on the other core. A wrong guess changes the duration, not the
 * numbers reported.
 */
const SIM_EVENTS_PER_S = 120_000;
/** With --itl-ms 0 one stream alone is paced by the simulator's setImmediate chain. */
const ZERO_ITL_STREAM_EVENTS_PER_S = 80_000;

/**
 * Client token gaps below this, where the server's gap was at least MERGED_TRUTH_GAP_US, mean the
 * two events reached the client together (most likely in one socket read) and were timestamped as
 * one, a check of the engine's own coalesced-event counter.
 */
const MERGED_CLIENT_GAP_US = 50;
const MERGED_TRUTH_GAP_US = 200;

interface Options {
  levels: number[];
  itlMs: number[];
  workers: number[];
  tokensPerEvent: number[];
  pinServer: string | undefined;
  pinClient: string | undefined;
  seconds: number;
  requests: number | undefined;
  outputTokens: number;
  inputTokens: number;
}

function parseOptions(): Options {
  const { values } = parseArgs({
    options: {
      levels: { type: 'string', default: '1,4,16,64,256,1024' },
      'itl-ms': { type: 'string', default: '0,1' },
      workers: { type: 'string', default: '1' },
      'tokens-per-event': { type: 'string', default: '1' },
      'pin-server': { type: 'string' },
      'pin-client': { type: 'string' },
      seconds: { type: 'string', default: '3' },
      requests: { type: 'string' },
      'output-tokens': { type: 'string', default: '256' },
      'input-tokens': { type: 'string', default: '16' },
    },
    strict: true,
  });
  return {
    levels: values.levels.split(',').map((part) => numberArg('--levels', part, 1, true)),
    itlMs: values['itl-ms'].split(',').map((part) => numberArg('--itl-ms', part, 0, false)),
    workers: values.workers.split(',').map((part) => numberArg('--workers', part, 0, true)),
    tokensPerEvent: values['tokens-per-event']
      .split(',')
      .map((part) => numberArg('--tokens-per-event', part, 1, true)),
    pinServer: values['pin-server'],
    pinClient: values['pin-client'],
    seconds: numberArg('--seconds', values.seconds, 0.1, false),
    requests:
      values.requests === undefined ? undefined : numberArg('--requests', values.requests, 1, true),
    outputTokens: numberArg('--output-tokens', values['output-tokens'], 2, true),
    inputTokens: numberArg('--input-tokens', values['input-tokens'], 1, true),
  };
}

function numberArg(name: string, text: string, min: number, integer: boolean): number {
  const n = Number(text.trim());
  if (!Number.isFinite(n) || n < min || (integer && !Number.isInteger(n))) {
    throw new Error(
      `${name}: expected ${integer ? 'an integer' : 'a number'} >= ${min}, got "${text}"`,
    );
  }
  return n;
}

/** Requests that keep a level busy for about `seconds` at the rate it can reach. */
function requestsFor(
  options: Options,
  concurrency: number,
  itlMs: number,
  tokensPerEvent: number,
): number {
  if (options.requests !== undefined) return options.requests;
  const streamRate = itlMs > 0 ? 1000 / (itlMs * tokensPerEvent) : ZERO_ITL_STREAM_EVENTS_PER_S;
  const eventsPerS = Math.min(concurrency * streamRate, SIM_EVENTS_PER_S);
  const eventsPerRequest = Math.ceil(options.outputTokens / tokensPerEvent) + 1;
  const estimated = Math.ceil((options.seconds * eventsPerS) / eventsPerRequest);
  // At least every virtual user twice over, so the level is more than its own ramp-up; at least
  // 20 requests so a mean means something.
  return Math.max(estimated, concurrency * 2, 20);
}

function job(url: string, options: Options): Omit<WorkerJob, 'part'> {
  const fixed = (value: number) => ({ kind: 'fixed' as const, value });
  return {
    target: {
      backend: 'openai',
      baseUrl: url,
      endpoint: 'completions',
      model: MODEL,
      temperature: 0,
      ignoreEos: false,
      continuousUsageStats: false,
      headers: {},
      // Generous: at high concurrency with zero ITL a request waits its turn on the sim's core.
      timeoutMs: 300_000,
    },
    seed: 7,
    workload: {
      scenario: {
        name: 'bench',
        input: fixed(options.inputTokens),
        output: fixed(options.outputTokens),
      },
      tokenizer: 'words',
      tokenizerOptions: { builtInSimulator: true },
      seed: 7,
      promptSalt: 0,
      promptOverheadTokens: 0,
    },
    summaryContext: { load: { mode: 'closed', concurrency: 1 } },
  };
}

interface LevelRun {
  records: RequestRecord[];
  results: LoadgenResult[];
  /** The run clock's 0 on process.hrtime's clock, ms. */
  originHrMs: number;
}

/** One level on `workers` threads, as `infergauge run --workers` runs it. */
async function runLevel(
  url: string,
  concurrency: number,
  requests: number,
  workers: number,
  options: Options,
): Promise<LevelRun> {
  const records: RequestRecord[] = [];
  const part = { ...wholeRun({ mode: 'closed', concurrency }, 0, requests), measureFromId: 0 };
  if (workers === 0) {
    // In this thread, as the engine ran before worker threads: the workers' own cost shows.
    const j = job(url, options);
    const clock = createRunClock();
    const result = await runLoadgen({
      clock,
      target: { ...j.target, backend: BACKENDS[j.target.backend] },
      load: part.load,
      ids: part,
      warmupRequests: 0,
      seed: j.seed,
      ...(await loadWorkload(j.workload)),
      onRecord: (record) => records.push(record),
    });
    return { records, results: [result], originHrMs: Number(clock.originHrNs) / 1e6 };
  }
  let originHrMs = 0;
  const { results } = await runWorkers({
    workers: Math.min(workers, concurrency),
    // No warm-up phase: it would share the CPU and wall readings with the measured requests.
    part,
    job: job(url, options),
    clockFor: () => {
      const clock = createRunClock({ startInMs: 20 });
      originHrMs = Number(clock.originHrNs) / 1e6;
      return { clock, startAtUs: 0 };
    },
    onRecords: (text) => {
      for (const line of text.split('\n')) if (line) records.push(JSON.parse(line));
    },
    progress: { sent: 0, finished: 0, failed: 0, inFlight: 0 },
  });
  return { records, results, originHrMs };
}

interface Row {
  itlMs: number;
  tokensPerEvent: number;
  workers: number;
  concurrency: number;
  requests: number;
  failed: number;
  wallS: number;
  eventsPerS: number;
  tokensPerS: number;
  cpuShare: number;
  cpuUsPerEvent: number;
  loopP99Ms: number;
  coalescedShare: number;
  mergedShare: number;
  matched: number;
  ttftErrMeanUs: number;
  ttftErrP99Us: number;
  ttftErrP99LaterUs: number;
  tpotErrMeanUs: number;
  tpotErrP99Us: number;
  itlP99ClientMs: number;
  itlP99TruthMs: number;
  sendLagMeanUs: number;
  stampLagMeanUs: number;
  stampLagP99Us: number;
}

function mean(values: number[]): number {
  let sum = 0;
  for (const v of values) sum += v;
  return values.length > 0 ? sum / values.length : Number.NaN;
}

function p99(values: number[]): number {
  return percentileOfSorted(Float64Array.from(values).sort(), 99);
}

function measure(
  setting: { itlMs: number; tokensPerEvent: number; workers: number; concurrency: number },
  run: LevelRun,
  timeline: { requests: TruthRecord[]; originHrMs: number },
): Row {
  const { concurrency } = setting;
  const { records, results } = run;
  const truth = timeline.requests;
  // Client time t is at run.originHrMs + t on the machine's monotonic clock; truth time at
  // timeline.originHrMs + t: this turns a truth time into client time.
  const truthToClientMs = timeline.originHrMs - run.originHrMs;
  const sendLagMs: number[] = [];
  const stampLagMs: number[] = [];
  const threads = results.map((r) => r.clientHealth);
  const wallS = Math.max(...threads.map((h) => h.wallS));
  const byId = new Map(truth.map((t) => [t.requestId, t]));
  let events = 0;
  let tokens = 0;
  let failed = 0;
  const ttftErrMs: number[] = [];
  const tpotErrMs: number[] = [];
  const laterTtftErrMs: number[] = [];
  let gaps = 0;
  let merged = 0;
  // Per-token ITL as the summary defines it: each event's gap spread over its tokens.
  const clientItl: number[] = [];
  const truthItl: number[] = [];
  for (const record of records) {
    events += record.events.dtUs.length;
    tokens += record.outputTokens;
    if (record.error) {
      failed++;
      continue;
    }
    const t = byId.get(String(record.id));
    if (!t || record.firstTokenAt === undefined || record.lastTokenAt === undefined) continue;
    const tokenEvents = t.events.filter((e) => e.tokens > 0);
    if (tokenEvents.length === 0) continue;
    const first = tokenEvents[0];
    const last = tokenEvents[tokenEvents.length - 1];
    const ttftErr = record.firstTokenAt - record.sentAt - (first.at - t.arrivedAt);
    sendLagMs.push(t.arrivedAt + truthToClientMs - record.sentAt);
    ttftErrMs.push(ttftErr);
    // The first `concurrency` requests go out at once, each on a new connection; when they
    // overflow the simulator's accept queue, the request waits in a connection the client thinks
    // is open (SYN-ACK retransmits, 1 s and more). Later requests reuse kept-alive connections.
    if (record.id >= concurrency) laterTtftErrMs.push(ttftErr);
    // The i-th client token event is the i-th server write (one token per event, in order).
    const { dtUs, tokens: eventTokens } = record.events;
    let k = 0;
    let sinceTokenUs = 0;
    let atUs = record.sentAt * 1000;
    for (let i = 0; i < dtUs.length && k < tokenEvents.length; i++) {
      sinceTokenUs += dtUs[i];
      atUs += dtUs[i];
      if (eventTokens[i] <= 0) continue;
      stampLagMs.push(atUs / 1000 - (tokenEvents[k].at + truthToClientMs));
      if (k > 0) {
        gaps++;
        const truthGapUs = (tokenEvents[k].at - tokenEvents[k - 1].at) * 1000;
        if (sinceTokenUs < MERGED_CLIENT_GAP_US && truthGapUs >= MERGED_TRUTH_GAP_US) merged++;
        for (let n = 0; n < eventTokens[i]; n++)
          clientItl.push(sinceTokenUs / 1000 / eventTokens[i]);
        for (let n = 0; n < tokenEvents[k].tokens; n++) {
          truthItl.push(truthGapUs / 1000 / tokenEvents[k].tokens);
        }
      }
      sinceTokenUs = 0;
      k++;
    }
    if (record.outputTokens > 1 && t.outputTokens > 1) {
      const clientTpot = (record.lastTokenAt - record.firstTokenAt) / (record.outputTokens - 1);
      const truthTpot = (last.at - first.at) / (t.outputTokens - 1);
      tpotErrMs.push(clientTpot - truthTpot);
    }
  }
  // The engine threads' own CPU (Linux), else the process's (which counts this thread too).
  const cpuS = threads.every((h) => h.threadCpuS !== undefined)
    ? threads.reduce((n, h) => n + (h.threadCpuS ?? 0), 0)
    : Math.max(...threads.map((h) => h.cpuUserS + h.cpuSystemS));
  const tokenEvents = threads.reduce((n, h) => n + h.tokenEvents, 0);
  const coalesced = threads.reduce((n, h) => n + h.coalescedTokenEvents, 0);
  return {
    ...setting,
    requests: records.length,
    failed,
    wallS,
    eventsPerS: events / wallS,
    tokensPerS: tokens / wallS,
    cpuShare: cpuS / wallS,
    cpuUsPerEvent: events > 0 ? (cpuS * 1e6) / events : Number.NaN,
    loopP99Ms: Math.max(...threads.map((h) => h.eventLoopDelayMs.p99)),
    coalescedShare: tokenEvents > 0 ? coalesced / tokenEvents : 0,
    mergedShare: gaps > 0 ? merged / gaps : 0,
    matched: ttftErrMs.length,
    ttftErrMeanUs: mean(ttftErrMs) * 1000,
    ttftErrP99Us: p99(ttftErrMs) * 1000,
    ttftErrP99LaterUs: p99(laterTtftErrMs) * 1000,
    tpotErrMeanUs: mean(tpotErrMs) * 1000,
    tpotErrP99Us: p99(tpotErrMs) * 1000,
    itlP99ClientMs: p99(clientItl),
    itlP99TruthMs: p99(truthItl),
    sendLagMeanUs: mean(sendLagMs) * 1000,
    stampLagMeanUs: mean(stampLagMs) * 1000,
    stampLagP99Us: p99(stampLagMs) * 1000,
  };
}

const COLUMNS: { title: string; width: number; cell: (row: Row) => string }[] = [
  { title: 'itl_ms', width: 6, cell: (r) => String(r.itlMs) },
  { title: 'tok/ev', width: 6, cell: (r) => String(r.tokensPerEvent) },
  { title: 'workers', width: 7, cell: (r) => String(r.workers) },
  { title: 'conc', width: 5, cell: (r) => String(r.concurrency) },
  { title: 'reqs', width: 6, cell: (r) => String(r.requests) },
  { title: 'fail', width: 4, cell: (r) => String(r.failed) },
  { title: 'wall_s', width: 6, cell: (r) => r.wallS.toFixed(2) },
  { title: 'events/s', width: 9, cell: (r) => r.eventsPerS.toFixed(0) },
  { title: 'out_tok/s', width: 9, cell: (r) => r.tokensPerS.toFixed(0) },
  { title: 'cpu%', width: 5, cell: (r) => (r.cpuShare * 100).toFixed(0) },
  { title: 'cpu_us/ev', width: 9, cell: (r) => r.cpuUsPerEvent.toFixed(2) },
  { title: 'loop_p99_ms', width: 11, cell: (r) => r.loopP99Ms.toFixed(2) },
  { title: 'coalesced%', width: 10, cell: (r) => (r.coalescedShare * 100).toFixed(1) },
  { title: 'merged%', width: 7, cell: (r) => (r.mergedShare * 100).toFixed(1) },
  { title: 'ttft_err_mean_us', width: 16, cell: (r) => r.ttftErrMeanUs.toFixed(0) },
  { title: 'ttft_err_p99_us', width: 15, cell: (r) => r.ttftErrP99Us.toFixed(0) },
  {
    title: 'ttft_err_p99_later_us',
    width: 21,
    cell: (r) => (Number.isNaN(r.ttftErrP99LaterUs) ? '-' : r.ttftErrP99LaterUs.toFixed(0)),
  },
  { title: 'tpot_err_mean_us', width: 16, cell: (r) => r.tpotErrMeanUs.toFixed(2) },
  { title: 'tpot_err_p99_us', width: 15, cell: (r) => r.tpotErrP99Us.toFixed(2) },
  { title: 'send_lag_us', width: 11, cell: (r) => r.sendLagMeanUs.toFixed(0) },
  { title: 'stamp_lag_mean_us', width: 17, cell: (r) => r.stampLagMeanUs.toFixed(0) },
  { title: 'stamp_lag_p99_us', width: 16, cell: (r) => r.stampLagP99Us.toFixed(0) },
  { title: 'itl_p99_ms', width: 10, cell: (r) => r.itlP99ClientMs.toFixed(3) },
  {
    title: 'itl_p99_err_ms',
    width: 14,
    cell: (r) => (r.itlP99ClientMs - r.itlP99TruthMs).toFixed(3),
  },
];

function line(cells: string[]): string {
  return cells.map((cell, i) => cell.padStart(COLUMNS[i].width)).join('  ');
}

function printHeader(options: Options): void {
  const out = process.stdout;
  out.write(
    [
      `client overhead: closed loop, completions endpoint, ${options.inputTokens} input / ${options.outputTokens} output tokens,`,
      'simulator in a child process (TTFT 0 ms, no prefill cost, no concurrency limit).',
      'itl_ms 0 = the simulator emits with setImmediate (as fast as it can); > 0 = timer-paced.',
      '  events/s, out_tok/s  stream events parsed / output tokens received per second of run wall time',
      '  workers              engine worker threads (infergauge run --workers), the load split among them;',
      '                       0 = the engine in the coordinating thread itself (no worker thread)',
      '  cpu%                 CPU of the engine threads (Linux; else the process) / wall time, 100 = one core',
      '  cpu_us/ev            that CPU in microseconds per parsed stream event',
      '  loop_p99_ms          worst engine thread event-loop delay p99 (monitorEventLoopDelay, beyond its 2 ms tick)',
      "  coalesced%           the engine's own count: token events read together with their predecessor",
      `  merged%              token gaps the server spaced >= ${MERGED_TRUTH_GAP_US} us apart that the client saw < ${MERGED_CLIENT_GAP_US} us apart`,
      '                       (most likely one socket read: the events got one timestamp)',
      '  ttft_err_*_us        client TTFT (firstTokenAt - sentAt) minus server TTFT',
      '                       (first token write - request headers received), mean and p99, over requests',
      '  ttft_err_p99_later   the same p99 over requests after the first wave (id >= conc), which reuse',
      '                       kept-alive connections; the first wave opens conc connections at once and',
      "                       at high conc overflows the simulator's accept queue (seconds of SYN-ACK retries)",
      '  tpot_err_*_us        client TPOT minus server TPOT, per request, mean and p99 (signed)',
      '  send_lag_us          mean time from the client sending a request to the server parsing its headers',
      "                       (on the machine's shared monotonic clock): the uplink plus the server's own queue",
      '  stamp_lag_*_us       time from the server writing a token event to the client timestamping it, mean and',
      "                       p99 over events: the client's timing error on every token (includes the loopback hop)",
      '  itl_p99_ms, _err_ms  per-token ITL p99 seen by the client, and minus the same from the server writes',
      `  pinned               server on cores ${options.pinServer ?? '(any)'}, client on cores ${options.pinClient ?? '(any)'}`,
      '',
      line(COLUMNS.map((c) => c.title)),
      '',
    ].join('\n'),
  );
}

/** Pins every thread of process `pid` to `cores` (a taskset list such as 0 or 1-3). */
function pin(pid: number, cores: string | undefined): void {
  if (cores === undefined) return;
  execFileSync('taskset', ['-a', '-cp', cores, String(pid)], { stdio: 'ignore' });
}

async function main(): Promise<void> {
  const options = parseOptions();
  // Threads started later (the workers) inherit this affinity.
  pin(process.pid, options.pinClient);
  const maxRequests = Math.max(
    ...options.itlMs.flatMap((itl) =>
      options.tokensPerEvent.flatMap((k) =>
        options.levels.map((c) => requestsFor(options, c, itl, k)),
      ),
    ),
  );
  printHeader(options);
  for (const itlMs of options.itlMs) {
    for (const tokensPerEvent of options.tokensPerEvent) {
      let sim: SimulatorProcess | undefined;
      try {
        sim = await spawnSimulator([
          '--engine',
          'scripted',
          '--ttft-base-ms',
          '0',
          '--ttft-per-input-token-ms',
          '0',
          '--itl-ms',
          String(itlMs),
          '--tokens-per-event',
          String(tokensPerEvent),
          '--max-concurrency',
          '100000',
          // Every request of a level must still be in the truth when it is fetched.
          '--truth-limit',
          String(maxRequests + 1000),
        ]);
        pin(sim.pid, options.pinServer);
        // Warm both processes' JIT outside any measured level (each level opens its own pool).
        await runLevel(sim.url, 16, 64, 1, options);
        for (const workers of options.workers) {
          for (const concurrency of options.levels) {
            await resetTruth(sim.url);
            const run = await runLevel(
              sim.url,
              concurrency,
              requestsFor(options, concurrency, itlMs, tokensPerEvent),
              workers,
              options,
            );
            const truth = await fetchTruthTimeline(sim.url);
            const setting = {
              itlMs,
              tokensPerEvent,
              workers: Math.min(workers, concurrency),

              concurrency,
            };
            const row = measure(setting, run, truth);
            process.stdout.write(`${line(COLUMNS.map((c) => c.cell(row)))}\n`);
            if (row.matched < row.requests - row.failed) {
              process.stdout.write(
                `  (only ${row.matched} of ${row.requests - row.failed} successful requests matched their truth record)\n`,
              );
            }
          }
        }
      } finally {
        await sim?.stop();
      }
    }
  }
}

main().catch((err: Error) => {
  process.stderr.write(`client-overhead: ${err.stack ?? err.message}\n`);
  process.exitCode = 1;
});
