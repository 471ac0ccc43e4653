/**
 * The report's charts: echarts rendered on the server to SVG (no DOM, no browser), each with the
 * pixel positions and labels of its points for the report's small tooltip script. Pure functions
 * from results to chart specs, and one renderer for them all.
 *
 * Strings from servers and datasets (scenario names, model names) may reach a chart as a legend
 * entry or a category: echarts writes every text node HTML-encoded, and no such string is ever
 * put in an attribute (series names are ours; the report's test checks both).
 */
import { createRequire } from 'node:module';
import type * as EChartsCore from 'echarts/core';
import type { Cliff, Knee, MaxLoadSearch, Recommendation, SweepPoint } from '../analysis/sweep.js';
import { requireCached } from '../codeCache.js';
import type { CapacityLimit, CapacityPrediction, CapacityStep } from '../memory/capacity.js';
import {
  type Distribution,
  percentileOf,
  type RankedSamples,
  sortedSamples,
  weightedSamples,
} from '../metrics/distribution.js';
import { enUsNumber, fmtNumber, fmtSig } from '../metrics/format.js';
import type { RunSummary, Warning } from '../metrics/summary.js';
import { ERROR_KINDS } from '../record.js';
import { REQUEST_STATE, type RunCharts } from '../results/runView.js';
import { commonFields } from '../telemetry/common.js';
import type { TelemetrySnapshot } from '../telemetry/snapshot.js';
import { metricLabel, metricUnit } from './format.js';

/**
 * echarts' one-file build of its common charts and components (line, bar, scatter, grid, axes
 * incl. log, legend, markLine: all this file draws), minified, as its server-side rendering
 * guide loads a one-file build. Its whole build took 0.12 s more CPU at the end of every run
 * that writes a report (a one-request run: 0.70 -> 0.57 s, bench:startup), for the same SVG to
 * the byte on every report fixture; the ES modules of `echarts/core` are some 600 files and
 * cost about 1 s on Node 20's module loader. It is compiled from a V8 code cache (codeCache.ts),
 * saved once a chart is drawn, so that the cache holds the functions drawing compiled.
 */
const echartsBundle = requireCached(
  createRequire(import.meta.url).resolve('echarts/dist/echarts.common.min'),
);
const echarts = echartsBundle.exports as typeof EChartsCore;

/**
 * echarts writes the family into each text's style attribute as it is; the report turns that
 * into a font-size attribute and sets the family once, in its stylesheet.
 */
const FONT = 'sans-serif';
const INK = '#1f2937';
const MUTED = '#6b7280';
const GRID_LINE = '#e5e7eb';
export const COLORS = {
  blue: '#2563eb',
  green: '#059669',
  red: '#dc2626',
  amber: '#d97706',
  violet: '#7c3aed',
  cyan: '#0891b2',
  pink: '#db2777',
  grey: '#9ca3af',
} as const;
const PALETTE = [
  COLORS.blue,
  COLORS.green,
  COLORS.amber,
  COLORS.violet,
  COLORS.cyan,
  COLORS.pink,
  COLORS.red,
];

/** At most this many points per series reach a chart (and its tooltips); more are sampled. */
export const MAX_SERIES_POINTS = 2000;
/** Points of a distribution curve. */
const CDF_POINTS = 200;

export interface Axis {
  name: string;
  /** `log` axes drop points at or below 0. */
  type?: 'value' | 'log';
  logBase?: number;
  min?: number;
  max?: number;
  /** Unit after values in tooltips (`ms`, `tok/s`). */
  unit?: string;
  /** Values are 0..1 shares shown as percent. */
  percent?: boolean;
  /** Fit the axis to the data instead of starting it at 0. */
  scale?: boolean;
}

export interface Series {
  name: string;
  type: 'line' | 'scatter' | 'step';
  data: [number, number][];
  /** Which y axis (0 left, 1 right). */
  yAxis?: 0 | 1;
  /** Tooltip text per point (default: series, y and x with their units). */
  labels?: string[];
  /** Short text drawn next to each point (e.g. the load level). */
  pointLabels?: string[];
  color?: string;
  dashed?: boolean;
  symbol?: 'circle' | 'triangle' | 'diamond' | 'rect' | 'none';
  symbolSize?: number;
  /** Leaves the series out of the tooltips (fits, reference lines). */
  noTips?: boolean;
  width?: number;
}

/** A reference line: vertical at an x value or horizontal at a y value, labelled. */
export interface Mark {
  axis: 'x' | 'y';
  value: number;
  label: string;
  color?: string;
  /** Where the label sits along the line, to keep neighbouring labels apart. */
  at?: 'start' | 'middle' | 'end';
  /** For `y` marks on a two-axis chart: the axis the value belongs to. */
  yAxis?: 0 | 1;
}

export interface XYChartSpec {
  kind: 'xy';
  /** Stable chart id (`ttft-cdf`, `sweep-throughput`): the report's golden structure. */
  id: string;
  title: string;
  /** One or two sentences under the chart. */
  caption?: string;
  x: Axis;
  y: [Axis] | [Axis, Axis];
  series: Series[];
  marks?: Mark[];
  width?: number;
  height?: number;
}

export interface BarChartSpec {
  kind: 'bar';
  id: string;
  title: string;
  caption?: string;
  categories: string[];
  y: Axis;
  series: { name: string; values: number[]; color?: string }[];
  width?: number;
  height?: number;
}

export type ChartSpec = XYChartSpec | BarChartSpec;

/** Tooltip points in SVG pixels (flat x, y pairs) and a label for each. */
export interface ChartTips {
  p: number[];
  l: string[];
}

export interface RenderedChart {
  id: string;
  title: string;
  caption?: string;
  svg: string;
  tips: ChartTips;
}

const SMALL = { width: 560, height: 300 };
const WIDE = { width: 1120, height: 260 };

// ---------------------------------------------------------------------------------------------
// Formatting

/** Axis ticks: as echarts chose them, grouped, without trailing zeros; 12k, 3.5M when large. */
function fmtTick(v: number): string {
  const a = Math.abs(v);
  if (a >= 1e9) return `${fmtTick(v / 1e9)}G`;
  if (a >= 1e6) return `${fmtTick(v / 1e6)}M`;
  if (a >= 1e4) return `${fmtTick(v / 1e3)}k`;
  return enUsNumber(v, 0, 4);
}

function fmtAxisValue(axis: Axis, value: number): string {
  if (axis.percent) return `${fmtSig(value * 100)}%`;
  return `${fmtSig(value)}${axis.unit ? ` ${axis.unit}` : ''}`;
}

// ---------------------------------------------------------------------------------------------
// Rendering

/** Renders a chart to an SVG string, with its tooltip points. */
export function renderChart(spec: ChartSpec): RenderedChart {
  const size = { ...(spec.kind === 'bar' ? SMALL : SMALL), ...pickSize(spec) };
  const chart = echarts.init(null, null, {
    renderer: 'svg',
    ssr: true,
    width: size.width,
    height: size.height,
  });
  try {
    const { option, tips } = spec.kind === 'xy' ? xyOption(spec) : barOption(spec);
    chart.setOption(option);
    const svg = chart.renderToSVGString();
    echartsBundle.save();
    return {
      id: spec.id,
      title: spec.title,
      ...(spec.caption ? { caption: spec.caption } : {}),
      svg,
      tips: tips(chart),
    };
  } finally {
    chart.dispose();
  }
}

