/**
 * The HTML report: one self-contained file (inline CSS, charts as inline SVG drawn by echarts on
 * the server, and a small script for tooltips) that works offline, reads in a browser and
 * prints. Nothing is fetched: a Content-Security-Policy allows no source but the file's own
 * inline style and its one script (by hash), so even a string that escaped escaping could
 * neither run nor load anything. Every string from a server, a dataset, a plan or a manifest
 * is HTML-escaped.
 */

import { createHash } from 'node:crypto';
import { cacheStatePhrase, readCacheState } from '../analysis/prefixCache.js';
import type { PredictedPointField, Recommendation, SweepPoint } from '../analysis/sweep.js';
import {
  type CapacityLimit,
  type CapacityPrediction,
  type CapacityStep,
  timeScaleNote,
} from '../memory/capacity.js';
import { clientHealthVerdict } from '../metrics/clientHealth.js';
import type { Distribution } from '../metrics/distribution.js';
import { fmtNumber, fmtSig } from '../metrics/format.js';
import { type Validity, validityOf } from '../metrics/validity.js';
import { severityOf, type Warning, type WarningSeverity, warning } from '../metrics/warnings.js';
import type { ReportInput, RunReportInput } from '../results/load.js';
import { chartsOf, type RunCharts } from '../results/runView.js';
import { VERSION } from '../version.js';
import {
  type ChartSpec,
  capacityCharts,
  type DecodeFitJson,
  type DecodePointJson,
  decodeCharts,
  latencyCharts,
  type PrefillFitJson,
  type PrefillPointJson,
  prefillCharts,
  type RenderedChart,
  renderChart,
  type ScenarioSweepJson,
  scenarioCharts,
  sweepCharts,
  timelineCharts,
  turnCharts,
} from './charts.js';
import {
  connectionsLine,
  connectionsMatter,
  PHASE_COLUMNS,
  phaseRows,
  STREAMS_COLUMNS,
  streamsRow,
} from './connectionsText.js';
import { catalogDistributions, escapeHtml, metricLabel } from './format.js';
import { noReliableFit } from './probeText.js';
import { describeReasoning, sessionFacts, TURN_COLUMNS } from './sessionsText.js';
import {
  chanceText,
  type SizePredictionView,
  type SizeRowPredictionView,
  type SizeView,
  sizePredictionLines,
  sizeTrafficText,
  tightestText,
} from './sizeText.js';
import { htmlTable, htmlTableOf as table } from './table.js';
import {
  describeClientHealth,
  describeLoad,
  describeSteadyState,
  describeUntil,
  describeWarmupTransient,
} from './terminal.js';

// ---------------------------------------------------------------------------------------------
// Escaping and small helpers

const esc = escapeHtml;

