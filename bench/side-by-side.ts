/**
 * Side by side: infergauge's client and vLLM's benchmark client against one minimal fake OpenAI
 * server (bench/fake-server/, C, one thread), the server pinned to one core and the client to
 * another. Each client run is a fresh server and a fresh client process, measured from outside:
 *
 * - client CPU: user + system of the whole process (all threads) from start to exit, read by
 *   bash's `times` after `wait` (wait4's rusage, 1 ms);
 * - start-up CPU: the client's CPU when the server has read its first completion request
 *   (/proc/<pid>/stat, 10 ms ticks);
 * - events: token events the server wrote (its own log), per client CPU-second, and client CPU per
 *   event after start-up;
 * - timing error against the server's own send times: client mean TTFT minus the server's (first
 *   token event written minus request read), client ITL p99 minus the server's (gaps between a
 *   request's token events); per token event, infergauge's stamp against the server's write of
 *   that event (joined by x-request-id and event index: stampErrorsMs), p50 / p99 / max; and how
 *   late the server ran against its own schedule, so a late server shows as such.
 *
 * `--clients floor` adds the floor (fake-server/floor-client.mjs): a Node reader that stamps each
 * read and does nothing else, so the figures show what the machine allows any Node client.
 * `--floor-objects HOLD,DROP` gives it a client's garbage: HOLD small objects kept by each request
 * until its end, DROP made and dropped at each read (floor-client.mjs, --hold-objects).
 *
 * infergauge runs as its CLI (dist/, `npm run -s build` first) and is read from its summary.json;
 * the peer is vLLM's benchmark_serving.py (v0.7.3, ../shared/peers/, run with Debian's Python) or
 * `vllm bench serve`, read from its --save-result JSON. docs/benchmarks.md, "Side by side with
 * vLLM's client", has the commands of the issue's tables.
 *
 *   npm run bench:peer -- [--regime client-bound|paced|own-write|engine-paced]
 *     [--levels 16,64,256] [--tokens-per-event 1] [--ttft-ms 0] [--itl-ms 0] [--events-per-s 0]
 *     [--step-ms 0]
 *     [--requests 10000] [--repeats 3] [--workers default,0,1] [--clients infergauge,vllm,floor]
 *     [--floor-objects 0,0] [--peer PATH|vllm] [--peer-tokenizer NAME] [--python /usr/bin/python3]
 *     [--infergauge-args 'ARGS;ARGS...']
 *     [--pin-server 0] [--pin-client 1] [--out DIR] [--markdown]
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { percentileOfSorted } from '../src/metrics/distribution.js';
import { prepareHarness, type ServerLog, startFakeServer } from './fake-server/fakeServer.js';
import { processCpuS } from './processCpu.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const CLI = join(ROOT, 'dist/cli/main.js');
const FLOOR = join(ROOT, 'bench/fake-server/floor-client.mjs');
const DEFAULT_PEER = join(ROOT, '../shared/peers/vllm-bench-serving-v0.7.3');
const MODEL = 'fake-model';
const INPUT_TOKENS = 128;
const OUTPUT_TOKENS = 128;
/** The model and lengths, as infergauge and the floor client both take them. */
const LENGTH_FLAGS = [
  '--model',
  MODEL,
  '--input-tokens',
  String(INPUT_TOKENS),
  '--output-tokens',
  String(OUTPUT_TOKENS),
];
/** What benchmark_serving.py imports (its README: Debian's python3-aiohttp, -numpy, ...). */
const PEER_IMPORTS = 'import aiohttp, numpy, pandas, PIL, tqdm';

/**
 * The standard regimes (docs/benchmarks.md): what each sets; flags given beside one win.
 * - client-bound: the server writes as fast as the client reads, so reads carry many events;
 * - paced: an engine's pace, 50 ms to the first token and 10 ms a token on 256 streams (25,600
 *   events/s), each read one event;
 * - own-write: each event in a write of its own at 15,000 events/s over 64 streams, below either
 *   client's pace, so each read is one event and the kernel's share per event is the largest.
 * - engine-paced: paced's timing in an engine's 10 ms steps (fake-openai --step-ms): every stream
 *   gets its token at the same step's end, whatever the phase its client's sends gave it. In
 *   `paced` a client that sends a wave's next requests together (the floor) keeps its streams
 *   in phase, and reads their events in a few wake-ups a step; one that spreads its sends
 *   spreads the events and wakes several times as often: a difference of the fake server's
 *   pacing, not of the clients' reading, which this regime removes.
 */
