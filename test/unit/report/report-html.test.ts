/**
 * The HTML report from fixed results (test/fixtures/report, written by the tool itself: see
 * generate.ts there): its structure per kind of results (sections and charts, none missing or
 * extra), escaping of every string from servers, datasets and plans, no external URL, its size;
 * then in a real browser (Debian's chromium through playwright-core): no console error, no
 * request but the file itself, every chart drawn, the hostile strings shown as text and never
 * run, tooltips, the print stylesheet, and a screenshot per section type in test-artifacts/.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { warning } from '../../../src/metrics/warnings.js';
import { cdfPoints, MAX_SERIES_POINTS, paretoFront } from '../../../src/report/charts.js';
import { escapeHtml } from '../../../src/report/format.js';
import { renderHtmlReport } from '../../../src/report/html.js';
import { loadReportInput, type ReportInput } from '../../../src/results/load.js';
import { readRunRecords } from '../../../src/results/reader.js';
import { REPO } from '../../../tools/repo.js';
import { openFile, startBrowser } from '../../helpers/browser.js';

const FIXTURES = join(REPO, 'test/fixtures/report/');
const ARTIFACTS = join(REPO, 'test-artifacts/report/');
/** What generate.ts put in model names, labels, messages and Prometheus labels. */
const HOSTILE = '<script>window.__pwned=1</script>"><img src=x onerror="window.__pwned=2">';

const RUN_CHARTS = [
  'ttft-cdf',
  'itl-cdf',
  'tpot-cdf',
  'e2e-cdf',
  'latency-timeline',
  'load-timeline',
];

/** The golden structure: top-level sections and charts, in order, per fixture. */
const EXPECTED: Record<
  string,
  { kind: ReportInput['kind']; sections: string[]; charts: string[] }
> = {
  run: {
    kind: 'run',
    sections: ['headline', 'latency', 'timeline', 'summary', 'manifest'],
    charts: RUN_CHARTS,
  },
  'run-telemetry': {
    kind: 'run',
    sections: ['headline', 'warnings', 'latency', 'timeline', 'summary', 'failures', 'manifest'],
    charts: [...RUN_CHARTS, 'kv-timeline', 'memory-timeline'],
  },
  scenarios: {
    kind: 'scenarios',
    sections: ['headline', 'warnings', 'scenarios', 'scenario', 'scenario', 'manifest'],
    charts: ['scenarios-throughput', 'scenarios-latency', ...RUN_CHARTS, ...RUN_CHARTS],
  },
  sweep: {
    kind: 'sweep',
    sections: ['headline', 'warnings', 'sweep', 'recommendations', 'manifest'],
    charts: ['sweep-throughput', 'sweep-latency', 'sweep-pareto', 'sweep-per-user'],
  },
  'probe-prefill': {
    kind: 'probe',
    sections: ['headline', 'warnings', 'probe', 'manifest'],
    charts: ['probe-ttft', 'probe-prefill-throughput'],
  },
  'probe-decode': {
    kind: 'probe',
    sections: ['headline', 'warnings', 'probe', 'manifest'],
    charts: ['probe-itl', 'probe-decode-throughput'],
  },
  capacity: {
    kind: 'capacity',
    sections: ['headline', 'capacity', 'manifest'],
    charts: ['capacity-kv', 'capacity-throughput', 'capacity-latency'],
  },
};

const NAMES = Object.keys(EXPECTED);
/** Fixtures that carry the hostile strings (see generate.ts). */
const HOSTILE_FIXTURES = ['run-telemetry', 'sweep', 'probe-decode', 'capacity'];

const inputs = new Map<string, ReportInput>();
const reports = new Map<string, string>();

async function report(name: string): Promise<string> {
  let html = reports.get(name);
  if (html === undefined) {
    const input = await loadReportInput(join(FIXTURES, name));
    inputs.set(name, input);
    html = renderHtmlReport(input);
    reports.set(name, html);
  }
  return html;
}