function pickSize(spec: ChartSpec): { width?: number; height?: number } {
  const out: { width?: number; height?: number } = {};
  if (spec.width !== undefined) out.width = spec.width;
  if (spec.height !== undefined) out.height = spec.height;
  return out;
}

type Option = Record<string, unknown>;

const baseOption = (): Option => ({
  animation: false,
  backgroundColor: 'transparent',
  color: PALETTE,
  textStyle: { fontFamily: FONT, color: INK, fontSize: 12 },
});

function axisOption(axis: Axis, position?: 'left' | 'right', gridLines = true): Option {
  const log = axis.type === 'log';
  return {
    type: log ? 'log' : 'value',
    ...(log ? { logBase: axis.logBase ?? 10 } : {}),
    name: axis.name,
    nameLocation: 'middle',
    nameGap: position === undefined ? 28 : 46,
    nameTextStyle: { color: MUTED, fontSize: 12 },
    ...(position ? { position } : {}),
    ...(axis.min !== undefined ? { min: axis.min } : {}),
    ...(axis.max !== undefined ? { max: axis.max } : {}),
    scale: axis.scale === true,
    axisLine: { show: true, lineStyle: { color: MUTED } },
    axisTick: { show: true },
    axisLabel: {
      color: MUTED,
      hideOverlap: true,
      formatter: (v: number) => (axis.percent ? `${fmtTick(v * 100)}%` : fmtTick(v)),
    },
    splitLine: { show: gridLines, lineStyle: { color: GRID_LINE } },
  };
}

function xyOption(spec: XYChartSpec): {
  option: Option;
  tips: (c: EChartsCore.ECharts) => ChartTips;
} {
  const twoAxes = spec.y.length === 2;
  const axisIndex = (s: Series): 0 | 1 => (twoAxes ? (s.yAxis ?? 0) : 0);
  const yAxisOf = (s: Series): Axis => spec.y[axisIndex(s)] ?? spec.y[0];
  // Points a log axis cannot show (and non-numbers) are left out; `kept` maps back to labels.
  const kept = spec.series.map((s) => {
    const axis = yAxisOf(s);
    const out: number[] = [];
    s.data.forEach(([x, y], i) => {
      if (!Number.isFinite(x) || !Number.isFinite(y)) return;
      if ((axis.type === 'log' && y <= 0) || (spec.x.type === 'log' && x <= 0)) return;
      out.push(i);
    });
    return out;
  });
  const seriesData = spec.series.map((s, i) => kept[i].map((j) => s.data[j]));
  const series: Option[] = spec.series.map((s, i) => {
    const step = s.type === 'step';
    const scatter = s.type === 'scatter';
    const symbol = s.symbol ?? (scatter ? 'circle' : 'none');
    const out: Option = {
      name: s.name,
      type: scatter ? 'scatter' : 'line',
      data: seriesData[i],
      yAxisIndex: axisIndex(s),
      symbol,
      symbolSize: s.symbolSize ?? (scatter ? 4 : 6),
      showSymbol: symbol !== 'none',
      clip: true,
      silent: true,
      // Many symbols as one path: a tenth of the size in SVG.
      ...(scatter ? { large: true, largeThreshold: 200 } : {}),
      ...(s.color ? { itemStyle: { color: s.color } } : {}),
    };
    if (!scatter) {
      out.lineStyle = {
        width: s.width ?? 2,
        ...(s.color ? { color: s.color } : {}),
        ...(s.dashed ? { type: 'dashed' } : {}),
      };
      if (step) out.step = 'end';
    }
    if (s.pointLabels) {
      const labels = s.pointLabels;
      out.label = {
        show: true,
        position: 'top',
        color: MUTED,
        fontSize: 11,
        formatter: (p: { dataIndex: number }) => labels[kept[i][p.dataIndex]] ?? '',
      };
    }
    return out;
  });
  if (spec.marks && spec.marks.length > 0) series.push(marksSeries(spec.marks, spec.y));
  const legend = spec.series.length > 1;
  const option: Option = {
    ...baseOption(),
    grid: {
      left: 64,
      right: twoAxes ? 64 : 24,
      top: legend ? 40 : 20,
      bottom: 48,
    },
    legend: legend
      ? {
          top: 4,
          left: 'center',
          itemWidth: 18,
          itemHeight: 10,
          itemGap: 18,
          textStyle: { color: INK, fontSize: 12 },
          data: spec.series.map((s) => s.name),
        }
      : { show: false },
    xAxis: { ...axisOption(spec.x), splitLine: { show: false } },
    yAxis: spec.y.map((axis, i) =>
      axisOption(axis, twoAxes ? (i === 0 ? 'left' : 'right') : 'left', i === 0),
    ),
    series,
  };
  const tips = (chart: EChartsCore.ECharts): ChartTips => {
    const p: number[] = [];
    const l: string[] = [];
    spec.series.forEach((s, i) => {
      if (s.noTips) return;
      const data = seriesData[i];
      const yAxis = yAxisOf(s);
      data.forEach(([x, y], j) => {
        const at = chart.convertToPixel({ seriesIndex: i }, [x, y]) as number[] | undefined;
        if (!at || !Number.isFinite(at[0]) || !Number.isFinite(at[1])) return;
        p.push(Math.round(at[0] * 10) / 10, Math.round(at[1] * 10) / 10);
        const label = s.labels?.[kept[i][j]];
        l.push(label ?? `${s.name}: ${fmtAxisValue(yAxis, y)} at ${fmtAxisValue(spec.x, x)}`);
      });
    });
    return { p, l };
  };
  return { option, tips };
}

/** Reference lines drawn by an empty series, so they never depend on a data series' axis. */
function marksSeries(marks: Mark[], yAxes: Axis[]): Option {
  const byAxis = (m: Mark) => (m.axis === 'y' ? (m.yAxis ?? 0) : 0);
  const yIndex = marks.some((m) => byAxis(m) === 1) && yAxes.length === 2 ? 1 : 0;
  const position = { start: 'insideStartTop', middle: 'insideMiddleTop', end: 'insideEndTop' };
  return {
    name: '__marks',
    type: 'line',
    data: [],
    yAxisIndex: yIndex,
    silent: true,
    markLine: {
      silent: true,
      symbol: 'none',
      animation: false,
      data: marks.map((m) => ({
        ...(m.axis === 'x' ? { xAxis: m.value } : { yAxis: m.value }),
        lineStyle: { color: m.color ?? MUTED, type: 'dashed', width: 1.5 },
        label: {
          show: true,
          formatter: () => m.label,
          position: position[m.at ?? 'end'],
          color: m.color ?? MUTED,
          fontSize: 11,
          textBorderColor: '#fff',
          textBorderWidth: 3,
        },
      })),
    },
  };
}

