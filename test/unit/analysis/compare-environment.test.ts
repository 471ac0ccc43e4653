/**
 * `compare` names how the two servers differ (issue 53): engine, version, GPUs and
 * --server-info keys, read from each run's manifest, as facts beside the verdicts in every
 * rendering; never a refusal, and nothing for runs made before the environment was recorded.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import {
  environmentChanges,
  type RunEnvironment,
  type RunUnit,
  sampleRecords,
} from '../../../src/analysis/compare.js';
import type { RequestRecord } from '../../../src/record.js';
import {
  compareTargets,
  renderHtml,
  renderJson,
  renderMarkdown,
  renderTerminal,
} from '../../../src/report/compare.js';
import { type LoadedUnit, readCompareTarget } from '../../../src/results/compareInput.js';

/** `n` requests of one TTFT and eight tokens 10 ms apart, two at a time. */
function records(ttftMs: number, n = 120): RequestRecord[] {
  return Array.from({ length: n }, (_, id) => {
    const sentAt = Math.floor(id / 2) * (ttftMs + 80);
    const dtUs = [ttftMs * 1000, ...Array.from({ length: 7 }, () => 10_000)];
    return {
      id,
      phase: 'measure' as const,
      scheduledAt: sentAt,
      sentAt,
      firstTokenAt: sentAt + ttftMs,
      firstContentAt: sentAt + ttftMs,
      lastTokenAt: sentAt + ttftMs + 70,
      endAt: sentAt + ttftMs + 70,
      requestedInputTokens: 256,
      requestedOutputTokens: 8,
      status: 200,
      outputTokens: 8,
      outputTokensSource: 'server' as const,
      events: { dtUs, tokens: dtUs.map(() => 1), contentChars: dtUs.map(() => 4) },
    };
  });
}

function unit(environment: RunEnvironment | undefined, ttftMs = 100, label = 'run'): RunUnit {
  return {
    label,
    scenario: 'chat',
    load: { mode: 'closed', concurrency: 2 },
    workload: { lengths: '256 in / 8 out tokens' },
    sample: sampleRecords(records(ttftMs)),
    conditions: environment ? { environment } : {},
  };
}

const texts = (a?: RunEnvironment, b?: RunEnvironment) =>
  environmentChanges(unit(a), unit(b)).map((c) => c.text);

describe('environment changes (pure)', () => {
  test('a version change, said with the engine where both runs name the same one', () => {
    assert.deepEqual(
      texts({ engine: 'vllm', engineVersion: '0.8.5' }, { engine: 'vllm', engineVersion: '0.9.0' }),
      ['vllm version 0.8.5 -> 0.9.0'],
    );
    assert.deepEqual(
      texts(
        { engine: 'vllm', engineVersion: '0.8.5' },
        { engine: 'sglang', engineVersion: '0.4.6' },
      ),
      ['engine vllm -> sglang', 'server version 0.8.5 -> 0.4.6'],
    );
  });

  test('GPUs and server-info keys that differ, or that one run gave and the other did not', () => {
    const changes = environmentChanges(
      unit({ gpu: '8x NVIDIA H100 80GB HBM3', serverInfo: { tp: '4', flags: '--x' } }),
      unit({
        gpu: '8x NVIDIA H200',
        serverInfo: { tp: '8', 'prefix-caching': 'on', flags: '--x' },
      }),
    );
    assert.deepEqual(
      changes.map((c) => c.text),
      [
        'GPUs 8x NVIDIA H100 80GB HBM3 -> 8x NVIDIA H200',
        'server-info tp: 4 -> 8',
        'server-info prefix-caching: (not given) -> on',
      ],
    );
    assert.deepEqual(changes[2], {
      field: 'serverInfo',
      key: 'prefix-caching',
      candidate: 'on',
      text: 'server-info prefix-caching: (not given) -> on',
    });
  });

  test('the same environment, or one run made before it was recorded: nothing', () => {
    const env = { engine: 'vllm', engineVersion: '0.9.0', gpu: '1x H100', serverInfo: { tp: '1' } };
    assert.deepEqual(texts(env, { ...env, serverInfo: { tp: '1' } }), []);
    assert.deepEqual(texts(undefined, { engine: 'vllm', engineVersion: '0.9.0' }), []);
    assert.deepEqual(texts({ engine: 'vllm' }, { engineVersion: '0.9.0' }), []);
  });
});

