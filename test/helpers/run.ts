import { openaiBackend } from '../../src/backends/openai.js';
import type { LoadSpec } from '../../src/load.js';
import type { TargetConfig } from '../../src/loadgen/http.js';
import { type LoadgenOptions, type LoadgenResult, runLoadgen } from '../../src/loadgen/run.js';
import type { SloCondition } from '../../src/metrics/slo.js';
import { type RunSummary, summarize } from '../../src/metrics/summary.js';
import type { RequestRecord } from '../../src/record.js';
import { createSyntheticWorkload } from '../../src/workload/synthetic.js';

export interface TestRun {
  records: RequestRecord[];
  summary: RunSummary;
  result: LoadgenResult;
}

export function target(url: string, overrides: Partial<TargetConfig> = {}): TargetConfig {
  return {
    backend: openaiBackend,
    baseUrl: url,
    endpoint: 'completions',
    model: 'sim-llama-3-8b',
    temperature: 0,
    ignoreEos: false,
    continuousUsageStats: false,
    headers: {},
    timeoutMs: 30_000,
    ...overrides,
  };
}

/** Runs the real engine against `url` and returns its records (sorted by id) and summary. */
export async function runAgainst(
  url: string,
  options: {
    target?: Partial<TargetConfig>;
    load?: LoadSpec;
    requests?: number;
    durationS?: number;
    warmupRequests?: number;
    inputTokens?: number;
    outputTokens?: number;
    slo?: SloCondition[];
    engine?: Partial<LoadgenOptions>;
    /** Called after each record is collected (with all records so far). */
    onRecord?: (record: RequestRecord, all: RequestRecord[]) => void;
  } = {},
): Promise<TestRun> {
  const records: RequestRecord[] = [];
  const load = options.load ?? { mode: 'closed', concurrency: 1 };
  const result = await runLoadgen({
    target: target(url, options.target),
    load,
    ...(options.durationS === undefined ? { requests: options.requests ?? 4 } : {}),
    ...(options.durationS !== undefined ? { durationS: options.durationS } : {}),
    warmupRequests: options.warmupRequests ?? 0,
    seed: 7,
    nextRequest: createSyntheticWorkload({
      inputTokens: options.inputTokens ?? 16,
      outputTokens: options.outputTokens ?? 8,
      seed: 7,
    }),
    onRecord: (r) => {
      records.push(r);
      options.onRecord?.(r, records);
    },
    ...options.engine,
  });
  records.sort((a, b) => a.id - b.id);
  const summary = summarize(
    records,
    { load, ...(options.slo ? { slo: options.slo } : {}) },
    {
      clientHealth: result.clientHealth,
    },
  );
  return { records, summary, result };
}
