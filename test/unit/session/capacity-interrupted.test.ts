/**
 * A capacity search stopped during a step (SIGINT's AbortSignal): the step and the search say
 * they were interrupted, and no limit or capacity rests on the step cut short.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { EXIT } from '../../../src/errors.js';
import { renderCapacity } from '../../../src/report/capacityText.js';
import type { Output } from '../../../src/session/events.js';
import { capacitySettings, runCapacity } from '../../../src/session/profiles/capacity.js';
import { tempDir } from '../../helpers/cli.js';
import {
  DONE,
  type ScriptedServer,
  startScriptedServer,
  textEvent,
  usageEvent,
} from '../../helpers/scriptedServer.js';

let server: ScriptedServer;
before(async () => {
  server = await startScriptedServer((r) =>
    r.path.endsWith('/completions')
      ? {
          steps: [
            { wait: 5 },
            { write: textEvent('a') },
            { write: textEvent('b') },
            { write: usageEvent(16, 2) },
            { write: DONE },
            { end: true },
          ],
        }
      : { status: 404, headers: { 'content-type': 'text/plain' }, steps: [{ end: true }] },
  );
});
after(() => server.close());

/** A search of batches 1 and 2 that stops as the first record of `stopAt`'s step arrives. */
async function searchStoppedAt(stopAt: string) {
  const problems: string[] = [];
  const settings = capacitySettings(
    { batches: '1,2', inputTokens: '16', outputTokens: '2', promptSalt: '1' },
    problems,
  );
  assert.deepEqual(problems, []);
  const stop = new AbortController();
  const stopper: Output = {
    name: 'stopper',
    records: (e) => {
      if (e.point.scenario === stopAt) stop.abort();
    },
  };
  const out = join(tempDir('ig-capacity-stop-'), 'search');
  const result = await runCapacity(
    settings,
    { url: server.url, modelName: 'm', apiKey: undefined, out, outputs: [stopper] },
    stop.signal,
  );
  return { ...result, out };
}

describe('capacity, interrupted', () => {
  test('during the first step: it says so, and concludes nothing', async () => {
    const { report, code, out } = await searchStoppedAt('batch 1');
    assert.equal(code, EXIT.interrupted);
    assert.equal(report.interrupted, true);
    assert.equal(report.steps.length, 1);
    const [step] = report.steps;
    assert.equal(step.interrupted, true);
    assert.ok(step.completed + step.failed < 4, `${step.completed} of 4`);
    assert.equal(report.limit, null);
    assert.equal(report.capacity, 0);
    const saved = JSON.parse(readFileSync(join(out, 'capacity.json'), 'utf8'));
    assert.equal(saved.interrupted, true);
    assert.equal(saved.steps[0].interrupted, true);
    const summary = JSON.parse(readFileSync(join(out, 'batch-1', 'summary.json'), 'utf8'));
    assert.equal(summary.interrupted, true);
    const text = renderCapacity(report, false);
    assert.match(text, /The search was interrupted during batch 1, before any step was whole/);
    // Stopped at the first record: the user's second request had gone out as the first answer
    // ended, and ends too; no third is sent.
    assert.match(text, /\* interrupted: 2 of 4 requests finished at batch 1/);
    assert.match(text, /Capacity: not measured\./);
    assert.doesNotMatch(text, /No limit reached/);
  });

  test('during the second: the first stands, the second is judged on nothing', async () => {
    const { report, code } = await searchStoppedAt('batch 2');
    assert.equal(code, EXIT.interrupted);
    assert.equal(report.interrupted, true);
    assert.deepEqual(
      report.steps.map((s) => [s.batch, s.interrupted ?? false]),
      [
        [1, false],
        [2, true],
      ],
    );
    assert.equal(report.limit, null);
    assert.equal(report.capacity, 1);
    const text = renderCapacity(report, false);
    assert.match(
      text,
      /interrupted during batch 2: no limit reached up to batch 1, the last whole step/,
    );
    assert.match(text, /Capacity: 1 concurrent sequences of 18 tokens or more\./);
  });
});
