/**
 * Other tools' results read as runs (issue 54): each format's reader (one file per format in
 * this folder) turns a file into a `ForeignRun`, which the one read model takes as it takes a
 * run directory: per-request records where the file has them (the paired bootstrap then
 * applies), the tool's own summary statistics otherwise.
 */
import type { LoadSpec } from '../../load.js';
import type { RunSummary } from '../../metrics/summary.js';
import type { RequestRecord } from '../../record.js';

/** The formats read (and, for llm-d, written). */
export type ForeignFormat = 'vllm-bench' | 'guidellm' | 'aiperf' | 'llm-d';

export interface ForeignRun {
  format: ForeignFormat;
  /** The format's version or the tool's release, as the file says or as its shape tells. */
  formatVersion?: string;
  /** The file read (and, for a file of several benchmarks, which one: `benchmarks[2]`). */
  source: string;
  /** Per-request records rebuilt from the file (times in ms on the run's clock), where it has them. */
  records?: RequestRecord[];
  /**
   * The run's summary: computed from `records` by the SummaryBuilder where there are records,
   * else from the file's own statistics (distributions without samples).
   */
  summary: RunSummary;
  /** Whether `records` are the file's own per-request figures (not a summary's). */
  perRequest: boolean;
  model?: string;
  url?: string;
  load?: LoadSpec;
  startedAt?: string;
  /**
   * What does not translate, named for the reader of a comparison: the tool's percentile
   * definition, warm-up handling, what it counts as TTFT or ITL, whether failures are in its
   * percentiles. One sentence each.
   */
  notes: string[];
}