describe('every rendering names them; JSON carries them; nothing is refused', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ig-compare-env-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  /** A run directory as a run writes it, its manifest's server telling its environment. */
  function runDir(name: string, ttftMs: number, server: Record<string, unknown>): string {
    const out = join(dir, name);
    mkdirSync(out, { recursive: true });
    writeFileSync(
      join(out, 'records.jsonl'),
      `${records(ttftMs)
        .map((r) => JSON.stringify(r))
        .join('\n')}\n`,
    );
    writeFileSync(
      join(out, 'manifest.json'),
      JSON.stringify({
        schemaVersion: 2,
        kind: 'run',
        plan: { load: { mode: 'closed', concurrency: 2 }, seed: 42, promptSalt: Number(ttftMs) },
        workload: { scenario: 'chat: 256 in / 8 out tokens' },
        server: { url: 'http://gpu-host:8000', ...server },
      }),
    );
    return out;
  }

  test('from the manifests: version, GPUs and server-info in terminal, Markdown, HTML and JSON', async () => {
    const a = runDir('a', 100, {
      engine: 'vllm',
      engineVersion: '0.8.5',
      gpu: { type: 'NVIDIA H100 80GB HBM3', count: 8, source: 'dcgm' },
      info: { tp: '4' },
    });
    const b = runDir('b', 90, {
      engine: 'vllm',
      engineVersion: '0.9.0',
      gpu: { type: 'NVIDIA H100 80GB HBM3', count: 8, source: 'dcgm' },
      info: { tp: '8', note: '<b>x</b>\u001b[2J' },
    });
    const targets = await Promise.all([a, b].map((d) => readCompareTarget(d)));
    const report = compareTargets(
      targets,
      { confidence: 0.95, resamples: 200, seed: 42, minEffect: 0.01, force: false },
      undefined,
    );
    const [pair] = report.candidates[0].pairs;
    assert.equal(pair.refused, false);
    assert.deepEqual(
      pair.environment.map((c) => c.text),
      [
        'vllm version 0.8.5 -> 0.9.0',
        'server-info tp: 4 -> 8',
        'server-info note: (not given) -> <b>x</b> [2J',
      ],
    );
    const terminal = renderTerminal(report, false);
    assert.match(terminal, /Environment: vllm version 0.8.5 -> 0.9.0; server-info tp: 4 -> 8/);
    assert.ok(!terminal.includes('\u001b'));
    const markdown = renderMarkdown(report);
    assert.match(markdown, /\*\*Environment:\*\* vllm version 0\.8\.5 -&gt; 0\.9\.0/);
    assert.ok(!markdown.includes('\u001b'));
    const html = renderHtml(report);
    assert.match(html, /<p class="env">Environment: vllm version 0.8.5 -&gt; 0.9.0/);
    assert.doesNotMatch(html, /<b>x<\/b>/);
    const json = JSON.parse(renderJson(report));
    assert.deepEqual(json.candidates[0].pairs[0].environment[0], {
      field: 'engineVersion',
      baseline: '0.8.5',
      candidate: '0.9.0',
      text: 'vllm version 0.8.5 -> 0.9.0',
    });
  });

  test('no environment line where the servers are alike', () => {
    const loaded = (u: RunUnit): LoadedUnit => ({ ...u, summaries: [] });
    const env = { engine: 'vllm', engineVersion: '0.9.0' };
    const report = compareTargets(
      [
        { dir: 'a', label: 'a', kind: 'run', units: [loaded(unit(env, 100, 'a'))], warnings: [] },
        { dir: 'b', label: 'b', kind: 'run', units: [loaded(unit(env, 100, 'b'))], warnings: [] },
      ],
      { confidence: 0.95, resamples: 200, seed: 42, minEffect: 0.01, force: false },
      undefined,
    );
    assert.deepEqual(report.candidates[0].pairs[0].environment, []);
    assert.doesNotMatch(renderTerminal(report, false), /Environment:/);
  });
});
