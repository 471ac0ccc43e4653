/**
 * The request path at light load (roofline.ts REQUEST_PATH): its fixed part, hops to the engine's
 * process, tokenising; who sends the requests (`clientPath`); per personality and release.
 */

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  clientPathOf,
  engineOptions,
  simulatePoint,
  type ValidationPoint,
} from '../../../bench/simValidation.js';
import { findGpuPreset, type GpuSpec } from '../../../src/memory/hardware.js';
import { findModelPreset, type ModelSpec } from '../../../src/memory/model.js';
import { EngineModel, type EngineModelOptions } from '../../../src/sim/engineModel.js';
import { engineFromFlags } from '../../../src/sim/options.js';
import { REQUEST_PATH } from '../../../src/sim/roofline.js';

const h100 = findGpuPreset('h100') as GpuSpec;
const llama3 = findModelPreset('llama-3-8b') as ModelSpec;
const base: EngineModelOptions = { model: llama3, gpu: h100 };
const MS = 1e6;
const { hopS, tokenizeSPerToken: tokS } = REQUEST_PATH;

/** One request alone: when the scheduler saw it, its first token, and its first step. */
function alone(options: EngineModelOptions, promptTokens: number, arrivalMs = 0) {
  const engine = new EngineModel(options);
  let firstNs: number | undefined;
  const seq = engine.add(
    { arrivalNs: arrivalMs * MS, promptTokens, maxTokens: 2 },
    {
      onToken: (at, index) => {
        if (index === 0) firstNs = at;
      },
    },
  );
  const steps = [];
  for (let guard = 0; guard < 1000 && !seq.done; guard++) {
    const next = engine.nextWorkNs();
    if (next === undefined) break;
    engine.advanceTo(next);
    const r = engine.step();
    if (r) steps.push(r);
  }
  assert.ok(firstNs !== undefined && steps.length > 1);
  return {
    pathMs: (seq.readyNs - arrivalMs * MS) / MS,
    ttftMs: (firstNs - arrivalMs * MS) / MS,
    prefillMs: (steps[0].endNs - steps[0].startNs) / MS,
    /** The step after the prefill (its one decode). */
    nextStepMs: (steps[1].endNs - steps[1].startNs) / MS,
  };
}

const close = (actual: number, expected: number, what: string) =>
  assert.ok(Math.abs(actual - expected) < 1e-5, `${what}: ${actual} against ${expected}`);

