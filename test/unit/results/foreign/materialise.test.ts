/**
 * Another tool's runs written as run directories (report FILE, history --import): read back
 * through the same readers as infergauge's own runs, with every headline figure kept and the
 * file's provenance in the manifest.
 */

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { readForeign } from '../../../../src/results/foreign/index.js';
import { writeForeignRuns } from '../../../../src/results/foreign/materialise.js';
import { loadReportInput } from '../../../../src/results/load.js';
import { readSummary } from '../../../../src/results/reader.js';
import { REPO } from '../../../../tools/repo.js';

const FIXTURES = join(REPO, 'test/fixtures/foreign');

describe('foreign runs as run directories', () => {
  const root = mkdtempSync(join(tmpdir(), 'ig-foreign-dir-'));
  after(() => rmSync(root, { recursive: true, force: true }));

  test('a per-request run: records, summary and manifest read back as a run', async () => {
    const runs = await readForeign(join(FIXTURES, 'vllm-bench-detailed.json'));
    const dir = join(root, 'vllm');
    assert.deepEqual(writeForeignRuns(runs, dir), [dir]);
    const input = await loadReportInput(dir);
    assert.equal(input.kind, 'run');
    if (input.kind !== 'run') return;
    const ours = runs[0]?.summary;
    assert.equal(input.summary.requests.completed, ours?.requests.completed);
    assert.equal(input.summary.latency.ttftMs.p50, ours?.latency.ttftMs.p50);
    assert.equal(input.charts?.requests, 12);
    const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'));
    assert.equal(manifest.imported.format, 'vllm-bench');
    assert.equal(manifest.imported.perRequest, true);
    assert.equal(manifest.model, 'Qwen/Qwen2.5-0.5B-Instruct');
    assert.deepEqual(manifest.plan.load, { mode: 'closed', concurrency: 4 });
  });

  test('a summary-only run keeps its statistics (unknown ones as null) and passes the summary schema', async () => {
    const runs = await readForeign(join(FIXTURES, 'vllm-bench-summary.json'));
    const dir = join(root, 'summary');
    writeForeignRuns(runs, dir);
    const saved = readSummary(dir);
    assert.equal(saved?.latency.ttftMs.p50, runs[0]?.summary.latency.ttftMs.p50);
    assert.equal(saved?.latency.ttftMs.p90, null);
    const input = await loadReportInput(dir);
    assert.equal(input.kind, 'run');
  });

  test('a file of several benchmarks: one scenario folder each, read as a multi-scenario run', async () => {
    const runs = await readForeign(join(FIXTURES, 'guidellm-benchmarks.json'));
    const dir = join(root, 'guidellm');
    const dirs = writeForeignRuns(runs, dir);
    assert.deepEqual(dirs, [join(dir, 'benchmark-1'), join(dir, 'benchmark-2')]);
    const input = await loadReportInput(dir);
    assert.equal(input.kind, 'scenarios');
    if (input.kind !== 'scenarios') return;
    assert.deepEqual(
      input.runs.map((r) => r.summary.requests.completed),
      runs.map((r) => r.summary.requests.completed),
    );
  });
});

describe('history --import', () => {
  const root = mkdtempSync(join(tmpdir(), 'ig-foreign-history-'));
  after(() => rmSync(root, { recursive: true, force: true }));

  test('indexes each file’s runs under <root>/imported, tagged; an unreadable file is named and the rest imported', async () => {
    const { runImport, runHistory } = await import('../../../../src/cli/history.js');
    let out = '';
    const print = (text: string) => {
      out += text;
    };
    const write = process.stderr.write;
    let err = '';
    process.stderr.write = ((text: string) => {
      err += text;
      return true;
    }) as typeof process.stderr.write;
    let code: number;
    try {
      code = await runImport(
        [
          join(FIXTURES, 'vllm-bench-detailed.json'),
          join(FIXTURES, 'guidellm-benchmarks.json'),
          join(root, 'missing.json'),
        ],
        { root, tag: ['old-vllm'] },
        print,
      );
    } finally {
      process.stderr.write = write;
    }
    assert.equal(code, 1);
    assert.match(err, /cannot read .*missing\.json/);
    assert.match(
      out,
      /imported\/vllm-bench-detailed\.json-[0-9a-f]{12}: vLLM bench serve JSON, per request/,
    );
    assert.match(out, /benchmark-2: GuideLLM benchmarks file, per request/);
    out = '';
    await runHistory({ root, tag: ['old-vllm'], json: true }, print);
    const listed = (JSON.parse(out) as { runs: { model: string; completed: number }[] }).runs;
    assert.equal(listed.length, 3);
    assert.ok(listed.some((r) => r.model === 'Qwen/Qwen2.5-0.5B-Instruct' && r.completed === 11));
  });
});
