/**
 * Cost of summarising and storing a long run: synthetic records (256 output tokens each, one
 * token per event) go (a) straight through SummaryBuilder, (b) into records.jsonl through
 * JsonlWriter, and (c) back out through readRecords into a second SummaryBuilder; the two
 * summaries must be identical. Records are generated one at a time and dropped, so memory is
 * what the summariser, the writer and the reader keep, not the run itself.
 *
 *   node --import tsx bench/summary.ts [--records 1000000] [--seed 1]
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { isDeepStrictEqual, parseArgs } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { LoadSpec } from '../src/load.js';
import type { SloCondition } from '../src/metrics/slo.js';
import { type RunSummary, SummaryBuilder } from '../src/metrics/summary.js';
import type { RequestRecord } from '../src/record.js';
import { JsonlWriter, readRecords } from '../src/results/jsonl.js';
import { createRng } from '../src/rng.js';

const OUTPUT_TOKENS = 256;
const INPUT_TOKENS = 512;
/** Closed-loop users the synthetic timeline is laid out for (sets meanConcurrency, duration). */
const CONCURRENCY = 64;
/** Memory is sampled every this many records: a timer never fires inside the synchronous loops. */
const SAMPLE_EVERY = 1024;

const LOAD: LoadSpec = { mode: 'closed', concurrency: CONCURRENCY };
/** An SLO, so that the goodput path is part of what is timed. */
const SLO: SloCondition[] = [
  { metric: 'ttft', op: '<', value: 60 },
  { metric: 'tpot', op: '<', value: 10.1 },
];

// Collecting before each phase lets each phase's peak be its own rather than the previous
// phase's garbage; `--expose-gc` set at runtime keeps the plain `node --import tsx` command line.
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/**
 * Deterministic records in issue order, laid out as a closed loop of CONCURRENCY users: each
 * user sends its next request shortly after its last one ended. Times are whole microseconds
 * divided by 1000, as the engine writes them (so they survive JSON exactly).
 */
function createRecordSource(seed: number): () => RequestRecord {
  const rng = createRng(seed);
  const between = (lo: number, hi: number) => lo + rng.int(hi - lo + 1);
  const userFreeUs = new Array<number>(CONCURRENCY).fill(0);
  let id = 0;
  return () => {
    const user = id % CONCURRENCY;
    const scheduledUs = userFreeUs[user];
    const sentUs = scheduledUs + between(5, 60);
    const headersUs = sentUs + between(1_000, 4_000);
    const dtUs = new Array<number>(OUTPUT_TOKENS);
    const tokens = new Array<number>(OUTPUT_TOKENS);
    const contentChars = new Array<number>(OUTPUT_TOKENS);
    dtUs[0] = headersUs - sentUs + between(15_000, 60_000);
    let atUs = sentUs + dtUs[0];
    const firstTokenUs = atUs;
    for (let i = 0; i < OUTPUT_TOKENS; i++) {
      if (i > 0) {
        dtUs[i] = between(8_000, 12_000);
        atUs += dtUs[i];
      }
      tokens[i] = 1;
      contentChars[i] = between(4, 6);
    }
    const endUs = atUs + between(20, 300);
    userFreeUs[user] = endUs + between(10, 100);
    // Field order as the engine's buildRecord writes it, so the file is the size a real one is.
    const record: RequestRecord = {
      id: id++,
      phase: 'measure',
      scheduledAt: scheduledUs / 1000,
      sentAt: sentUs / 1000,
      endAt: endUs / 1000,
      requestedInputTokens: INPUT_TOKENS,
      requestedOutputTokens: OUTPUT_TOKENS,
      outputTokens: OUTPUT_TOKENS,
      outputTokensSource: 'server',
      events: { dtUs, tokens, contentChars },
      headersAt: headersUs / 1000,
      status: 200,
      firstTokenAt: firstTokenUs / 1000,
      firstContentAt: firstTokenUs / 1000,
      lastTokenAt: atUs / 1000,
      finishReason: 'length',
      inputTokens: INPUT_TOKENS,
      inputTokensSource: 'server',
    };
    return record;
  };
}

/** Peak RSS and heapUsed over a phase, sampled by the phase's own loop. */
class MemoryPeak {
  readonly startRss: number;
  maxRss: number;
  maxHeapUsed: number;
  /** SampleSet keeps its exact samples in Float64Arrays: outside heapUsed, inside arrayBuffers. */
  maxArrayBuffers: number;

  constructor() {
    const m = process.memoryUsage();
    this.startRss = m.rss;
    this.maxRss = m.rss;
    this.maxHeapUsed = m.heapUsed;
    this.maxArrayBuffers = m.arrayBuffers;
  }

  sample(): void {
    const m = process.memoryUsage();
    if (m.rss > this.maxRss) this.maxRss = m.rss;
    if (m.heapUsed > this.maxHeapUsed) this.maxHeapUsed = m.heapUsed;
    if (m.arrayBuffers > this.maxArrayBuffers) this.maxArrayBuffers = m.arrayBuffers;
  }
}

interface PhaseResult {
  seconds: number;
  memory: MemoryPeak;
}

async function phase(run: (memory: MemoryPeak) => void | Promise<void>): Promise<PhaseResult> {
  gc();
  const memory = new MemoryPeak();
  const start = performance.now();
  await run(memory);
  const seconds = (performance.now() - start) / 1000;
  memory.sample();
  return { seconds, memory };
}

const MB = 1024 * 1024;