function barOption(spec: BarChartSpec): {
  option: Option;
  tips: (c: EChartsCore.ECharts) => ChartTips;
} {
  const legend = spec.series.length > 1;
  const option: Option = {
    ...baseOption(),
    grid: { left: 64, right: 24, top: legend ? 40 : 20, bottom: 48 },
    legend: legend
      ? {
          top: 4,
          left: 'center',
          itemWidth: 18,
          itemHeight: 10,
          itemGap: 18,
          textStyle: { color: INK, fontSize: 12 },
          data: spec.series.map((s) => s.name),
        }
      : { show: false },
    xAxis: {
      type: 'category',
      data: spec.categories,
      axisLabel: { color: INK, interval: 0 },
      axisLine: { lineStyle: { color: MUTED } },
    },
    yAxis: axisOption(spec.y),
    series: spec.series.map((s) => ({
      name: s.name,
      type: 'bar',
      silent: true,
      data: s.values.map((v) => (spec.y.type === 'log' && !(v > 0) ? null : v)),
      barMaxWidth: 48,
      ...(s.color ? { itemStyle: { color: s.color } } : {}),
      label: {
        show: true,
        position: 'top',
        color: MUTED,
        fontSize: 11,
        formatter: (p: { value: number }) => fmtSig(p.value),
      },
    })),
  };
  const tips = (chart: EChartsCore.ECharts): ChartTips => {
    const p: number[] = [];
    const l: string[] = [];
    spec.series.forEach((s, i) => {
      s.values.forEach((v, j) => {
        if (!Number.isFinite(v) || (spec.y.type === 'log' && !(v > 0))) return;
        const at = chart.convertToPixel({ seriesIndex: i }, [j, v]) as number[] | undefined;
        if (!at || !Number.isFinite(at[0]) || !Number.isFinite(at[1])) return;
        p.push(Math.round(at[0] * 10) / 10, Math.round(at[1] * 10) / 10);
        l.push(`${spec.categories[j]}: ${s.name} ${fmtAxisValue(spec.y, v)}`);
      });
    });
    return { p, l };
  };
  return { option, tips };
}

// ---------------------------------------------------------------------------------------------
// Helpers over data

/** Every k-th item, so that at most `max` remain (the last one always kept). */
export function sample<T>(items: T[], max = MAX_SERIES_POINTS): T[] {
  if (items.length <= max) return items;
  const step = items.length / max;
  const out: T[] = [];
  for (let i = 0; i < max; i++) out.push(items[Math.floor(i * step)]);
  out[out.length - 1] = items[items.length - 1];
  return out;
}

/** An empirical CDF of ascending samples: [value, percent at or below] at ~CDF_POINTS places. */
export function cdfPoints(
  samples: ArrayLike<number> | RankedSamples,
  points = CDF_POINTS,
): [number, number][] {
  const ranked = ranks(samples);
  const n = ranked.count;
  if (n === 0) return [];
  const out: [number, number][] = [[ranked.at(0), (1 / n) * 100]];
  const steps = Math.min(points, n);
  for (let k = 1; k <= steps; k++) {
    const i = Math.min(n - 1, Math.ceil((k / steps) * n) - 1);
    const value = ranked.at(i);
    const previous = out[out.length - 1];
    if (previous[0] === value && previous[1] === ((i + 1) / n) * 100) continue;
    out.push([value, ((i + 1) / n) * 100]);
  }
  return out;
}

function ranks(samples: ArrayLike<number> | RankedSamples): RankedSamples {
  return 'count' in samples ? samples : sortedSamples(samples);
}

/**
 * Per-token inter-token latencies of the completed requests, one weighted sample per token event
 * (so the work follows events, not the tokens a server claims); for very long runs every k-th
 * request's (the read model keeps at most MAX_CHART_ITL_EVENTS events).
 */
function itlSamples(charts: RunCharts): RankedSamples {
  return weightedSamples(charts.itl.values, charts.itl.tokens);
}

// ---------------------------------------------------------------------------------------------
// Runs

export interface RunData {
  summary: RunSummary;
  /** The run's records as the read model keeps them (results/runView.ts). */
  charts: RunCharts;
  telemetry: TelemetrySnapshot[];
}

/** The distribution curves: names and units from the metric catalogue. */
const LATENCY_METRICS = (
  [
    { key: 'ttftMs', id: 'ttft-cdf', long: 'time to first token' },
    { key: 'itlMs', id: 'itl-cdf', long: 'inter-token latency, per token' },
    { key: 'tpotMs', id: 'tpot-cdf', long: 'time per output token, per request' },
    { key: 'e2eMs', id: 'e2e-cdf', long: 'end-to-end latency' },
  ] as const
).map((m) => ({ ...m, name: metricLabel(m.key), unit: metricUnit(m.key) }));

/** A per-request column of the completed measured requests, sorted, without gaps. */
function completedValues(charts: RunCharts, key: 'ttftMs' | 'tpotMs' | 'e2eMs'): Float64Array {
  const { state, sentAt, endAt } = charts.columns;
  const column = key === 'e2eMs' ? undefined : charts.columns[key];
  const out = new Float64Array(charts.requests);
  let n = 0;
  for (let i = 0; i < charts.requests; i++) {
    if (state[i] !== REQUEST_STATE.completed) continue;
    const v = column ? column[i] : endAt[i] - sentAt[i];
    if (!Number.isNaN(v)) out[n++] = v;
  }
  return out.slice(0, n).sort();
}

/** TTFT, ITL, TPOT and E2E as distribution curves with p50, p95 and p99 marked. */
export function latencyCharts(run: RunData): ChartSpec[] {
  const charts: ChartSpec[] = [];
  for (const m of LATENCY_METRICS) {
    const sorted =
      m.key === 'itlMs' ? itlSamples(run.charts) : ranks(completedValues(run.charts, m.key));
    if (sorted.count === 0) continue;
    const d: Distribution | undefined = run.summary.latency?.[m.key];
    const pick = (q: 'p50' | 'p95' | 'p99') =>
      d && d.count > 0 && Number.isFinite(d[q]) ? d[q] : percentileOf(sorted, Number(q.slice(1)));
    const marks: Mark[] = [
      { axis: 'x', value: pick('p50'), label: `p50 ${fmtSig(pick('p50'))}`, at: 'start' },
      {
        axis: 'x',
        value: pick('p95'),
        label: `p95 ${fmtSig(pick('p95'))}`,
        at: 'middle',
        color: COLORS.amber,
      },
      {
        axis: 'x',
        value: pick('p99'),
        label: `p99 ${fmtSig(pick('p99'))}`,
        at: 'end',
        color: COLORS.red,
      },
    ];
    const points = cdfPoints(sorted);
    const unit = m.key === 'itlMs' ? 'tokens' : 'requests';
    charts.push({
      kind: 'xy',
      id: m.id,
      title: `${m.name}: ${m.long}`,
      caption: `Share of ${unit} at or below each latency (${fmtNumber(sorted.count)} ${unit === 'tokens' ? 'token gaps' : 'requests'}${sorted.count < (d?.count ?? 0) ? ', sampled' : ''}); p50 ${fmtSig(pick('p50'))} ms, p95 ${fmtSig(pick('p95'))} ms, p99 ${fmtSig(pick('p99'))} ms.`,
      x: { name: `${m.name} (${m.unit})`, unit: m.unit, scale: true },
      y: [{ name: `% of ${unit}`, min: 0, max: 100, unit: '%' }],
      series: [
        {
          name: m.name,
          type: 'line',
          data: points,
          color: COLORS.blue,
          labels: points.map(
            ([v, q]) => `${m.name} ${fmtSig(v)} ${m.unit}: ${fmtSig(q)}% of ${unit} at or below`,
          ),
        },
      ],
      marks,
    });
  }
  return charts;
}

/**
 * TTFT and E2E (p50 and p99) by turn index (an agent's step), from the summary's per-turn
 * table: with a prefix cache, turns after the first re-send a cached history and start sooner;
 * an agent's user feels each step's end-to-end.
 */
