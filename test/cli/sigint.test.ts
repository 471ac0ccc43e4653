import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { RunSummary } from '../../src/metrics/summary.js';
import type { RequestRecord } from '../../src/record.js';
import { collect, spawnCli, tempDir } from '../helpers/cli.js';

function lines(path: string): string[] {
  return existsSync(path)
    ? readFileSync(path, 'utf8')
        .split('\n')
        .filter((l) => l.length > 0)
    : [];
}

async function waitForRecords(path: string, count: number): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (lines(path).length < count) {
    if (Date.now() > deadline) throw new Error(`fewer than ${count} records after 30 s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Ctrl-C in a terminal signals the whole process group (the built-in simulator too), so the
 * tests do the same: the run stops sending, lets in-flight requests finish, and still writes
 * the summary of everything that finished.
 */
describe('Ctrl-C during a run', () => {
  test('SIGINT: stop sending, finish in-flight requests, write the summary, exit 130', async () => {
    const out = join(tempDir('ig-int-'), 'run');
    const child = spawnCli(
      ['run', '--requests', '100000', '--concurrency', '8', '--output-tokens', '48', '--out', out],
      { detached: true },
    );
    const done = collect(child);
    const recordsPath = join(out, 'records.jsonl');
    await waitForRecords(recordsPath, 12);
    process.kill(-(child.pid as number), 'SIGINT');
    const result = await done;
    assert.ok(result.code === 130 || result.code === 0, `exit ${result.code}: ${result.stderr}`);
    const records = lines(recordsPath).map((l) => JSON.parse(l) as RequestRecord);
    assert.ok(records.length >= 12);
    assert.deepEqual(
      records.filter((r) => r.error),
      [],
      'in-flight requests finished within the grace period',
    );
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as RunSummary;
    assert.equal(summary.interrupted, true);
    assert.equal(summary.requests.completed, records.length);
    assert.match(result.stdout, /Interrupted/);
    assert.match(result.stdout, /8 concurrent requests/);
  });

  test('a second SIGINT cancels in-flight requests; every line still parses', async () => {
    const out = join(tempDir('ig-int-'), 'run');
    const child = spawnCli(
      [
        'run',
        '--requests',
        '100000',
        '--concurrency',
        '8',
        '--output-tokens',
        '400',
        '--grace',
        '60',
        '--out',
        out,
      ],
      { detached: true },
    );
    const done = collect(child);
    const recordsPath = join(out, 'records.jsonl');
    await waitForRecords(recordsPath, 1);
    process.kill(-(child.pid as number), 'SIGINT');
    await new Promise((r) => setTimeout(r, 200));
    process.kill(-(child.pid as number), 'SIGINT');
    const result = await done;
    assert.equal(result.code, 130, result.stderr);
    const records = lines(recordsPath).map((l) => JSON.parse(l) as RequestRecord);
    const cancelled = records.filter((r) => r.error?.kind === 'cancelled');
    assert.ok(cancelled.length >= 1, 'in-flight requests were cancelled');
    assert.ok(
      cancelled.every((r) => r.outputTokens > 0),
      'tokens received before the cancel are kept',
    );
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as RunSummary;
    assert.equal(summary.requests.errorsByKind.cancelled, cancelled.length);
  });
});

describe('Ctrl-C with an output that never settles', () => {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    test(`the built-in simulator run ends promptly after ${signal}, its summary written`, async () => {
      const dir = tempDir('ig-int-hang-');
      const module = join(dir, 'hang.mjs');
      writeFileSync(
        module,
        "export default () => ({ name: 'hang', pointFinished: () => new Promise(() => {}) });\n",
      );
      const out = join(dir, 'run');
      const child = spawnCli(
        [
          'run',
          '--requests',
          '8',
          '--concurrency',
          '4',
          '--output-tokens',
          '4',
          '--no-html',
          '--export',
          module,
          '--out',
          out,
        ],
        { detached: true },
      );
      const done = collect(child);
      // The run is measured and its summary written: only the output holds it now.
      const summaryPath = join(out, 'summary.json');
      const deadline = Date.now() + 30_000;
      while (!existsSync(summaryPath)) {
        if (Date.now() > deadline) throw new Error('no summary after 30 s');
        await new Promise((r) => setTimeout(r, 50));
      }
      await new Promise((r) => setTimeout(r, 200));
      const sent = performance.now();
      process.kill(-(child.pid as number), signal);
      const result = await done;
      const tookMs = performance.now() - sent;
      // The hung output would hold the process for ever; its exit (the simulator stopped, the
      // run indexed into history.db) took 1.19 s once on a machine loaded beside the suite.
      assert.ok(tookMs < 2500, `${tookMs} ms after ${signal}: ${result.stderr}`);
      assert.ok(result.code === 0 || result.code === 130, `exit ${result.code}: ${result.stderr}`);
      assert.match(
        result.stderr,
        /output hang was still busy with pointFinished when the session stopped/,
      );
      assert.match(result.stdout, /Requests/);
    });
  }

  test('a factory that never settles: SIGINT ends the run within a second, nothing sent', async () => {
    const dir = tempDir('ig-int-hang-');
    const module = join(dir, 'hang.mjs');
    const loading = join(dir, 'loading');
    writeFileSync(
      module,
      `import { writeFileSync } from 'node:fs';
export default () => {
  writeFileSync(${JSON.stringify(loading)}, '');
  return new Promise(() => {});
};
`,
    );
    const out = join(dir, 'run');
    const child = spawnCli(['run', '--requests', '8', '--export', module, '--out', out], {
      detached: true,
    });
    const done = collect(child);
    const deadline = Date.now() + 30_000;
    while (!existsSync(loading)) {
      if (Date.now() > deadline) throw new Error('the module was not loaded after 30 s');
      await new Promise((r) => setTimeout(r, 50));
    }
    const sent = performance.now();
    process.kill(-(child.pid as number), 'SIGINT');
    const result = await done;
    const tookMs = performance.now() - sent;
    assert.ok(tookMs < 1000, `${tookMs} ms after SIGINT: ${result.stderr}`);
    assert.equal(result.code, 130, result.stderr);
    assert.match(result.stderr, /output .*hang\.mjs was still loading when stopped/);
    assert.equal(existsSync(join(out, 'records.jsonl')), false);
  });
});
