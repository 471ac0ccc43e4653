/**
 * An agentic trace (issue 55 item 2) replayed over HTTP against the built-in simulator and in
 * virtual time: the same calls, in the same turns, with the same prompt and answer lengths and
 * the same ending record, timed within timer jitter. The two session runners (runCallGraph and
 * CallGraphSession) must agree, as the step runners do.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { findGpuPreset, type GpuSpec } from '../../src/memory/hardware.js';
import { findModelPreset, type ModelSpec } from '../../src/memory/model.js';
import type { RequestRecord } from '../../src/record.js';
import { spawnSimulator } from '../../src/session/simulator.js';
import { EngineModel } from '../../src/sim/engineModel.js';
import { simulateRun } from '../../src/sim/virtual.js';
import { AGENT_TRACE_SCENARIO, readAgentTrace } from '../../src/workload/agentTrace.js';
import type { ConversationWorkload } from '../../src/workload/conversations.js';
import { traceLoad } from '../../src/workload/trace.js';
import { loadWorkload } from '../../src/workload/workload.js';
import { REPO } from '../../tools/repo.js';
import { perRequestGaps } from '../helpers/agreement.js';
import { runAlone } from '../helpers/alone.js';
import { runAgainst, target } from '../helpers/run.js';

await runAlone(import.meta.url);

test('an agentic trace over HTTP and in virtual time: the same calls, turns and lengths, timed within jitter', async () => {
  const trace = readAgentTrace(join(REPO, 'test/fixtures/workload/agent-trace.jsonl'));
  const load = traceLoad(
    trace.tasks.map((t) => ({ atMs: t.startMs, inputTokens: 0, outputTokens: 0 })),
    { source: 'agent-trace.jsonl' },
  );
  const sessions = (promptSalt = 0) =>
    loadWorkload({
      scenario: AGENT_TRACE_SCENARIO,
      tokenizer: 'words',
      tokenizerOptions: { builtInSimulator: true },
      seed: 7,
      promptSalt,
      promptOverheadTokens: 0,
      agentTasks: trace.tasks,
    }) as Promise<{ nextSession: ConversationWorkload }>;
  const server = await spawnSimulator(['--enable-prefix-caching']);
  try {
    const options = { endpoint: 'chat' as const, ignoreEos: true };
    // Warm the process first (JIT, connections), as a real run would with --warmup; with
    // other texts, so the measured run meets a prefix cache as cold as virtual time's.
    await runAgainst(server.url, {
      target: options,
      load,
      requests: 2,
      engine: { nextRequest: undefined, ...(await sessions(1)) },
    });
    const real = await runAgainst(server.url, {
      target: options,
      load,
      requests: 2,
      engine: { nextRequest: undefined, ...(await sessions()) },
    });
    const same: RequestRecord[] = [];
    simulateRun({
      engine: new EngineModel({
        model: findModelPreset('llama-3-8b') as ModelSpec,
        gpu: findGpuPreset('h100') as GpuSpec,
        prefixCaching: true,
      }),
      load,
      requests: 2,
      warmupRequests: 0,
      seed: 7,
      endpoint: 'chat',
      ...(await sessions()),
      wire: { options: target(server.url, options) },
      onRecord: (r) => same.push(r),
    });
    same.sort((a, b) => a.id - b.id);
    assert.equal(real.records.length, 8);
    const shape = (r: RequestRecord) => {
      const { id, sessionId, turn, call, sessionDone, taskToolWaitMs, status } = r;
      const { requestedInputTokens, inputTokens, outputTokens } = r;
      return {
        ...{ id, sessionId, turn, call, sessionDone, taskToolWaitMs, status },
        ...{ requestedInputTokens, inputTokens, outputTokens },
      };
    };
    assert.deepEqual(same.map(shape), real.records.map(shape));
    // The trace's whole-prompt inputs reach the server as asked (words are tokens here).
    for (const r of real.records) assert.equal(r.inputTokens, r.requestedInputTokens);
    const gaps = perRequestGaps(real.records, same);
    console.log(
      `  agentic trace, real vs virtual: |TTFT gap| median ${gaps.medianTtftGapMs.toFixed(2)} ms, |E2E gap| median ${gaps.medianE2eGapMs.toFixed(2)} ms of ${gaps.meanE2eMs.toFixed(0)} ms`,
    );
    // The bounds of the simulator-engine session test: timer lateness, not a modelling gap.
    assert.ok(gaps.medianTtftGapMs < 8, `TTFT gap ${gaps.medianTtftGapMs} ms`);
    assert.ok(
      gaps.medianE2eGapMs < 10 + 0.02 * gaps.meanE2eMs,
      `E2E gap ${gaps.medianE2eGapMs} ms`,
    );
  } finally {
    await server.stop();
  }
});
