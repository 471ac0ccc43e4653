/** The terminal view of a prefill or decode probe (probe.json's points and fit). */

import Table from 'cli-table3';
import pc from 'picocolors';
import {
  type DecodeModel,
  type DecodeRow,
  MIN_FIT_R2,
  type PrefillModel,
  type PrefillRow,
  QUADRATIC_SHARE,
} from '../analysis/probe.js';
import { fmtNumber } from '../metrics/format.js';
import type { Warning } from '../metrics/summary.js';
import { failedCell } from './failures.js';
import { terminalSafe } from './format.js';

/** A probe point as saved in probe.json: its row, its run directory, its summary's warnings. */
export type PrefillPoint = PrefillRow & { dir: string; warnings: Warning[] };
export type DecodePoint = DecodeRow & { dir: string; warnings: Warning[] };

/**
 * Each kind of warning once, with the first point that raised it: `<dir>: <message> (and N
 * more points)`.
 */
export function probeWarnings(points: readonly { dir: string; warnings: Warning[] }[]): string[] {
  const seen = new Map<string, { dir: string; message: string; count: number }>();
  for (const p of points) {
    for (const w of p.warnings) {
      // A few requests per point is the design: p99 over them is their slowest (in probe.json).
      if (w.code === 'low_sample') continue;
      const first = seen.get(w.code);
      if (first) first.count++;
      else seen.set(w.code, { dir: p.dir, message: w.message, count: 1 });
    }
  }
  return [...seen.values()].map(({ dir, message, count }) => {
    const more = count > 1 ? ` (and ${count - 1} more point${count > 2 ? 's' : ''})` : '';
    return `${dir}: ${message}${more}`;
  });
}

const num = (n: number | undefined, digits = 0) => fmtNumber(n ?? Number.NaN, digits);

/** Three significant digits with thousands separators: 24,300 tok/s. */
const sig3 = (n: number) =>
  Number.isFinite(n) ? Number(n.toPrecision(3)).toLocaleString('en-US') : '-';

/** Milliseconds: one decimal from 1 ms up, three significant digits below. */
export function formatMs(ms: number): string {
  if (!Number.isFinite(ms)) return '-';
  return Math.abs(ms) >= 1 ? ms.toFixed(1) : Number(ms.toPrecision(3)).toString();
}

/** "TTFT ~ 31.2 ms + n / 24,300 tok/s (r2 0.9981, batch 1, 128-8,191 tokens)", and the parabola. */
export function formatPrefillModel(m: PrefillModel): string[] {
  const n = m.batch === 1 ? 'n' : `n x ${m.batch}`;
  const n2 = m.batch === 1 ? 'n²' : `(n x ${m.batch})²`;
  const range = `${num(m.tokens.min)}-${num(m.tokens.max)} tokens${m.batch === 1 ? '' : ' per batch'}`;
  if (m.reliable === false) return [noReliableFit(`TTFT against ${n}`, m.r2, range)];
  const held =
    m.fixedMsUnconstrained !== undefined
      ? `; fixed latency held at 0: least squares gave ${formatMs(m.fixedMsUnconstrained)} ms, below its physical range`
      : '';
  const lines = [
    `TTFT ~ ${formatMs(m.fixedMs)} ms + ${n} / ${sig3(m.tokensPerS)} tok/s (r2 ${m.r2.toFixed(4)}, batch ${m.batch}, ${range}): fixed latency ${formatMs(m.fixedMs)} ms, prefill ${sig3(m.tokensPerS)} tok/s${held}`,
  ];
  const q = m.quadratic;
  if (q) {
    const share = `${(q.shareAtMax * 100).toFixed(1)}% of TTFT at ${num(m.tokens.max)} tokens`;
    lines.push(
      `TTFT ~ ${formatMs(q.fixedMs)} ms + ${n} x ${q.msPerToken.toPrecision(3)} ms + ${n2} x ${q.msPerToken2.toPrecision(3)} ms (r2 ${q.r2.toFixed(4)}): ${
        q.matters
          ? `the quadratic term (attention) matters, ${share}; the linear rate averages over the range`
          : q.msPerToken2 <= 0 || q.msPerToken <= 0
            ? 'no clear quadratic term (a coefficient is not positive: noise, or no attention cost to see)'
            : q.shareAtMax < QUADRATIC_SHARE
              ? `the quadratic term is negligible (${share})`
              : `no clear quadratic term (${share}, but the parabola fits little better than the line)`
      }`,
    );
  }
  return lines;
}

/** What a fit whose line explains its points poorly says instead of its numbers. */
export function noReliableFit(what: string, r2: number, range: string): string {
  return `No reliable fit of ${what} (r2 ${r2.toFixed(4)} < ${MIN_FIT_R2}, ${range}): the points scatter about any line; read the table`;
}