export function turnCharts(summary: RunSummary): ChartSpec[] {
  const turns = (summary.sessions?.turns ?? []).filter((t) => t.ttftMs.count > 0);
  if (turns.length === 0) return [];
  const byTurn = (metric: 'ttftMs' | 'e2eMs', label: string): ChartSpec => {
    const line = (q: 'p50' | 'p99', color: string): Series => ({
      name: `${label} ${q}`,
      type: 'line',
      data: turns.map((t) => [t.turn, t[metric][q]]),
      color,
      symbol: 'circle',
      labels: turns.map(
        (t) =>
          `turn ${t.turn}: ${label} ${q} ${fmtSig(t[metric][q])} ms over ${fmtNumber(t[metric].count)} requests${t[metric].lowConfidence?.includes(q) ? ' (too few to resolve)' : ''}`,
      ),
    });
    const first = turns[0][metric].p50;
    const later = turns.filter((t) => t.turn > 1).map((t) => t[metric].p50);
    const laterNote =
      later.length > 0 && turns[0].turn === 1
        ? `; p50 of turn 1 ${fmtSig(first)} ms, of the later turns ${fmtSig(Math.min(...later))} to ${fmtSig(Math.max(...later))} ms`
        : '';
    return {
      kind: 'xy',
      id: metric === 'ttftMs' ? 'turn-ttft' : 'turn-e2e',
      title: `${label} by turn`,
      caption:
        metric === 'ttftMs'
          ? `Each turn of the sessions (an agent's step) over every session that reached it${laterNote}. A turn re-sends the history before it: a prefix cache shows as later turns starting sooner.`
          : `Each turn's end-to-end latency, first send to last byte${laterNote}: what the user of a chat turn or an agent's step waits.`,
      x: { name: 'turn', min: 1, max: Math.max(2, turns[turns.length - 1].turn) },
      y: [{ name: `${label} (ms)`, min: 0, unit: 'ms' }],
      series: [line('p50', COLORS.blue), line('p99', COLORS.red)],
    };
  };
  return [byTurn('ttftMs', 'TTFT'), byTurn('e2eMs', 'E2E')];
}

/** The run's clock span in seconds: records and telemetry on one axis. */
export function runSpanS(run: RunData): number {
  let end = run.charts.endMs;
  for (const t of run.telemetry) end = Math.max(end, t.at);
  return end / 1000;
}

/**
 * Per-request TTFT and E2E by send time, requests in flight and output tokens/s, and the
 * server's telemetry (KV cache, running and waiting, memory), all on the run's clock.
 */
export function timelineCharts(run: RunData): ChartSpec[] {
  const spanS = runSpanS(run);
  if (run.charts.requests === 0 && run.telemetry.length === 0) return [];
  const x: Axis = { name: 'run clock (s)', unit: 's', min: 0, max: niceCeil(spanS) };
  const charts: ChartSpec[] = [];
  if (run.charts.requests > 0) {
    charts.push(requestTimeline(run.charts, x), loadTimeline(run.charts, x, spanS));
  }
  charts.push(...telemetryCharts(run.telemetry, x));
  return charts;
}

