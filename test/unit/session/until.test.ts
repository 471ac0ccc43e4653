/**
 * Issue 50, the stop rule on precision (`--until`), against the simulator: in virtual time and
 * live (in this thread and on a worker), a met target stops sending early and the run ends as
 * its plan's end does; an unreachable one runs to its cap and says so.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { RunSummary } from '../../../src/metrics/summary.js';
import { readPrecisionTarget, UntilTracker } from '../../../src/metrics/until.js';
import { PlanError, parseRunPlan } from '../../../src/plan/runPlan.js';
import { renderTerminalSummary } from '../../../src/report/terminal.js';
import { prepareRun } from '../../../src/session/prepare.js';
import { benchmark, runPlan } from '../../../src/session/run.js';
import { type RunningSimulator, startSimulator } from '../../../src/sim/simulator.js';

const dir = mkdtempSync(join(tmpdir(), 'ig-until-'));
let sim: RunningSimulator;
before(async () => {
  sim = await startSimulator({ port: 0, host: '127.0.0.1' });
});
after(async () => {
  await sim.stop();
  rmSync(dir, { recursive: true, force: true });
});

const saved = (out: string) =>
  JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as RunSummary;

async function virtualRun(name: string, options: Record<string, string>): Promise<RunSummary> {
  const out = join(dir, name);
  const prepared = prepareRun({ simulate: true, rate: '20', out, ...options });
  assert.deepEqual(prepared.problems, []);
  const result = await runPlan(prepared as never, { html: false });
  return result.results[0].summary;
}

describe('--until in virtual time', () => {
  test('a met target stops sending before the cap; the summary says where', async () => {
    const s = await virtualRun('met', { until: 'ttft.p50±2%', requests: '5000' });
    const until = s.until ?? assert.fail('no until in the summary');
    assert.equal(until.met, true);
    assert.ok(until.stoppedAtRequests !== null && until.stoppedAtRequests >= 30);
    // In flight at the stop finish and are counted; nothing new is sent.
    assert.ok(s.requests.completed >= until.stoppedAtRequests);
    assert.ok(s.requests.completed < 2000, `completed ${s.requests.completed}`);
    assert.equal(s.interrupted, false);
    assert.ok(until.relativeHalfWidth !== null && until.relativeHalfWidth <= 0.02);
    assert.ok(s.warnings.every((w) => w.code !== 'interrupted'));
    // The terminal: intervals under the table, within 80 columns, and what the rule came to.
    const text = renderTerminalSummary(s, { color: false });
    const lines = text.split('\n');
    const at = lines.findIndex((l) => l.startsWith('  95% intervals'));
    assert.ok(at > 0, text);
    assert.match(lines[at + 1], /^ {2}TTFT +p50 \d+\.\d\d \(\d+\.\d\d-\d+\.\d\d\), p99 /);
    for (const line of lines.slice(at, at + 6)) assert.ok(line.length <= 80, line);
    assert.match(text, /until ttft\.p50±2%: met at \d+ requests, stopped sending; ±\d/);
  });

  test('an unreachable target runs to the cap and says the cap came first', async () => {
    const s = await virtualRun('cap', { until: 'ttft.p50±0.001%', requests: '300' });
    assert.equal(s.requests.completed, 300);
    assert.equal(s.until?.met, false);
    assert.equal(s.until?.stoppedAtRequests, null);
    assert.ok((s.until?.halfWidthMs ?? 0) > 0);
    assert.match(
      renderTerminalSummary(s, { color: false }),
      /until ttft\.p50±0\.001%: NOT met, the cap came first: ±[\d.]+ ms \(±[\d.]+%\) at 300 requests/,
    );
  });

  test('a duration cap bounds it too', async () => {
    const s = await virtualRun('duration', { until: 'ttft.p99±0.001%', duration: '5' });
    assert.equal(s.until?.met, false);
    assert.ok(s.durationS < 8, `duration ${s.durationS}`);
  });
});

describe('--until live, against the HTTP simulator', () => {
  for (const workers of ['0', '1']) {
    test(`stops early within its cap (--workers ${workers})`, async () => {
      const out = join(dir, `live-${workers}`);
      const plan = parseRunPlan({
        url: sim.url,
        requests: '2000',
        concurrency: '4',
        inputTokens: '16',
        outputTokens: '4',
        // Wide enough to be met at the first check (30 requests).
        until: 'e2e.p50±100000ms',
        workers,
        out,
      });
      const result = await benchmark(plan, { html: false });
      const s = result.results[0].summary;
      assert.equal(s.until?.met, true);
      const at = s.until?.stoppedAtRequests ?? assert.fail('the rule did not stop the run');
      assert.ok(at >= 30 && at < 200, `stopped at ${at}`);
      assert.ok(s.requests.completed >= at && s.requests.completed < 300);
      assert.equal(s.interrupted, false);
      assert.deepEqual(saved(out).until, s.until);
    });
  }
});

describe('--until: reading the rule', () => {
  test('relative and absolute targets, short metric names as --threshold takes them', () => {
    const read = (text: string) => {
      const r = readPrecisionTarget(text);
      return 'value' in r ? r.value : assert.fail(r.problem);
    };
    assert.deepEqual(read('ttft.p99±5%').halfWidth, { relative: 0.05 });
    assert.equal(read('ttft.p99±5%').metric, 'ttftMs');
    assert.deepEqual(read('e2e.p50 +- 10ms').halfWidth, { ms: 10 });
    assert.deepEqual(read('timeToFirstToken.p99.9±0.5s').halfWidth, { ms: 500 });
    assert.equal(read('itl.p99.9±1%').stat, 'p99_9');
  });

  test('an unknown metric names the valid ones; a bad form names the syntax', () => {
    const problem = (text: string) => {
      const r = readPrecisionTarget(text);
      return 'problem' in r ? r.problem : assert.fail(`read ${text}`);
    };
    assert.match(problem('queueDelay.p99±5%'), /use one of ttft, itl, tpot, e2e/);
    assert.match(problem('ttft.mean±5%'), /unknown percentile "mean"/);
    assert.match(problem('ttft.p99<5'), /METRIC\.STAT±TARGET/);
    assert.match(problem('ttft.p99±0%'), /above 0/);
  });

  test('without a cap of its own the plan is refused, naming the fix', () => {
    assert.throws(
      () => parseRunPlan({ until: 'ttft.p99±5%' }),
      (err: unknown) =>
        err instanceof PlanError &&
        /--until needs a cap .*--requests N or --duration S/.test(err.message),
    );
    assert.equal(parseRunPlan({ until: 'ttft.p99±5%', requests: '100' }).until?.stat, 'p99');
  });

  test('the tracker skips warm-up and failed records and checks only as samples grow', () => {
    const target = readPrecisionTarget('ttft.p50±50%');
    assert.ok('value' in target);
    const tracker = new UntilTracker(target.value);
    const record = (id: number, phase: 'warmup' | 'measure', ttft = 100) => ({
      id,
      phase,
      scheduledAt: id,
      sentAt: id,
      firstTokenAt: id + ttft,
      lastTokenAt: id + ttft + 1,
      endAt: id + ttft + 1,
      requestedInputTokens: 1,
      requestedOutputTokens: 2,
      outputTokens: 2,
      outputTokensSource: 'server' as const,
      events: { dtUs: [ttft * 1000, 1000], tokens: [1, 1], contentChars: [1, 1] },
    });
    for (let i = 0; i < 100; i++) assert.equal(tracker.add(record(i, 'warmup')), false);
    let stoppedAt = -1;
    for (let i = 0; i < 100 && stoppedAt < 0; i++) {
      if (tracker.add(record(i, 'measure', 100 + (i % 7)))) stoppedAt = i + 1;
    }
    // The first check is at 30 samples, and a tight series meets ±50 % there.
    assert.equal(stoppedAt, 30);
    assert.equal(tracker.stopped, true);
  });
});