const sectionsOf = (html: string) =>
  [...html.matchAll(/<section id="[^"]*" data-section="([^"]+)"/g)].map((m) => m[1]);
const chartsOf = (html: string) => [...html.matchAll(/data-chart="([^"]+)"/g)].map((m) => m[1]);
const figuresOf = (html: string) =>
  [...html.matchAll(/<figure[\s\S]*?<\/figure>/g)].map((m) => m[0]);

describe('report input', () => {
  test('loadReportInput tells each kind of results directory by its files', async () => {
    for (const name of NAMES) {
      const input = await loadReportInput(join(FIXTURES, name));
      assert.equal(input.kind, EXPECTED[name].kind, name);
    }
    const run = await loadReportInput(join(FIXTURES, 'run'));
    assert.ok(run.kind === 'run');
    assert.equal(run.charts?.requests, 208, 'every record, warm-up included');
    assert.equal(run.records, undefined, 'records are streamed, never held');
    assert.equal(run.telemetry.length, 0);
    assert.ok(run.manifest !== null);
    const telemetry = await loadReportInput(join(FIXTURES, 'run-telemetry'));
    assert.ok(telemetry.kind === 'run' && telemetry.telemetry.length > 10);
    const scenarios = await loadReportInput(join(FIXTURES, 'scenarios'));
    assert.ok(scenarios.kind === 'scenarios');
    assert.deepEqual(
      scenarios.runs.map((r) => r.dir.split(/[\\/]/).pop()),
      ['chat', 'summarize'],
    );
    // A results file stands for its directory.
    const byFile = await loadReportInput(join(FIXTURES, 'sweep', 'sweep.json'));
    assert.equal(byFile.kind, 'sweep');
  });

  test('loadReportInput: a clear error for what is not a results directory', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'infergauge-report-'));
    try {
      await assert.rejects(
        loadReportInput(empty),
        /is not an infergauge results directory: it holds none of sweep\.json, probe\.json, capacity\.json, size\.json, scenarios\.json, summary\.json/,
      );
      await assert.rejects(loadReportInput(join(empty, 'missing')), /no such file or directory/);
      writeFileSync(join(empty, 'summary.json'), '{"not":');
      await assert.rejects(loadReportInput(empty), /summary\.json is not valid JSON/);
      writeFileSync(join(empty, 'notes.txt'), 'x');
      await assert.rejects(loadReportInput(join(empty, 'notes.txt')), /is not a results file/);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});

describe('HTML report structure', () => {
  for (const name of NAMES) {
    test(`golden structure: ${name}`, async () => {
      const html = await report(name);
      const expected = EXPECTED[name];
      assert.deepEqual(sectionsOf(html), expected.sections, 'sections in order');
      assert.deepEqual(chartsOf(html), expected.charts, 'charts in order');
      for (const figure of figuresOf(html)) {
        assert.equal((figure.match(/<svg\b/g) ?? []).length, 1, 'one <svg> per chart');
        assert.equal((figure.match(/<\/svg>/g) ?? []).length, 1);
        assert.match(figure, /<figcaption>[^<]+<\/figcaption>/, 'every chart has a title');
        assert.match(figure, /<path d="M/, 'every chart draws paths');
      }
      assert.equal(
        (html.match(/<section\b/g) ?? []).length,
        expected.sections.length,
        'no section beyond the expected ones',
      );
      // Every section has its heading; a run's verdict comes before everything else.
      for (const section of html.split(/<section /).slice(1)) {
        assert.match(
          section,
          /^[^>]*>\s*(<p class="verdict [^"]+"[^>]*>[\s\S]*?<\/p>\s*)?(<p class="kicker">[\s\S]*?<\/p>\s*)?<h[12]>/,
        );
      }
      if (name.startsWith('run')) {
        assert.match(html, /data-section="headline">\n<p class="verdict (valid|caution|invalid)" /);
      }
      if (name === 'run')
        assert.match(html, /<p class="verdict valid" data-verdict="valid">VALID /);
      assert.match(html, /^<!doctype html>\n<html lang="en">/);
      assert.match(html, /@media print\{/, 'a print stylesheet');
    });
  }

  test('golden structure: each scenario has its latency, timeline and numbers', async () => {
    const html = await report('scenarios');
    const scenarios = html.split('data-section="scenario"').slice(1);
    assert.equal(scenarios.length, 2);
    for (const s of scenarios) {
      const blocks = [...s.split('</section>')[0].matchAll(/data-block="([^"]+)"/g)].map(
        (m) => m[1],
      );
      assert.deepEqual(blocks, ['latency', 'timeline', 'summary']);
    }
    assert.match(html, /data-scenario="chat"/);
    assert.match(html, /data-scenario="summarize"/);
  });

  test('the headline states the load and warnings come first', async () => {
    const html = await report('run');
    assert.match(
      html,
      /<h1>sim-llama-3-8b: 1,646 output tok\/s at 16 concurrent requests \(measured 14\.4\)<\/h1>/,
    );
    const telemetry = await report('run-telemetry');
    assert.match(telemetry, /at 8 concurrent requests \(measured 7\.\d\)<\/h1>/);
    const order = sectionsOf(telemetry);
    assert.equal(order.indexOf('warnings'), 1, 'warnings right after the headline');
    assert.match(telemetry, /<code>low_sample<\/code>/);
    const sweep = await report('sweep');
    assert.match(sweep, /Latency cliff<\/b> at 64 concurrent requests/);
    assert.match(sweep, /data-profile="latency-first"/);
    assert.match(sweep, /data-profile="throughput-first"/);
    assert.match(sweep, /data-profile="memory-first"/);
  });

  test('percentiles are marked on the distributions, knee and cliff on the sweep', async () => {
    const html = await report('run');
    const ttft = figuresOf(html).find((f) => f.includes('data-chart="ttft-cdf"')) as string;
    for (const p of ['p50', 'p95', 'p99']) assert.match(ttft, new RegExp(`>${p} [0-9.,]+</text>`));
    const input = structuredClone(
      (await loadReportInput(join(FIXTURES, 'sweep'))) as Extract<ReportInput, { kind: 'sweep' }>,
    );
    const scenario = (input.sweep as { scenarios: Record<string, unknown>[] }).scenarios[0];
    scenario.knee = {
      saturatesAt: 64,
      level: 128,
      throughputGain: 0.1,
      loadGain: 1,
      latencyGain: 0.5,
      why: 'made up for the test',
    };
    const sweep = figuresOf(renderHtmlReport(input));
    const throughput = sweep.find((f) => f.includes('data-chart="sweep-throughput"')) as string;
    assert.match(throughput, />knee: saturates at 64</);
    assert.match(throughput, />cliff: p99 TTFT x3.34</);
    assert.match(throughput, />max concurrency under SLO: 85</);
    const latency = sweep.find((f) => f.includes('data-chart="sweep-latency"')) as string;
    assert.match(latency, />SLO ttft\.p99&lt;500</);
    const capacity = figuresOf(await report('capacity'));
    const kv = capacity.find((f) => f.includes('data-chart="capacity-kv"')) as string;
    assert.match(kv, />predicted max 9</);
    assert.match(kv, />measured KV peak</);
    assert.match(kv, />predicted</);
  });

  test('an interrupted run says so once', async () => {
    const run = (await loadReportInput(join(FIXTURES, 'run'))) as Extract<
      ReportInput,
      { kind: 'run' }
    >;
    const said = {
      code: 'interrupted',
      message: 'the run was interrupted: this summary covers only the requests that finished',
    };
    const summary = {
      ...run.summary,
      interrupted: true,
      warnings: [said, ...run.summary.warnings],
    };
    const html = renderHtmlReport({ ...run, summary });
    assert.equal(html.match(/<code>interrupted<\/code>/g)?.length, 1);
    assert.ok(html.includes(said.message));
    // A summary that does not say it (an older one) still gets the line.
    const older = renderHtmlReport({ ...run, summary: { ...summary, warnings: [] } });
    assert.equal(older.match(/<code>interrupted<\/code>/g)?.length, 1);
  });

  test("a warning's severity marks its line and its detail is shown, escaped", async () => {
    const run = (await loadReportInput(join(FIXTURES, 'run'))) as Extract<
      ReportInput,
      { kind: 'run' }
    >;
    const limited = warning('client_limited', {
      reasons: ['event-loop delay p99 14.0 ms (limit 10 ms): <b>late</b>'],
      causes: ['event-loop delay p99 14.0 ms (limit 10 ms)'],
      advice: 'use --workers 3 to spread the streams over more cores',
    });
    const summary = { ...run.summary, warnings: [limited] };
    const html = renderHtmlReport({ ...run, summary });
    assert.match(html, /<li class="error"><code>client_limited<\/code>the client limited this run/);
    assert.ok(html.includes('<small>event-loop delay p99 14.0 ms (limit 10 ms): &lt;b&gt;late'));
    // An older summary's warning has no severity: its code's, from the catalogue.
    const { severity: _, ...older } = limited;
    const again = renderHtmlReport({ ...run, summary: { ...summary, warnings: [older] } });
    assert.match(again, /<li class="error"><code>client_limited<\/code>/);
  });

  test('a run without records.jsonl still reports its numbers', async () => {
    const run = (await loadReportInput(join(FIXTURES, 'run-telemetry'))) as Extract<
      ReportInput,
      { kind: 'run' }
    >;
    const html = renderHtmlReport({ ...run, records: [] });
    assert.deepEqual(sectionsOf(html), [
      'headline',
      'warnings',
      'latency',
      'timeline',
      'summary',
      'manifest',
    ]);
    assert.deepEqual(chartsOf(html), ['kv-timeline', 'memory-timeline'], 'telemetry only');
    assert.match(html, /records\.jsonl is missing/);
    const bare = renderHtmlReport({ ...run, records: [], telemetry: [], manifest: null });
    assert.deepEqual(chartsOf(bare), []);
    assert.match(bare, /No manifest\.json in this directory/);
  });

  test('timelines of long runs are sampled', async () => {
    const run = (await loadReportInput(join(FIXTURES, 'run'))) as Extract<
      ReportInput,
      { kind: 'run' }
    >;
    const saved = await readRunRecords(run.dir);
    const span = Math.max(...saved.map((r) => r.endAt));
    const records = Array.from({ length: 15 }, (_, k) =>
      saved.map((r) => ({
        ...r,
        id: r.id + k * 1000,
        scheduledAt: r.scheduledAt + k * span,
        sentAt: r.sentAt + k * span,
        endAt: r.endAt + k * span,
      })),
    ).flat();
    const html = renderHtmlReport({ ...run, records });
    const tips = JSON.parse(
      (
        /<script type="application\/json" id="ig-tips">([\s\S]*?)<\/script>/.exec(html) as string[]
      )[1],
    ) as Record<string, { p: number[]; l: string[] }>;
    const key = (/data-chart="latency-timeline" data-key="(c\d+)"/.exec(html) as string[])[1];
    assert.ok(tips[key].l.length <= MAX_SERIES_POINTS * 2);
    assert.match(html, /2,000 of 3,120 requests shown/);
  });
});

describe('HTML report safety', () => {
  for (const name of NAMES) {
    test(`escaping and no external URL: ${name}`, async () => {
      const html = await report(name);
      if (HOSTILE_FIXTURES.includes(name)) {
        assert.ok(html.includes(escapeHtml(HOSTILE)), 'the hostile string shows, escaped');
      }
      assert.ok(!html.includes(HOSTILE), 'never raw');
      assert.ok(!html.includes('<script>window'), 'no script from data');
      assert.ok(!/<img\b/i.test(html), 'no <img> at all');
      assert.ok(!/<[a-z][^>]*\son[a-z]+\s*=/i.test(html), 'no event-handler attribute');
      assert.equal((html.match(/<script\b/g) ?? []).length, 2, 'the tooltip data and script only');
      assert.equal((html.match(/<\/script>/g) ?? []).length, 2);
      // Nothing that could be fetched: every URL-valued attribute is a fragment or data:.
      for (const m of html.matchAll(
        /\s(src|href|xlink:href|action|formaction|poster)\s*=\s*"([^"]*)"/gi,
      )) {
        assert.match(m[2], /^(#|data:)/, `${m[1]}="${m[2]}"`);
      }
      for (const m of html.matchAll(/url\(\s*['"]?([^'")]*)/gi)) assert.match(m[1], /^#/);
      assert.ok(!/@import|@font-face/i.test(html), 'no imported styles or fonts');
      assert.ok(
        !/<(link|iframe|object|embed|base|form)\b(?![^>]*rel="icon" href="data:)/i.test(html),
      );
      assert.match(
        html,
        /<meta http-equiv="Content-Security-Policy" content="default-src &#39;none&#39;;/,
      );
    });
  }

  test('a hostile scenario name reaches chart SVG text escaped', async () => {
    const input = (await loadReportInput(join(FIXTURES, 'scenarios'))) as Extract<
      ReportInput,
      { kind: 'scenarios' }
    >;
    const runs = input.runs.map((r, i) =>
      i === 0 ? { ...r, dir: join(input.dir, HOSTILE.replace(/\//g, '|')) } : r,
    );
    const html = renderHtmlReport({ ...input, runs });
    const bars = figuresOf(html).find((f) => f.includes('data-chart="scenarios-throughput"'));
    assert.ok(bars?.includes('&lt;script&gt;window.__pwned=1&lt;|script&gt;'), 'a category label');
    assert.ok(!html.includes('<script>window'));
    assert.ok(!/<img\b/i.test(html));
  });

  test('the Content-Security-Policy allows exactly the inline script', async () => {
    const html = await report('run');
    const script = (/<script>([\s\S]*?)<\/script>/.exec(html) as string[])[1];
    const hash = createHash('sha256').update(script).digest('base64');
    assert.ok(html.includes(`script-src &#39;sha256-${hash}&#39;`));
  });

  test('sizes stay sensible', async (t) => {
    for (const name of NAMES) {
      const bytes = Buffer.byteLength(await report(name));
      t.diagnostic(`${name}: ${(bytes / 1024).toFixed(0)} KiB`);
      assert.ok(bytes < 600 * 1024, `${name}: ${bytes} bytes`);
    }
    // 208 records with every chart drawn.
    assert.ok(Buffer.byteLength(await report('run')) < 250 * 1024);
  });

  test('chart helpers: distribution curves rise, the Pareto front is not dominated', () => {
    const sorted = Float64Array.from({ length: 1000 }, (_, i) => i);
    const cdf = cdfPoints(sorted);
    assert.ok(cdf.length <= 201);
    assert.deepEqual(cdf[cdf.length - 1], [999, 100]);
    for (let i = 1; i < cdf.length; i++) assert.ok(cdf[i][1] >= cdf[i - 1][1]);
    const p = (level: number, tps: number, ttft: number) =>
      ({ level, outputTokensPerS: tps, ttftP99Ms: ttft }) as Parameters<typeof paretoFront>[0][0];
    const front = paretoFront([p(1, 100, 10), p(2, 200, 20), p(3, 150, 30), p(4, 300, 25)]);
    assert.deepEqual(
      front.map((x) => x.level),
      [1, 2, 4],
    );
  });
});

describe('HTML report in Chromium', () => {
  let browser: Browser | undefined;
  let skipReason: string | undefined;
  let dir: string;

  before(async () => {
    const started = await startBrowser();
    if (started.browser) browser = started.browser;
    else skipReason = started.reason;
    mkdirSync(ARTIFACTS, { recursive: true });
    dir = mkdtempSync(join(tmpdir(), 'infergauge-report-html-'));
  });
  after(async () => {
    await browser?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const screenshotted = new Set<string>();

  for (const name of NAMES) {
    test(`opens offline and draws every chart: ${name}`, async (t) => {
      if (!browser) {
        t.skip(`no Chromium: ${skipReason}`);
        return;
      }
      const html = await report(name);
      const file = join(ARTIFACTS, `${name}.html`);
      writeFileSync(file, html);
      const { page, url, errors, requests } = await openFile(browser, file);
      try {
        assert.deepEqual(errors, [], 'no console or page errors');
        assert.deepEqual(requests, [url], 'no request but the file itself');
        assert.equal(await page.evaluate('typeof window.__pwned'), 'undefined');
        assert.equal(await page.locator('img').count(), 0);
        if (HOSTILE_FIXTURES.includes(name)) {
          const text = (await page.evaluate('document.body.innerText')) as string;
          assert.ok(text.includes('<script>window.__pwned=1</script>'), 'shown as text');
        }
        const figures = page.locator('figure[data-chart]');
        assert.equal(await figures.count(), EXPECTED[name].charts.length);
        for (let i = 0; i < (await figures.count()); i++) {
          const figure = figures.nth(i);
          const id = await figure.getAttribute('data-chart');
          const svg = figure.locator('svg');
          assert.equal(await svg.count(), 1, `${id}: one svg`);
          const box = await svg.boundingBox();
          assert.ok(box && box.width > 100 && box.height > 100, `${id}: ${JSON.stringify(box)}`);
          // Paths that draw something: a series line or symbols, not only the axes.
          // No named helpers inside: tsx would wrap them in a __name() the page lacks.
          const drawn = await svg.evaluate(
            (s: SvgLike) =>
              [...s.querySelectorAll('path')].filter(
                (p) =>
                  [p.getAttribute('stroke'), p.getAttribute('fill')].some(
                    (v) => v !== null && v !== 'none' && v !== 'transparent',
                  ) &&
                  (p.getBBox().width > 0 || p.getBBox().height > 0),
              ).length,
          );
          assert.ok(drawn > 5, `${id}: ${drawn} drawn paths`);
        }
        await tooltipShows(page);
        // The sticky navigation would cover the top of each section's screenshot.
        await page.evaluate(`document.querySelector('nav.top').style.position = 'static'`);
        for (const section of await page.locator('section[data-section]').all()) {
          const kind = (await section.getAttribute('data-section')) as string;
          const probe = await section.getAttribute('data-probe');
          const key = probe ? `${kind}-${probe}` : kind;
          if (screenshotted.has(key)) continue;
          screenshotted.add(key);
          await section.screenshot({ path: join(ARTIFACTS, `section-${key}.png`) });
        }
        // Printing hides the navigation and opens the details.
        await page.emulateMedia({ media: 'print' });
        assert.equal(
          await page.evaluate(`getComputedStyle(document.querySelector('nav.top')).display`),
          'none',
        );
        assert.deepEqual(errors, [], 'still no errors');
        assert.deepEqual(requests, [url], 'still no request');
      } finally {
        await page.close();
      }
    });
  }

  test('a PDF prints with every chart', async (t) => {
    if (!browser) {
      t.skip(`no Chromium: ${skipReason}`);
      return;
    }
    const file = join(dir, 'run.html');
    writeFileSync(file, await report('run'));
    const { page, errors, requests, url } = await openFile(browser, file);
    try {
      await page.emulateMedia({ media: 'print' });
      const pdf = await page.pdf({ format: 'A4', printBackground: true });
      writeFileSync(join(ARTIFACTS, 'run.pdf'), pdf);
      assert.ok(pdf.length > 20_000, `${pdf.length} bytes`);
      assert.deepEqual(errors, []);
      assert.deepEqual(requests, [url]);
    } finally {
      await page.close();
    }
  });
});

/** What the drawn-paths check touches in the page (the tests compile without DOM types). */
interface SvgPathLike {
  getAttribute(name: string): string | null;
  getBBox(): { width: number; height: number };
}
interface SvgLike {
  querySelectorAll(selector: 'path'): Iterable<SvgPathLike>;
}

/** Hovers the first point of the first chart with points and expects its label. */
async function tooltipShows(page: import('playwright-core').Page): Promise<void> {
  const target = (await page.evaluate(`(() => {
    const tips = JSON.parse(document.getElementById('ig-tips').textContent);
    for (const fig of document.querySelectorAll('figure[data-key]')) {
      const d = tips[fig.getAttribute('data-key')];
      if (!d || d.l.length === 0) continue;
      const i = Math.floor(d.l.length / 2);
      const svg = fig.querySelector('svg');
      svg.scrollIntoView({ block: 'center' });
      const r = svg.getBoundingClientRect();
      const vb = svg.viewBox.baseVal;
      return { x: r.left + d.p[2 * i] * r.width / vb.width, y: r.top + d.p[2 * i + 1] * r.height / vb.height, label: d.l[i] };
    }
    return null;
  })()`)) as { x: number; y: number; label: string } | null;
  assert.ok(target, 'some chart has tooltip points');
  await page.mouse.move(target.x, target.y);
  const tip = page.locator('.ig-tip');
  assert.equal(await tip.isVisible(), true, 'the tooltip shows');
  assert.ok(((await tip.textContent()) ?? '').length > 0);
  await page.mouse.move(0, 0);
}