/** "TPOT ~ 7.1 ms + 0.021 ms x concurrency (r2 0.9990, concurrency 1-64)". */
export function formatDecodeModel(m: DecodeModel): string {
  const range = `concurrency ${m.concurrency.min}-${m.concurrency.max}`;
  if (m.reliable === false) return noReliableFit('TPOT against concurrency', m.r2, range);
  const held = m.held
    ? `; ${m.held.term === 'stepMs' ? 'per-step cost' : 'per-sequence cost'} held at 0: least squares gave ${formatMs(m.held.unconstrainedMs)} ms, below its physical range`
    : '';
  return `TPOT ~ ${formatMs(m.stepMs)} ms + ${formatMs(m.perSequenceMs)} ms x concurrency (r2 ${m.r2.toFixed(4)}, ${range}): per-step cost at batch 1 ${formatMs(m.stepMs)} ms, each further sequence adds ${formatMs(m.perSequenceMs)} ms${held}`;
}

/** What the heading and notes say about the target (the description may hold server text). */
export interface ProbeTarget {
  /** The runner's description: model, and the simulated deployment if any. */
  description: string;
  endpoint: string;
  /** The built-in simulator's --time-scale, as given. */
  timeScale?: string;
  color: boolean;
}

const TABLE_STYLE = {
  style: { head: [], border: [] },
  chars: { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' },
};

function timeScaleNote(x: string | undefined): string {
  return x !== undefined
    ? `; the simulator ran at time scale ${x}, so times are ${x}x its modelled ones and rates 1/${x} of them`
    : '';
}

export function renderPrefill(
  points: PrefillPoint[],
  fit: PrefillModel | undefined,
  r: ProbeTarget,
): string {
  const c = pc.createColors(r.color);
  const counted = points.some((p) => Math.abs(p.countedInputTokens - p.inputTokens) >= 0.5);
  const head = [
    'input',
    ...(counted ? ['counted'] : []),
    'batch',
    'measured',
    'TTFT p50',
    'TTFT p99',
    'TTFT mean',
    'prefill tok/s',
    'failed',
  ];
  const table = new Table({ head, colAligns: Array(head.length).fill('right'), ...TABLE_STYLE });
  for (const p of points) {
    table.push([
      num(p.inputTokens),
      ...(counted ? [num(p.countedInputTokens, 1)] : []),
      p.batch,
      num(p.meanConcurrency, 1),
      num(p.ttftP50Ms, 1),
      num(p.ttftP99Ms, 1),
      num(p.ttftMeanMs, 1),
      num(p.prefillTokensPerS),
      failedCell(p, c.red),
    ]);
  }
  const lines = [
    c.bold(`Prefill probe (max_tokens 1, ${r.endpoint}): ${terminalSafe(r.description)}`),
    '',
    table.toString(),
    `(input tokens per request; latency in ms, p99 of a few requests is about their slowest; prefill tok/s: input tokens per second at that batch (its measured concurrency beside it), input x batch / mean TTFT when a batch runs in lockstep; TTFT includes the fixed latency of HTTP and the server's front end${timeScaleNote(r.timeScale)})`,
    '',
  ];
  if (fit) lines.push(...formatPrefillModel(fit).map((l, i) => (i === 0 ? c.bold(l) : l)));
  else lines.push(c.yellow('No fit: it needs two input lengths with completed requests.'));
  return lines.join('\n');
}

export function renderDecode(
  points: DecodePoint[],
  fit: DecodeModel | undefined,
  r: ProbeTarget,
): string {
  const c = pc.createColors(r.color);
  const head = [
    'concurrency',
    'measured',
    'ITL p50',
    'ITL p99',
    'TPOT mean',
    'per-user tok/s',
    'system tok/s',
    'out tokens',
    'failed',
  ];
  const table = new Table({ head, colAligns: Array(head.length).fill('right'), ...TABLE_STYLE });
  for (const p of points) {
    table.push([
      p.concurrency,
      num(p.meanConcurrency, 1),
      num(p.itlP50Ms, 2),
      num(p.itlP99Ms, 2),
      num(p.tpotMeanMs, 2),
      num(p.perUserTokensPerS, 1),
      num(p.systemTokensPerS),
      num(p.outputTokensMean, 1),
      failedCell(p, c.red),
    ]);
  }
  const lines = [
    c.bold(`Decode probe (closed loops, ${r.endpoint}): ${terminalSafe(r.description)}`),
    '',
    table.toString(),
    `(latency in ms, p99 of a few requests is about their slowest; per-user tok/s = 1000 / mean TPOT; system decode tok/s = measured concurrency x per-user tok/s; out tokens: mean per request${timeScaleNote(r.timeScale)})`,
    '',
  ];
  if (fit) lines.push(c.bold(formatDecodeModel(fit)));
  else lines.push(c.yellow('No fit: it needs two concurrency levels with completed requests.'));
  return lines.join('\n');
}
