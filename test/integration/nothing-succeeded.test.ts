/**
 * A run where every request fails (a wrong --model, a broken endpoint) is a failure to run:
 * the library's result says so (code 1, no throw), the summary keeps the first server message
 * of each error kind and leads with it, and the command exits 1 (before a threshold's 3).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { EXIT } from '../../src/errors.js';
import type { RunPlan } from '../../src/plan/runPlan.js';
import { nothingSucceeded } from '../../src/report/failures.js';
import { markdownSummary } from '../../src/report/markdown.js';
import { renderTerminalSummary } from '../../src/report/terminal.js';
import { prepareRun } from '../../src/session/prepare.js';
import { runPlan } from '../../src/session/run.js';
import type { PreparedRun } from '../../src/session/target.js';
import { runCli, tempDir } from '../helpers/cli.js';
import { type ScriptedServer, startScriptedServer } from '../helpers/scriptedServer.js';

/** vLLM's answer to an unknown model, with escape sequences a hostile server might add. */
const MISSING_MODEL = JSON.stringify({
  error: { message: 'The model `gpt-4o` does not exist.\u001b]0;owned\u0007\u001b[2J', code: 404 },
});

let server: ScriptedServer;
before(async () => {
  server = await startScriptedServer(() => ({
    status: 404,
    headers: { 'content-type': 'application/json' },
    steps: [{ write: MISSING_MODEL }],
  }));
});
after(() => server.close());

function prepared(): PreparedRun & { plan: RunPlan } {
  const p = prepareRun({
    url: server.url,
    model: 'gpt-4o',
    requests: '2',
    concurrency: '1',
    serverMetrics: false,
    workers: '0',
  });
  assert.deepEqual(p.problems, []);
  return p as PreparedRun & { plan: RunPlan };
}

describe('a run where nothing succeeded', () => {
  test('the library result is EXIT.failure and the summary keeps the server reason', async () => {
    const done = await runPlan(prepared(), { save: false });
    assert.equal(done.code, EXIT.failure);
    const { summary } = done.results[0];
    assert.deepEqual(summary.requests.errorsByKind, { http_4xx: 2 });
    assert.match(summary.requests.firstErrorByKind?.http_4xx ?? '', /HTTP 404: The model/);

    const text = renderTerminalSummary(summary, { color: false, model: 'gpt-4o' });
    const lines = text.split('\n');
    assert.match(lines[0], /^ALL 2 REQUESTS FAILED/);
    assert.match(lines[1], /^ {2}http_4xx 2: HTTP 404: The model `gpt-4o` does not exist\./);
    assert.doesNotMatch(text, /0 in \/ 0 out tokens/);
    // Server text reaches the terminal without an escape sequence or a control character.
    assert.ok(
      [...lines[1]].every((ch) => ch >= ' ' && (ch < '\u007f' || ch > '\u009f')),
      JSON.stringify(lines[1]),
    );

    const md = markdownSummary('run', [{ name: 'run', summary }]);
    assert.match(md, /\*\*All 2 requests failed\*\*/);
    assert.match(md, /- http\\_4xx 2: HTTP 404: The model \\`gpt-4o\\` does not exist\./);
  });

  test('the command exits 1 naming the kinds, before a failed threshold (3)', async () => {
    const out = tempDir('infergauge-nothing-');
    const r = await runCli([
      'run',
      '--url',
      server.url,
      '--model',
      'gpt-4o',
      '--requests',
      '2',
      '--concurrency',
      '1',
      '--no-server-metrics',
      '--no-html',
      '--threshold',
      'failureRate<0.5',
      '--out',
      out,
    ]);
    assert.equal(r.code, EXIT.failure, r.stderr);
    assert.match(
      r.stderr,
      /failed to run: no measured request succeeded \(2 failed\): http_4xx 2: HTTP 404: The model/,
    );
    assert.match(r.stdout, /^ALL 2 REQUESTS FAILED/);
  });
});

test('nothingSucceeded: all failed across summaries; one success or nothing counted is not', () => {
  const s = (completed: number, failed: number) => ({ requests: { completed, failed } });
  assert.equal(nothingSucceeded([s(0, 2), s(0, 1)]), true);
  assert.equal(nothingSucceeded([s(0, 2), s(1, 1)]), false);
  assert.equal(nothingSucceeded([s(0, 0)]), false);
  assert.equal(nothingSucceeded([]), false);
});