/** JSON for a `<script type="application/json">`: no `<`, `>` or `&` to end it early. */
function scriptJson(value: unknown): string {
  return JSON.stringify(value).replace(
    /[<>&\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

type Json = Record<string, unknown>;
const obj = (v: unknown): Json | undefined =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Json) : undefined;
const str = (v: unknown): string | undefined =>
  typeof v === 'string' ? v : typeof v === 'number' ? String(v) : undefined;
const num = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isFinite(v) ? v : undefined;
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

const ms = (v: number | undefined) => (v === undefined ? '-' : `${fmtSig(v)} ms`);
const pct = (v: number | undefined, digits = 0) =>
  v === undefined || !Number.isFinite(v) ? '-' : `${fmtNumber(v * 100, digits)}%`;
const gib = (bytes: number) => `${fmtNumber(bytes / 2 ** 30, 1)} GiB`;

// ---------------------------------------------------------------------------------------------
// Document assembly

interface Section {
  /** `data-section`: the report's golden structure (headline, warnings, latency, ...). */
  kind: string;
  id: string;
  /** Short name in the navigation bar; none for the headline. */
  nav?: string;
  html: string;
  attrs?: Record<string, string>;
}

/** Collects the document's charts; each figure gets a unique key for its SVG ids and tips. */
class Charts {
  private readonly tips: Record<string, RenderedChart['tips']> = {};
  private n = 0;

  figure(spec: ChartSpec, wide = false): string {
    const chart = renderChart(spec);
    const key = `c${this.n++}`;
    this.tips[key] = chart.tips;
    return `<figure class="chart${wide ? ' wide' : ''}" data-chart="${esc(chart.id)}" data-key="${key}">
<figcaption>${esc(chart.title)}</figcaption>
${cleanSvg(chart.svg, key, chart.title)}
${chart.caption ? `<p class="caption">${esc(chart.caption)}</p>` : ''}
</figure>`;
  }

  grid(specs: ChartSpec[]): string {
    if (specs.length === 0) return '';
    return `<div class="grid">${specs.map((s) => this.figure(s)).join('\n')}</div>`;
  }

  stack(specs: ChartSpec[]): string {
    return specs.map((s) => this.figure(s, true)).join('\n');
  }

  json(): string {
    return scriptJson(this.tips);
  }
}

/**
 * echarts' SVG for inline use: ids and classes made unique in the document (every chart's own
 * `zrN-` prefix becomes its key), namespace declarations dropped (HTML needs none), and a role
 * and a label for assistive technology.
 */
function cleanSvg(svg: string, key: string, title: string): string {
  return (
    svg
      // echarts' hover styles and event metadata serve its own client, which is not used here.
      .replace(/<style\b[^>]*>[\s\S]*?<\/style>/g, '')
      .replace(/\s+class="zr\d+-cls-\d+"/g, '')
      .replace(/\s+ecmeta_[a-z_]+="[^"]*"/g, '')
      .replace(/\s+pointer-events="visible"/g, '')
      .replace(/style="font-size:(\d+)px;font-family:sans-serif;"/g, 'font-size="$1"')
      .replace(/\bzr\d+-/g, `${key}-`)
      .replace(/\s+xmlns(:xlink)?="[^"]*"/g, '')
      .replace(/\s+(version|baseProfile)="[^"]*"/g, '')
      .replace(/^<svg /, `<svg role="img" aria-label="${esc(title)}" `)
  );
}

/** Tooltips: the nearest point within reach of the pointer, its label as text. */
const CLIENT = `(()=>{"use strict";
const el=document.getElementById("ig-tips");const data=el?JSON.parse(el.textContent||"{}"):{};
const tip=document.createElement("div");tip.className="ig-tip";tip.setAttribute("role","tooltip");tip.hidden=true;document.body.appendChild(tip);
const NS="http://www.w3.org/2000/svg";
for(const fig of document.querySelectorAll("figure[data-key]")){
const d=data[fig.getAttribute("data-key")];const svg=fig.querySelector("svg");if(!d||!svg||d.l.length===0)continue;
const dot=document.createElementNS(NS,"circle");dot.setAttribute("r","5");dot.setAttribute("class","ig-dot");dot.style.display="none";svg.appendChild(dot);
const hide=()=>{tip.hidden=true;dot.style.display="none";};
svg.addEventListener("mousemove",(e)=>{const r=svg.getBoundingClientRect();const vb=svg.viewBox.baseVal;
const sx=vb&&vb.width?vb.width/r.width:1;const sy=vb&&vb.height?vb.height/r.height:1;
const x=(e.clientX-r.left)*sx,y=(e.clientY-r.top)*sy;let best=-1,bd=(16*sx)*(16*sx);
for(let i=0;i<d.l.length;i++){const dx=d.p[2*i]-x,dy=d.p[2*i+1]-y,dd=dx*dx+dy*dy;if(dd<bd){bd=dd;best=i;}}
if(best<0){hide();return;}
tip.textContent=d.l[best];tip.hidden=false;
const w=tip.offsetWidth,h=tip.offsetHeight;let left=e.clientX+14,top=e.clientY+14;
if(left+w>window.innerWidth-8)left=e.clientX-14-w;if(top+h>window.innerHeight-8)top=e.clientY-14-h;
tip.style.left=left+"px";tip.style.top=top+"px";
dot.setAttribute("cx",String(d.p[2*best]));dot.setAttribute("cy",String(d.p[2*best+1]));dot.style.display="";});
svg.addEventListener("mouseleave",hide);}
window.addEventListener("beforeprint",()=>{for(const x of document.querySelectorAll("details"))x.open=true;});
})();`;

const CLIENT_HASH = createHash('sha256').update(CLIENT).digest('base64');

const CSP = `default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-${CLIENT_HASH}'; base-uri 'none'; form-action 'none'`;

const STYLE = `
:root{--ink:#1f2937;--muted:#6b7280;--line:#e5e7eb;--soft:#f9fafb;--accent:#2563eb;--warn:#b45309;--warn-bg:#fffbeb;--bad:#b91c1c;--good:#047857}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:var(--ink);background:#fff}
nav.top{position:sticky;top:0;z-index:5;background:rgba(255,255,255,.95);border-bottom:1px solid var(--line);padding:6px 24px;display:flex;gap:16px;flex-wrap:wrap;align-items:baseline}
nav.top b{margin-right:8px}
nav.top a{color:var(--muted);text-decoration:none;font-size:13px}
nav.top a:hover{color:var(--accent)}
main{max-width:1200px;margin:0 auto;padding:8px 24px 48px}
section{margin:28px 0}
section.scenario{border-top:2px solid var(--line);padding-top:8px}
h1{font-size:24px;line-height:1.3;margin:8px 0 4px}
h2{font-size:19px;margin:0 0 10px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:15px;margin:18px 0 6px}
.kicker{color:var(--muted);font-size:13px;margin:12px 0 0;overflow-wrap:anywhere}
.facts{margin:4px 0 12px;color:#374151;overflow-wrap:anywhere}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:10px;margin:12px 0}
.card{border:1px solid var(--line);border-radius:8px;padding:8px 12px;background:var(--soft)}
.card .v{font-size:18px;font-weight:600;font-variant-numeric:tabular-nums;white-space:nowrap}
.card .k{font-size:12px;color:var(--muted)}
.card.bad .v{color:var(--bad)}
.verdict{display:inline-block;margin:12px 0 0;padding:4px 10px;border-radius:6px;font-weight:600;border:1px solid var(--line);overflow-wrap:anywhere}
.verdict.valid{color:#166534;background:#dcfce7}
.verdict.caution{color:#854d0e;background:var(--warn-bg)}
.verdict.invalid{color:var(--bad);background:#fee2e2}
.verdict span{font-weight:400}
ul.warnings{list-style:none;padding:0;margin:0}
ul.warnings li{background:var(--warn-bg);border-left:4px solid var(--warn);padding:6px 10px;margin:6px 0;overflow-wrap:anywhere}
ul.warnings code{color:var(--warn);font-size:12px;margin-right:6px}
ul.warnings li.error{border-left-color:var(--bad)}
ul.warnings li.info{opacity:.85}
ul.findings{padding-left:20px}
ul.findings li{margin:3px 0;overflow-wrap:anywhere}
table{border-collapse:collapse;margin:8px 0 12px;font-variant-numeric:tabular-nums;font-size:13px}
th,td{padding:4px 10px;border-bottom:1px solid var(--line);text-align:right;vertical-align:top}
th:first-child,td:first-child{text-align:left}
td.text,th.text{text-align:left;overflow-wrap:break-word;max-width:640px}
thead th{color:var(--muted);font-weight:600;border-bottom:2px solid var(--line)}
.scroll{overflow-x:auto}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(460px,1fr));gap:16px}
figure.chart{margin:8px 0 16px;border:1px solid var(--line);border-radius:8px;padding:10px 12px 6px;background:#fff;break-inside:avoid;page-break-inside:avoid}
figure.chart figcaption{font-weight:600;font-size:14px;margin-bottom:2px;overflow-wrap:anywhere}
figure.chart svg{display:block;width:100%;height:auto;max-width:100%;font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif}
p.caption{color:var(--muted);font-size:12px;margin:2px 0 4px}
figure.phases{margin:8px 0 12px}
.phase-row{display:flex;align-items:center;gap:8px;margin:4px 0}
.phase-q{width:32px;color:var(--muted);font-size:12px}
.phase-bar{flex:1;display:flex;height:18px;background:var(--soft);border-radius:3px;overflow:hidden}
.phase-bar .seg{display:block;height:100%}
.phase-key{white-space:nowrap}
.swatch{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px;vertical-align:middle}
.recs{display:grid;grid-template-columns:repeat(auto-fit,minmax(280px,1fr));gap:12px}
.rec{border:1px solid var(--line);border-radius:8px;padding:10px 12px;background:var(--soft)}
.rec h4{margin:0 0 4px;font-size:14px}
.rec .load{font-size:18px;font-weight:600}
.rec p{margin:4px 0;font-size:13px;overflow-wrap:anywhere}
.rec .rule{color:var(--muted)}
dl.manifest{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:8px 0}
dl.manifest dt{color:var(--muted)}
dl.manifest dd{margin:0;overflow-wrap:anywhere}
details{margin:8px 0}
summary{cursor:pointer;color:var(--accent)}
pre{background:var(--soft);border:1px solid var(--line);border-radius:6px;padding:10px;overflow:auto;font-size:12px;line-height:1.4;white-space:pre-wrap;overflow-wrap:anywhere;max-height:480px}
footer{color:var(--muted);font-size:12px;border-top:1px solid var(--line);padding-top:8px;margin-top:32px}
.ig-tip{position:fixed;z-index:10;pointer-events:none;background:#111827;color:#fff;font-size:12px;padding:4px 8px;border-radius:4px;max-width:420px;box-shadow:0 2px 6px rgba(0,0,0,.2)}
.ig-dot{fill:none;stroke:#111827;stroke-width:2;pointer-events:none}
@media print{
@page{margin:12mm}
body{font-size:11px}
nav.top,.ig-tip{display:none!important}
main{max-width:none;padding:0}
section{margin:14px 0}
section.scenario{break-before:page}
.grid{grid-template-columns:1fr 1fr;gap:8px}
figure.chart{border-color:#d1d5db}
pre{max-height:none;overflow:visible}
a{color:inherit;text-decoration:none}
}
`;

function htmlDocument(title: string, sections: Section[], charts: Charts, footer: string): string {
  const nav = sections
    .filter((s) => s.nav)
    .map((s) => `<a href="#${esc(s.id)}">${esc(s.nav)}</a>`)
    .join('');
  const body = sections
    .map((s) => {
      const attrs = Object.entries(s.attrs ?? {})
        .map(([k, v]) => ` ${k}="${esc(v)}"`)
        .join('');
      return `<section id="${esc(s.id)}" data-section="${esc(s.kind)}"${attrs}>\n${s.html}\n</section>`;
    })
    .join('\n');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${esc(CSP)}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="infergauge ${esc(VERSION)}">
<link rel="icon" href="data:,">
<title>${esc(title)}</title>
<style>${STYLE}</style>
</head>
<body>
<nav class="top"><b>infergauge</b>${nav}</nav>
<main>
${body}
<footer>${footer}</footer>
</main>
<script type="application/json" id="ig-tips">${charts.json()}</script>
<script>${CLIENT}</script>
</body>
</html>
`;
}

/** The whole self-contained HTML document for a results directory. */
export function renderHtmlReport(input: ReportInput): string {
  const charts = new Charts();
  switch (input.kind) {
    case 'run':
      return runReport(input, charts);
    case 'scenarios':
      return scenariosReport(input, charts);
    case 'sweep':
      return sweepReport(input, charts);
    case 'probe':
      return probeReport(input, charts);
    case 'capacity':
      return capacityReport(input, charts);
    case 'size':
      return sizeReport(input, charts);
  }
}

function footer(dir: string): string {
  return `Report by infergauge ${esc(VERSION)} from <code>${esc(dir)}</code>. A single file: it loads nothing from the network and prints as it reads.`;
}

// ---------------------------------------------------------------------------------------------
// Shared pieces

function warningsSection(warnings: ListedWarning[]): Section[] {
  if (warnings.length === 0) return [];
  const items = warnings
    .map((w) => {
      const severity = w.code ? severityOf({ code: w.code, severity: sev(w.severity) }) : undefined;
      const detail = typeof w.detail === 'string' ? `<br><small>${esc(w.detail)}</small>` : '';
      return `<li${severity ? ` class="${severity}"` : ''}>${w.code ? `<code>${esc(w.code)}</code>` : ''}${w.where ? `<b>${esc(w.where)}:</b> ` : ''}${esc(w.message)}${detail}</li>`;
    })
    .join('\n');
  return [
    {
      kind: 'warnings',
      id: 'warnings',
      nav: 'Warnings',
      html: `<h2>Warnings (${warnings.length})</h2>\n<ul class="warnings">${items}</ul>`,
    },
  ];
}

/** A saved severity, if it is one (summaries are files: anything may be in them). */
function sev(value: unknown): WarningSeverity | undefined {
  return value === 'info' || value === 'warning' || value === 'error' ? value : undefined;
}

function card(label: string, value: string, bad = false): string {
  return `<div class="card${bad ? ' bad' : ''}"><div class="v">${esc(value)}</div><div class="k">${esc(label)}</div></div>`;
}

function jsonDetails(label: string, value: unknown): string {
  return `<details><summary>${esc(label)}</summary><pre>${esc(JSON.stringify(value, null, 2))}</pre></details>`;
}

function factList(facts: [string, string | undefined][]): string {
  const items = facts
    .filter((f): f is [string, string] => f[1] !== undefined && f[1] !== '')
    .map(([k, v]) => `<dt>${esc(k)}</dt><dd>${esc(v)}</dd>`)
    .join('');
  return items ? `<dl class="manifest">${items}</dl>` : '';
}

// ---------------------------------------------------------------------------------------------
// Runs

type Summary = RunReportInput['summary'];

/** A warning as the report lists it: a saved one (severity, detail), or the report's own. */
type ListedWarning = {
  code?: string;
  severity?: WarningSeverity;
  message: string;
  detail?: string;
  where?: string;
};

/**
 * The run's warnings, the server's not yet among them, and the client's and the stop's where
 * the summary does not say them already: SummaryBuilder writes `interrupted` (with the
 * arrivals never sent) and `client_limited` (with the advice) itself, and the report showed
 * each twice when it added its own line as well.
 */
function runWarnings(summary: Summary): Warning[] {
  const out: Warning[] = [];
  const saved = arr(summary.warnings).filter(
    (w): w is Warning => typeof obj(w)?.message === 'string',
  );
  const says = (code: string) => saved.some((w) => w.code === code);
  const h = summary.clientHealth;
  if (h?.clientLimited && !says('client_limited')) {
    out.push(warning('client_limited', h));
  }
  if (summary.interrupted && !says('interrupted')) {
    out.push(warning('interrupted', { unsent: 0 }));
  }
  out.push(...saved);
  for (const w of arr(summary.serverMetrics?.warnings) as Warning[]) {
    if (!out.some((x) => x.code === w.code)) out.push(w);
  }
  return out;
}

function runFacts(run: RunReportInput): {
  model?: string;
  endpoint?: string;
  simulator?: string;
  startedAt?: string;
} {
  const m = obj(run.manifest);
  const plan = obj(m?.plan);
  const server = obj(m?.server);
  const backend = str(plan?.backend);
  const endpoint = str(plan?.endpoint);
  return {
    model: str(m?.model),
    endpoint:
      backend && backend !== 'openai' ? `${backend} native` : endpoint ? `${endpoint}` : undefined,
    simulator: str(server?.simulator),
    startedAt: str(m?.startedAt),
  };
}

function headlineText(run: RunReportInput): string {
  const s = run.summary;
  const { model } = runFacts(run);
  const load = s.load ? describeLoad(s) : 'an unknown load';
  return `${model ? `${model}: ` : ''}${fmtNumber(s.throughput?.outputTokensPerS ?? Number.NaN)} output tok/s at ${load}`;
}

function runHeadline(run: RunReportInput, kicker: string): string {
  const s = run.summary;
  const facts = runFacts(run);
  const cacheState = readCacheState(s.cacheState);
  const counted = s.requests.completed + s.requests.failed;
  const per = (n: number) => (counted > 0 ? fmtNumber(n / counted) : '-');
  const sentences = [
    `${fmtNumber(counted)} requests${s.sessions ? ` in ${fmtNumber(s.sessions.started)} sessions` : ''}, ${per(s.tokens.requestedInput)} in / ${per(s.tokens.requestedOutput)} out tokens ${s.sessions ? 'per request (mean: a turn re-sends the history)' : 'each'}${s.tokens.input !== s.tokens.requestedInput || s.tokens.output !== s.tokens.requestedOutput ? ` (server counted ${per(s.tokens.input)} / ${per(s.tokens.output)})` : ''}`,
    facts.endpoint ? `${facts.endpoint} endpoint` : undefined,
    `over ${fmtNumber(s.durationS, 1)} s`,
    cacheState
      ? `prefix cache at the start ${cacheStatePhrase(cacheState, s.prefixHitRate)}`
      : undefined,
  ].filter(Boolean);
  const lat = s.latency;
  const failed = s.requests.failed;
  const cards = [
    card('output tok/s (system)', fmtNumber(s.throughput.outputTokensPerS)),
    card('requests/s', fmtNumber(s.throughput.requestsPerS, 2)),
    card('per-user tok/s (mean)', fmtSig(lat.outputSpeedTokS.mean)),
    card('TTFT p50 / p99', `${fmtSig(lat.ttftMs.p50)} / ${fmtSig(lat.ttftMs.p99)} ms`),
    card('ITL p50 / p99', `${fmtSig(lat.itlMs.p50)} / ${fmtSig(lat.itlMs.p99)} ms`),
    card('E2E p99', ms(lat.e2eMs.p99)),
    card('failed', `${fmtNumber(failed)} of ${fmtNumber(counted)}`, failed > 0),
  ];
  if (s.goodput) cards.push(card('SLO attainment', pct(s.goodput.sloAttainment, 1)));
  return `${verdictBanner(validityOf(runWarnings(s)))}
<p class="kicker">${kicker}</p>
<h1>${esc(headlineText(run))}</h1>
<p class="facts">${esc(`${sentences.join(', ')}.`)}${facts.simulator ? `<br>Simulated server: ${esc(facts.simulator)}` : ''}</p>
<div class="cards">${cards.join('')}</div>`;
}

/**
 * The run's validity verdict, the first thing on its page: whether its numbers can be used as
 * the server's, and which warnings (listed below it) say otherwise.
 */
function verdictBanner(v: Validity): string {
  const why =
    v.verdict === 'valid'
      ? 'no warning puts these numbers in doubt'
      : `${v.verdict === 'invalid' ? 'do not use these numbers as the server’s' : 'read the numbers with the warnings below'}: ${[...new Set(v.reasons.map((r) => r.code))].join(', ')}`;
  return `<p class="verdict ${v.verdict}" data-verdict="${v.verdict}">${esc(v.verdict.toUpperCase())} <span>${esc(why)}</span></p>`;
}

const LATENCY_ROWS: [string, keyof Summary['latency']][] = [
  [metricLabel('ttftMs'), 'ttftMs'],
  [metricLabel('ttfcMs', 'first content'), 'ttfcMs'],
  [metricLabel('itlMs', 'per token'), 'itlMs'],
  [metricLabel('tpotMs'), 'tpotMs'],
  [metricLabel('e2eMs'), 'e2eMs'],
];

/**
 * Under a figure of a calibrated simulated run, in small text, its prediction interval
 * (summary.json's `prediction`: the median's at its top, the others under `statistics`).
 */
function predictedCell(
  d: Distribution,
  q: 'mean' | 'p50' | 'p90' | 'p95' | 'p99' | 'p99_9',
): string {
  const p = d.prediction;
  if (!p || q === 'p99_9') return '';
  const range = q === 'p50' ? p : p.statistics?.[q];
  if (!range) return '';
  return `<br><small class="prediction" title="${esc(fmtNumber(p.level * 100, 0))}% prediction interval from the calibration">predicted ${esc(fmtNumber(range.low, 2))}-${esc(fmtNumber(range.high, 2))}</small>`;
}

function latencyTable(s: Summary): string {
  const rows: [string, keyof Summary['latency']][] = [...LATENCY_ROWS];
  if (s.latency.chunkGapMs?.count > 0 && s.streaming?.tokensPerEvent > 1.05) {
    rows.push([metricLabel('chunkGapMs', 'per event'), 'chunkGapMs']);
  }
  if (s.load?.mode === 'open')
    rows.push(
      [metricLabel('queueDelayMs'), 'queueDelayMs'],
      [metricLabel('userTtftMs'), 'userTtftMs'],
    );
  // The percentile, and under it in small text its interval (summary.json's `intervals`).
  const cell = (d: Distribution, q: 'p50' | 'p90' | 'p95' | 'p99' | 'p99_9') => {
    const figure = `${q !== 'p50' && d.lowConfidence?.includes(q) ? '~' : ''}${fmtNumber(d[q], 2)}`;
    const interval = d.intervals?.[q];
    if (!interval) return `${figure}${predictedCell(d, q)}`;
    const side = (v: number | null) => (v === null ? 'open' : fmtNumber(v, 2));
    const range = `${side(interval.low)}-${side(interval.high)}`;
    const how = interval.method === 'block-bootstrap' ? 'block bootstrap' : 'order statistics';
    return `${figure}<br><small class="interval" title="${fmtNumber(interval.level * 100, 0)}% interval, ${how}">${range}</small>${predictedCell(d, q)}`;
  };
  const body = rows
    .map(([name, key]) => [name, s.latency[key]] as const)
    .filter(([, d]) => d && d.count > 0)
    .map(([name, d]) => [
      esc(name),
      `${fmtNumber(d.mean, 2)}${predictedCell(d, 'mean')}`,
      cell(d, 'p50'),
      cell(d, 'p90'),
      cell(d, 'p95'),
      cell(d, 'p99'),
      cell(d, 'p99_9'),
      fmtNumber(d.max, 2),
      fmtNumber(d.count),
    ]);
  const low = rows.some(([, k]) => s.latency[k]?.lowConfidence?.includes('p99'));
  const intervals = rows.some(([, k]) => s.latency[k]?.intervals);
  const predicted = s.prediction
    ? `<p class="caption">predicted: the figure's ${esc(fmtNumber(s.prediction.level * 100, 0))}% prediction interval from the calibration ${esc(s.prediction.calibration)}, ${esc(fmtNumber(s.prediction.draws))} draws of its fitted values (docs/metrics.md, "Prediction intervals"); it leaves out the run's own sampling error, which the interval above it is.</p>`
    : '';
  return `${table(['latency (ms)', 'mean', 'p50', 'p90', 'p95', 'p99', 'p99.9', 'max', 'n'], body)}${low ? '<p class="caption">~ marks a percentile with too few samples to resolve it.</p>' : ''}${intervals ? '<p class="caption">Under a percentile, its 95% interval (docs/metrics.md, "Intervals"); open: the samples cannot bound that side.</p>' : ''}${predicted}${s.until ? `<p>${esc(describeUntil(s.until, s.requests.completed))}</p>` : ''}`;
}

/**
 * Every distribution of the metric catalogue that the run measured, with the catalogue's label,
 * name (as thresholds and SLOs spell it) and unit: a metric added to the catalogue shows here.
 */
function catalogMetricsHtml(s: Summary): string {
  const rows = catalogDistributions()
    .map((m) => ({ m, d: s.latency?.[m.key] as Distribution | undefined }))
    .filter((x): x is { m: (typeof x)['m']; d: Distribution } => (x.d?.count ?? 0) > 0)
    .map(({ m, d }) => {
      const digits = m.unit === 'ms' ? 2 : 1;
      return [
        esc(m.label),
        esc(m.id),
        esc(m.unit),
        fmtNumber(d.mean, digits),
        fmtNumber(d.p50, digits),
        fmtNumber(d.p90, digits),
        fmtNumber(d.p99, digits),
        fmtNumber(d.max, digits),
        fmtNumber(d.count),
      ];
    });
  if (rows.length === 0) return '';
  return `<details><summary>Every measured distribution (${rows.length}, as the metric catalogue names them)</summary>
${table(['metric', 'name', 'unit', 'mean', 'p50', 'p90', 'p99', 'max', 'n'], rows, [0, 1, 2])}
</details>`;
}

/** A calibrated run's throughput prediction: each range, and its level (escaped where shown). */
function throughputPredicted(t: Summary['throughput']): string {
  const p = t.prediction;
  if (!p) return '';
  const range = (r: { low: number; high: number } | undefined, digits: number, unit: string) =>
    r ? [`${fmtNumber(r.low, digits)}-${fmtNumber(r.high, digits)} ${unit}`] : [];
  return `${[...range(p.outputTokensPerS, 1, 'output tok/s'), ...range(p.requestsPerS, 2, 'req/s')].join(', ')} (${fmtNumber(p.level * 100, 0)}% prediction intervals from the calibration)`;
}

function numbersHtml(s: Summary): string {
  const t = s.throughput;
  const lat = s.latency;
  const counted = s.requests.completed + s.requests.failed;
  const steady = describeSteadyState(s);
  const transient = describeWarmupTransient(s);
  const rows: [string, string][] = [
    ['load', describeLoad(s)],
    [
      'system throughput',
      `${fmtNumber(t.outputTokensPerS, 1)} output tok/s, ${fmtNumber(t.totalTokensPerS, 1)} total tok/s, ${fmtNumber(t.requestsPerS, 2)} req/s`,
    ],
    ...(t.prediction ? [['predicted', throughputPredicted(t)] as [string, string]] : []),
    ...(steady ? [['steady state', steady] as [string, string]] : []),
    ...(transient ? [['warm-up transient', transient] as [string, string]] : []),
    [
      'per request',
      `output speed mean ${fmtNumber(lat.outputSpeedTokS.mean, 1)} tok/s, p50 ${fmtNumber(lat.outputSpeedTokS.p50, 1)}, slowest ${fmtNumber(lat.outputSpeedTokS.min, 1)}`,
    ],
    [
      'input / decode',
      `input ${fmtNumber(t.inputTokensPerS, 1)} tok/s, decode ${fmtNumber(t.decodeTokensPerS, 1)} tok/s`,
    ],
    [
      'requests',
      `${fmtNumber(s.requests.completed)} completed, ${fmtNumber(s.requests.failed)} failed${
        s.requests.failed > 0
          ? ` (${Object.entries(s.requests.errorsByKind ?? {})
              .map(([k, n]) => `${k} ${n}`)
              .join(', ')})`
          : ''
      }${s.requests.warmup > 0 ? `, ${fmtNumber(s.requests.warmup)} warm-up not counted` : ''}`,
    ],
  ];
  if (s.requests.failed > 0) {
    const adj = s.latencyAdjusted?.ttftMs?.p99;
    rows.push([
      'TTFT p99 counting failures',
      adj === null || adj === undefined ? 'infinite (never answered)' : `${fmtSig(adj)} ms`,
    ]);
  }
  if (s.goodput) {
    rows.push([
      `goodput (${s.goodput.slo})`,
      `${fmtNumber(s.goodput.requestsPerS, 2)} req/s, SLO attainment ${pct(s.goodput.sloAttainment, 1)} (${fmtNumber(s.goodput.goodRequests)} of ${fmtNumber(counted)})`,
    ]);
  }
  if (s.streaming) {
    rows.push([
      'streaming',
      `${fmtNumber(s.streaming.tokensPerEvent, 2)} tokens per event; output tokens counted by ${Object.entries(
        s.streaming.outputTokensSource ?? {},
      )
        .map(([k, n]) => `${k} (${n})`)
        .join(', ')}`,
    ]);
  }
  const reasoning = describeReasoning(s);
  if (reasoning) rows.push(['reasoning', reasoning]);
  const h = s.clientHealth;
  if (h) {
    rows.push([
      'client health',
      `${describeClientHealth(h)}: ${clientHealthVerdict(h)}${(h.notes ?? []).map((n) => `. ${n}`).join('')}`,
    ]);
  }
  const m = s.serverMetrics?.memory;
  if (m) {
    const parts: string[] = [];
    if (m.kvCacheUsage) {
      parts.push(
        `KV cache peak ${pct(m.kvCacheUsage.max, 1)} (mean ${pct(m.kvCacheUsage.mean, 1)})`,
      );
    }
    if (m.running) parts.push(`running max ${fmtNumber(m.running.max)}`);
    if (m.waiting) parts.push(`waiting max ${fmtNumber(m.waiting.max)}`);
    if (m.preemptions !== undefined) parts.push(`preemptions ${fmtNumber(m.preemptions)}`);
    if (m.gpuMemoryUsedBytes) {
      parts.push(
        `GPU memory peak ${gib(m.gpuMemoryUsedBytes.max)}${m.gpuMemoryUsedBytes.total !== undefined ? ` of ${gib(m.gpuMemoryUsedBytes.total)}` : ''}`,
      );
    }
    if (m.processRssBytes) parts.push(`server RSS max ${gib(m.processRssBytes.max)}`);
    rows.push(['server memory', parts.join(', ')]);
  }
  const main = `<dl class="manifest">${rows.map(([k, v]) => `<dt>${esc(k)}</dt><dd>${esc(v)}</dd>`).join('')}</dl>`;
  return `${main}${serverMetricsDetails(s)}`;
}

/** A phase's colour in the stacked bar and its legend. */
const PHASE_COLOURS = {
  'pool wait': '#f59e0b',
  DNS: '#8b5cf6',
  TCP: '#06b6d4',
  TLS: '#ec4899',
  TTFT: '#2563eb',
} as const;
type PhaseName = keyof typeof PHASE_COLOURS;

/**
 * What a request waited for before its first token, phase by phase, as stacked bars at p50 and
 * p99 (each segment its own phase's percentile, over the requests it applies to), then the
 * phases' table (docs/metrics.md, "Connection phases").
 */
function connectionsHtml(s: Summary): string {
  const c = s.connections;
  if (!c) return '';
  const ttft = s.latency.ttftMs;
  const opened = c.newConnections > 0;
  const rows = (['p50', 'p99'] as const).map((q) => {
    const parts: [PhaseName, number | undefined][] = [
      ['pool wait', c.poolWaitMs.count > 0 ? c.poolWaitMs[q] : undefined],
      ['DNS', opened ? c.dnsMs?.[q] : undefined],
      ['TCP', opened ? c.tcpMs[q] : undefined],
      ['TLS', opened ? c.tlsMs?.[q] : undefined],
      ['TTFT', ttft.count > 0 ? ttft[q] : undefined],
    ];
    return {
      q,
      parts: parts.filter((p): p is [PhaseName, number] => p[1] !== undefined && p[1] > 0),
    };
  });
  const widest = Math.max(...rows.map((r) => r.parts.reduce((sum, [, v]) => sum + v, 0)), 1e-9);
  const bar = (parts: [PhaseName, number][]) =>
    parts
      .map(
        ([name, v]) =>
          `<span class="seg" style="width:${((v / widest) * 100).toFixed(2)}%;background:${PHASE_COLOURS[name]}" title="${esc(`${name} ${fmtSig(v)} ms`)}"></span>`,
      )
      .join('');
  const bars = rows
    .map(
      (r) =>
        `<div class="phase-row"><span class="phase-q">${esc(r.q)}</span><div class="phase-bar" role="img" aria-label="${esc(r.parts.map(([n, v]) => `${n} ${fmtSig(v)} ms`).join(', '))}">${bar(r.parts)}</div></div>`,
    )
    .join('');
  const legend = (Object.keys(PHASE_COLOURS) as PhaseName[])
    .filter((name) => rows.some((r) => r.parts.some(([n]) => n === name)))
    .map(
      (name) =>
        `<span class="phase-key"><span class="swatch" style="background:${PHASE_COLOURS[name]}"></span>${esc(name)}</span>`,
    )
    .join(' ');
  const line = connectionsLine(s);
  return `${line ? `<p>${esc(line)}</p>` : ''}<figure class="phases" data-phases><figcaption>Before the first token: pool wait, connection set-up, TTFT</figcaption>${bars}<p class="caption">${legend}. Each segment is its own phase's percentile over the requests it applies to (set-up: those that opened a connection), so a bar is not one request's.</p></figure>${htmlTable(PHASE_COLUMNS, phaseRows(s))}`;
}

function serverMetricsDetails(s: Summary): string {
  const sm = s.serverMetrics;
  if (!sm) return '';
  const gauges = Object.entries(sm.gauges ?? {}).map(([k, g]) => [
    esc(k),
    fmtSig(g.min),
    fmtSig(g.mean),
    fmtSig(g.max),
    fmtSig(g.last),
  ]);
  const counters = Object.entries(sm.counters ?? {}).map(([k, c]) => [
    esc(k),
    fmtSig(c.delta),
    fmtSig(c.perS),
  ]);
  const failed =
    sm.failedScrapes > 0 ? `, ${sm.failedScrapes} failed (${sm.firstError ?? ''})` : '';
  return `<details><summary>Server metrics: ${esc(`${sm.scrapes} scrapes over ${fmtNumber(sm.windowS, 1)} s${failed}`)}</summary>
${gauges.length > 0 ? table(['gauge', 'min', 'mean', 'max', 'last'], gauges, [0]) : ''}
${counters.length > 0 ? table(['counter', 'growth', 'per s'], counters, [0]) : ''}
</details>`;
}

/** Rows of the failures table: the most frequent messages. */
const FAILURE_ROWS = 20;

/** The failures table of a run's chart data ('' without failures). */
export function failuresHtml(charts: RunCharts): string {
  const { failures } = charts;
  if (failures.failed === 0) return '';
  // The groups come most frequent first, each count exact (metrics/failureGroups.ts).
  const shown = failures.groups.slice(0, FAILURE_ROWS);
  const rows = shown.map((g) => [
    esc(g.kind),
    g.status !== undefined ? String(g.status) : '-',
    fmtNumber(g.n),
    String(g.first),
    esc(g.message.length > 500 ? `${g.message.slice(0, 500)}...` : g.message),
  ]);
  const more = failures.distinct - shown.length;
  const notes = [
    ...(more > 0
      ? [
          `${fmtNumber(more)}${failures.ungrouped > 0 ? ' or more' : ''} more distinct messages not shown.`,
        ]
      : []),
    ...(failures.ungrouped > 0
      ? [
          `${fmtNumber(failures.ungrouped)} failures carried a message first seen after ${fmtNumber(failures.distinct)} distinct ones: counted, but in no row.`,
        ]
      : []),
  ];
  const note = notes.length > 0 ? `<p class="caption">${notes.join(' ')}</p>` : '';
  return `<h3>Failures</h3>${table(['kind', 'status', 'requests', 'first request', 'message'], rows, [0, 4])}${note}`;
}

/** The run's chart data: from the records a caller passed, else as the reader built it. */
function runCharts(run: RunReportInput): RunCharts {
  return run.records ? chartsOf(run.records) : (run.charts ?? chartsOf([]));
}

function manifestHtml(manifest: unknown): string {
  const m = obj(manifest);
  if (!m) return '<p>No manifest.json in this directory.</p>';
  const plan = obj(m.plan);
  const server = obj(m.server);
  const workload = obj(m.workload);
  const host = obj(m.host);
  const tool = obj(m.tool);
  const load = obj(plan?.load);
  return `${factList([
    ['tool', tool ? `${str(tool.name) ?? ''} ${str(tool.version) ?? ''}` : undefined],
    ['started', str(m.startedAt)],
    ['model', str(m.model)],
    [
      'server',
      str(server?.url) ?? (server?.virtualTime ? 'built-in simulator, virtual time' : undefined),
    ],
    ['simulator', str(server?.simulator)],
    ['workload', str(workload?.scenario)],
    ['tokenizer', str(workload?.tokenizer)],
    [
      'backend / endpoint',
      plan ? `${str(plan.backend) ?? ''} / ${str(plan.endpoint) ?? ''}` : undefined,
    ],
    ['load', load ? JSON.stringify(load) : undefined],
    ['seed', str(plan?.seed)],
    // The point's own salt: with the seed, what repeats its prompts (--prompt-salt).
    ['prompt salt', str(workload?.promptSalt ?? plan?.promptSalt)],
    ['temperature', str(plan?.temperature)],
    ['node', str(m.node)],
    [
      'host',
      host
        ? `${str(host.hostname) ?? ''} (${str(host.platform) ?? ''} ${str(host.arch) ?? ''}, ${str(host.cpus) ?? '?'} CPUs${host.cpuModel ? `, ${str(host.cpuModel)}` : ''})`
        : undefined,
    ],
  ])}${jsonDetails('manifest.json', manifest)}`;
}

/** Latency, timeline and failures of one run (the body shared by runs and scenarios). */
function runBody(run: RunReportInput, charts: Charts, idPrefix: string, heading: 2 | 3): Section[] {
  const h = `h${heading}`;
  const data = { summary: run.summary, charts: runCharts(run), telemetry: run.telemetry };
  const sections: Section[] = [
    {
      kind: 'latency',
      id: `${idPrefix}latency`,
      nav: heading === 2 ? 'Latency' : undefined,
      html: `<${h}>Latency distributions</${h}>${latencyTable(run.summary)}${catalogMetricsHtml(run.summary)}${charts.grid(latencyCharts(data))}`,
    },
  ];
  // HTTP/2's streams per connection stand beside the phases: how many requests shared each
  // connection explains how few connections were opened and how long requests waited for one.
  const phases = connectionsMatter(run.summary);
  const streams = streamsRow(run.summary);
  if (phases || streams) {
    const streamsHtml = streams
      ? `<div data-streams>${htmlTable(STREAMS_COLUMNS, [streams])}</div>`
      : '';
    sections.push({
      kind: 'connections',
      id: `${idPrefix}connections`,
      nav: heading === 2 ? 'Connections' : undefined,
      html: `<${h}>${phases ? 'Connection phases' : 'Connections'}</${h}>${streamsHtml}${phases ? connectionsHtml(run.summary) : ''}`,
    });
  }
  const sessions = sessionFacts(run.summary, run.summary.serverMetrics);
  if (sessions && run.summary.sessions) {
    const facts = sessions.map((line) => `<p>${esc(line)}</p>`).join('');
    sections.push({
      kind: 'sessions',
      id: `${idPrefix}sessions`,
      nav: heading === 2 ? 'Sessions' : undefined,
      html: `<${h}>Sessions and turns</${h}>${facts}${htmlTable(TURN_COLUMNS, run.summary.sessions.turns)}${charts.grid(turnCharts(run.summary))}`,
    });
  }
  const timeline = timelineCharts(data);
  if (timeline.length > 0) {
    sections.push({
      kind: 'timeline',
      id: `${idPrefix}timeline`,
      nav: heading === 2 ? 'Timeline' : undefined,
      html: `<${h}>Timeline</${h}><p class="caption">Requests and the server's telemetry on the run's one clock (seconds from its start)${data.charts.requests === 0 ? '; records.jsonl is missing' : ''}.</p>${charts.stack(timeline)}`,
    });
  }
  sections.push({
    kind: 'summary',
    id: `${idPrefix}summary`,
    nav: heading === 2 ? 'Numbers' : undefined,
    html: `<${h}>Throughput and requests</${h}>${numbersHtml(run.summary)}`,
  });
  const failures = failuresHtml(data.charts);
  if (failures) {
    sections.push({
      kind: 'failures',
      id: `${idPrefix}failures`,
      nav: heading === 2 ? 'Failures' : undefined,
      html: failures.replace('<h3>Failures</h3>', `<${h}>Failures</${h}>`),
    });
  }
  return sections;
}

function runReport(run: RunReportInput, charts: Charts): string {
  const facts = runFacts(run);
  const sections: Section[] = [
    {
      kind: 'headline',
      id: 'headline',
      html: runHeadline(
        run,
        `infergauge run report${facts.startedAt ? ` &middot; ${esc(facts.startedAt)}` : ''}`,
      ),
    },
    ...warningsSection(runWarnings(run.summary)),
    ...runBody(run, charts, '', 2),
    {
      kind: 'manifest',
      id: 'manifest',
      nav: 'Manifest',
      html: `<h2>Run manifest</h2>${manifestHtml(run.manifest)}`,
    },
  ];
  return htmlDocument(`infergauge: ${headlineText(run)}`, sections, charts, footer(run.dir));
}

// ---------------------------------------------------------------------------------------------
// Several scenarios

function scenarioName(run: RunReportInput, i: number): string {
  const m = obj(run.manifest);
  const scenarios = arr(obj(m?.plan)?.scenarios);
  const fromDir = run.dir.split(/[\\/]/).filter(Boolean).pop();
  return fromDir ?? str(obj(scenarios[i])?.name) ?? `scenario ${i + 1}`;
}

function scenariosReport(
  input: Extract<ReportInput, { kind: 'scenarios' }>,
  charts: Charts,
): string {
  const names = input.runs.map(scenarioName);
  const rows = arr(obj(input.table)?.scenarios).map(obj);
  const lengths = (name: string) => str(rows.find((r) => r?.scenario === name)?.lengths);
  const model = runFacts(input.runs[0]).model;
  const startedAt = runFacts(input.runs[0]).startedAt;
  const warnings = input.runs.flatMap((run, i) =>
    runWarnings(run.summary).map((w) => ({ ...w, where: names[i] })),
  );
  const tableRows = input.runs.map((run, i) => {
    const s = run.summary;
    return [
      esc(names[i]),
      esc(lengths(names[i]) ?? ''),
      esc(describeLoad(s)),
      `${fmtNumber(s.requests.completed)}${s.requests.failed > 0 ? ` (+${fmtNumber(s.requests.failed)} failed)` : ''}`,
      fmtNumber(s.latency.ttftMs.p50, 1),
      fmtNumber(s.latency.ttftMs.p99, 1),
      fmtNumber(s.latency.tpotMs.p50, 2),
      fmtNumber(s.latency.itlMs.p99, 2),
      fmtNumber(s.latency.e2eMs.p99, 0),
      fmtNumber(s.throughput.outputTokensPerS, 0),
      fmtNumber(s.throughput.requestsPerS, 2),
    ];
  });
  const sections: Section[] = [
    {
      kind: 'headline',
      id: 'headline',
      html: `<p class="kicker">infergauge scenarios report${startedAt ? ` &middot; ${esc(startedAt)}` : ''}</p>
<h1>${esc(`${input.runs.length} scenarios${model ? ` against ${model}` : ''}: ${names.join(', ')}`)}</h1>
<p class="facts">${esc(
        input.runs
          .map(
            (r, i) =>
              `${names[i]}: ${fmtNumber(r.summary.throughput.outputTokensPerS)} output tok/s at ${describeLoad(r.summary)}`,
          )
          .join('; '),
      )}</p>`,
    },
    ...warningsSection(warnings),
    {
      kind: 'scenarios',
      id: 'scenarios',
      nav: 'Scenarios',
      html: `<h2>Scenarios side by side</h2>${table(
        [
          'scenario',
          'lengths',
          'load',
          'requests',
          'TTFT p50',
          'TTFT p99',
          'TPOT p50',
          'ITL p99',
          'E2E p99',
          'output tok/s',
          'req/s',
        ],
        tableRows,
        [0, 1, 2],
      )}<p class="caption">Latency in ms; every throughput at its scenario's measured load.</p>${charts.grid(
        scenarioCharts(
          input.runs.map((r, i) => ({
            name: names[i],
            outputTokensPerS: r.summary.throughput.outputTokensPerS,
            ttftP99Ms: r.summary.latency.ttftMs.p99,
            tpotP50Ms: r.summary.latency.tpotMs.p50,
            e2eP99Ms: r.summary.latency.e2eMs.p99,
          })),
        ),
      )}`,
    },
  ];
  input.runs.forEach((run, i) => {
    const body = runBody(run, charts, `s${i}-`, 3);
    sections.push({
      kind: 'scenario',
      id: `scenario-${i}`,
      nav: names[i],
      attrs: { 'data-scenario': names[i], class: 'scenario' },
      html: `<h2>${esc(`Scenario ${names[i]}: ${fmtNumber(run.summary.throughput.outputTokensPerS)} output tok/s at ${describeLoad(run.summary)}`)}</h2>
${body.map((b) => `<div data-block="${esc(b.kind)}" id="${esc(b.id)}">${b.html}</div>`).join('\n')}`,
    });
  });
  sections.push({
    kind: 'manifest',
    id: 'manifest',
    nav: 'Manifest',
    html: `<h2>Run manifest</h2>${manifestHtml(input.runs[0].manifest)}${input.runs
      .slice(1)
      .map((r, i) => jsonDetails(`manifest.json of ${names[i + 1]}`, r.manifest))
      .join('')}${jsonDetails('scenarios.json', input.table)}`,
  });
  return htmlDocument(
    `infergauge: ${input.runs.length} scenarios${model ? ` against ${model}` : ''}`,
    sections,
    charts,
    footer(input.dir),
  );
}

// ---------------------------------------------------------------------------------------------
// Sweeps

/**
 * Under a calibrated sweep point's figure, in small text, its prediction interval (sweep.json's
 * `points[].prediction`, read as untrusted: numbers only).
 */
function pointPredicted(p: SweepPoint, field: PredictedPointField, digits: number): string {
  const prediction = obj(p.prediction);
  const range = obj(obj(prediction?.ranges)?.[field]);
  const low = num(range?.low);
  const high = num(range?.high);
  const level = num(prediction?.level);
  if (low === undefined || high === undefined || level === undefined) return '';
  return `<br><small class="prediction" title="${esc(fmtNumber(level * 100, 0))}% prediction interval from the calibration">predicted ${esc(fmtNumber(low, digits))}-${esc(fmtNumber(high, digits))}</small>`;
}

function sweepPointsTable(points: SweepPoint[], mode: string): string {
  const rows = [...points]
    .sort((a, b) => a.level - b.level)
    .map((p) => [
      fmtSig(p.level),
      fmtNumber(p.meanConcurrency, 1),
      `${fmtNumber(p.outputTokensPerS)}${pointPredicted(p, 'outputTokensPerS', 0)}`,
      fmtNumber(p.perUserTokensPerS, 1),
      `${fmtNumber(p.ttftP50Ms, 1)}${pointPredicted(p, 'ttftP50Ms', 1)}`,
      `${fmtNumber(p.ttftP99Ms, 1)}${pointPredicted(p, 'ttftP99Ms', 1)}`,
      `${fmtNumber(p.itlP50Ms, 2)}${pointPredicted(p, 'itlP50Ms', 2)}`,
      `${fmtNumber(p.itlP99Ms, 2)}${pointPredicted(p, 'itlP99Ms', 2)}`,
      `${fmtNumber(p.e2eP99Ms, 0)}${pointPredicted(p, 'e2eP99Ms', 0)}`,
      p.kvCacheUsageMax !== undefined ? pct(p.kvCacheUsageMax, 1) : '-',
      fmtNumber(p.failed),
      p.validity
        ? esc(`${p.validity}${p.validityCodes?.length ? ` (${p.validityCodes.join(', ')})` : ''}`)
        : '-',
    ]);
  return table(
    [
      mode === 'rate' ? 'rate (req/s)' : 'concurrency',
      'measured',
      'output tok/s',
      'per user tok/s',
      'TTFT p50',
      'TTFT p99',
      'ITL p50',
      'ITL p99',
      'E2E p99',
      'KV peak',
      'failed',
      'validity',
    ],
    rows,
    [11],
  );
}

function sweepFindings(s: ScenarioSweepJson, mode: string): string {
  const unit = mode === 'rate' ? 'requests/s' : 'concurrent requests';
  const items: string[] = [];
  items.push(
    s.knee
      ? `<b>Saturation</b> past ${esc(fmtSig(s.knee.saturatesAt))} ${unit}: ${esc(s.knee.why)}.`
      : '<b>Saturation</b>: none within the levels measured.',
  );
  items.push(
    s.cliff
      ? `<b>Latency cliff</b> at ${esc(fmtSig(s.cliff.level))} ${unit}: ${esc(s.cliff.why)}.`
      : '<b>Latency cliff</b>: none within the levels measured.',
  );
  if (s.search) {
    const best = s.search.bestPoint;
    items.push(
      s.search.best > 0 && best
        ? `<b>Capacity</b> under ${esc(s.search.slos.join(', '))}: ${esc(fmtSig(s.search.best))} ${unit} (${esc(fmtNumber(best.outputTokensPerS))} output tok/s, ${esc(fmtSig(best.perUserTokensPerS))} tok/s per user${best.goodputRequestsPerS !== undefined ? `, goodput ${esc(fmtNumber(best.goodputRequestsPerS, 2))} req/s` : ''})${s.search.binding ? `; binding SLO ${esc(s.search.binding)}` : ''}${s.search.failedAt !== undefined ? `; fails at ${esc(fmtSig(s.search.failedAt))}` : ''}${searchRange(s.search.prediction)}. Tried ${esc(s.search.tried.map((t) => `${fmtSig(t.level)}${t.ok ? '' : ' (missed)'}`).join(', '))}.`
        : `<b>Capacity</b> under ${esc(s.search.slos.join(', '))}: no load met them (tried ${esc(s.search.tried.map((t) => fmtSig(t.level)).join(', '))}).`,
    );
  }
  return `<ul class="findings">${items.map((i) => `<li>${i}</li>`).join('')}</ul>`;
}

function recommendationsHtml(name: string, recs: Recommendation[], mode: string): string {
  const cards = recs
    .map((r) => {
      const p = r.point;
      const load = p
        ? mode === 'rate'
          ? `${fmtSig(p.level)} req/s`
          : `${fmtNumber(p.level)} concurrent`
        : 'no point';
      return `<div class="rec" data-profile="${esc(r.profile)}"><h4>${esc(r.profile)}</h4><div class="load">${esc(load)}</div><p class="rule">${esc(r.rule)}</p><p>${esc(r.costs)}</p></div>`;
    })
    .join('');
  return `<h3>${esc(name)}</h3><div class="recs">${cards}</div>`;
}

function sweepReport(input: Extract<ReportInput, { kind: 'sweep' }>, charts: Charts): string {
  const sweep = obj(input.sweep) ?? {};
  const mode = str(sweep.mode) === 'rate' ? 'rate' : 'concurrency';
  const scenarios = arr(sweep.scenarios)
    .map(obj)
    .filter((s): s is Json => s !== undefined && Array.isArray(s.points))
    .map((s) => s as unknown as ScenarioSweepJson);
  const target = str(sweep.target) ?? 'the target';
  const warnings: ListedWarning[] = [];
  if (sweep.interrupted === true) {
    warnings.push(warning('interrupted', { profile: 'sweep', missing: 'levels' }));
  }
  for (const s of scenarios) {
    for (const w of arr(s.warnings).map(obj)) {
      if (w && typeof w.message === 'string') {
        warnings.push({
          code: str(w.code),
          severity: sev(w.severity),
          message: w.message,
          detail: str(w.detail),
          where: str(s.scenario),
        });
      }
    }
  }
  // "chat: meets ttft<300 up to 24, saturates past 32, at most 8,900 output tok/s measured (at
  // concurrency 64)",
  // each fact only where it holds.
  const headlineFacts = scenarios.map((s) => {
    const facts: string[] = [];
    if (s.search && s.search.best > 0) {
      facts.push(`meets ${s.search.slos.join(', ')} up to ${fmtSig(s.search.best)}`);
    }
    if (s.knee) facts.push(`saturates past ${fmtSig(s.knee.saturatesAt)}`);
    // A throughput is said with its load (METRICS.md): the level that reached it.
    const top = s.points.reduce<SweepPoint | undefined>(
      (a, b) => (a === undefined || b.outputTokensPerS > a.outputTokensPerS ? b : a),
      undefined,
    );
    if (top) {
      const at =
        mode === 'rate' ? `${fmtSig(top.level)} req/s` : `concurrency ${fmtSig(top.level)}`;
      facts.push(`at most ${fmtNumber(top.outputTokensPerS)} output tok/s measured (at ${at})`);
    }
    return `${s.scenario}: ${facts.join(', ')}`;
  });
  const sections: Section[] = [
    {
      kind: 'headline',
      id: 'headline',
      html: `<p class="kicker">infergauge sweep report &middot; ${esc(mode === 'rate' ? 'open-loop rates' : 'concurrency levels')}</p>
<h1>${esc(`Load sweep of ${target}`)}</h1>
<p class="facts">${esc(headlineFacts.join('; '))}</p>`,
    },
    ...warningsSection(warnings),
  ];
  scenarios.forEach((s, i) => {
    sections.push({
      kind: 'sweep',
      id: `sweep-${i}`,
      nav: scenarios.length > 1 ? `Sweep: ${s.scenario}` : 'Sweep',
      attrs: { 'data-scenario': s.scenario },
      html: `<h2>${esc(`Scenario ${s.scenario}: ${s.points.length} load levels`)}</h2>${sweepFindings(s, mode)}${sweepPointsTable(s.points, mode)}${charts.grid(sweepCharts(s, mode))}`,
    });
  });
  const withRecs = scenarios.filter((s) => arr(s.recommendations).length > 0);
  if (withRecs.length > 0) {
    sections.push({
      kind: 'recommendations',
      id: 'recommendations',
      nav: 'Operating points',
      html: `<h2>Operating points: latency, throughput, memory</h2><p class="caption">One point per priority, chosen from the measured levels, with what it costs on the other two corners.</p>${withRecs
        .map((s) => recommendationsHtml(s.scenario, s.recommendations ?? [], mode))
        .join('')}`,
    });
  }
  const meta = { ...sweep, scenarios: scenarios.map((s) => s.scenario) };
  sections.push({
    kind: 'manifest',
    id: 'manifest',
    nav: 'Manifest',
    html: `<h2>Sweep manifest</h2>${factList([
      ['target', target],
      ['mode', mode],
      ['scenarios', scenarios.map((s) => s.scenario).join(', ')],
      ['schema version', str(sweep.schemaVersion)],
      ['interrupted', sweep.interrupted === true ? 'yes' : 'no'],
    ])}${jsonDetails('sweep.json (without its points)', meta)}${jsonDetails('sweep.json', input.sweep)}`,
  });
  return htmlDocument(`infergauge: load sweep of ${target}`, sections, charts, footer(input.dir));
}

// ---------------------------------------------------------------------------------------------
// Probes

function probeReport(input: Extract<ReportInput, { kind: 'probe' }>, charts: Charts): string {
  const probe = obj(input.probe) ?? {};
  const kind = str(probe.probe) === 'decode' ? 'decode' : 'prefill';
  const server = obj(probe.server);
  const model = str(server?.model) ?? 'the server';
  const points = arr(probe.points)
    .map(obj)
    .filter((p): p is Json => p !== undefined);
  const fit = obj(probe.fit);
  const warnings: ListedWarning[] = [];
  if (probe.interrupted === true) {
    warnings.push(warning('interrupted', { profile: 'probe', missing: 'points' }));
  }
  if (typeof probe.promptOverheadNote === 'string') {
    warnings.push({ code: 'prompt_overhead', message: probe.promptOverheadNote });
  }
  const seen = new Map<string, number>();
  for (const p of points) {
    for (const w of arr(p.warnings).map(obj)) {
      if (w && typeof w.message === 'string') seen.set(w.message, (seen.get(w.message) ?? 0) + 1);
    }
  }
  for (const [message, n] of seen) {
    warnings.push({ message: n > 1 ? `${message} (${n} points)` : message });
  }
  let headline: string;
  let body: string;
  if (kind === 'prefill') {
    const ps = points as unknown as PrefillPointJson[];
    const judged = fit as unknown as PrefillFitJson | undefined;
    // A fit that explains its points poorly is no finding: no headline figure, no line drawn.
    const f = judged?.reliable === false ? undefined : judged;
    const q = obj(fit?.quadratic);
    headline = f
      ? `Prefill probe of ${model}: ${fmtNumber(f.tokensPerS)} prefill tok/s, ${fmtSig(f.fixedMs)} ms fixed latency`
      : `Prefill probe of ${model}`;
    const rows = [...ps]
      .sort((a, b) => a.inputTokens - b.inputTokens || a.batch - b.batch)
      .map((p) => [
        fmtNumber(p.inputTokens),
        fmtNumber(p.batch),
        fmtNumber(p.completed),
        fmtNumber(p.ttftMeanMs, 1),
        fmtNumber(p.ttftP50Ms, 1),
        fmtNumber(p.ttftP99Ms, 1),
        fmtNumber(p.prefillTokensPerS),
      ]);
    body = `${
      f
        ? `<ul class="findings"><li>${esc(`TTFT ~ ${fmtSig(f.fixedMs)} ms + n / ${fmtNumber(f.tokensPerS)} tok/s on batch ${f.batch} (r² ${fmtNumber(f.r2, 4)})${f.fixedMsUnconstrained !== undefined ? `; fixed latency held at 0: least squares gave ${fmtSig(f.fixedMsUnconstrained)} ms, below its physical range` : ''}`)}</li>${
            q
              ? `<li>${esc(`with a parabola: n² term ${pct(num(q.shareAtMax), 1)} of TTFT at the longest input: ${q.matters === true ? 'attention matters here' : 'attention is not the cost here'}`)}</li>`
              : ''
          }</ul>`
        : judged
          ? `<p>${esc(noReliableFit('TTFT against n', judged.r2, `batch ${judged.batch}`))}</p>`
          : '<p>No fit: too few lengths completed.</p>'
    }${table(['input tokens', 'batch', 'completed', 'TTFT mean', 'TTFT p50', 'TTFT p99', 'prefill tok/s'], rows)}${charts.grid(prefillCharts(ps, f))}`;
  } else {
    const ps = points as unknown as DecodePointJson[];
    const judged = fit as unknown as DecodeFitJson | undefined;
    const f = judged?.reliable === false ? undefined : judged;
    headline = f
      ? `Decode probe of ${model}: ${fmtSig(f.stepMs)} ms per step at batch 1, +${fmtSig(f.perSequenceMs)} ms per sequence`
      : `Decode probe of ${model}`;
    const rows = [...ps]
      .sort((a, b) => a.concurrency - b.concurrency)
      .map((p) => [
        fmtNumber(p.concurrency),
        fmtNumber(p.meanConcurrency, 1),
        fmtNumber(p.completed),
        fmtNumber(p.itlP50Ms, 2),
        fmtNumber(p.itlP99Ms, 2),
        fmtNumber(p.tpotMeanMs, 2),
        fmtNumber(p.perUserTokensPerS, 1),
        fmtNumber(p.systemTokensPerS),
      ]);
    body = `${
      f
        ? `<ul class="findings"><li>${esc(`TPOT ~ ${fmtSig(f.stepMs)} ms + ${fmtSig(f.perSequenceMs)} ms x concurrency (r² ${fmtNumber(f.r2, 4)})${f.held ? `; ${f.held.term === 'stepMs' ? 'per-step cost' : 'per-sequence cost'} held at 0: least squares gave ${fmtSig(f.held.unconstrainedMs)} ms, below its physical range` : ''}`)}</li></ul>`
        : judged
          ? `<p>${esc(noReliableFit('TPOT against concurrency', judged.r2, `${ps.length} levels`))}</p>`
          : '<p>No fit: too few levels completed.</p>'
    }${table(['concurrency', 'measured', 'completed', 'ITL p50', 'ITL p99', 'TPOT mean', 'per user tok/s', 'system tok/s'], rows)}${charts.grid(decodeCharts(ps, f))}`;
  }
  const meta = { ...probe, points: `${points.length} points` };
  const sections: Section[] = [
    {
      kind: 'headline',
      id: 'headline',
      html: `<p class="kicker">infergauge ${kind} probe report${str(probe.startedAt) ? ` &middot; ${esc(str(probe.startedAt))}` : ''}</p>
<h1>${esc(headline)}</h1>
<p class="facts">${esc(`${str(server?.target) ?? model}; ${str(probe.endpoint) ?? '?'} endpoint, tokenizer ${str(probe.tokenizer) ?? '?'}, ${points.length} points.`)}</p>`,
    },
    ...warningsSection(warnings),
    {
      kind: 'probe',
      id: 'probe',
      nav: kind === 'prefill' ? 'Prefill' : 'Decode',
      attrs: { 'data-probe': kind },
      html: `<h2>${kind === 'prefill' ? 'Prefill: TTFT against input length' : 'Decode: ITL against concurrency'}</h2>${body}`,
    },
    {
      kind: 'manifest',
      id: 'manifest',
      nav: 'Manifest',
      html: `<h2>Probe manifest</h2>${factList([
        ['tool', `${str(obj(probe.tool)?.name) ?? ''} ${str(obj(probe.tool)?.version) ?? ''}`],
        ['started', str(probe.startedAt)],
        ['target', str(server?.target)],
        ['model', str(server?.model)],
        ['server', str(server?.url)],
        ['endpoint', str(probe.endpoint)],
        ['tokenizer', str(probe.tokenizer)],
        ['prompt overhead tokens', str(probe.promptOverheadTokens)],
        ['settings', probe.settings !== undefined ? JSON.stringify(probe.settings) : undefined],
      ])}${jsonDetails('probe.json (without its points)', meta)}${jsonDetails('probe.json', input.probe)}`,
    },
  ];
  return htmlDocument(`infergauge: ${headline}`, sections, charts, footer(input.dir));
}

// ---------------------------------------------------------------------------------------------
// Capacity

/** A saved prediction interval (`{ low, high, level }`), read defensively; undefined when not whole. */
function savedInterval(value: unknown): { low: number; high: number; level: number } | undefined {
  const r = obj(value);
  const low = num(r?.low);
  const high = num(r?.high);
  const level = num(r?.level);
  return low === undefined || high === undefined || level === undefined
    ? undefined
    : { low, high, level };
}

/** A calibrated --find-max capacity's prediction interval, escaped, as a clause; '' without one. */
function searchRange(value: unknown): string {
  const i = savedInterval(value);
  if (!i) return '';
  const { low, high, level } = i;
  return esc(
    `; ${fmtNumber(level * 100, 0)}% prediction interval ${fmtSig(low)}-${fmtSig(high)} (docs/metrics.md, "Prediction intervals")`,
  );
}

/** A calibrated capacity's prediction interval, escaped, as a clause; '' without one. */
function capacityRange(value: unknown): string {
  const i = savedInterval(value);
  if (!i) return '';
  const { low, high, level } = i;
  return esc(
    ` (${fmtNumber(level * 100, 0)}% prediction interval from the calibration: ${fmtNumber(low)}-${fmtNumber(high)}; docs/metrics.md, "Prediction intervals")`,
  );
}

function capacityReport(input: Extract<ReportInput, { kind: 'capacity' }>, charts: Charts): string {
  const c = obj(input.capacity) ?? {};
  const server = obj(c.server);
  const workload = obj(c.workload);
  const model = str(server?.model) ?? 'the server';
  const steps = arr(c.steps)
    .map(obj)
    .filter((s): s is Json => s !== undefined) as unknown as CapacityStep[];
  const prediction = (obj(c.prediction) as unknown as CapacityPrediction | undefined) ?? null;
  const limit = (obj(c.limit) as unknown as CapacityLimit | undefined) ?? null;
  const capacity = num(c.capacity);
  const sequence = num(workload?.sequenceTokens);
  const timeScale = num(server?.timeScale);
  const warnings: { code?: string; message: string }[] = [];
  if (c.interrupted === true) {
    warnings.push(warning('interrupted', { profile: 'capacity search', missing: 'batches' }));
  }
  if (typeof c.predictionNote === 'string') {
    warnings.push({
      code: 'no_prediction',
      message: `no analytic prediction: ${c.predictionNote}`,
    });
  }
  if (!limit && steps.length > 0) {
    warnings.push({
      code: 'no_limit',
      message: `no limit reached up to batch ${fmtNumber(Math.max(...steps.map((s) => s.batch)))}: the capacity is at least that`,
    });
  }
  const headline = `Capacity of ${model}: ${capacity !== undefined ? fmtNumber(capacity) : '?'} concurrent requests${sequence !== undefined ? ` of ${fmtNumber(sequence)} tokens` : ''}${prediction ? ` (analytic ${fmtNumber(prediction.maxBatch)})` : ''}`;
  const rows = [...steps]
    .sort((a, b) => a.batch - b.batch)
    .map((s) => [
      fmtNumber(s.batch),
      fmtNumber(s.meanConcurrency, 1),
      s.kvCacheUsageMax !== undefined ? pct(s.kvCacheUsageMax, 1) : '-',
      s.predictedKvCacheUsage !== undefined ? pct(s.predictedKvCacheUsage, 1) : '-',
      s.preemptions !== undefined ? fmtNumber(s.preemptions) : '-',
      s.waitingMax !== undefined ? fmtNumber(s.waitingMax) : '-',
      s.gpuMemoryUsedMaxBytes !== undefined ? gib(s.gpuMemoryUsedMaxBytes) : '-',
      fmtNumber(s.outputTokensPerS),
      fmtNumber(s.perUserTokensPerS, 1),
      fmtNumber(s.ttftP50Ms, 1),
      fmtNumber(s.ttftP99Ms, 1),
      fmtNumber(s.tpotMeanMs, 2),
      fmtNumber(s.itlP99Ms, 2),
      fmtNumber(s.failed),
    ]);
  const findings = [
    limit
      ? `<b>Limit</b> at batch ${esc(fmtNumber(limit.batch))} (${esc(limit.reason.replace(/_/g, ' '))}): ${esc(limit.detail)}`
      : undefined,
    capacity !== undefined
      ? `<b>Capacity</b>: ${esc(fmtNumber(capacity))} concurrent requests, the last batch before the limit${capacityRange(c.capacityPredictionInterval)}.`
      : undefined,
    prediction
      ? `<b>Prediction</b>: ${esc(`${fmtNumber(prediction.maxBatch)} sequences (${fmtNumber(prediction.numGpuBlocks)} KV blocks / ${fmtNumber(prediction.blocksPerSequence)} per sequence)`)}.`
      : undefined,
  ].filter(Boolean);
  const sections: Section[] = [
    {
      kind: 'headline',
      id: 'headline',
      html: `<p class="kicker">infergauge capacity report</p>
<h1>${esc(headline)}</h1>
<p class="facts">${esc(`${str(server?.simulator) ?? str(server?.url) ?? ''}${workload ? `; ${str(workload.inputTokens) ?? '?'} in / ${str(workload.outputTokens) ?? '?'} out tokens per request, ${str(workload.endpoint) ?? '?'} endpoint` : ''}${timeScale !== undefined ? `; ${timeScaleNote(timeScale)}` : ''}.`)}</p>`,
    },
    ...warningsSection(warnings),
    {
      kind: 'capacity',
      id: 'capacity',
      nav: 'Capacity',
      html: `<h2>The batch-to-OOM curve</h2><ul class="findings">${findings.map((f) => `<li>${f}</li>`).join('')}</ul>${table(
        [
          'batch',
          'measured',
          'KV peak',
          'KV predicted',
          'preempted',
          'waiting max',
          'GPU memory',
          'output tok/s',
          'per user tok/s',
          'TTFT p50',
          'TTFT p99',
          'TPOT mean',
          'ITL p99',
          'failed',
        ],
        rows,
      )}${charts.grid(capacityCharts(steps, prediction, limit, capacity))}`,
    },
    {
      kind: 'manifest',
      id: 'manifest',
      nav: 'Manifest',
      html: `<h2>Capacity manifest</h2>${factList([
        ['tool', `${str(obj(c.tool)?.name) ?? ''} ${str(obj(c.tool)?.version) ?? ''}`],
        ['server', str(server?.url)],
        ['model', str(server?.model)],
        ['simulator', str(server?.simulator)],
        ['time scale', timeScale !== undefined ? String(timeScale) : undefined],
        ['workload', workload ? JSON.stringify(workload) : undefined],
        ['prediction', prediction ? JSON.stringify(prediction) : undefined],
      ])}${jsonDetails('capacity.json', input.capacity)}`,
    },
  ];
  return htmlDocument(`infergauge: ${headline}`, sections, charts, footer(input.dir));
}

// ---------------------------------------------------------------------------------------------
// Sizing

/** A row's prediction as size.json holds it, read defensively (a file may be another version's). */
function rowPredictionView(v: unknown): SizeRowPredictionView | undefined {
  const p = obj(v);
  const level = num(p?.level);
  const sloChance = num(p?.sloChance);
  if (!p || level === undefined || sloChance === undefined) return undefined;
  const slos = arr(p.slos).flatMap((x) => {
    const s = obj(x);
    const slo = str(s?.slo);
    if (!s || slo === undefined) return [];
    const i = obj(s.interval);
    const low = num(i?.low);
    const high = num(i?.high);
    return [
      {
        slo,
        value: num(s.value) ?? null,
        ...(low !== undefined && high !== undefined ? { interval: { low, high } } : {}),
      },
    ];
  });
  const tightest = str(p.tightest);
  const centralDp = num(p.centralDp);
  return {
    level,
    slos,
    sloChance,
    ...(tightest !== undefined ? { tightest } : {}),
    ...(centralDp !== undefined ? { centralDp } : {}),
  };
}

/** What sizePredictionLines reads, from size.json read defensively. */
function sizeViewOf(
  z: Json,
  rows: Json[],
  predictions: (SizeRowPredictionView | undefined)[],
): SizeView {
  const p = obj(z.prediction);
  const level = num(p?.level);
  const first = obj(p?.centralFirst);
  const prediction: SizePredictionView | undefined =
    p && level !== undefined
      ? {
          level,
          draws: num(p.draws) ?? 0,
          intervalRows: num(p.intervalRows) ?? 0,
          rows: num(p.rows) ?? 0,
          ...(num(p.confidence) !== undefined ? { confidence: num(p.confidence) } : {}),
          ...(first
            ? {
                centralFirst: {
                  label: str(first.label) ?? '',
                  dp: num(first.dp) ?? 0,
                  sloChance: num(first.sloChance) ?? Number.NaN,
                },
              }
            : {}),
          leaders: arr(p.leaders).flatMap((x) => num(x) ?? []),
          ...(p.interrupted === true ? { interrupted: true } : {}),
        }
      : undefined;
  return {
    candidates: num(z.candidates) ?? rows.length,
    simulations: num(z.simulations) ?? 0,
    wallS: num(z.wallS) ?? 0,
    ...(str(z.calibration) !== undefined ? { calibration: str(z.calibration) } : {}),
    ...(prediction ? { prediction } : {}),
    deployments: rows.map((d, i) => ({
      gpu: str(d.gpu) ?? '',
      tp: num(d.tp) ?? 0,
      dp: num(d.dp) ?? 0,
      gpus: num(d.gpus) ?? 0,
      dtype: str(d.dtype) ?? '',
      kvCacheDtype: str(d.kvCacheDtype) ?? '',
      maxNumSeqs: num(d.maxNumSeqs) ?? 0,
      personality: str(d.personality) ?? '',
      feasible: d.feasible === true,
      ...(predictions[i] ? { prediction: predictions[i] } : {}),
    })),
  };
}

/**
 * `size --verify`: the point measured on the server, each figure predicted against measured,
 * the SLOs on the server and what became of the calibration. All of it is file text: escaped.
 */
function verificationSection(v: Json | undefined): Section[] {
  if (!v) return [];
  const figure = (n: number | undefined) => (n === undefined ? '-' : fmtSig(n));
  const load = obj(v.load);
  const loadText =
    load?.mode === 'rate'
      ? `${fmtSig(num(load.rate) ?? 0)} req/s`
      : `${fmtNumber(num(load?.users) ?? 0)} users`;
  const head = `<h2>Verified on the server</h2><p>${esc(`${str(v.deployment) ?? ''} at ${loadText}, ${fmtNumber(num(v.requests) ?? 0)} requests on ${str(v.server) ?? 'the server'}: ${str(v.chosen) ?? ''}`)}</p>`;
  const error = str(v.error);
  if (error !== undefined) {
    return [
      {
        kind: 'verification',
        id: 'verification',
        nav: 'Verification',
        html: `${head}<p>${esc(`The server could not be measured: ${error}`)}</p>`,
      },
    ];
  }
  const rows = arr(v.figures).flatMap((f) => {
    const o = obj(f);
    if (!o) return [];
    const interval = obj(o.interval);
    const low = num(interval?.low);
    const high = num(interval?.high);
    const error = num(o.error);
    const tolerance = num(o.tolerance);
    return [
      [
        str(o.metric) ?? '',
        `${figure(num(o.predicted))}${low !== undefined && high !== undefined ? ` (${fmtSig(low)}-${fmtSig(high)})` : ''}`,
        figure(num(o.measured)),
        error === undefined ? '-' : `${error >= 0 ? '+' : ''}${pct(error)}`,
        o.inside === undefined
          ? '-'
          : interval
            ? o.inside === true
              ? 'inside'
              : 'outside'
            : `${o.inside === true ? 'within' : 'off by more than'} ${pct(tolerance)}`,
      ],
    ];
  });
  const slo = arr(v.slo)
    .map(obj)
    .flatMap((s) => (s ? [str(s.message) ?? ''] : []))
    .join('; ');
  const calibration = str(v.calibration) ?? 'the calibration';
  const validity = obj(v.validity);
  const verdict = str(validity?.verdict);
  const invalid = verdict === 'invalid';
  const outcome = [
    ...(verdict && verdict !== 'valid'
      ? [
          `The measured run is ${verdict.toUpperCase()} (${arr(validity?.reasons).map(str).join(', ')}): see its summary.`,
        ]
      : []),
    v.inside === true
      ? `The server agrees with the prediction; the check is recorded in ${calibration}${v.addedAsPoint === true ? ', its run added as a point' : ''}.`
      : v.refitted === true
        ? `The server contradicts the prediction: ${calibration} was refitted with this run.`
        : invalid
          ? `${str(v.refitProblem) ?? 'Not refitted'}; the check is recorded in ${calibration}.`
          : `The server contradicts the prediction (${str(v.refitProblem) ?? 'not refitted'}): ${calibration} warns of it (calibration_verify_contradicted).`,
  ].join(' ');
  return [
    {
      kind: 'verification',
      id: 'verification',
      nav: 'Verification',
      html: `${head}${table(
        ['figure', 'predicted', 'measured', 'error', 'verdict'],
        rows.map((r) => r.map(esc)),
        [0, 4],
      )}<p>${esc(`SLOs on the server: ${v.sloHeld === true ? 'hold' : 'missed'} (${slo}). ${outcome} Run: ${str(v.dir) ?? ''}`)}</p>`,
    },
  ];
}

/**
 * `infergauge size`: the deployments that serve the traffic, ranked by cost, with the
 * cost/latency scatter and its Pareto front; those ruled out below with their reasons.
 */
function sizeReport(input: Extract<ReportInput, { kind: 'size' }>, charts: Charts): string {
  const z = obj(input.size) ?? {};
  const rows = arr(z.deployments)
    .map(obj)
    .filter((d): d is Json => d !== undefined);
  const feasible = rows.filter((d) => d.feasible === true);
  const priced = feasible.some((d) => num(d.costPerHour) !== undefined);
  const traffic = obj(z.traffic);
  const trafficText = sizeTrafficText(traffic ?? {}, (n) =>
    fmtNumber(n, traffic?.mode === 'rate' ? 2 : 0),
  );
  // A stopped search ranks what it evaluated: the headline says so first.
  const partial =
    z.interrupted === true
      ? `Partial (interrupted, ${fmtNumber(num(z.evaluated) ?? rows.length)} of ${fmtNumber(num(z.candidates) ?? rows.length)} candidates evaluated): `
      : '';
  const headline = `${partial}${feasible.length} of ${fmtNumber((partial ? num(z.evaluated) : num(z.candidates)) ?? rows.length)} deployments serve ${trafficText} within ${str(z.slo) ?? 'the SLOs'}`;
  const cost = (d: Json) => (priced ? num(d.costPerHour) : num(d.gpus));
  const ttft = (d: Json) => num(obj(d.at)?.ttftP99Ms);
  const name = (d: Json) =>
    `${str(d.gpu)} TP${num(d.tp)} DP${num(d.dp)} ${str(d.dtype)}/${str(d.kvCacheDtype)} ${str(d.personality)}`;
  const plotted = feasible.filter((d) => cost(d) !== undefined && ttft(d) !== undefined);
  const front = plotted
    .filter((d) => d.pareto === true)
    .sort((a, b) => (cost(a) as number) - (cost(b) as number));
  const chart: ChartSpec = {
    kind: 'xy',
    id: 'size-pareto',
    title: priced ? 'Cost per hour against p99 TTFT' : 'GPUs against p99 TTFT',
    caption:
      'Each deployment that meets the SLOs, at its share of the traffic; the line joins the Pareto front (none cheaper and faster).',
    x: { name: priced ? 'cost per hour' : 'GPUs', unit: priced ? '$/h' : 'GPUs', scale: true },
    y: [{ name: 'p99 TTFT', unit: 'ms', scale: true }],
    series: [
      {
        name: 'deployments',
        type: 'scatter',
        data: plotted.map((d) => [cost(d) as number, ttft(d) as number]),
        labels: plotted.map(name),
      },
      {
        name: 'Pareto front',
        type: 'line',
        data: front.map((d) => [cost(d) as number, ttft(d) as number]),
        labels: front.map(name),
      },
    ],
  };
  const money = (v: number | undefined, digits = 2) =>
    v === undefined ? '-' : `$${fmtNumber(v, digits)}`;
  // A trace's sizing says the prefix-cache hit rate each deployment ran at.
  const hitRates = feasible.some((d) => num(d.prefixCacheHitRate) !== undefined);
  // A calibrated sizing's predictions: each row's chance and tightest SLO, the lines below.
  const predictions = rows.map((d) => rowPredictionView(d.prediction));
  const predicted = feasible.some((d) => rowPredictionView(d.prediction) !== undefined);
  const predictionLines = sizePredictionLines(sizeViewOf(z, rows, predictions));
  const implied = num(z.traceImpliedHitRate);
  const tableRows = feasible.map((d, i) => [
    `${i + 1}${d.pareto === true ? '*' : ''}`,
    str(d.gpu) ?? '',
    fmtNumber(num(d.tp) ?? 0),
    `${fmtNumber(num(d.dp) ?? 0)}${((c) => (c !== undefined ? ` (+${(num(d.dp) ?? 0) - c})` : ''))(rowPredictionView(d.prediction)?.centralDp)}`,
    fmtNumber(num(d.gpus) ?? 0),
    str(d.dtype) ?? '',
    str(d.kvCacheDtype) ?? '',
    fmtNumber(num(d.maxNumSeqs) ?? 0),
    str(d.personality) ?? '',
    money(num(d.costPerHour)),
    money(num(d.costPerMillionOutputTokens), 3),
    ms(ttft(d)),
    ms(num(obj(d.at)?.itlP99Ms)),
    `${d.headroomAtLeast === true ? '>=' : ''}${pct(num(d.headroom))}`,
    ...(predicted
      ? ((p) => [p ? chanceText(p.sloChance) : '-', tightestText(p)])(
          rowPredictionView(d.prediction),
        )
      : []),
    ...(hitRates ? [pct(num(d.prefixCacheHitRate), 1)] : []),
    str(d.binding) ?? '',
  ]);
  const ruledOut = rows
    .filter((d) => d.feasible !== true)
    .map((d) => [name(d), str(d.reason) ?? '']);
  const sections: Section[] = [
    {
      kind: 'headline',
      id: 'headline',
      html: `<p class="kicker">infergauge sizing report</p>
<h1>${esc(headline)}</h1>
<p class="facts">${esc(`${[str(z.scenario), `${fmtNumber(num(z.simulations) ?? 0)} virtual runs in ${fmtNumber(num(z.wallS) ?? 0, 1)} s.`].filter((x) => x !== undefined).join('; ')}`)}</p>`,
    },
    ...warningsSection([
      ...arr(z.warnings).map((w) => ({ message: String(w) })),
      // The calibration's own (its fit's, a check's that contradicted it), as the file keeps them.
      ...arr(z.calibrationWarnings).flatMap((w) => {
        const o = obj(w);
        return o
          ? [{ where: 'calibration', message: `[${str(o.code) ?? '?'}] ${str(o.message) ?? ''}` }]
          : [];
      }),
    ]),
    {
      kind: 'size',
      id: 'deployments',
      nav: 'Deployments',
      html: `<h2>Deployments that meet the SLOs</h2>${plotted.length > 0 ? charts.grid([chart]) : ''}${table(
        [
          '#',
          'GPU',
          'TP',
          'DP',
          'GPUs',
          'weights',
          'KV',
          'max seqs',
          'engine',
          '$/h',
          '$/M out tok',
          'p99 TTFT',
          'p99 ITL',
          'headroom',
          ...(predicted ? ['P(SLOs)', 'tightest SLO'] : []),
          ...(hitRates ? ['hit rate'] : []),
          'what binds one replica',
        ],
        tableRows.map((row) => row.map(esc)),
        [1, 5, 6, 8, ...(predicted ? [15] : []), 14 + (predicted ? 2 : 0) + (hitRates ? 1 : 0)],
      )}<p class="caption">* on the Pareto front. Latency and headroom are each replica at its share of the traffic.${
        hitRates
          ? esc(
              ` Hit rate: the trace's prompt tokens the simulator served from the prefix cache at that deployment (the rate it assumed; replicas split the sharing)${implied !== undefined ? `; the trace's block ids imply ${pct(implied, 1)} with a cache that never evicts` : ''}.`,
            )
          : ''
      }</p>${predictionLines.map((line) => `<p class="caption">${esc(line)}</p>`).join('')}`,
    },
    ...verificationSection(obj(z.verification)),
    {
      kind: 'ruled-out',
      id: 'ruled-out',
      nav: 'Ruled out',
      html: `<h2>Ruled out (${ruledOut.length})</h2>${table(
        ['deployment', 'why'],
        ruledOut.map((row) => row.map(esc)),
        [0, 1],
      )}${jsonDetails('size.json', input.size)}`,
    },
  ];
  return htmlDocument(`infergauge: ${headline}`, sections, charts, footer(input.dir));
}
