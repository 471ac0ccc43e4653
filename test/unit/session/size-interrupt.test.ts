/**
 * A long `size` search says how many candidates it will try and how long that should take,
 * shows how far it is (on a terminal and in a log), and when stopped ranks what it evaluated:
 * the result, the terminal table and report.html all say "N of M candidates evaluated".
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { renderHtmlReport } from '../../../src/report/html.js';
import { renderSize } from '../../../src/report/sizeText.js';
import { type SizeOptions, size, sizeInParallel } from '../../../src/session/size.js';
import { aboutDuration, sizeProgress, sizeRemainingMs } from '../../../src/session/sizeProgress.js';

const options: SizeOptions = {
  model: 'llama-3-8b',
  traffic: { mode: 'rate', rate: 8 },
  scenario: {
    name: 'test',
    input: { kind: 'fixed', value: 128 },
    output: { kind: 'fixed', value: 32 },
  },
  slo: 'ttft.p99<1000',
  space: {
    gpus: [{ gpu: 'h100' }, { gpu: 'l40s' }],
    tps: [1, 2, 4],
    dtypes: [undefined, 'fp8'],
    kvCacheDtypes: [undefined],
    maxNumSeqs: [undefined],
    personalities: ['vllm-v1'],
  },
  prices: { h100: 2, l40s: 1 },
  requests: 40,
};

/** A progress writer on a clock the test moves. */
function fakeProgress(terminal: boolean) {
  let ms = 0;
  const out: string[] = [];
  const p = sizeProgress({
    terminal,
    write: (t) => out.push(t),
    now: () => ms,
    intervalMs: 10_000,
  });
  return { p, out, tick: (by: number) => (ms += by) };
}

describe('size progress', () => {
  test('the count first, an estimate once every thread ended a candidate, then lines at the interval', () => {
    const { p, out, tick } = fakeProgress(false);
    p.started(8448, 4);
    assert.deepEqual(out, [
      'infergauge size: 8,448 candidates on 4 threads; an estimate of the time follows the first 4 (Ctrl-C ranks those done so far)\n',
    ]);
    tick(800);
    for (let done = 1; done <= 3; done++) p.candidate(done, 8448);
    assert.equal(out.length, 1, 'no estimate before every thread has one');
    p.candidate(4, 8448);
    // 4 candidates in 0.8 s on 4 threads: 0.2 s each, 28 min for all.
    assert.equal(
      out[1],
      'infergauge size: about 28 min for the 8,448 candidates (0.20 s each so far)\n',
    );
    tick(5_000);
    p.candidate(5, 8448);
    assert.equal(out.length, 2, 'nothing between two lines');
    tick(5_000);
    p.candidate(30, 8448);
    assert.match(out[2], /^infergauge size: 30\/8,448 candidates tried, about 51 min left\n$/);
    p.candidate(8448, 8448);
    assert.equal(out[3], 'infergauge size: 8,448/8,448 candidates tried, done\n');
    p.finished();
    assert.equal(out.length, 4);
  });

  test('on a terminal one line is redrawn, and ended once', () => {
    const { p, out, tick } = fakeProgress(true);
    p.started(10, 1);
    tick(1000);
    p.candidate(1, 10);
    assert.match(out[1], /about 10 s for the 10 candidates/);
    tick(300);
    p.candidate(2, 10);
    assert.equal(out[2], '\r\x1b[Kinfergauge size: 2/10 candidates tried, about 5 s left');
    tick(100);
    p.candidate(3, 10);
    assert.equal(out.length, 3, 'at most four redraws a second');
    p.finished();
    p.finished();
    assert.deepEqual(out.slice(3), ['\n']);
  });

  test('the estimate: the mean so far for each left, in words', () => {
    assert.equal(sizeRemainingMs(10, 40, 5000), 15_000);
    assert.equal(sizeRemainingMs(0, 40, 5000), Number.POSITIVE_INFINITY);
    assert.equal(aboutDuration(400), 'about 1 s');
    assert.equal(aboutDuration(89_000), 'about 89 s');
    assert.equal(aboutDuration(28 * 60_000), 'about 28 min');
    assert.equal(aboutDuration(2.5 * 3_600_000), 'about 2.5 h');
    assert.equal(aboutDuration(Number.POSITIVE_INFINITY), 'unknown');
  });
});

describe('a stopped size search', () => {
  test('in this thread: the candidates evaluated are ranked, and the result says how many of all', async () => {
    const stop = new AbortController();
    const started: number[] = [];
    const result = await size({
      ...options,
      signal: stop.signal,
      onStart: (total, threads) => started.push(total, threads),
      onCandidate: (done) => {
        if (done === 3) stop.abort();
      },
    });
    assert.deepEqual(started, [12, 1]);
    assert.equal(result.candidates, 12);
    assert.equal(result.evaluated, 3);
    assert.equal(result.interrupted, true);
    assert.equal(result.deployments.length, 3);
    assert.ok(result.simulations > 0);
    const complete = await size(options);
    assert.equal(complete.evaluated, 12);
    assert.equal(complete.interrupted, undefined);
  });

  test('on worker threads: a stop ends every worker at once, mid-candidate, and ranks the rows in', async () => {
    const stop = new AbortController();
    let stoppedAt = 0;
    let threads = 0;
    const result = await sizeInParallel(
      {
        ...options,
        // Slow candidates: a stop must not wait for the ones in progress.
        requests: 3000,
        signal: stop.signal,
        onStart: (_, t) => {
          threads = t;
        },
        onCandidate: (done) => {
          if (done === 1) {
            stop.abort();
            stoppedAt = performance.now();
          }
        },
      },
      2,
    );
    const tookMs = performance.now() - stoppedAt;
    assert.equal(threads, 2);
    assert.ok(tookMs < 1000, `returned ${tookMs.toFixed(0)} ms after the stop`);
    assert.equal(result.interrupted, true);
    assert.equal(result.evaluated, 1);
    assert.equal(result.deployments.length, 1);
    assert.ok(result.simulations > 0);
  });

  test('stopped before it starts: nothing evaluated, and said so', async () => {
    const stop = new AbortController();
    stop.abort();
    const result = await sizeInParallel({ ...options, signal: stop.signal }, 1);
    assert.equal(result.evaluated, 0);
    assert.equal(result.interrupted, true);
  });

  test('the table and report.html say the answer is partial, and of how many', () => {
    const view = {
      candidates: 12,
      evaluated: 3,
      interrupted: true as const,
      deployments: [],
      simulations: 9,
      wallS: 1,
      warnings: [],
    };
    const text = renderSize(view, 15, '8 req/s');
    assert.match(
      text,
      /^Partial answer \(interrupted\): 3 of 12 candidates evaluated\.\n0 of 3 evaluated deployments serve 8 req\/s/,
    );
    assert.doesNotMatch(
      renderSize({ ...view, interrupted: undefined, evaluated: 12 }, 15, 'x'),
      /Partial/,
    );
    const html = renderHtmlReport({
      kind: 'size',
      dir: 'out',
      size: { schemaVersion: 1, traffic: { mode: 'rate', rate: 8 }, ...view },
    });
    assert.match(
      html,
      /<h1>Partial \(interrupted, 3 of 12 candidates evaluated\): 0 of 3 deployments serve/,
    );
  });
});