describe('request path', () => {
  test("a light-load request's TTFT is HTTP + hops + tokenising + its prefill, per personality", () => {
    const parts = {
      'vllm-v1': [REQUEST_PATH.vllmFixedS, 2],
      'vllm-v0': [REQUEST_PATH.vllmFixedS, 2],
      'vllm-v0.5': [REQUEST_PATH.vllmFixedS, 0],
      sglang: [REQUEST_PATH.sglangFixedS, 3],
      trtllm: [REQUEST_PATH.tritonFixedS, 4],
    } as const;
    for (const [personality, [httpS, hops]] of Object.entries(parts)) {
      for (const tokens of [16, 2000]) {
        const r = alone({ ...base, personality: personality as keyof typeof parts }, tokens);
        const expectedMs = (httpS + hops * hopS + tokens * tokS) * 1e3;
        close(r.pathMs, expectedMs, `${personality} at ${tokens} tokens`);
        // SGLang's overlap scheduler sends the first token on once the next step is out.
        const lagMs = personality === 'sglang' ? r.nextStepMs : 0;
        close(r.ttftMs, expectedMs + r.prefillMs + lagMs, `${personality} TTFT`);
      }
    }
    // llama-server tokenises in C++ in its own process: its front end is one figure.
    close(alone({ ...base, personality: 'llamacpp' }, 2000).pathMs, 3, 'llamacpp');
  });

  test('the parts add up to the wholes they were taken from, at the prompts measured', () => {
    close(alone(base, 201).pathMs, 20, 'vLLM: 20 ms at 201 tokens');
    close(alone({ ...base, personality: 'sglang' }, 128).pathMs, 9.54 - 2.63, 'SGLang');
    close(alone({ ...base, personality: 'trtllm' }, 467).pathMs, 4.5, 'TensorRT-LLM (fitted)');
    // A 20k-token prompt takes 22 ms more to tokenise than the whole it was taken from.
    close(alone(base, 20_201).pathMs, 20 + 20_000 * tokS * 1e3, 'vLLM, 20k tokens more');
  });

  test("the engine's own entry point keeps the fixed part and takes its own hops; token ids drop the whole path", () => {
    for (const personality of ['vllm-v1', 'sglang', 'trtllm'] as const) {
      const http = alone({ ...base, personality }, 1000);
      const engine = alone({ ...base, personality, clientPath: 'engine' }, 1000);
      const none = alone({ ...base, personality, clientPath: 'none' }, 1000);
      const e = new EngineModel({ ...base, personality }).config.efficiency;
      close(
        http.pathMs - engine.pathMs,
        (e.engineHopS - e.entryPointHopS) * 1e3,
        `${personality}: the server's hops less the entry point's`,
      );
      assert.ok(engine.pathMs > 1000 * tokS * 1e3, `${personality}: still tokenises`);
      assert.equal(none.pathMs, 0);
      const lagMs = personality === 'sglang' ? none.nextStepMs : 0;
      close(none.ttftMs, none.prefillMs + lagMs, `${personality}: TTFT is the prefill`);
    }
  });

  test("SGLang's overlap scheduler: the first token leaves when the next step ends, from 0.3.6", () => {
    const sglang = { ...base, personality: 'sglang' as const, clientPath: 'none' as const };
    for (const [engineVersion, lags] of [
      [undefined, true],
      ['0.4.6', true],
      ['0.3.6', true],
      ['0.3.5', false],
      ['0.3.0', false],
    ] as const) {
      const r = alone({ ...sglang, ...(engineVersion ? { engineVersion } : {}) }, 1000);
      close(
        r.ttftMs,
        r.prefillMs + (lags ? r.nextStepMs : 0),
        `SGLang ${engineVersion ?? 'latest'}`,
      );
      assert.ok(r.nextStepMs > 1, 'a decode step takes time');
    }
    // A request of one output token has no next step of its own: it leaves with its prefill.
    const engine = new EngineModel(sglang);
    let firstNs: number | undefined;
    const seq = engine.add(
      { arrivalNs: 0, promptTokens: 1000, maxTokens: 1 },
      {
        onToken: (at, index) => {
          if (index === 0) firstNs = at;
        },
      },
    );
    const step = engine.step();
    assert.ok(seq.done && step);
    assert.equal(firstNs, step.endNs);
  });

  test('entry points: vLLM V1 and SGLang keep their hops, V0 runs the engine in the caller, the LLM API has two', () => {
    // The entry point's path less its fixed part and tokenising: its hops.
    const entry = (personality: EngineModelOptions['personality']) => {
      const e = new EngineModel({ ...base, personality }).config.efficiency;
      return (
        alone({ ...base, personality, clientPath: 'engine' }, 1000).pathMs -
        (e.frontendLatencyS + 1000 * tokS) * 1e3
      );
    };
    close(entry('vllm-v1'), 2 * hopS * 1e3, 'V1 LLM/AsyncLLM to EngineCore');
    close(entry('vllm-v0'), 0, 'V0 LLMEngine in the caller');
    close(entry('vllm-v0.5'), 0, 'V0.5 likewise');
    close(entry('sglang'), 3 * hopS * 1e3, 'sgl.Engine: scheduler and detokenizer processes');
    close(entry('trtllm'), 2 * hopS * 1e3, 'LLM API proxy and worker');
    // vLLM V1 through its entry point: the same fixed part and hops as through its server.
    close(
      alone(base, 1000).pathMs,
      alone({ ...base, clientPath: 'engine' }, 1000).pathMs,
      'V1: the same path',
    );
  });

  test('releases: vLLM 0.5 ran its engine in the API server (no hop), 0.6 on behind ZMQ (two)', () => {
    const v05 = alone({ ...base, personality: 'vllm-v0.5' }, 500).pathMs;
    const v06 = alone({ ...base, personality: 'vllm-v0' }, 500).pathMs;
    const v1 = alone(base, 500).pathMs;
    close(v06 - v05, 2 * hopS * 1e3, 'MQLLMEngine hops');
    close(v1, v06, 'V1 AsyncLLM to EngineCore: the same two hops');
  });

  test('a given front-end latency is the whole request path, as calibrations hold it', () => {
    // --frontend-latency-ms 6 (or a calibration.json's): 6 ms whatever the prompt.
    for (const tokens of [10, 5000]) {
      close(alone({ ...base, efficiency: { frontendLatencyS: 6e-3 } }, tokens).pathMs, 6, 'whole');
    }
    // Parts given beside it add to it; 0 is no path at all (engine-only points).
    const withHop = { frontendLatencyS: 6e-3, engineHopS: 1e-3, tokenizeSPerPromptToken: 2e-6 };
    close(alone({ ...base, efficiency: withHop }, 1000).pathMs, 6 + 1 + 2, 'given parts');
    assert.equal(alone({ ...base, efficiency: { frontendLatencyS: 0 } }, 1000).pathMs, 0);
  });

  test('a short prompt does not overtake a long one that came first; a mid-step arrival waits for the step', () => {
    const engine = new EngineModel(base);
    const long = engine.add(
      { arrivalNs: 0, promptTokens: 30_000, maxTokens: 1 },
      { onToken: () => undefined },
    );
    const short = engine.add(
      { arrivalNs: 1 * MS, promptTokens: 10, maxTokens: 1 },
      { onToken: () => undefined },
    );
    assert.ok(short.readyNs >= long.readyNs, 'in order through the path');
    // A request ready while a step runs is scheduled at the step's end, not when it is ready.
    const busy = new EngineModel({ ...base, clientPath: 'none' });
    busy.add({ arrivalNs: 0, promptTokens: 4000, maxTokens: 50 }, { onToken: () => undefined });
    busy.advanceTo(0);
    const first = busy.step();
    assert.ok(first);
    let scheduledNs: number | undefined;
    const late = busy.add(
      { arrivalNs: Math.round((first.startNs + first.endNs) / 2), promptTokens: 10, maxTokens: 1 },
      {
        onToken: () => undefined,
        onScheduled: (at) => {
          scheduledNs = at;
        },
      },
    );
    assert.ok(late.readyNs < first.endNs);
    busy.step();
    assert.equal(scheduledNs, first.endNs);
  });

  test('--client-path takes http, engine or none', () => {
    const ok = engineFromFlags('llama-3-8b', { clientPath: 'engine', engineHopMs: '0.5' });
    assert.deepEqual(ok.problems, []);
    assert.equal(ok.engine?.clientPath, 'engine');
    assert.equal(ok.engine?.efficiency?.engineHopS, 0.5e-3);
    const bad = engineFromFlags('llama-3-8b', { clientPath: 'grpc' });
    assert.match(
      bad.problems[0] as string,
      /--client-path grpc is not one; choose http, engine, none/,
    );
  });

  test('validation points: the client their source names', () => {
    const point = (name: string, settings?: Record<string, unknown>) =>
      ({
        engine: { name, personality: 'vllm-v1', settings },
        source: { title: 't' },
      }) as unknown as ValidationPoint;
    assert.equal(
      clientPathOf(point('vLLM (ROCm, benchmark_latency.py offline LLM engine)')),
      'engine',
    );
    assert.equal(clientPathOf(point('SGLang (sgl.Engine)')), 'engine');
    assert.equal(clientPathOf(point('TensorRT-LLM (PyTorch backend, trtllm-bench)')), 'none');
    assert.equal(clientPathOf(point('TensorRT-LLM', { frontendLatencyMs: 0 })), 'none');
    assert.equal(clientPathOf(point('vLLM', { clientPath: 'engine' })), 'engine');
    assert.equal(clientPathOf(point('vLLM')), 'http');
  });
});