function report(label: string, records: number, result: PhaseResult, extra = ''): void {
  const { seconds, memory } = result;
  const rate = Math.round(records / seconds).toLocaleString('en-US');
  const cells = [
    label.padEnd(20),
    `${seconds.toFixed(2).padStart(8)} s`,
    `${rate.padStart(10)} records/s`,
    `rss ${(memory.startRss / MB).toFixed(0).padStart(5)} -> peak ${(memory.maxRss / MB).toFixed(0).padStart(5)} MB`,
    `heapUsed max ${(memory.maxHeapUsed / MB).toFixed(0).padStart(4)} MB`,
    `arrayBuffers max ${(memory.maxArrayBuffers / MB).toFixed(0).padStart(4)} MB`,
  ];
  process.stdout.write(`${cells.join('   ')}${extra ? `   ${extra}` : ''}\n`);
}

/** The first path at which two JSON values differ, for a readable failure. */
function firstDifference(a: unknown, b: unknown, path = '$'): string | undefined {
  if (isDeepStrictEqual(a, b)) return undefined;
  if (typeof a === 'object' && a !== null && typeof b === 'object' && b !== null) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const key of keys) {
      const found = firstDifference(
        (a as Record<string, unknown>)[key],
        (b as Record<string, unknown>)[key],
        `${path}.${key}`,
      );
      if (found) return found;
    }
  }
  return `${path}: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`;
}

function describeSummary(summary: RunSummary): string {
  const { latency } = summary;
  const ms = (n: number) => n.toFixed(3);
  return [
    `completed ${summary.requests.completed}, duration ${summary.durationS.toFixed(1)} s,`,
    `meanConcurrency ${summary.load.meanConcurrency.toFixed(2)},`,
    `output ${summary.throughput.outputTokensPerS.toFixed(0)} tok/s,`,
    `ttft p50/p99 ${ms(latency.ttftMs.p50)}/${ms(latency.ttftMs.p99)} ms,`,
    `itl p50/p99 ${ms(latency.itlMs.p50)}/${ms(latency.itlMs.p99)} ms`,
    `(${latency.itlMs.count.toLocaleString('en-US')} samples${latency.itlMs.approximate ? `, ${latency.itlMs.approximate}` : ', exact'}),`,
    `sloAttainment ${summary.goodput?.sloAttainment.toFixed(4)}`,
  ].join(' ');
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      records: { type: 'string', default: '1000000' },
      seed: { type: 'string', default: '1' },
    },
    strict: true,
  });
  const count = Number(values.records);
  const seed = Number(values.seed);
  if (!Number.isInteger(count) || count < 1) throw new Error('--records: expected an integer >= 1');
  if (!Number.isInteger(seed)) throw new Error('--seed: expected an integer');

  const out = process.stdout;
  out.write(
    `summary bench: ${count.toLocaleString('en-US')} records x ${OUTPUT_TOKENS} output tokens (1 per event), seed ${seed}, node ${process.version}\n`,
  );
  out.write('rss: at phase start (after a forced GC) -> peak during the phase\n');

  const baseline = await phase((memory) => {
    const next = createRecordSource(seed);
    let checksum = 0;
    for (let i = 0; i < count; i++) {
      // Read something from each record so the generation cannot be optimised away.
      checksum += next().events.dtUs[1];
      if (i % SAMPLE_EVERY === 0) memory.sample();
    }
    if (checksum < 0) out.write('impossible\n');
  });
  report('generate only', count, baseline);

  let inMemory = '';
  const summarise = await phase((memory) => {
    const next = createRecordSource(seed);
    const builder = new SummaryBuilder({ load: LOAD, slo: SLO });
    for (let i = 0; i < count; i++) {
      builder.add(next());
      if (i % SAMPLE_EVERY === 0) memory.sample();
    }
    memory.sample();
    inMemory = JSON.stringify(builder.build());
  });
  report('(a) summarise', count, summarise);

  const dir = mkdtempSync(join(tmpdir(), 'infergauge-bench-'));
  const path = join(dir, 'records.jsonl');
  try {
    const write = await phase((memory) => {
      const next = createRecordSource(seed);
      const writer = new JsonlWriter<RequestRecord>(path);
      try {
        for (let i = 0; i < count; i++) {
          writer.write(next());
          if (i % SAMPLE_EVERY === 0) memory.sample();
        }
      } finally {
        writer.close();
      }
    });
    const bytes = statSync(path).size;
    report(
      '(b) write jsonl',
      count,
      write,
      `file ${(bytes / MB).toFixed(0)} MB (${(bytes / count).toFixed(0)} B/record), ${(bytes / MB / write.seconds).toFixed(0)} MB/s`,
    );

    let fromDisk = '';
    let badLines = 0;
    let readCount = 0;
    const read = await phase(async (memory) => {
      const builder = new SummaryBuilder({ load: LOAD, slo: SLO });
      for await (const record of readRecords(path, () => badLines++)) {
        builder.add(record);
        if (readCount++ % SAMPLE_EVERY === 0) memory.sample();
      }
      memory.sample();
      fromDisk = JSON.stringify(builder.build());
    });
    report(
      '(c) read + summarise',
      readCount,
      read,
      `${(bytes / MB / read.seconds).toFixed(0)} MB/s, bad lines ${badLines}`,
    );

    const a = JSON.parse(inMemory) as RunSummary;
    const b = JSON.parse(fromDisk) as RunSummary;
    const difference = firstDifference(a, b);
    out.write(`summary: ${describeSummary(a)}\n`);
    out.write(
      difference === undefined && readCount === count
        ? 'summaries equal (in memory vs read back): yes\n'
        : `summaries equal (in memory vs read back): NO (${readCount} of ${count} records read back; ${difference ?? 'same JSON'})\n`,
    );
    if (difference !== undefined || readCount !== count) process.exitCode = 1;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: Error) => {
  process.stderr.write(`summary bench: ${err.stack ?? err.message}\n`);
  process.exitCode = 1;
});
