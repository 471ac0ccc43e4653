/**
 * The live dashboard (issue 52) in headless Chromium, during real runs against the built-in
 * simulator: the page loads from its own origin only (offline), its numbers grow, a tab opened
 * late sees the run from its first snapshot, Stop ends the run as Ctrl-C does (exit 130, a
 * complete summary.json), and at the end the page becomes the report, whose numbers are
 * summary.json's; without a report the page's final numbers are summary.json's. Every wait is
 * for a condition, none for a time.
 *
 * INFERGAUGE_SCREENSHOTS=1 also writes docs/dashboard.png (the README's picture).
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { fmtNumber, fmtSig } from '../../src/metrics/format.js';
import { REPO } from '../../tools/repo.js';
import { startBrowser } from '../helpers/browser.js';
import { type CliResult, collect, spawnCli, tempDir } from '../helpers/cli.js';

/** Generous: a loaded 2-core machine starts the CLI through tsx in seconds, not minutes. */
const WAIT_MS = 120_000;

interface Started {
  child: ChildProcess;
  done: Promise<CliResult>;
  url: string;
}

/** Starts `infergauge run ... --output ui=0` and reads the dashboard's URL from stderr. */
async function startRun(args: string[]): Promise<Started> {
  const child = spawnCli(['run', ...args, '--output', 'ui=0']);
  const done = collect(child);
  const url = await new Promise<string>((resolve, reject) => {
    let text = '';
    const onData = (d: Buffer) => {
      text += d.toString();
      const m = /live dashboard at (http:\/\/\S+)/.exec(text);
      if (m) {
        child.stderr?.off('data', onData);
        resolve(m[1]);
      }
    };
    child.stderr?.on('data', onData);
    void done.then((r) => reject(new Error(`the run ended before its URL: ${r.stderr}`)));
  });
  return { child, done, url };
}

interface Watched {
  page: Page;
  errors: string[];
  requests: string[];
}

async function watch(browser: Browser, url: string): Promise<Watched> {
  const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
  const errors: string[] = [];
  const requests: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
  page.on('request', (r) => requests.push(r.url()));
  await page.goto(url, { waitUntil: 'load' });
  return { page, errors, requests };
}

/** The exact number an element of the page carries (`data-value`), as the page was told it. */
const numberAt = async (page: Page, selector: string) =>
  Number(await page.getAttribute(selector, 'data-value'));

/**
 * Waits until `data-NAME` of `selector` (a number) passes `ok`, reading it from here: the page's
 * policy allows no eval, which a predicate run in the page would need.
 */
