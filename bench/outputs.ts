/**
 * Cost of the event seam per record (issue 48): SessionEvents.record (a record measured in this
 * thread, as --workers 0 and virtual time tell it) and SessionEvents.lines (a worker's batch)
 * with only built-in outputs subscribed, then with an output of the user's own that reads every
 * record too, which gets frozen copies. Records have `--tokens` output tokens, one per event.
 * Last, what a measuring thread adds per record once an output listens for live snapshots
 * (LiveRecorder.add, issue 52).
 *
 *   node --import tsx bench/outputs.ts [--records 200000] [--tokens 256]
 */
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { LiveRecorder } from '../src/metrics/live.js';
import type { RequestRecord } from '../src/record.js';
import { builtInOutput, type Output, SessionEvents } from '../src/session/events.js';

const { values } = parseArgs({
  options: {
    records: { type: 'string', default: '200000' },
    tokens: { type: 'string', default: '256' },
  },
});
const N = Number(values.records);
const TOKENS = Number(values.tokens);

function record(id: number): RequestRecord {
  const dtUs = [120_000, ...Array.from({ length: TOKENS }, (_, i) => 7500 + (i % 7))];
  return {
    id,
    phase: 'measure',
    scheduledAt: 0,
    sentAt: 0,
    requestedInputTokens: 512,
    requestedOutputTokens: TOKENS,
    headersAt: 0,
    firstTokenAt: 120,
    firstContentAt: 120,
    lastTokenAt: 120 + TOKENS * 7.5,
    endAt: 120 + TOKENS * 7.5,
    status: 200,
    inputTokens: 512,
    inputTokensSource: 'server',
    outputTokens: TOKENS,
    outputTokensSource: 'server',
    finishReason: 'length',
    events: {
      dtUs,
      tokens: dtUs.map((_, i) => (i === 0 ? 0 : 1)),
      contentChars: dtUs.map(() => 4),
    },
  } as unknown as RequestRecord;
}

let sink = 0;
const builtIn = builtInOutput<Output>({
  name: 'results-like',
  records: (e) => {
    sink += e.lines !== undefined ? e.lines.length : e.records()[0].outputTokens;
  },
});
const user: Output = {
  name: 'user',
  records: (e) => {
    for (const r of e.records()) sink += r.outputTokens;
  },
};

const info = {
  id: 'bench',
  command: 'run',
  kind: 'run' as const,
  root: '',
  rootIsPoint: true,
  startedAt: '',
  plan: {},
};

function time(outputs: Output[], how: 'record' | 'lines'): number {
  const events = new SessionEvents(info, outputs);
  const point = events.nextPoint({ load: { mode: 'closed', concurrency: 1 }, scenario: 's' });
  const records = Array.from({ length: 64 }, (_, i) => record(i));
  const lines = records.map((r) => `${JSON.stringify(r)}\n`);
  const started = performance.now();
  for (let i = 0; i < N; i++) {
    if (how === 'record') events.record(point, records[i % 64]);
    else events.lines(point, lines[i % 64], 1);
  }
  return ((performance.now() - started) * 1000) / N;
}

for (const how of ['record', 'lines'] as const) {
  // A first pass warms the JIT; the second is reported.
  time([builtIn], how);
  time([builtIn, user], how);
  const base = time([builtIn], how);
  const withUser = time([builtIn, user], how);
  process.stdout.write(
    `${how}: ${base.toFixed(3)} µs/record built-in outputs only; ${withUser.toFixed(3)} µs/record with an output of the user's own reading every record (${TOKENS} tokens)\n`,
  );
}

function timeLive(): number {
  const live = new LiveRecorder();
  const records = Array.from({ length: 64 }, (_, i) => record(i));
  const started = performance.now();
  for (let i = 0; i < N; i++) {
    live.add(records[i % 64]);
    // A worker hands its counts over once a second: some thousands of records apart.
    if (i % 4096 === 0) sink += live.take().completed;
  }
  return ((performance.now() - started) * 1000) / N;
}
timeLive();
const liveUs = timeLive();
process.stdout.write(
  `live counts: ${liveUs.toFixed(3)} µs/record (${((liveUs / TOKENS) * 1000).toFixed(0)} ns per token event) when an output listens for snapshots\n`,
);
if (sink < 0) process.stdout.write(String(sink));