const REGIMES = {
  'client-bound': { levels: '64', ttftMs: '0', itlMs: '0', eventsPerS: '0', requests: '10000' },
  paced: { levels: '256', ttftMs: '50', itlMs: '10', eventsPerS: '0', requests: '3000' },
  'own-write': { levels: '64', ttftMs: '0', itlMs: '0', eventsPerS: '15000', requests: '2000' },
  'engine-paced': {
    levels: '256',
    ttftMs: '50',
    itlMs: '10',
    eventsPerS: '0',
    stepMs: '10',
    requests: '3000',
  },
} as const;

/** Without a regime: concurrency 16, 64, 256 as fast as the client reads. */
const DEFAULTS = {
  levels: '16,64,256',
  ttftMs: '0',
  itlMs: '0',
  eventsPerS: '0',
  requests: '10000',
};

type ClientName = 'infergauge' | 'vllm' | 'floor';

interface Options {
  regime: keyof typeof REGIMES | undefined;
  levels: number[];
  tokensPerEvent: number[];
  ttftMs: number;
  itlMs: number;
  /** The server's cap on token events a second (fake-openai --events-per-s); 0: none. */
  eventsPerS: number;
  /** The server's engine step (fake-openai --step-ms); 0: each stream keeps its own phase. */
  stepMs: number;
  requests: number;
  repeats: number;
  /** infergauge --workers values; "default" leaves the flag out. */
  workers: string[];
  clients: Set<ClientName>;
  /** The floor's garbage: objects held per request, objects dropped per read. */
  floorObjects: [number, number];
  /** Each infergauge client runs once per entry, with its arguments added. */
  infergaugeArgs: string[][];
  peer: string | undefined;
  peerTokenizer: string | undefined;
  python: string;
  pinServer: string | undefined;
  pinClient: string | undefined;
  out: string;
  markdown: boolean;
}

function usage(message: string): never {
  process.stderr.write(`side-by-side: ${message}\n`);
  process.exit(2);
}

function numberArg(name: string, text: string, min: number, integer: boolean): number {
  const n = Number(text.trim());
  if (!Number.isFinite(n) || n < min || (integer && !Number.isInteger(n))) {
    usage(`${name}: expected ${integer ? 'an integer' : 'a number'} >= ${min}, got "${text}"`);
  }
  return n;
}

