/**
 * The live dashboard's page: one HTML document, its script and the report's echarts, all served
 * by the output itself (no CDN, nothing absolute: it works offline). Every text the server or
 * the run said (model, scenario, labels, error messages) reaches the page as JSON and is set
 * with textContent, never parsed as HTML.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

let echarts: Buffer | undefined;

/** The echarts build the report's charts come from, resolved as Node resolves the package. */
export function echartsScript(): Buffer {
  echarts ??= readFileSync(
    createRequire(import.meta.url).resolve('echarts/dist/echarts.common.min.js'),
  );
  return echarts;
}

function escapeAttr(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** The document; `token` (off loopback) rides on its scripts' URLs. */
export function dashboardPage(token: string | undefined): string {
  const q = token ? `?token=${escapeAttr(encodeURIComponent(token))}` : '';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<link rel="icon" href="data:,">
<title>infergauge: live</title>
<style>${STYLE}</style>
</head>
<body>
<header>
  <h1>infergauge <span class="muted">live</span></h1>
  <div id="session" class="muted"></div>
  <div class="spacer"></div>
  <span id="status" class="badge">connecting</span>
  <button id="stop" type="button" disabled>Stop</button>
</header>
<main>
  <section class="tiles">
    <div class="tile"><div class="label">point</div><div id="point" class="value small">-</div></div>
    <div class="tile"><div class="label">completed</div><div id="completed" class="value">-</div></div>
    <div class="tile"><div class="label">failed</div><div id="failed" class="value">-</div></div>
    <div class="tile"><div class="label">sent / planned</div><div id="sent" class="value">-</div></div>
    <div class="tile"><div class="label">in flight</div><div id="inflight" class="value">-</div></div>
    <div class="tile"><div class="label">ETA</div><div id="eta" class="value">-</div></div>
    <div class="tile"><div class="label">req/s (window)</div><div id="rps" class="value">-</div></div>
    <div class="tile"><div class="label">output tok/s (window)</div><div id="tps" class="value">-</div></div>
    <div class="tile"><div class="label">concurrency (window)</div><div id="concurrency" class="value">-</div></div>
  </section>
  <p id="ended" class="notice" hidden></p>
  <section>
    <h2>Latency (ms) <span class="muted">window: last 10 s; cumulative: the point so far</span></h2>
    <table id="latency">
      <thead><tr><th></th><th>window p50</th><th>p90</th><th>p99</th><th>cumulative p50</th><th>p90</th><th>p95</th><th>p99</th><th>max</th></tr></thead>
      <tbody></tbody>
    </table>
    <p id="failures" class="muted"></p>
  </section>
  <section class="charts">
    <div class="chart-box"><h2>Throughput</h2><div id="chart-throughput" class="chart"></div></div>
    <div class="chart-box"><h2>Concurrency</h2><div id="chart-concurrency" class="chart"></div></div>
    <div class="chart-box"><h2>Latency over time (window)</h2><div id="chart-latency" class="chart"></div></div>
    <div class="chart-box" id="server-box" hidden><h2>Server: KV cache and batch</h2><div id="chart-server" class="chart"></div></div>
    <div class="chart-box" id="curve-box" hidden><h2>Finished points: throughput against latency</h2><div id="chart-curve" class="chart"></div></div>
  </section>
  <section>
    <h2>Finished points</h2>
    <div id="finished"><p class="muted">none yet</p></div>
  </section>
  <p id="history" class="muted" data-rows="0"></p>
</main>
<script src="echarts.min.js${q}"></script>
<script src="app.js${q}"></script>
</body>
</html>
`;
}

const STYLE = `
:root { color-scheme: light; --fg: #1d2433; --muted: #667085; --line: #e4e7ec; --bg: #f7f8fa; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; align-items: center; gap: 12px; padding: 10px 20px; background: #fff; border-bottom: 1px solid var(--line); }
h1 { font-size: 18px; margin: 0; }
h2 { font-size: 14px; margin: 0 0 6px; }
.muted { color: var(--muted); font-weight: normal; }
.spacer { flex: 1; }
.badge { padding: 2px 10px; border-radius: 10px; background: #eef2ff; }
.badge.ended { background: #ecfdf3; }
.badge.stopping, .badge.lost { background: #fef3f2; }
button { font: inherit; padding: 4px 14px; border-radius: 6px; border: 1px solid #d92d20; background: #fff; color: #d92d20; cursor: pointer; }
button:disabled { opacity: 0.4; cursor: default; }
main { padding: 14px 20px; display: grid; gap: 14px; }
section { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; }
.tiles { display: grid; grid-template-columns: repeat(auto-fit, minmax(110px, 1fr)); gap: 8px; }
.tile .label { color: var(--muted); font-size: 12px; }
.tile .value { font-size: 20px; font-variant-numeric: tabular-nums; }
.tile .value.small { font-size: 13px; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 10px; text-align: right; border-bottom: 1px solid var(--line); }
th:first-child, td:first-child { text-align: left; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(380px, 1fr)); gap: 12px; background: none; border: none; padding: 0; }
.chart-box { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; }
.chart { height: 220px; }
.notice { margin: 0; padding: 8px 12px; background: #fffaeb; border: 1px solid #fedf89; border-radius: 8px; }
.card { border-top: 1px solid var(--line); padding: 6px 0; }
.card:first-child { border-top: none; }
.verdict-valid, .verdict-ok { color: #067647; }
.verdict-caution, .verdict-ok-near-a-limit, .verdict-not-measured { color: #b54708; }
.verdict-invalid, .verdict-client-limited { color: #b42318; }
.card ul { margin: 2px 0 0; padding-left: 20px; color: var(--muted); }
`;

/** The page's script: plain browser JavaScript, no build step. */
export function pageScript(): string {
  return SCRIPT;
}

const SCRIPT = `'use strict';
(function () {
  const token = new URLSearchParams(location.search).get('token');
  const q = token ? '?token=' + encodeURIComponent(token) : '';
  const $ = (id) => document.getElementById(id);
  const state = { session: null, points: [], rows: [], telemetry: [], finished: [], ended: false, thinned: 0 };
  const KEYS = [['ttftMs', 'TTFT'], ['itlMs', 'ITL'], ['tpotMs', 'TPOT'], ['e2eMs', 'E2E']];

  function fmt(v, digits) {
    if (v === undefined || v === null || !Number.isFinite(v)) return '-';
    if (digits !== undefined) return v.toFixed(digits);
    const a = Math.abs(v);
    return a >= 100 ? v.toFixed(0) : a >= 10 ? v.toFixed(1) : v.toFixed(2);
  }
  function fmtS(s) {
    if (s === undefined || s === null || !Number.isFinite(s)) return '-';
    if (s < 60) return s.toFixed(0) + ' s';
    const m = Math.floor(s / 60);
    return m + ' min ' + Math.round(s - m * 60) + ' s';
  }
  function setValue(id, value, text) {
    const e = $(id);
    e.textContent = text !== undefined ? text : fmt(value, 0);
    e.dataset.value = value === undefined || value === null ? '' : String(value);
  }
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = String(text);
    return e;
  }
  function verdictClass(v) {
    return 'verdict-' + String(v).replace(/[^a-z]+/gi, '-').toLowerCase();
  }
  function setStatus(text, cls) {
    const s = $('status');
    s.textContent = text;
    s.className = 'badge' + (cls ? ' ' + cls : '');
  }

  // Charts: drawn with the same echarts as the report, on seconds since the session started.
  const charts = {};
  function chart(id) {
    if (!window.echarts) return null;
    if (!charts[id]) charts[id] = window.echarts.init($(id), null, { renderer: 'canvas' });
    return charts[id];
  }
  function base(yNames) {
    return {
      animation: false,
      grid: { left: 50, right: yNames.length > 1 ? 50 : 16, top: 48, bottom: 28 },
      legend: { top: 0 },
      tooltip: { trigger: 'axis' },
      xAxis: { type: 'value', name: 's', nameGap: 4, min: 0 },
      yAxis: yNames.map((n, i) => ({ type: 'value', name: n, position: i ? 'right' : 'left', splitLine: { show: i === 0 } })),
    };
  }
  function line(name, rows, key, axis) {
    return {
      name: name, type: 'line', showSymbol: false, yAxisIndex: axis || 0, connectNulls: false,
      data: rows.map((r) => [r.t, r[key] === undefined ? null : r[key]]),
    };
  }
  function drawTimeCharts() {
    const rows = state.rows;
    const c1 = chart('chart-throughput');
    if (!c1) return;
    c1.setOption(Object.assign(base(['req/s', 'tok/s']), {
      series: [line('requests/s', rows, 'requestsPerS', 0), line('output tok/s', rows, 'outputTokensPerS', 1)],
    }), true);
    chart('chart-concurrency').setOption(Object.assign(base(['requests']), {
      series: [line('measured (window)', rows, 'concurrency'), line('in flight', rows, 'inFlight')],
    }), true);
    chart('chart-latency').setOption(Object.assign(base(['ms']), {
      series: [
        line('TTFT p50', rows, 'ttftP50Ms'), line('TTFT p99', rows, 'ttftP99Ms'),
        line('ITL p50', rows, 'itlP50Ms'), line('ITL p99', rows, 'itlP99Ms'),
        line('E2E p50', rows, 'e2eP50Ms'),
      ],
    }), true);
    const h = $('history');
    h.dataset.rows = String(rows.length);
    h.dataset.firstT = rows.length ? String(rows[0].t) : '';
    h.textContent = rows.length
      ? rows.length + ' snapshots from ' + fmt(rows[0].t, 1) + ' s' + (state.thinned ? ' (older ones thinned)' : '')
      : '';
  }
  function drawServer() {
    const rows = state.telemetry;
    if (rows.length === 0) return;
    $('server-box').hidden = false;
    const c = chart('chart-server');
    if (!c) return;
    c.setOption(Object.assign(base(['KV %', 'requests']), {
      series: [
        { name: 'KV cache used %', type: 'line', showSymbol: false, data: rows.map((r) => [r.t, r.kvCacheUsage === undefined ? null : r.kvCacheUsage * 100]) },
        line('running', rows, 'running', 1), line('waiting', rows, 'waiting', 1),
      ],
    }), true);
  }
  function drawCurve() {
    const f = state.finished;
    const many = (state.session && state.session.kind !== 'run') || f.length > 1;
    if (!many || f.length === 0) return;
    $('curve-box').hidden = false;
    const c = chart('chart-curve');
    if (!c) return;
    const pts = f.slice().sort((a, b) => a.outputTokensPerS - b.outputTokensPerS);
    const opt = base(['TTFT p99 ms', 'ITL p99 ms']);
    opt.xAxis = { type: 'value', name: 'output tok/s', nameGap: 4, nameLocation: 'end' };
    opt.tooltip = { trigger: 'item' };
    opt.series = [
      { name: 'TTFT p99', type: 'line', symbolSize: 8, data: pts.map((p) => ({ value: [p.outputTokensPerS, p.ttftP99Ms], name: p.load })) },
      { name: 'ITL p99', type: 'line', yAxisIndex: 1, symbolSize: 8, data: pts.map((p) => ({ value: [p.outputTokensPerS, p.itlP99Ms], name: p.load })) },
    ];
    c.setOption(opt, true);
  }

  function pointLabel(index) {
    const p = state.points.find((x) => x.index === index);
    if (!p) return '-';
    return (index + 1) + ': ' + p.scenario + ', ' + p.load;
  }

  function onSnapshot(s) {
    const c = s.cumulative;
    $('point').textContent = pointLabel(s.point);
    setValue('completed', c.completed);
    setValue('failed', c.failed);
    setValue('sent', s.sent, s.sent + (s.totalRequests !== undefined ? ' / ' + s.totalRequests : ''));
    setValue('inflight', s.inFlight);
    setValue('eta', s.etaS, s.final ? 'done' : fmtS(s.etaS));
    setValue('rps', s.window.requestsPerS, fmt(s.window.requestsPerS));
    setValue('tps', s.window.outputTokensPerS, fmt(s.window.outputTokensPerS, 0));
    setValue('concurrency', s.window.concurrency, fmt(s.window.concurrency, 1));
    const body = $('latency').tBodies[0];
    body.replaceChildren();
    for (const [key, name] of KEYS) {
      const w = s.window[key] || {};
      const a = c[key] || {};
      const tr = el('tr');
      tr.dataset.metric = key;
      tr.append(el('td', '', name));
      for (const v of [w.p50, w.p90, w.p99, a.p50, a.p90, a.p95, a.p99, a.max]) tr.append(el('td', '', fmt(v)));
      body.append(tr);
    }
    const kinds = Object.entries(c.failedByKind || {});
    $('failures').textContent = kinds.length ? 'failures by kind: ' + kinds.map(([k, n]) => k + ' ' + n).join(', ') : '';
  }

  function onFinished(f) {
    state.finished.push(f);
    const box = $('finished');
    if (state.finished.length === 1) box.replaceChildren();
    const card = el('div', 'card');
    card.dataset.point = String(f.index);
    const head = el('div');
    head.append(el('strong', '', 'Point ' + (f.index + 1) + ': ' + f.scenario + ', ' + f.load + (f.interrupted ? ' (interrupted)' : '')));
    card.append(head);
    const nums = el('div');
    const num = (cls, label, value, text) => {
      const s = el('span', cls, text);
      s.dataset.value = value === null || value === undefined ? '' : String(value);
      nums.append(label + ' ', s, '  ');
    };
    num('completed', 'completed', f.completed, String(f.completed));
    num('failed', 'failed', f.failed, String(f.failed));
    num('rps', 'req/s', f.requestsPerS, fmt(f.requestsPerS));
    num('tps', 'output tok/s', f.outputTokensPerS, fmt(f.outputTokensPerS, 0));
    num('ttft-p50', 'TTFT p50', f.ttftP50Ms, fmt(f.ttftP50Ms) + ' ms');
    num('ttft-p99', 'p99', f.ttftP99Ms, fmt(f.ttftP99Ms) + ' ms');
    num('itl-p99', 'ITL p99', f.itlP99Ms, fmt(f.itlP99Ms) + ' ms');
    card.append(nums);
    const verdict = (what, cls, v, reasons) => {
      const d = el('div', cls);
      d.append(what + ': ', el('strong', verdictClass(v), v));
      if (reasons.length) {
        const ul = el('ul');
        for (const r of reasons) ul.append(el('li', '', r));
        d.append(ul);
      }
      card.append(d);
    };
    if (f.validity) verdict('Validity', 'validity', f.validity.verdict, f.validity.reasons.map((r) => r.verdict + ': ' + r.text));
    if (f.clientHealth) verdict('Client health', 'client-health', f.clientHealth.verdict, f.clientHealth.reasons);
    box.append(card);
    drawCurve();
  }

  function onEnd(e) {
    state.ended = true;
    source.close();
    $('stop').disabled = true;
    if (e.report) {
      // The report replaces the page: the server keeps it for a moment after the run ended.
      location.replace('report.html' + q);
      return;
    }
    setStatus('ended (exit ' + e.code + ')', 'ended');
    const note = $('ended');
    note.hidden = false;
    note.textContent = 'The run ended (exit ' + e.code + ')' + (e.error ? ': ' + e.error : '') +
      '. No HTML report was written (--no-html or nothing saved): the numbers above are its last.';
    document.body.dataset.ended = 'true';
  }

  const source = new EventSource('events' + q);
  const on = (name, f) => source.addEventListener(name, (m) => f(JSON.parse(m.data)));
  source.onopen = () => { if (!state.ended) setStatus('running'); };
  source.onerror = () => { if (!state.ended) setStatus('connection lost; retrying', 'lost'); };
  on('reset', () => {
    state.points = [];
    state.finished = [];
    const box = $('finished');
    box.replaceChildren(el('p', 'muted', 'none yet'));
  });
  on('session', (s) => {
    state.session = s;
    $('session').textContent = 'infergauge ' + s.command + ' · ' + s.id;
    $('stop').disabled = !s.stoppable;
    $('stop').title = s.stoppable ? 'Stop the run as Ctrl-C does: in-flight requests finish, results are written' : 'this session cannot be stopped from here';
  });
  on('point', (p) => {
    state.points.push(p);
    $('point').textContent = pointLabel(p.index);
  });
  on('history', (h) => {
    state.rows = h.rows;
    state.telemetry = h.telemetry;
    state.thinned = h.thinned;
    drawTimeCharts();
    drawServer();
  });
  // Thinned as the server thins its own: a tab left open for days stays small.
  const thin = (rows) => rows.length > 7200 ? rows.filter((_, i) => i % 2 === 0 || i === rows.length - 1) : rows;
  on('row', (r) => { state.rows.push(r); state.rows = thin(state.rows); drawTimeCharts(); });
  on('telemetry', (r) => { state.telemetry.push(r); state.telemetry = thin(state.telemetry); drawServer(); });
  on('snapshot', onSnapshot);
  on('finished', onFinished);
  on('end', onEnd);

  $('stop').addEventListener('click', () => {
    $('stop').disabled = true;
    setStatus('stopping', 'stopping');
    const headers = { 'X-Infergauge-Stop': '1' };
    if (token) headers['X-Infergauge-Token'] = token;
    fetch('stop' + q, { method: 'POST', headers: headers }).then((r) => {
      if (!r.ok) setStatus('stop refused (' + r.status + ')', 'lost');
    }, () => setStatus('stop failed: no connection', 'lost'));
  });
  window.addEventListener('resize', () => { for (const c of Object.values(charts)) c.resize(); });
})();
`;