function niceCeil(v: number): number {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

/** Indices of every k-th request, so that at most `max` remain (the last one always kept). */
function sampledIndices(count: number, max = MAX_SERIES_POINTS): number[] {
  if (count <= max) return Array.from({ length: count }, (_, i) => i);
  const step = count / max;
  const out: number[] = [];
  for (let i = 0; i < max; i++) out.push(Math.floor(i * step));
  out[out.length - 1] = count - 1;
  return out;
}

function requestTimeline(charts: RunCharts, x: Axis): ChartSpec {
  const ttft: [number, number][] = [];
  const ttftLabels: string[] = [];
  const e2e: [number, number][] = [];
  const e2eLabels: string[] = [];
  const failed: [number, number][] = [];
  const failedLabels: string[] = [];
  const warmup: [number, number][] = [];
  const warmupLabels: string[] = [];
  const c = charts.columns;
  for (const i of sampledIndices(charts.requests)) {
    const at = c.sentAt[i] / 1000;
    const e2eMs = c.endAt[i] - c.sentAt[i];
    const sent = `sent at ${fmtSig(at)} s`;
    if (c.state[i] === REQUEST_STATE.warmup) {
      warmup.push([at, e2eMs]);
      warmupLabels.push(`warm-up request ${c.id[i]}: E2E ${fmtSig(e2eMs)} ms, ${sent}`);
    } else if (c.state[i] === REQUEST_STATE.failed) {
      failed.push([at, Math.max(e2eMs, 0.001)]);
      failedLabels.push(
        `request ${c.id[i]} failed (${ERROR_KINDS[c.errorKind[i]]}) after ${fmtSig(e2eMs)} ms, ${sent}`,
      );
    } else {
      const ttftMs = c.ttftMs[i];
      if (!Number.isNaN(ttftMs)) {
        ttft.push([at, ttftMs]);
        ttftLabels.push(`request ${c.id[i]}: TTFT ${fmtSig(ttftMs)} ms, ${sent}`);
      }
      e2e.push([at, e2eMs]);
      e2eLabels.push(
        `request ${c.id[i]}: E2E ${fmtSig(e2eMs)} ms, ${fmtNumber(c.outputTokens[i])} tokens, ${sent}`,
      );
    }
  }
  const series: Series[] = [
    { name: 'TTFT', type: 'scatter', data: ttft, labels: ttftLabels, color: COLORS.blue },
    { name: 'E2E', type: 'scatter', data: e2e, labels: e2eLabels, color: COLORS.green },
  ];
  if (failed.length > 0) {
    series.push({
      name: 'failed',
      type: 'scatter',
      data: failed,
      labels: failedLabels,
      color: COLORS.red,
      symbol: 'diamond',
      symbolSize: 8,
    });
  }
  if (warmup.length > 0) {
    series.push({
      name: 'warm-up (E2E)',
      type: 'scatter',
      data: warmup,
      labels: warmupLabels,
      color: COLORS.grey,
    });
  }
  return {
    kind: 'xy',
    id: 'latency-timeline',
    title: 'Per-request TTFT and E2E over the run',
    caption: `Each request at the time it was sent (log scale)${charts.requests > MAX_SERIES_POINTS ? `; ${fmtNumber(MAX_SERIES_POINTS)} of ${fmtNumber(charts.requests)} requests shown` : ''}.`,
    ...WIDE,
    x,
    y: [{ name: 'ms (log)', type: 'log', unit: 'ms' }],
    series,
  };
}

/** Requests in flight (exact steps, or per-bin means for long runs) and output tokens/s. */
function loadTimeline(charts: RunCharts, x: Axis, spanS: number): ChartSpec {
  const { sentAt, endAt } = charts.columns;
  let inFlight: [number, number][] = [];
  if (charts.requests <= MAX_SERIES_POINTS) {
    const changes: [number, number][] = [];
    for (let i = 0; i < charts.requests; i++) changes.push([sentAt[i], 1], [endAt[i], -1]);
    changes.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    let level = 0;
    inFlight.push([0, 0]);
    for (const [at, d] of changes) {
      level += d;
      const point: [number, number] = [at / 1000, level];
      if (inFlight.length > 0 && inFlight[inFlight.length - 1][0] === point[0]) {
        inFlight[inFlight.length - 1] = point;
      } else inFlight.push(point);
    }
  } else {
    // Time-weighted mean per bin: each request adds 1 over its span.
    const bins = 500;
    const width = (spanS * 1000) / bins;
    const area = new Float64Array(bins);
    for (let i = 0; i < charts.requests; i++) accumulate(area, width, sentAt[i], endAt[i], 1);
    inFlight = Array.from(area, (a, i) => [((i + 0.5) * width) / 1000, a / width]);
  }
  const tokens = tokenRate(charts, spanS);
  const reasoning = tokens.reasoning;
  return {
    kind: 'xy',
    id: 'load-timeline',
    title: 'Requests in flight and output tokens per second',
    caption: `Output tokens counted in ${fmtSig(tokens.binS)} s bins, at the time each token arrived${reasoning ? '; reasoning tokens (those of reasoning-only events) are part of the output, the rest is the answer' : ''}.`,
    ...WIDE,
    x,
    y: [
      { name: 'requests in flight', min: 0 },
      { name: 'output tok/s', min: 0, unit: 'tok/s' },
    ],
    series: [
      {
        name: 'in flight',
        type: 'step',
        data: inFlight,
        color: COLORS.violet,
        labels: inFlight.map(([t, n]) => `${fmtSig(n)} requests in flight at ${fmtSig(t)} s`),
      },
      {
        name: 'output tok/s',
        type: 'line',
        data: tokens.points,
        yAxis: 1,
        color: COLORS.amber,
        width: 1.5,
        labels: tokens.points.map(([t, v]) => `${fmtNumber(v)} output tok/s around ${fmtSig(t)} s`),
      },
      ...(reasoning
        ? [
            {
              name: 'reasoning tok/s',
              type: 'line' as const,
              data: reasoning,
              yAxis: 1 as const,
              color: COLORS.pink,
              width: 1.5,
              dashed: true,
              labels: reasoning.map(
                ([t, v], i) =>
                  `${fmtNumber(v)} reasoning tok/s, ${fmtNumber(tokens.points[i][1] - v)} answer tok/s around ${fmtSig(t)} s`,
              ),
            },
          ]
        : []),
    ],
  };
}

function accumulate(area: Float64Array, width: number, from: number, to: number, level: number) {
  if (level === 0 || to <= from) return;
  let t = from;
  while (t < to) {
    const bin = Math.min(area.length - 1, Math.floor(t / width));
    const end = Math.min(to, (bin + 1) * width);
    area[bin] += level * (end - t);
    if (end <= t) break;
    t = end;
  }
}

/**
 * Output tokens per second in bins of a round width (about 100 over the run), added up from the
 * read model's finer bins; `reasoning`, when some event carried reasoning text, is the part of
 * them in reasoning-only events.
 */
function tokenRate(
  charts: RunCharts,
  spanS: number,
): { binS: number; points: [number, number][]; reasoning?: [number, number][] } {
  const raw = Math.max(spanS / 60, 0.01);
  const p = 10 ** Math.floor(Math.log10(raw));
  const binS = [1, 2, 5, 10].map((m) => m * p).find((w) => w >= raw) ?? 10 * p;
  const length = Math.max(1, Math.ceil(spanS / binS));
  const { widthMs, output, reasoning } = charts.tokenBins;
  // Fine bin i covers [i, i + 1) * widthMs, inside round bin floor(i / ratio): both widths
  // are whole ms, the round one a whole multiple of the fine one.
  const ratio = Math.max(1, Math.round((binS * 1000) / widthMs));
  const rebin = (fine: Float64Array) => {
    const bins = new Float64Array(length);
    for (let i = 0; i < fine.length; i++) {
      if (fine[i] === 0) continue;
      bins[Math.min(length - 1, Math.floor(i / ratio))] += fine[i];
    }
    return bins;
  };
  const rates = (b: Float64Array) =>
    Array.from(b, (n, i): [number, number] => [(i + 0.5) * binS, n / binS]);
  return {
    binS,
    points: rates(rebin(output)),
    ...(reasoning ? { reasoning: rates(rebin(reasoning)) } : {}),
  };
}

function telemetryCharts(snapshots: TelemetrySnapshot[], x: Axis): ChartSpec[] {
  const fields = [...snapshots]
    .filter((s) => s.values)
    .sort((a, b) => a.at - b.at)
    .map((s) => ({ at: s.at / 1000, f: commonFields(s.values as Record<string, number>) }));
  const series = (pick: (f: ReturnType<typeof commonFields>) => number | undefined, scale = 1) =>
    fields.flatMap(({ at, f }) => {
      const v = pick(f);
      return v === undefined ? [] : [[at, v * scale] as [number, number]];
    });
  const charts: ChartSpec[] = [];
  const kv = series((f) => f.kvCacheUsage);
  const running = series((f) => f.running);
  const waiting = series((f) => f.waiting);
  if (kv.length > 0 || running.length > 0 || waiting.length > 0) {
    const s: Series[] = [];
    if (kv.length > 0) {
      s.push({
        name: 'KV cache used',
        type: 'line',
        data: kv,
        color: COLORS.red,
        symbol: 'circle',
        symbolSize: 4,
        labels: kv.map(([t, v]) => `KV cache ${fmtSig(v * 100)}% used at ${fmtSig(t)} s`),
      });
    }
    const queue = kv.length > 0 ? 1 : 0;
    if (running.length > 0) {
      s.push({
        name: 'running',
        type: 'step',
        data: running,
        yAxis: queue,
        color: COLORS.blue,
        labels: running.map(([t, v]) => `${fmtSig(v)} running at ${fmtSig(t)} s`),
      });
    }
    if (waiting.length > 0) {
      s.push({
        name: 'waiting',
        type: 'step',
        data: waiting,
        yAxis: queue,
        color: COLORS.amber,
        labels: waiting.map(([t, v]) => `${fmtSig(v)} waiting at ${fmtSig(t)} s`),
      });
    }
    const y: [Axis] | [Axis, Axis] =
      kv.length > 0
        ? running.length + waiting.length > 0
          ? [
              { name: 'KV cache used', min: 0, max: 1, percent: true },
              { name: 'requests', min: 0 },
            ]
          : [{ name: 'KV cache used', min: 0, max: 1, percent: true }]
        : [{ name: 'requests', min: 0 }];
    charts.push({
      kind: 'xy',
      id: 'kv-timeline',
      title: 'Server: KV cache, running and waiting requests',
      caption: `From the server's metrics, scraped ${fmtNumber(fields.length)} times on the run's clock.`,
      ...WIDE,
      x,
      y,
      series: s,
    });
  }
  const gib = 2 ** 30;
  const gpu = series((f) => f.gpuMemoryUsedBytes, 1 / gib);
  const gpuTotal = series((f) => f.gpuMemoryTotalBytes, 1 / gib);
  const rss = series((f) => f.processRssBytes, 1 / gib);
  if (gpu.length > 0 || rss.length > 0) {
    const s: Series[] = [];
    if (gpu.length > 0) {
      s.push({
        name: 'GPU memory used',
        type: 'line',
        data: gpu,
        color: COLORS.violet,
        labels: gpu.map(([t, v]) => `GPU memory ${fmtSig(v)} GiB used at ${fmtSig(t)} s`),
      });
    }
    if (gpuTotal.length > 0) {
      s.push({
        name: 'GPU memory total',
        type: 'line',
        data: gpuTotal,
        color: COLORS.grey,
        dashed: true,
        noTips: true,
      });
    }
    if (rss.length > 0) {
      s.push({
        name: 'server RSS',
        type: 'line',
        data: rss,
        color: COLORS.cyan,
        labels: rss.map(([t, v]) => `server RSS ${fmtSig(v)} GiB at ${fmtSig(t)} s`),
      });
    }
    charts.push({
      kind: 'xy',
      id: 'memory-timeline',
      title: 'Server: memory',
      caption: 'GPU memory summed over GPUs; the server process resident memory where read.',
      ...WIDE,
      x,
      y: [{ name: 'GiB', min: 0, unit: 'GiB' }],
      series: s,
    });
  }
  return charts;
}

// ---------------------------------------------------------------------------------------------
// Several scenarios

export interface ScenarioBar {
  name: string;
  outputTokensPerS: number;
  ttftP99Ms: number;
  e2eP99Ms: number;
  tpotP50Ms: number;
}

export function scenarioCharts(rows: ScenarioBar[]): ChartSpec[] {
  if (rows.length === 0) return [];
  const categories = rows.map((r) => r.name);
  return [
    {
      kind: 'bar',
      id: 'scenarios-throughput',
      title: 'System output throughput by scenario',
      caption: 'Each scenario at its own measured load (see the table).',
      categories,
      y: { name: 'output tok/s', min: 0, unit: 'tok/s' },
      series: [
        {
          name: 'output tok/s',
          values: rows.map((r) => r.outputTokensPerS),
          color: COLORS.blue,
        },
      ],
    },
    {
      kind: 'bar',
      id: 'scenarios-latency',
      title: 'p99 latencies by scenario',
      caption: 'Log scale.',
      categories,
      y: { name: 'ms (log)', type: 'log', unit: 'ms' },
      series: [
        { name: 'TTFT p99', values: rows.map((r) => r.ttftP99Ms), color: COLORS.blue },
        { name: 'TPOT p50', values: rows.map((r) => r.tpotP50Ms), color: COLORS.amber },
        { name: 'E2E p99', values: rows.map((r) => r.e2eP99Ms), color: COLORS.green },
      ],
    },
  ];
}

// ---------------------------------------------------------------------------------------------
// Sweeps

/** One scenario of sweep.json. */
export interface ScenarioSweepJson {
  scenario: string;
  points: SweepPoint[];
  knee?: Knee;
  cliff?: Cliff;
  search?: MaxLoadSearch & { slos: string[]; binding?: string };
  recommendations?: Recommendation[];
  warnings?: Warning[];
}

function levelMarks(s: ScenarioSweepJson, levelName: string): Mark[] {
  const marks: Mark[] = [];
  if (s.knee) {
    marks.push({
      axis: 'x',
      value: s.knee.saturatesAt,
      label: `knee: saturates at ${fmtSig(s.knee.saturatesAt)}`,
      color: COLORS.amber,
      at: 'end',
    });
  }
  if (s.cliff) {
    marks.push({
      axis: 'x',
      value: s.cliff.level,
      label: `cliff: ${s.cliff.metric} x${fmtSig(s.cliff.factor)}`,
      color: COLORS.red,
      at: 'middle',
    });
  }
  if (s.search && s.search.best > 0) {
    marks.push({
      axis: 'x',
      value: s.search.best,
      label: `max ${levelName} under SLO: ${fmtSig(s.search.best)}`,
      color: COLORS.green,
      at: 'start',
    });
  }
  return marks;
}

/** Throughput and p99 latencies against the load, the Pareto front, per-user vs system. */
export function sweepCharts(s: ScenarioSweepJson, mode: 'concurrency' | 'rate'): ChartSpec[] {
  const points = [...s.points].sort((a, b) => a.level - b.level);
  if (points.length === 0) return [];
  const levelName = mode === 'rate' ? 'rate' : 'concurrency';
  const x: Axis = {
    name: mode === 'rate' ? 'requests/s (log)' : 'concurrency (log)',
    type: 'log',
    logBase: 2,
  };
  const lv = (p: SweepPoint) =>
    mode === 'rate' ? `${fmtSig(p.level)} req/s` : `concurrency ${fmtNumber(p.level)}`;
  const marks = levelMarks(s, levelName);
  const best = s.search?.bestPoint;
  const throughputSeries: Series[] = [
    {
      name: 'system output tok/s',
      type: 'line',
      data: points.map((p) => [p.level, p.outputTokensPerS]),
      symbol: 'circle',
      color: COLORS.blue,
      labels: points.map(
        (p) =>
          `${lv(p)} (measured ${fmtSig(p.meanConcurrency)}): ${fmtNumber(p.outputTokensPerS)} output tok/s`,
      ),
    },
  ];
  if (best) {
    throughputSeries.push({
      name: 'best under SLO',
      type: 'scatter',
      data: [[best.level, best.outputTokensPerS]],
      color: COLORS.green,
      symbol: 'diamond',
      symbolSize: 12,
      labels: [
        `${lv(best)} meets ${s.search?.slos.join(', ')}: ${fmtNumber(best.outputTokensPerS)} output tok/s`,
      ],
    });
  }
  const goodput = points.filter((p) => p.goodputRequestsPerS !== undefined);
  const sloLines: Mark[] = [];
  for (const text of s.search?.slos ?? []) {
    const m = /^(ttft|itl|e2e)\.p99\s*<\s*([0-9.]+)$/.exec(text);
    if (m) sloLines.push({ axis: 'y', value: Number(m[2]), label: `SLO ${text}`, at: 'start' });
  }
  const latency = latencyLines(points, (p) => p.level, lv, [
    ['TTFT p99', (p) => p.ttftP99Ms, COLORS.blue],
    ['ITL p99', (p) => p.itlP99Ms, COLORS.amber],
    ['E2E p99', (p) => p.e2eP99Ms, COLORS.green],
  ]);
  const front = paretoFront(points);
  const charts: ChartSpec[] = [
    {
      kind: 'xy',
      id: 'sweep-throughput',
      title: `System throughput against ${levelName}`,
      caption: `Output tokens per second over all requests at each ${levelName}${goodput.length > 0 ? '' : ''}; knee, cliff and the largest load meeting the SLOs marked where found.`,
      x,
      y: [{ name: 'output tok/s', min: 0, unit: 'tok/s' }],
      series: throughputSeries,
      marks,
    },
    {
      kind: 'xy',
      id: 'sweep-latency',
      title: `p99 latencies against ${levelName}`,
      caption: 'Log scales; the SLO limits searched for are dashed lines.',
      x,
      y: [{ name: 'ms (log)', type: 'log', unit: 'ms' }],
      series: latency,
      marks: [...marks, ...sloLines],
    },
    {
      kind: 'xy',
      id: 'sweep-pareto',
      title: 'Latency against throughput: the Pareto front',
      caption:
        'Each load level as p99 TTFT against system throughput; the front joins the levels no other beats on both.',
      x: { name: 'system output tok/s', min: 0, unit: 'tok/s' },
      y: [{ name: 'TTFT p99 (ms)', min: 0, unit: 'ms' }],
      series: [
        {
          name: 'Pareto front',
          type: 'line',
          data: front.map((p) => [p.outputTokensPerS, p.ttftP99Ms]),
          color: COLORS.grey,
          dashed: true,
          noTips: true,
        },
        {
          name: 'load levels',
          type: 'scatter',
          data: points.map((p) => [p.outputTokensPerS, p.ttftP99Ms]),
          color: COLORS.blue,
          symbolSize: 8,
          pointLabels: points.map((p) => fmtSig(p.level)),
          labels: points.map(
            (p) =>
              `${lv(p)}: ${fmtNumber(p.outputTokensPerS)} tok/s, TTFT p99 ${fmtSig(p.ttftP99Ms)} ms${front.includes(p) ? ' (on the front)' : ''}`,
          ),
        },
      ],
    },
    {
      kind: 'xy',
      id: 'sweep-per-user',
      title: 'Per-user against system tokens per second',
      caption:
        'What one user reads (mean output speed) against what the service delivers in all, labelled by load.',
      x: { name: 'per-user tok/s', min: 0, unit: 'tok/s' },
      y: [{ name: 'system output tok/s', min: 0, unit: 'tok/s' }],
      series: [
        {
          name: 'load levels',
          type: 'line',
          data: points.map((p) => [p.perUserTokensPerS, p.outputTokensPerS]),
          symbol: 'circle',
          symbolSize: 8,
          color: COLORS.violet,
          pointLabels: points.map((p) => fmtSig(p.level)),
          labels: points.map(
            (p) =>
              `${lv(p)}: ${fmtSig(p.perUserTokensPerS)} tok/s per user, ${fmtNumber(p.outputTokensPerS)} tok/s in all`,
          ),
        },
      ],
    },
  ];
  return charts;
}

/** Points no other point beats on both throughput (higher) and p99 TTFT (lower). */
export function paretoFront(points: SweepPoint[]): SweepPoint[] {
  const ok = points.filter(
    (p) => Number.isFinite(p.outputTokensPerS) && Number.isFinite(p.ttftP99Ms),
  );
  return ok
    .filter(
      (p) =>
        !ok.some(
          (q) =>
            q !== p &&
            q.outputTokensPerS >= p.outputTokensPerS &&
            q.ttftP99Ms <= p.ttftP99Ms &&
            (q.outputTokensPerS > p.outputTokensPerS || q.ttftP99Ms < p.ttftP99Ms),
        ),
    )
    .sort((a, b) => a.outputTokensPerS - b.outputTokensPerS);
}

// ---------------------------------------------------------------------------------------------
// Probes

export interface PrefillPointJson {
  inputTokens: number;
  batch: number;
  completed: number;
  countedInputTokens: number;
  ttftMeanMs: number;
  ttftP50Ms: number;
  ttftP99Ms: number;
  prefillTokensPerS: number;
}

export interface PrefillFitJson {
  batch: number;
  fixedMs: number;
  tokensPerS: number;
  r2: number;
  fixedMsUnconstrained?: number;
  /** Absent in probes saved before it was judged: taken as reliable. */
  reliable?: boolean;
}

export interface DecodePointJson {
  concurrency: number;
  completed: number;
  meanConcurrency: number;
  itlP50Ms: number;
  itlP99Ms: number;
  tpotMeanMs: number;
  perUserTokensPerS: number;
  systemTokensPerS: number;
}

export interface DecodeFitJson {
  stepMs: number;
  perSequenceMs: number;
  r2: number;
  held?: { term: 'stepMs' | 'perSequenceMs'; unconstrainedMs: number };
  /** Absent in probes saved before it was judged: taken as reliable. */
  reliable?: boolean;
}

const byBatch = <T extends { batch: number }>(points: T[]) => {
  const groups = new Map<number, T[]>();
  for (const p of points) groups.set(p.batch, [...(groups.get(p.batch) ?? []), p]);
  return [...groups.entries()].sort((a, b) => a[0] - b[0]);
};

/** TTFT against input length per batch, with the fitted line; prefill tokens/s likewise. */
export function prefillCharts(points: PrefillPointJson[], fit?: PrefillFitJson): ChartSpec[] {
  const good = points.filter((p) => p.completed > 0);
  if (good.length === 0) return [];
  const x: Axis = { name: 'input tokens (log)', type: 'log', logBase: 2, unit: 'tokens' };
  const groups = byBatch(good);
  const ttft: Series[] = groups.map(([batch, ps], i) => {
    const sorted = [...ps].sort((a, b) => a.inputTokens - b.inputTokens);
    return {
      name: `batch ${batch}`,
      type: 'line',
      data: sorted.map((p) => [p.inputTokens, p.ttftMeanMs]),
      symbol: 'circle',
      color: PALETTE[i % PALETTE.length],
      labels: sorted.map(
        (p) =>
          `batch ${batch}, ${fmtNumber(p.inputTokens)} input tokens: TTFT mean ${fmtSig(p.ttftMeanMs)} ms (p99 ${fmtSig(p.ttftP99Ms)})`,
      ),
    };
  });
  if (fit && fit.tokensPerS > 0) {
    const lengths = [...new Set(good.map((p) => p.inputTokens))].sort((a, b) => a - b);
    const lo = lengths[0];
    const hi = lengths[lengths.length - 1];
    const line: [number, number][] = [];
    for (let i = 0; i <= 24; i++) {
      const n = lo * (hi / lo) ** (i / 24);
      line.push([n, fit.fixedMs + ((n * fit.batch) / fit.tokensPerS) * 1000]);
    }
    ttft.push({
      name: `fit: ${fmtSig(fit.fixedMs)} ms + n / ${fmtNumber(fit.tokensPerS)} tok/s`,
      type: 'line',
      data: line,
      color: INK,
      dashed: true,
      width: 1,
      noTips: true,
    });
  }
  const rate: Series[] = groups.map(([batch, ps], i) => {
    const sorted = [...ps].sort((a, b) => a.inputTokens - b.inputTokens);
    return {
      name: `batch ${batch}`,
      type: 'line',
      data: sorted.map((p) => [p.inputTokens, p.prefillTokensPerS]),
      symbol: 'circle',
      color: PALETTE[i % PALETTE.length],
      labels: sorted.map(
        (p) =>
          `batch ${batch}, ${fmtNumber(p.inputTokens)} input tokens: ${fmtNumber(p.prefillTokensPerS)} prefill tok/s`,
      ),
    };
  });
  return [
    {
      kind: 'xy',
      id: 'probe-ttft',
      title: 'TTFT against input length',
      caption: `Mean TTFT per batch size (max_tokens 1)${fit ? `; the line is the fit on batch ${fit.batch} (r² ${fmtNumber(fit.r2, 4)})` : ''}.`,
      x,
      y: [{ name: 'TTFT mean (ms)', min: 0, unit: 'ms' }],
      series: ttft,
    },
    {
      kind: 'xy',
      id: 'probe-prefill-throughput',
      title: 'Prefill throughput against input length',
      caption: 'Input tokens per second over each point, per batch size.',
      x,
      y: [{ name: 'prefill tok/s', min: 0, unit: 'tok/s' }],
      series: rate,
    },
  ];
}

/** ITL and TPOT against concurrency with the fitted TPOT line; per-user and system speed. */
export function decodeCharts(points: DecodePointJson[], fit?: DecodeFitJson): ChartSpec[] {
  const good = [...points]
    .filter((p) => p.completed > 0)
    .sort((a, b) => a.concurrency - b.concurrency);
  if (good.length === 0) return [];
  const x: Axis = { name: 'concurrency (log)', type: 'log', logBase: 2 };
  const at = (p: DecodePointJson) => `concurrency ${fmtNumber(p.concurrency)}`;
  const itl = latencyLines(good, (p) => p.concurrency, at, [
    ['ITL p50', (p) => p.itlP50Ms, COLORS.blue],
    ['ITL p99', (p) => p.itlP99Ms, COLORS.red],
    ['TPOT mean', (p) => p.tpotMeanMs, COLORS.green],
  ]);
  if (fit) {
    const lo = good[0].concurrency;
    const hi = good[good.length - 1].concurrency;
    const line: [number, number][] = [];
    for (let i = 0; i <= 24; i++) {
      const c = lo * (hi / lo) ** (i / 24);
      line.push([c, fit.stepMs + fit.perSequenceMs * c]);
    }
    itl.push({
      name: `fit: ${fmtSig(fit.stepMs)} + ${fmtSig(fit.perSequenceMs)} ms x c`,
      type: 'line',
      data: line,
      color: INK,
      dashed: true,
      width: 1,
      noTips: true,
    });
  }
  return [
    {
      kind: 'xy',
      id: 'probe-itl',
      title: 'ITL and TPOT against concurrency',
      caption: `Decode cost per token as the batch grows${fit ? `; the line is TPOT fitted (r² ${fmtNumber(fit.r2, 4)})` : ''}.`,
      x,
      y: [{ name: 'ms', min: 0, unit: 'ms' }],
      series: itl,
    },
    {
      kind: 'xy',
      id: 'probe-decode-throughput',
      title: 'Decode speed: per user and in all',
      caption:
        'Per-user tokens/s (1000 / mean TPOT) and system decode tokens/s (measured concurrency x per-user).',
      x,
      y: [
        { name: 'per-user tok/s', min: 0, unit: 'tok/s' },
        { name: 'system tok/s', min: 0, unit: 'tok/s' },
      ],
      series: [
        {
          name: 'per user',
          type: 'line',
          data: good.map((p) => [p.concurrency, p.perUserTokensPerS]),
          symbol: 'circle',
          color: COLORS.violet,
          labels: good.map((p) => `${at(p)}: ${fmtSig(p.perUserTokensPerS)} tok/s per user`),
        },
        {
          name: 'system',
          type: 'line',
          yAxis: 1,
          data: good.map((p) => [p.concurrency, p.systemTokensPerS]),
          symbol: 'circle',
          color: COLORS.amber,
          labels: good.map((p) => `${at(p)}: ${fmtNumber(p.systemTokensPerS)} tok/s in all`),
        },
      ],
    },
  ];
}

// ---------------------------------------------------------------------------------------------
// Capacity

/** KV usage measured beside predicted, throughput and latency, each by batch size. */
export function capacityCharts(
  steps: CapacityStep[],
  prediction: CapacityPrediction | null | undefined,
  limit: CapacityLimit | null | undefined,
  capacity: number | undefined,
): ChartSpec[] {
  const sorted = [...steps].sort((a, b) => a.batch - b.batch);
  if (sorted.length === 0) return [];
  const x: Axis = { name: 'concurrent requests (batch, log)', type: 'log', logBase: 2 };
  const b = (s: CapacityStep) => `batch ${fmtNumber(s.batch)}`;
  const marks: Mark[] = [];
  if (prediction) {
    marks.push({
      axis: 'x',
      value: prediction.maxBatch,
      label: `predicted max ${fmtNumber(prediction.maxBatch)}`,
      color: COLORS.violet,
      at: 'end',
    });
  }
  if (limit) {
    marks.push({
      axis: 'x',
      value: limit.batch,
      label: `limit: ${limit.reason.replace(/_/g, ' ')} at ${fmtNumber(limit.batch)}`,
      color: COLORS.red,
      at: 'middle',
    });
  }
  if (capacity !== undefined && capacity > 0) {
    marks.push({
      axis: 'x',
      value: capacity,
      label: `capacity ${fmtNumber(capacity)}`,
      color: COLORS.green,
      at: 'start',
    });
  }
  const kv = sorted.filter((s) => s.kvCacheUsageMax !== undefined);
  const predicted = sorted.filter((s) => s.predictedKvCacheUsage !== undefined);
  const kvSeries: Series[] = [];
  if (kv.length > 0) {
    kvSeries.push({
      name: 'measured KV peak',
      type: 'line',
      data: kv.map((s) => [s.batch, s.kvCacheUsageMax as number]),
      symbol: 'circle',
      symbolSize: 8,
      color: COLORS.blue,
      labels: kv.map(
        (s) =>
          `${b(s)}: KV cache peak ${fmtSig((s.kvCacheUsageMax as number) * 100)}%${s.preemptions ? `, ${fmtNumber(s.preemptions)} preemptions` : ''}`,
      ),
    });
  }
  if (predicted.length > 0) {
    kvSeries.push({
      name: 'predicted',
      type: 'line',
      data: predicted.map((s) => [s.batch, s.predictedKvCacheUsage as number]),
      symbol: 'diamond',
      symbolSize: 8,
      dashed: true,
      color: COLORS.violet,
      labels: predicted.map(
        (s) =>
          `${b(s)}: predicted KV usage ${fmtSig((s.predictedKvCacheUsage as number) * 100)}% at full length`,
      ),
    });
  }
  const charts: ChartSpec[] = [];
  if (kvSeries.length > 0) {
    charts.push({
      kind: 'xy',
      id: 'capacity-kv',
      title: 'KV cache by batch: measured beside predicted',
      caption:
        'The server-reported KV cache peak at each batch, and what the analytic model expects for the batch at full length (it can pass 100%).',
      x,
      y: [{ name: 'KV cache used', min: 0, percent: true }],
      series: kvSeries,
      marks: [...marks, { axis: 'y', value: 1, label: 'full', color: COLORS.red, at: 'start' }],
    });
  }
  charts.push(
    {
      kind: 'xy',
      id: 'capacity-throughput',
      title: 'Throughput by batch',
      caption: 'System output tokens/s and what one request reads.',
      x,
      y: [
        { name: 'system tok/s', min: 0, unit: 'tok/s' },
        { name: 'per-user tok/s', min: 0, unit: 'tok/s' },
      ],
      series: [
        {
          name: 'system',
          type: 'line',
          data: sorted.map((s) => [s.batch, s.outputTokensPerS]),
          symbol: 'circle',
          color: COLORS.blue,
          labels: sorted.map((s) => `${b(s)}: ${fmtNumber(s.outputTokensPerS)} output tok/s`),
        },
        {
          name: 'per user',
          type: 'line',
          yAxis: 1,
          data: sorted.map((s) => [s.batch, s.perUserTokensPerS]),
          symbol: 'circle',
          color: COLORS.amber,
          labels: sorted.map((s) => `${b(s)}: ${fmtSig(s.perUserTokensPerS)} tok/s per user`),
        },
      ],
      marks,
    },
    {
      kind: 'xy',
      id: 'capacity-latency',
      title: 'Latency by batch',
      caption: 'Log scale.',
      x,
      y: [{ name: 'ms (log)', type: 'log', unit: 'ms' }],
      series: latencyLines(sorted, (s) => s.batch, b, [
        ['TTFT p99', (s) => s.ttftP99Ms, COLORS.blue],
        ['TPOT mean', (s) => s.tpotMeanMs, COLORS.green],
        ['ITL p99', (s) => s.itlP99Ms, COLORS.amber],
      ]),
      marks,
    },
  );
  return charts;
}

/**
 * Latency lines through `points`, one circle-marked series per metric: each point's tooltip
 * says where it is (`at`), the metric and its value in ms.
 */
function latencyLines<P>(
  points: readonly P[],
  x: (p: P) => number,
  at: (p: P) => string,
  metrics: [name: string, ms: (p: P) => number, color: string][],
): Series[] {
  return metrics.map(([name, ms, color]) => ({
    name,
    type: 'line',
    data: points.map((p) => [x(p), ms(p)]),
    symbol: 'circle',
    color,
    labels: points.map((p) => `${at(p)}: ${name} ${fmtSig(ms(p))} ms`),
  }));
}