async function waitData(
  page: Page,
  selector: string,
  name: string,
  ok: (n: number) => boolean,
): Promise<number> {
  const deadline = performance.now() + WAIT_MS;
  for (;;) {
    const n = Number(await page.getAttribute(selector, `data-${name}`, { timeout: WAIT_MS }));
    if (ok(n)) return n;
    if (performance.now() > deadline) {
      throw new Error(`${selector} data-${name} is still ${n} after ${WAIT_MS} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Waits until the number at `selector` is above `floor`; returns it. */
async function above(page: Page, selector: string, floor: number): Promise<number> {
  return waitData(page, selector, 'value', (n) => n > floor);
}

/** Only the page's own origin (and data: URLs) was asked for anything. */
function ownOriginOnly(w: Watched, url: string): void {
  const origin = new URL(url).origin;
  const elsewhere = w.requests.filter((r) => !r.startsWith(`${origin}/`) && !r.startsWith('data:'));
  assert.deepEqual(elsewhere, [], 'no request leaves the page’s origin');
}

interface Saved {
  requests: { completed: number; failed: number };
  latency: { ttftMs: { p50: number; p99: number } };
  interrupted: boolean;
}

describe('the live dashboard during a run', { timeout: 4 * WAIT_MS }, () => {
  let browser: Browser | undefined;
  let skipReason = '';
  before(async () => {
    const started = await startBrowser();
    if (started.browser) browser = started.browser;
    else skipReason = started.reason;
  });
  after(async () => {
    await browser?.close();
  });

  test('numbers grow, a late tab sees the whole run, Stop ends it (exit 130) and the page becomes the report', async (t) => {
    if (!browser) return t.skip(skipReason);
    const out = join(tempDir('infergauge-ui-'), 'run');
    // More requests than the test waits for: Stop ends it, not its length.
    const run = await startRun([
      '--requests',
      '20000',
      '--concurrency',
      '4',
      '--time-scale',
      '0.05',
      '--seed',
      '3',
      '--out',
      out,
    ]);
    try {
      const first = await watch(browser, run.url);
      const seen = await above(first.page, '#completed', 0);
      await above(first.page, '#completed', seen);
      // Several snapshots in, a second tab opens: it gets the rows from the first on.
      await waitData(first.page, '#history', 'rows', (n) => n >= 3);
      const rowsBefore = Number(await first.page.getAttribute('#history', 'data-rows'));
      const late = await watch(browser, run.url);
      await waitData(late.page, '#history', 'rows', (n) => n >= rowsBefore);
      const firstT = (w: Watched) => w.page.getAttribute('#history', 'data-first-t');
      assert.equal(
        await firstT(late),
        await firstT(first),
        'the late tab’s charts start where the first tab’s do',
      );
      // Charts are drawn (echarts, served by the output itself).
      assert.ok((await late.page.locator('#chart-throughput canvas').count()) > 0);
      if (process.env.INFERGAUGE_SCREENSHOTS === '1') {
        // A picture with some history in its charts.
        await waitData(late.page, '#history', 'rows', (n) => n >= 15);
        await late.page.screenshot({ path: join(REPO, 'docs/dashboard.png') });
      }

      await late.page.click('#stop');
      const result = await run.done;
      assert.equal(result.code, 130, result.stderr);
      assert.match(result.stderr, /stop requested from the dashboard/);
      const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as Saved;
      assert.equal(summary.interrupted, true);

      // Both tabs now show the report, whose headline numbers are summary.json's.
      for (const w of [first, late]) {
        await w.page.waitForURL(/report\.html/, { timeout: WAIT_MS });
        const cards = (await w.page.evaluate(
          `Object.fromEntries([...document.querySelectorAll('.card')].map((c) => [c.querySelector('.k')?.textContent, c.querySelector('.v')?.textContent]))`,
        )) as Record<string, string>;
        const l = summary.latency.ttftMs;
        assert.equal(cards['TTFT p50 / p99'], `${fmtSig(l.p50)} / ${fmtSig(l.p99)} ms`);
        const { completed, failed } = summary.requests;
        assert.equal(cards.failed, `${fmtNumber(failed)} of ${fmtNumber(completed + failed)}`);
        ownOriginOnly(w, run.url);
        assert.deepEqual(w.errors, []);
      }
    } finally {
      run.child.kill('SIGKILL');
    }
  });

  test('without a report, the page keeps its final numbers: summary.json’s, and says the run ended', async (t) => {
    if (!browser) return t.skip(skipReason);
    const out = join(tempDir('infergauge-ui-'), 'run');
    const run = await startRun([
      '--requests',
      '24',
      '--concurrency',
      '4',
      '--time-scale',
      '0.05',
      '--seed',
      '4',
      '--no-html',
      '--out',
      out,
    ]);
    try {
      const w = await watch(browser, run.url);
      await w.page.waitForSelector('body[data-ended="true"]', { timeout: WAIT_MS });
      const result = await run.done;
      assert.equal(result.code, 0, result.stderr);
      const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as Saved;
      const card = '#finished .card[data-point="0"]';
      assert.equal(await numberAt(w.page, `${card} .completed`), summary.requests.completed);
      assert.equal(await numberAt(w.page, `${card} .failed`), summary.requests.failed);
      assert.equal(await numberAt(w.page, `${card} .ttft-p50`), summary.latency.ttftMs.p50);
      assert.equal(await numberAt(w.page, '#completed'), summary.requests.completed);
      assert.match((await w.page.textContent('#ended')) ?? '', /The run ended \(exit 0\)/);
      ownOriginOnly(w, run.url);
      assert.deepEqual(w.errors, []);
    } finally {
      run.child.kill('SIGKILL');
    }
  });
});