function parseOptions(): Options {
  const { values } = parseArgs({
    options: {
      regime: { type: 'string' },
      levels: { type: 'string' },
      'tokens-per-event': { type: 'string', default: '1' },
      'ttft-ms': { type: 'string' },
      'itl-ms': { type: 'string' },
      'events-per-s': { type: 'string' },
      'step-ms': { type: 'string' },
      requests: { type: 'string' },
      repeats: { type: 'string', default: '3' },
      workers: { type: 'string', default: 'default' },
      clients: { type: 'string', default: 'infergauge,vllm' },
      'floor-objects': { type: 'string', default: '0,0' },
      // More infergauge runs in the same repeats, each with these arguments added (paired):
      // ';--output ./bench/live-listener.mjs' runs it plain and with a live listener.
      'infergauge-args': { type: 'string', default: '' },
      peer: { type: 'string' },
      'peer-tokenizer': { type: 'string' },
      python: {
        type: 'string',
        default: existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3',
      },
      'pin-server': { type: 'string', default: '0' },
      'pin-client': { type: 'string', default: '1' },
      out: { type: 'string' },
      markdown: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const list = (name: string, text: string, min: number) =>
    text.split(',').map((part) => numberArg(name, part, min, true));
  const clients = new Set(values.clients.split(',').map((c) => c.trim()));
  for (const c of clients) {
    if (c !== 'infergauge' && c !== 'vllm' && c !== 'floor')
      usage(`--clients: infergauge, vllm or floor, got "${c}"`);
  }
  const floorObjects = list('--floor-objects', values['floor-objects'], 0);
  if (floorObjects.length !== 2) usage('--floor-objects: HOLD,DROP (two counts)');
  const workers = values.workers.split(',').map((w) => w.trim());
  for (const w of workers) if (w !== 'default') numberArg('--workers', w, 0, true);
  const pin = (text: string) => (text === 'none' ? undefined : text);
  const regime = values.regime as keyof typeof REGIMES | undefined;
  if (regime !== undefined && !(regime in REGIMES)) {
    usage(`--regime: one of ${Object.keys(REGIMES).join(', ')}, got "${regime}"`);
  }
  const preset = regime ? REGIMES[regime] : DEFAULTS;
  return {
    regime,
    levels: list('--levels', values.levels ?? preset.levels, 1),
    tokensPerEvent: list('--tokens-per-event', values['tokens-per-event'], 1),
    ttftMs: numberArg('--ttft-ms', values['ttft-ms'] ?? preset.ttftMs, 0, false),
    itlMs: numberArg('--itl-ms', values['itl-ms'] ?? preset.itlMs, 0, false),
    eventsPerS: numberArg('--events-per-s', values['events-per-s'] ?? preset.eventsPerS, 0, false),
    stepMs: numberArg(
      '--step-ms',
      values['step-ms'] ?? ('stepMs' in preset ? String(preset.stepMs) : '0'),
      0,
      false,
    ),
    requests: numberArg('--requests', values.requests ?? preset.requests, 1, true),
    repeats: numberArg('--repeats', values.repeats, 1, true),
    workers,
    clients: clients as Set<ClientName>,
    floorObjects: floorObjects as [number, number],
    infergaugeArgs: values['infergauge-args']
      .split(';')
      .map((v) => v.trim().split(/\s+/).filter(Boolean)),
    peer: values.peer,
    peerTokenizer: values['peer-tokenizer'],
    python: values.python,
    pinServer: pin(values['pin-server']),
    pinClient: pin(values['pin-client']),
    out:
      values.out ??
      join(ROOT, '.bench-out/side-by-side', new Date().toISOString().replace(/[:.]/g, '-')),
    markdown: values.markdown,
  };
}

/** How to start a client for one run: its argv (results go under `dir`) and where it writes them. */
interface Client {
  label: string;
  argv(url: string, concurrency: number, dir: string): string[];
  read(dir: string): ClientFigures;
  /** Each token event's stamp, per request, where the client keeps them (see stampErrorsMs). */
  stamps?(dir: string): Iterable<RequestStamps>;
}

/** One request as the client stamped it: its id (x-request-id), send and token-event times. */
interface RequestStamps {
  id: number;
  sentAtMs: number;
  tokenEventsMs: number[];
}

/** What a client reports of itself. */
interface ClientFigures {
  failed: number;
  outputTokS: number;
  ttftMeanMs: number;
  itlP99Ms: number;
  verdict?: string;
}

function infergaugeClient(workers: string, options: Options, more: string[]): Client {
  const label = workers === 'default' ? 'infergauge' : `infergauge --workers ${workers}`;
  return {
    label: [label, ...more].join(' '),
    argv: (url, concurrency, dir) => [
      process.execPath,
      CLI,
      'run',
      '--url',
      url,
      '--endpoint',
      'completions',
      ...LENGTH_FLAGS,
      '--ignore-eos',
      '--requests',
      String(options.requests),
      '--concurrency',
      String(concurrency),
      '--out',
      dir,
      // Only the measurement: no /metrics probe, no HTML report, no table rendering.
      '--no-server-metrics',
      '--no-html',
      '--json',
      ...(workers === 'default' ? [] : ['--workers', workers]),
      ...more,
    ],
    read(dir) {
      const summary = JSON.parse(readFileSync(join(dir, 'summary.json'), 'utf8'));
      return {
        failed: summary.requests.failed,
        outputTokS: summary.throughput.outputTokensPerS,
        ttftMeanMs: summary.latency.ttftMs.mean,
        // Per event, as the server's gaps and vLLM's ITL (itlMs spreads an event over its tokens).
        itlP99Ms: summary.latency.chunkGapMs.p99,
        verdict: verdictOf(summary.clientHealth),
      };
    },
    *stamps(dir) {
      // The raw records: each event's time is sentAt plus the running sum of its dtUs.
      for (const line of readFileSync(join(dir, 'records.jsonl'), 'utf8').split('\n')) {
        if (!line) continue;
        const r = JSON.parse(line) as {
          id: number;
          sentAt: number;
          events?: { dtUs: number[]; tokens: number[]; reasoningChars?: number[] };
        };
        if (!r.events) continue;
        const tokenEventsMs: number[] = [];
        let atUs = r.sentAt * 1000;
        r.events.dtUs.forEach((dt, i) => {
          atUs += dt;
          if ((r.events?.tokens[i] ?? 0) > 0) tokenEventsMs.push(atUs / 1000);
        });
        yield { id: r.id, sentAtMs: r.sentAt, tokenEventsMs };
      }
    },
  };
}

/** The floor (see the file's head comment), read like a client from its own stamps. */
function floorClient(options: Options): Client {
  type FloorRun = { wallS: number; failed: number; requests: RequestStamps[] };
  // read() and stamps() both want the run's file: it is parsed once.
  let last: { dir: string; run: FloorRun } | undefined;
  const read = (dir: string): FloorRun => {
    if (last?.dir !== dir) {
      last = { dir, run: JSON.parse(readFileSync(join(dir, 'floor.json'), 'utf8')) as FloorRun };
    }
    return last.run;
  };
  return {
    label: options.floorObjects.some((n) => n > 0)
      ? `floor+${options.floorObjects.join(',')}`
      : 'floor',
    argv: (url, concurrency, dir) => [
      process.execPath,
      FLOOR,
      '--url',
      url,
      '--concurrency',
      String(concurrency),
      '--requests',
      String(options.requests),
      '--out',
      dir,
      ...LENGTH_FLAGS,
      '--hold-objects',
      String(options.floorObjects[0]),
      '--drop-objects',
      String(options.floorObjects[1]),
    ],
    read(dir) {
      const { wallS, failed, requests } = read(dir);
      const ttfts: number[] = [];
      const gaps: number[] = [];
      let events = 0;
      for (const r of requests) {
        const stamps = r.tokenEventsMs;
        events += stamps.length;
        if (stamps.length > 0) ttfts.push(stamps[0] - r.sentAtMs);
        for (let k = 1; k < stamps.length; k++) gaps.push(stamps[k] - stamps[k - 1]);
      }
      return {
        failed,
        outputTokS: events / wallS,
        ttftMeanMs: mean(Float64Array.from(ttfts)),
        itlP99Ms: p99(Float64Array.from(gaps)),
      };
    },
    stamps: (dir) => read(dir).requests,
  };
}

/**
 * Per token event, how late the client stamped it against the server's own write of that event
 * (joined by x-request-id and event index), in ms. Both clocks are the machine's monotonic clock
 * from different origins; the offset between them is taken once for the run, as the least of
 * (server read - client send) over its requests: the fastest request's transit, tens of
 * microseconds on loopback, is then in every error. Taken per request instead, a request the
 * server was slow to read (a busy moment of its own) would shift all its events, charging the
 * server's delay to the client's stamps.
 */
function stampErrorsMs(requests: Iterable<RequestStamps>, log: ServerLog): Float64Array {
  const joined: [RequestStamps, { readUs: number; writesUs: Float64Array }][] = [];
  let offsetMs = Number.POSITIVE_INFINITY;
  for (const r of requests) {
    const sent = log.sends.get(r.id);
    if (!sent) continue;
    joined.push([r, sent]);
    offsetMs = Math.min(offsetMs, sent.readUs / 1000 - r.sentAtMs);
  }
  const errors: number[] = [];
  for (const [r, sent] of joined) {
    const n = Math.min(r.tokenEventsMs.length, sent.writesUs.length);
    for (let k = 0; k < n; k++)
      errors.push(r.tokenEventsMs[k] + offsetMs - sent.writesUs[k] / 1000);
  }
  return Float64Array.from(errors).sort();
}

/** infergauge's client-health verdict in a few words, with the figures it judged. */
function verdictOf(health: unknown): string {
  const h = health as
    | {
        clientLimited?: boolean;
        reasons?: string[];
        cpu?: { utilisation?: number };
        stampDelayMs?: { p99Ms: number };
      }
    | undefined;
  if (!h) return 'none';
  const cpu =
    typeof h.cpu?.utilisation === 'number' ? `cpu ${h.cpu.utilisation.toFixed(2)}` : undefined;
  const stamps = h.stampDelayMs
    ? `stamp delay p99 ~${h.stampDelayMs.p99Ms.toFixed(1)} ms`
    : undefined;
  const figures = [cpu, stamps].filter(Boolean).join(', ');
  // The reasons' first clause: the figure past its limit, not the explanation after the colon.
  const reasons = (h.reasons ?? []).map((r) => r.split(': ')[0]).join('; ');
  return `${h.clientLimited ? `client-limited: ${reasons}` : 'ok'}${figures ? ` (${figures})` : ''}`;
}

/** The peer client, or why it is skipped. */
function peerClient(options: Options): Client | string {
  const given = options.peer ?? (existsSync(DEFAULT_PEER) ? DEFAULT_PEER : undefined);
  const cliPeer =
    given === undefined
      ? onPath('vllm')
      : given === 'vllm' || given.endsWith('/vllm')
        ? given
        : undefined;
  let prefix: string[];
  let tokenizer: string;
  if (cliPeer) {
    if (!options.peerTokenizer)
      return '`vllm bench serve` needs --peer-tokenizer (a tokenizer it can load)';
    prefix = [cliPeer, 'bench', 'serve'];
    tokenizer = options.peerTokenizer;
  } else if (given) {
    const script = statSync(given, { throwIfNoEntry: false })?.isDirectory()
      ? join(given, 'benchmark_serving.py')
      : given;
    if (!existsSync(script)) return `${script} not found (--peer)`;
    const check = spawnSync(options.python, ['-c', PEER_IMPORTS], { encoding: 'utf8' });
    if (check.status !== 0) {
      return `${options.python} lacks the peer's Python packages (${check.stderr.trim().split('\n').pop()}); see its README`;
    }
    prefix = [options.python, script];
    tokenizer = options.peerTokenizer ?? 'standin';
  } else {
    return `no peer: ${DEFAULT_PEER} is absent and vllm is not installed (--peer PATH)`;
  }
  return {
    label: 'vllm',
    argv: (url, concurrency, dir) => [
      ...prefix,
      '--backend',
      'openai',
      '--base-url',
      url,
      '--endpoint',
      '/v1/completions',
      '--model',
      MODEL,
      '--tokenizer',
      tokenizer,
      '--dataset-name',
      'random',
      '--random-input-len',
      String(INPUT_TOKENS),
      '--random-output-len',
      String(OUTPUT_TOKENS),
      '--ignore-eos',
      '--num-prompts',
      String(options.requests),
      '--max-concurrency',
      String(concurrency),
      '--percentile-metrics',
      'ttft,tpot,itl,e2el',
      '--metric-percentiles',
      '50,99',
      '--disable-tqdm',
      '--save-result',
      '--result-dir',
      dir,
      '--result-filename',
      'result.json',
    ],
    read(dir) {
      const result = JSON.parse(readFileSync(join(dir, 'result.json'), 'utf8'));
      return {
        failed: options.requests - result.completed,
        outputTokS: result.output_throughput,
        ttftMeanMs: result.mean_ttft_ms,
        itlP99Ms: result.p99_itl_ms,
      };
    },
  };
}

function onPath(command: string): string | undefined {
  const found = spawnSync('bash', ['-c', `command -v ${command}`], { encoding: 'utf8' });
  return found.status === 0 ? found.stdout.trim() : undefined;
}

interface ProcessCpu {
  code: number;
  cpuS: number;
  startupS: number | undefined;
}

/**
 * Runs argv (output to `logPath`) under bash, pinned with taskset, and returns its CPU from start
 * to exit (bash's `times` after `wait`: the reaped child's rusage) and its CPU when
 * `firstRequest` resolved.
 */
function runMeasured(
  argv: string[],
  cpus: string | undefined,
  logPath: string,
  firstRequest: Promise<void>,
): Promise<ProcessCpu> {
  const script = `${cpus ? 'taskset -c "$1" ' : ''}"\${@:3}" >"$2" 2>&1 & pid=$!
echo "pid $pid"; wait $pid; rc=$?; times; exit $rc`;
  const child = spawn('bash', ['-c', script, 'bash', cpus ?? '', logPath, ...argv], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines: string[] = [];
  let pid: number | undefined;
  let startupS: number | undefined;
  let firstSeen = false;
  const readStartup = () => {
    if (firstSeen && pid !== undefined && startupS === undefined) startupS = processCpuS(pid);
  };
  void firstRequest.then(() => {
    firstSeen = true;
    readStartup();
  });
  createInterface({ input: child.stdout }).on('line', (line) => {
    if (line.startsWith('pid ')) {
      pid = Number(line.slice(4));
      readStartup();
    } else lines.push(line);
  });
  return new Promise((resolvePromise, reject) => {
    child.on('close', (code) => {
      // `times`: the shell's own user and system, then its children's.
      const m = /^(\d+)m([\d.]+)s (\d+)m([\d.]+)s$/.exec(lines.at(-1) ?? '');
      if (!m) {
        reject(new Error(`no CPU times from the client's shell: ${lines.join(' | ')}`));
        return;
      }
      const cpuS = Number(m[1]) * 60 + Number(m[2]) + Number(m[3]) * 60 + Number(m[4]);
      resolvePromise({ code: code ?? 1, cpuS, startupS });
    });
  });
}

/** One client run against a fresh server: the row's figures. */
interface RunRow {
  client: string;
  concurrency: number;
  tokensPerEvent: number;
  repeat: number;
  cpuS: number;
  startupS: number;
  events: number;
  eventsPerCpuS: number;
  cpuUsPerEvent: number;
  outputTokS: number;
  failed: number;
  ttftMeanMs: number;
  serverTtftMeanMs: number;
  ttftErrorMs: number;
  itlP99Ms: number;
  serverItlP99Ms: number;
  itlP99ErrorMs: number;
  /** Per token event, the client's stamp against the server's write (stampErrorsMs); NaN where the client keeps no per-event stamps. */
  stampErrorP50Ms: number;
  stampErrorP99Ms: number;
  stampErrorMaxMs: number;
  serverLateMeanMs: number;
  serverLateP99Ms: number;
  serverLateMaxMs: number;
  /** The server's own CPU per token event: far below the client's, or the server is the limit. */
  serverCpuUsPerEvent: number;
  verdict?: string;
}

function mean(values: Float64Array): number {
  let sum = 0;
  for (const v of values) sum += v;
  return values.length ? sum / values.length : Number.NaN;
}

function p99(values: Float64Array): number {
  return values.length ? percentileOfSorted(values.slice().sort(), 99) : Number.NaN;
}

async function runOnce(
  client: Client,
  concurrency: number,
  tokensPerEvent: number,
  repeat: number,
  binary: string,
  options: Options,
): Promise<RunRow> {
  const dir = join(
    options.out,
    `${client.label.replace(/\W+/g, '-')}-c${concurrency}-t${tokensPerEvent}-r${repeat}`,
  );
  mkdirSync(join(dir, 'client'), { recursive: true });
  const server = await startFakeServer({
    binary,
    ttftMs: options.ttftMs,
    itlMs: options.itlMs,
    eventsPerS: options.eventsPerS,
    stepMs: options.stepMs,
    tokensPerEvent,
    model: MODEL,
    statsPath: join(dir, 'server-log.f64'),
    ...(options.pinServer ? { cpus: options.pinServer } : {}),
  });
  let run: ProcessCpu;
  let log: ServerLog;
  let serverCpuS = Number.NaN;
  try {
    const url = `http://127.0.0.1:${server.port}`;
    run = await runMeasured(
      client.argv(url, concurrency, join(dir, 'client')),
      options.pinClient,
      join(dir, 'client.log'),
      server.firstRequest,
    );
  } finally {
    serverCpuS = processCpuS(server.pid) ?? Number.NaN;
    log = await server.stop();
  }
  if (run.code !== 0) {
    const logPath = join(dir, 'client.log');
    const last = readFileSync(logPath, 'utf8').trim().split('\n').at(-1);
    throw new Error(`${client.label} exited with ${run.code} (${last}); see ${logPath}`);
  }
  const figures = client.read(join(dir, 'client'));
  const startupS = run.startupS ?? Number.NaN;
  const serverTtftMeanMs = mean(log.ttftMs);
  const serverItlP99Ms = p99(log.eventGapMs);
  const sortedLag = log.lagMs.slice().sort();
  const stampErrors = client.stamps
    ? stampErrorsMs(client.stamps(join(dir, 'client')), log)
    : new Float64Array();
  const stampAt = (p: number) =>
    stampErrors.length ? percentileOfSorted(stampErrors, p) : Number.NaN;
  return {
    client: client.label,
    concurrency,
    tokensPerEvent,
    repeat,
    cpuS: run.cpuS,
    startupS,
    events: log.events,
    eventsPerCpuS: log.events / run.cpuS,
    cpuUsPerEvent: ((run.cpuS - startupS) / log.events) * 1e6,
    outputTokS: figures.outputTokS,
    failed: figures.failed,
    ttftMeanMs: figures.ttftMeanMs,
    serverTtftMeanMs,
    ttftErrorMs: figures.ttftMeanMs - serverTtftMeanMs,
    itlP99Ms: figures.itlP99Ms,
    serverItlP99Ms,
    itlP99ErrorMs: figures.itlP99Ms - serverItlP99Ms,
    stampErrorP50Ms: stampAt(50),
    stampErrorP99Ms: stampAt(99),
    stampErrorMaxMs: stampErrors.at(-1) ?? Number.NaN,
    serverLateMeanMs: mean(log.lagMs),
    serverLateP99Ms: percentileOfSorted(sortedLag, 99),
    serverLateMaxMs: sortedLag.at(-1) ?? Number.NaN,
    serverCpuUsPerEvent: (serverCpuS / log.events) * 1e6,
    ...(figures.verdict === undefined ? {} : { verdict: figures.verdict }),
  };
}

type NumericKey = { [K in keyof RunRow]-?: RunRow[K] extends number ? K : never }[keyof RunRow];

/** A figure over the repeats: the median, with the range when there are several. */
function spread(rows: RunRow[], key: NumericKey, digits: number): string {
  const values = rows.map((r) => r[key]);
  const f = (v: number) => (Number.isFinite(v) ? v.toFixed(digits) : '-');
  const mid = f(median(rows, key));
  return values.length > 1 ? `${mid} (${f(Math.min(...values))}..${f(Math.max(...values))})` : mid;
}

function median(rows: RunRow[], key: NumericKey): number {
  const values = rows.map((r) => r[key]).sort((a, b) => a - b);
  const mid = values.length >> 1;
  return values.length % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

/** A table column: its header, the run figure it shows, the digits it keeps. */
type Column = [string, NumericKey, number];

const CPU_COLUMNS: Column[] = [
  ['client CPU s', 'cpuS', 2],
  ['start-up CPU s', 'startupS', 2],
  ['events', 'events', 0],
  ['events/CPU-s', 'eventsPerCpuS', 0],
  ['CPU us/event (after start-up)', 'cpuUsPerEvent', 2],
  ['output tok/s', 'outputTokS', 0],
  ['failed', 'failed', 0],
  ['server CPU us/event', 'serverCpuUsPerEvent', 2],
];
const TIMING_COLUMNS: Column[] = [
  ['server TTFT mean ms', 'serverTtftMeanMs', 2],
  ['TTFT error ms', 'ttftErrorMs', 2],
  ['server ITL p99 ms', 'serverItlP99Ms', 2],
  ['ITL p99 error ms', 'itlP99ErrorMs', 2],
];
/** The client's per-event stamp error: p50, p99, max (one column). */
const STAMP_COLUMNS: Column[] = [
  ['', 'stampErrorP50Ms', 2],
  ['', 'stampErrorP99Ms', 2],
  ['', 'stampErrorMaxMs', 1],
];
/** How late the server ran against its own schedule: mean, p99, max (one column). */
const LATE_COLUMNS: Column[] = [
  ['', 'serverLateMeanMs', 2],
  ['', 'serverLateP99Ms', 2],
  ['', 'serverLateMaxMs', 1],
];

function table(header: string[], rows: string[][], markdown: boolean): string {
  if (markdown) {
    const line = (cells: string[]) =>
      `| ${cells.map((c) => c.replaceAll('|', '\\|')).join(' | ')} |`;
    return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
  }
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

function report(rows: RunRow[], options: Options): string {
  const groups = new Map<string, RunRow[]>();
  for (const row of rows) {
    const key = `${row.tokensPerEvent}\t${row.concurrency}\t${row.client}`;
    groups.set(key, [...(groups.get(key) ?? []), row]);
  }
  const load = (r: RunRow) =>
    `c${r.concurrency}${r.tokensPerEvent > 1 ? `, ${r.tokensPerEvent} tok/event` : ''}`;
  const cpuRows: string[][] = [];
  const timingRows: string[][] = [];
  for (const group of groups.values()) {
    const [r] = group;
    const figures = (columns: Column[]) =>
      columns.map(([, key, digits]) => spread(group, key, digits));
    cpuRows.push([load(r), r.client, ...figures(CPU_COLUMNS)]);
    timingRows.push([
      load(r),
      r.client,
      ...figures(TIMING_COLUMNS),
      figures(STAMP_COLUMNS).join(' / '),
      figures(LATE_COLUMNS).join(' / '),
      [...new Set(group.map((g) => g.verdict ?? '-'))].join(', then '),
    ]);
  }
  const ratios: string[] = [];
  for (const [key, group] of groups) {
    if (group[0].client === 'vllm') continue;
    const peer = groups.get(key.replace(/[^\t]*$/, 'vllm'));
    if (!peer) continue;
    const x = median(group, 'eventsPerCpuS') / median(peer, 'eventsPerCpuS');
    ratios.push(
      `${load(group[0])}: ${group[0].client} ${x.toFixed(2)}x vLLM's events per CPU-second`,
    );
  }
  const medianNote =
    options.repeats > 1 ? `median (min..max) of ${options.repeats} runs` : 'one run';
  return [
    `${options.requests} requests of ${INPUT_TOKENS}/${OUTPUT_TOKENS} tokens, ${options.regime ? `regime ${options.regime}: ` : ''}server TTFT ${options.ttftMs} ms, ITL ${options.itlMs} ms${options.eventsPerS > 0 ? `, at most ${options.eventsPerS} events/s` : ''}${options.stepMs > 0 ? `, in ${options.stepMs} ms steps` : ''}, server on CPU ${options.pinServer ?? 'any'}, client on CPU ${options.pinClient ?? 'any'}; ${medianNote}`,
    '',
    table(['load', 'client', ...CPU_COLUMNS.map(([header]) => header)], cpuRows, options.markdown),
    '',
    table(
      [
        'load',
        'client',
        ...TIMING_COLUMNS.map(([header]) => header),
        'stamp error p50 / p99 / max ms',
        'server late mean / p99 / max ms',
        'client-health verdict',
      ],
      timingRows,
      options.markdown,
    ),
    ...(ratios.length ? ['', ...ratios] : []),
  ].join('\n');
}

async function main(): Promise<void> {
  const options = parseOptions();
  if (options.clients.has('infergauge') && !existsSync(CLI))
    usage(`${CLI} is missing: run \`npm run -s build\` first`);
  const binary = prepareHarness(options.pinServer, usage);
  const clients: Client[] = [];
  if (options.clients.has('infergauge')) {
    for (const workers of options.workers) {
      for (const more of options.infergaugeArgs)
        clients.push(infergaugeClient(workers, options, more));
    }
  }
  if (options.clients.has('vllm')) {
    const peer = peerClient(options);
    if (typeof peer === 'string') process.stdout.write(`note: vLLM's client skipped: ${peer}\n`);
    else clients.push(peer);
  }
  if (options.clients.has('floor')) clients.push(floorClient(options));
  mkdirSync(options.out, { recursive: true });
  const rows: RunRow[] = [];
  const failures: string[] = [];
  for (const tokensPerEvent of options.tokensPerEvent) {
    for (const concurrency of options.levels) {
      // Repeats outermost within a load, so slow drifts of the machine spread over both clients.
      for (let repeat = 0; repeat < options.repeats; repeat++) {
        for (const client of clients) {
          const name = `${client.label} c${concurrency} t${tokensPerEvent} #${repeat + 1}`;
          try {
            const row = await runOnce(client, concurrency, tokensPerEvent, repeat, binary, options);
            rows.push(row);
            process.stderr.write(
              `${name}: ${row.cpuS.toFixed(2)} s CPU, ${row.events} events, ${row.eventsPerCpuS.toFixed(0)} events/CPU-s, TTFT error ${row.ttftErrorMs.toFixed(2)} ms\n`,
            );
          } catch (error) {
            // One failed run (a refused flag, a crash) leaves the rest of the sweep standing.
            failures.push(`${name}: ${(error as Error).message}`);
            process.stderr.write(`${name}: failed: ${(error as Error).message}\n`);
          }
        }
      }
    }
  }
  writeFileSync(
    join(options.out, 'side-by-side.json'),
    `${JSON.stringify({ options: { ...options, clients: [...options.clients] }, rows, failures }, null, 2)}\n`,
  );
  const failed = failures.length ? `\n\nfailed runs:\n${failures.join('\n')}` : '';
  process.stdout.write(
    `${report(rows, options)}${failed}\n\nraw runs: ${join(options.out, 'side-by-side.json')}\n`,
  );
  if (failures.length) process.exitCode = 1;
}

await main();
