import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BACKENDS } from '../../src/backends/index.js';
import { requestMetrics } from '../../src/metrics/requestMetrics.js';
import type { RunSummary } from '../../src/metrics/summary.js';
import type { ServerMetricsSummary } from '../../src/telemetry/summary.js';
import { createPromptFactory } from '../../src/workload/prompts.js';
import { findScenario, type Scenario } from '../../src/workload/scenarios.js';
import { createTokenizer } from '../../src/workload/tokenizer.js';
import { loadWorkload } from '../../src/workload/workload.js';
import { ensureLlamaServer } from '../../tools/llama/build.js';
import { type RunningLlamaServer, startLlamaServer } from '../../tools/llama/server.js';
import { runAlone } from '../helpers/alone.js';
import { runCli, tempDir } from '../helpers/cli.js';
import {
  describePriority,
  ENGINE_NICE,
  raiseClientPriority,
  testLlamaModel,
} from '../helpers/llama.js';
import { runAgainst } from '../helpers/run.js';

// A real engine's pace on a 2-core machine is the machine's: run after the other files.
await runAlone(import.meta.url);

/**
 * infergauge against a real engine nobody here wrote: llama.cpp's llama-server (built from the
 * source in the node-llama-cpp npm package, cached between runs) on a generated 125M-parameter
 * q8_0 model, one compute thread, 4 parallel slots.
 */