describe('validation points served from a checkpoint the repository holds', () => {
  const point = (id: string): ValidationPoint =>
    ({
      id: 'p',
      role: 'validation',
      source: { title: 't' },
      engine: { name: 'vLLM', version: '0.6.3', personality: 'vllm-v0' },
      hardware: { gpu: 'h100', tp: 8 },
      model: { id, preset: 'llama-3.1-405b', weights: 'fp8' },
      workload: {
        inputTokens: { kind: 'fixed', value: 128 },
        outputTokens: { kind: 'fixed', value: 128 },
      },
      load: { kind: 'batch1', value: 1 },
      measured: {},
    }) as unknown as ValidationPoint;
  const weightsOf = (id: string) => {
    const o = engineOptions(point(id));
    assert.ok(typeof o !== 'string' && o.weights, id);
    return o.weights;
  };

  test("Meta's FP8 405B, base and instruct, keep their attention and two MLPs in bf16", () => {
    for (const id of ['meta-llama/Llama-3.1-405B-FP8', 'meta-llama/Llama-3.1-405B-Instruct-FP8']) {
      const kept = weightsOf(id).unquantised;
      assert.equal(kept?.dtype, 'bf16', id);
      assert.equal(kept?.modules, 126 * 4 + 2 * 3, id);
    }
  });

  test('any other checkpoint of the preset is read as its stated format alone', () => {
    assert.equal(weightsOf('neuralmagic/Meta-Llama-3.1-405B-Instruct-FP8').unquantised, undefined);
  });
});

describe('validation points whose source resends its prompts', () => {
  // Batch 1, vLLM V1 on an A100: 20 prompts of 240 tokens, sent once or three times over.
  const ttftMedian = (passes: number, prefixCaching: boolean): number => {
    const result = simulatePoint({
      id: 'p',
      role: 'validation',
      source: { title: 't' },
      engine: {
        name: 'vLLM (AsyncLLMEngine)',
        version: '0.20.1',
        personality: 'vllm-v1',
        settings: { prefixCaching },
      },
      hardware: { gpu: 'a100-80', tp: 1 },
      model: { id: 'meta-llama/Meta-Llama-3-8B-Instruct', preset: 'llama-3-8b', weights: 'bf16' },
      workload: {
        inputTokens: { kind: 'mean', value: 240 },
        outputTokens: { kind: 'mean', value: 32 },
        requests: 20,
        passes,
      },
      load: { kind: 'batch1', value: 1 },
      measured: { ttftMs: { median: 30 } },
    } as unknown as ValidationPoint);
    const c = result.comparisons.find((x) => x.metric === 'ttftMs.median');
    assert.ok(c, 'TTFT compared');
    return c.simulated;
  };

  test('with prefix caching, the later passes find each prompt cached: the median TTFT falls', () => {
    const once = ttftMedian(1, true);
    const thrice = ttftMedian(3, true);
    // Two of three requests skip all but the last block of their prefill.
    assert.ok(thrice < 0.9 * once, `${thrice} ms over three passes, ${once} ms over one`);
    // Without the cache a repeat costs what the first did.
    const uncached = ttftMedian(3, false);
    assert.ok(Math.abs(uncached / ttftMedian(1, false) - 1) < 0.02, `${uncached} ms uncached`);
  });
});