describe('llama-server (real engine, CPU)', { timeout: 20 * 60_000 }, () => {
  const dir = tempDir('ig-llama-');
  let binary: string;
  let modelPath: string;
  let server: RunningLlamaServer;
  let client: ReturnType<typeof raiseClientPriority> | undefined;

  before(async () => {
    client = raiseClientPriority();
    [binary, modelPath] = await Promise.all([ensureLlamaServer(), testLlamaModel()]);
    // Above its neighbours' priority, as the client: the timings compared are the engine's and
    // the client's, not a neighbour's.
    server = await startLlamaServer({
      binary,
      modelPath,
      parallel: 4,
      ctxSize: 4096,
      nice: ENGINE_NICE,
    });
    // Warm the server (first decode allocates buffers) and the client.
    await runAgainst(server.url, {
      target: { model: 'm', ignoreEos: true },
      load: { mode: 'closed', concurrency: 4 },
      requests: 8,
      outputTokens: 8,
    });
  });
  after(async () => {
    await server?.stop();
    client?.restore();
  });

  for (const concurrency of [1, 4, 8]) {
    test(`concurrency ${concurrency}: no failures, exact lengths, timings agree`, async (t) => {
      const { records, summary } = await runAgainst(server.url, {
        target: { model: 'm', ignoreEos: true, endpoint: 'completions' },
        load: { mode: 'closed', concurrency },
        requests: Math.max(8, concurrency * 2),
        inputTokens: 48,
        outputTokens: 24,
      });
      assert.equal(summary.requests.failed, 0, JSON.stringify(summary.requests.errorsByKind));
      if (concurrency === 1) {
        t.diagnostic(`${describePriority(server.priority)}; ${client?.line}`);
      }
      const ttftOverPrefill: number[] = [];
      const tpotError: number[] = [];
      for (const r of records) {
        assert.equal(r.outputTokens, 24, 'ignore_eos gives the exact length');
        assert.equal(r.outputTokensSource, 'server');
        assert.equal(r.inputTokens, 49, 'one token per prompt word, plus BOS');
        const timing = r.serverTiming;
        assert.ok(timing?.prefillMs !== undefined && timing.decodeMs !== undefined, 'timings');
        const m = requestMetrics(r);
        ttftOverPrefill.push((m.ttftMs as number) - timing.prefillMs);
        // llama.cpp times generation from the first sampled token: predicted_n - 1 gaps.
        const serverTpot = timing.decodeMs / ((timing.decodeTokens as number) - 1);
        tpotError.push(Math.abs((m.tpotMs as number) - serverTpot) / serverTpot);
      }
      const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
      t.diagnostic(
        `TTFT - server prompt_ms: mean ${mean(ttftOverPrefill).toFixed(2)} ms, min ${Math.min(...ttftOverPrefill).toFixed(2)} ms; TPOT vs server: mean |error| ${(mean(tpotError) * 100).toFixed(1)}%; client TTFT p50 ${summary.latency.ttftMs.p50.toFixed(1)} ms, TPOT p50 ${summary.latency.tpotMs.p50.toFixed(2)} ms`,
      );
      assert.ok(
        Math.min(...ttftOverPrefill) >= 0,
        'the client never sees a token before the prompt is done',
      );
      if (concurrency <= 4) {
        // All requests have a slot: TTFT is prompt processing plus the first sampling step and
        // the loopback hop.
        assert.ok(
          mean(ttftOverPrefill) < 25,
          `TTFT exceeds prompt_ms by ${mean(ttftOverPrefill)} ms`,
        );
      }
      assert.ok(
        mean(tpotError) < 0.1,
        `TPOT differs from the server's by ${mean(tpotError) * 100}%`,
      );
    });
  }

  test('native /completion backend: exact tokens per event and the server timings', async () => {
    const { records, summary } = await runAgainst(server.url, {
      target: { backend: BACKENDS.llamacpp, model: 'm', ignoreEos: true },
      load: { mode: 'closed', concurrency: 2 },
      requests: 6,
      inputTokens: 32,
      outputTokens: 20,
    });
    assert.equal(summary.requests.failed, 0, JSON.stringify(summary.requests.errorsByKind));
    for (const r of records) {
      assert.equal(r.outputTokens, 20);
      assert.equal(r.outputTokensSource, 'server');
      assert.equal(r.tokenCountMismatch, undefined);
      assert.equal(r.finishReason, 'length');
      assert.equal(r.inputTokens, 33);
      assert.equal(r.serverTiming?.decodeTokens, 20);
      assert.ok((requestMetrics(r).ttftMs as number) >= (r.serverTiming?.prefillMs as number));
    }
  });

  test('requests beyond the slot count wait: higher TTFT, deferred on the server', async () => {
    const run = (concurrency: number) =>
      runAgainst(server.url, {
        target: { model: 'm', ignoreEos: true },
        load: { mode: 'closed', concurrency },
        requests: 16,
        inputTokens: 16,
        outputTokens: 32,
      });
    const inSlots = await run(4);
    const overSlots = await run(8);
    const e2e = inSlots.summary.latency.e2eMs.mean;
    // Half the requests wait for a whole request to finish before they get a slot.
    assert.ok(
      overSlots.summary.latency.ttftMs.mean > inSlots.summary.latency.ttftMs.mean + 0.25 * e2e,
      `TTFT ${overSlots.summary.latency.ttftMs.mean} vs ${inSlots.summary.latency.ttftMs.mean} (e2e ${e2e})`,
    );
    assert.ok(overSlots.summary.latency.ttftMs.max > e2e * 0.8);
  });

  test('the CLI scrapes /metrics and /slots on the run clock', async () => {
    const out = join(dir, 'cli-run');
    const result = await runCli([
      'run',
      '--url',
      server.url,
      '--concurrency',
      '6',
      '--requests',
      '18',
      '--input-tokens',
      '16',
      '--output-tokens',
      '32',
      '--ignore-eos',
      '--server-metrics',
      '--slots',
      '--scrape-interval',
      '0.1',
      '--out',
      out,
    ]);
    assert.equal(result.code, 0, result.stderr);
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as RunSummary & {
      serverMetrics: ServerMetricsSummary;
    };
    const m = summary.serverMetrics;
    assert.equal(m.failedScrapes, 0, m.firstError);
    assert.ok(m.scrapes >= 4);
    assert.equal(m.counters['llamacpp:tokens_predicted_total']?.delta, 18 * 32);
    assert.ok((m.gauges['llamacpp_slots:processing']?.max ?? 0) >= 2);
    assert.equal(m.gauges['llamacpp_slots:total']?.max, 4);
    assert.ok((m.gauges['llamacpp:requests_deferred']?.max ?? 0) >= 1, 'six clients, four slots');
    assert.match(result.stdout, /Server metrics \(\d+ scrapes\): processing max \d/);
    assert.equal(summary.tokens.input, 18 * 17, 'chat prompts count one token per word plus BOS');
    const lines = readFileSync(join(out, 'telemetry.jsonl'), 'utf8').trim().split('\n');
    assert.ok(lines.every((l) => typeof JSON.parse(l).at === 'number'));
  });

  test('--prefix-hit-rate 0.5: the measured requests hit half their prompt tokens on its slots', async () => {
    // llama-server keeps each slot's last prompt (and, since its host prompt cache, earlier
    // ones): eight prefixes over four slots hit only as its slot choice and that cache allow.
    const out = join(dir, 'hit-rate');
    const result = await runCli([
      'run',
      '--url',
      server.url,
      '--backend',
      'llamacpp',
      '--prefix-hit-rate',
      '0.5',
      '--input-tokens',
      '64',
      '--output-tokens',
      '2',
      '--concurrency',
      '4',
      '--requests',
      '20',
      '--no-html',
      '--out',
      out,
    ]);
    assert.equal(result.code, 0, result.stderr);
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as RunSummary;
    const reached = summary.prefixHitRate?.achieved ?? Number.NaN;
    assert.ok(
      Math.abs(reached - 0.5) <= 0.03,
      `reached ${reached} (${summary.prefixHitRate?.from})`,
    );
    assert.deepEqual(summary.cacheState, { primed: 0.5 });
  });

  test('multi-turn sessions: the history goes back verbatim, and llama.cpp prefills only the new turn', async () => {
    const multiTurn = findScenario('multi-turn') as Scenario;
    const workload = await loadWorkload({
      scenario: {
        ...multiTurn,
        input: { kind: 'fixed', value: 24 },
        output: { kind: 'fixed', value: 12 },
        session: {
          turns: { kind: 'fixed', value: 4 },
          thinkTimeMs: { kind: 'fixed', value: 0 },
          history: 'actual',
          systemPromptTokens: 48,
        },
      },
      tokenizer: 'words',
      tokenizerOptions: {},
      seed: 3,
      promptSalt: 0,
      promptOverheadTokens: 0,
    });
    const { records, summary } = await runAgainst(server.url, {
      target: { model: 'm', ignoreEos: true, endpoint: 'chat' },
      load: { mode: 'closed', concurrency: 2 },
      requests: 2,
      engine: { nextRequest: undefined, ...workload },
    });
    assert.equal(summary.requests.failed, 0, JSON.stringify(summary.requests.errorsByKind));
    assert.equal(summary.sessions?.completed, 2);
    for (const sessionId of [0, 1]) {
      const turns = records.filter((r) => r.sessionId === sessionId);
      assert.deepEqual(
        turns.map((r) => r.turn),
        [1, 2, 3, 4],
      );
      for (const [k, r] of turns.entries()) {
        assert.equal(r.outputTokens, 12);
        if (k === 0) continue;
        const previous = turns[k - 1];
        // The prompt grew by the previous answer and the new message (BPE may merge a token or
        // two where they meet), and the slot's cache held the rest: llama.cpp's own count of the
        // tokens it prefilled is about the growth, not the whole prompt.
        const growth = (r.inputTokens as number) - (previous.inputTokens as number);
        assert.ok(Math.abs(growth - (12 + 24)) <= 4, `grew by ${growth}`);
        const prefilled = r.serverTiming?.prefillTokens as number;
        assert.ok(prefilled <= growth + 4, `prefilled ${prefilled} of ${r.inputTokens}`);
      }
    }
  });

  test('killing the server mid-run: categorised errors and a summary of what finished', async () => {
    const doomed = await startLlamaServer({ binary, modelPath, parallel: 4, ctxSize: 4096 });
    let killed = false;
    const { records, summary } = await runAgainst(doomed.url, {
      target: { model: 'm', ignoreEos: true, timeoutMs: 10_000 },
      load: { mode: 'closed', concurrency: 4 },
      requests: 40,
      outputTokens: 64,
      onRecord: (_r, all) => {
        if (!killed && all.length >= 6) {
          killed = true;
          doomed.child.kill('SIGKILL');
        }
      },
    });
    await doomed.stop();
    const kinds = new Set(records.filter((r) => r.error).map((r) => r.error?.kind));
    assert.ok(summary.requests.completed >= 6);
    assert.ok(summary.requests.failed >= 1);
    assert.equal(summary.requests.completed + summary.requests.failed, 40);
    for (const kind of kinds)
      assert.ok(kind === 'stream_broken' || kind === 'connect', `kind ${kind}`);
    assert.ok(summary.warnings.some((w) => w.code === 'requests_failed'));
  });
});

// /tokenize of the same server and model: the tokenizer that calibrates prompts against a
// model's own vocabulary (src/workload/tokenizer.ts), with nothing between it and llama.cpp.
describe('llama.cpp /tokenize on a real llama-server', { timeout: 20 * 60_000 }, () => {
  let server: RunningLlamaServer;
  before(async () => {
    const [binary, modelPath] = await Promise.all([ensureLlamaServer(), testLlamaModel()]);
    server = await startLlamaServer({ binary, modelPath, parallel: 1, ctxSize: 512 });
  });
  after(async () => {
    await server?.stop();
  });

  test('calibrates against the model vocabulary; prompts are exact', async () => {
    const tokenizer = await createTokenizer('server', {
      server: { url: server.url, model: 'm', backend: 'llamacpp', headers: {} },
    });
    assert.equal(await tokenizer.count('the of and'), 3);
    const factory = await createPromptFactory(tokenizer, { seed: 11, sharedPrefixTokens: 20 });
    assert.equal(await factory.verify(6, 20), 0);
    assert.equal(await factory.verify(6, 700), 0);
  });
});
