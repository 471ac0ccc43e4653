/**
 * The validity verdict (docs/metrics.md, "Validity"): each reason driven by a seeded case
 * against the simulator or a scripted server, judged as the run judges it (validityOf over the
 * summary's warnings), and the clean run `valid`.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { evaluateThreshold, parseThreshold } from '../../src/analysis/thresholds.js';
import { validityOf } from '../../src/metrics/validity.js';
import { warning } from '../../src/metrics/warnings.js';
import { renderTerminalSummary } from '../../src/report/terminal.js';
import { prepareRun } from '../../src/session/prepare.js';
import { runPlan } from '../../src/session/run.js';
import type { PreparedRun } from '../../src/session/target.js';
import { tempDir } from '../helpers/cli.js';
import { runAgainst } from '../helpers/run.js';
import { type ScriptedServer, type Step, startScriptedServer } from '../helpers/scriptedServer.js';

const codes = (w: Parameters<typeof validityOf>[0]) => validityOf(w).reasons.map((r) => r.code);

/** An OpenAI completions stream of `tokens` one-token events, `gapMs` apart, after `firstMs`. */
function stream(
  tokens: number,
  o: { firstMs?: number; gapMs?: number; usage?: object } = {},
): Step[] {
  const steps: Step[] = [{ wait: o.firstMs ?? 1 }];
  for (let i = 0; i < tokens; i++) {
    if (i > 0) steps.push({ wait: o.gapMs ?? 1 });
    steps.push({
      write: `data: ${JSON.stringify({ choices: [{ index: 0, text: `t${i} `, finish_reason: null }] })}\n\n`,
    });
  }
  if (o.usage) {
    steps.push({ write: `data: ${JSON.stringify({ choices: [], usage: o.usage })}\n\n` });
  }
  steps.push({ write: 'data: [DONE]\n\n' }, { end: true });
  return steps;
}

describe('validityOf: the verdict of the warnings', () => {
  test('no warning or info only: valid; a warning: caution; an error: invalid, first', () => {
    assert.equal(validityOf([]).verdict, 'valid');
    assert.equal(validityOf([warning('low_sample', { completed: 12 })]).verdict, 'valid');
    const short = warning('output_short', {
      short: 3,
      completed: 10,
      meanOutput: 5,
      meanRequested: 8,
    });
    const caution = validityOf([warning('low_sample', { completed: 10 }), short]);
    assert.equal(caution.verdict, 'caution');
    assert.deepEqual(caution.reasons, [
      { code: 'output_short', verdict: 'caution', figure: 0.3, threshold: 0, text: short.message },
    ]);
    const invalid = validityOf([short, warning('no_requests', {})]);
    assert.equal(invalid.verdict, 'invalid');
    assert.deepEqual(
      invalid.reasons.map((r) => [r.code, r.verdict]),
      [
        ['no_requests', 'invalid'],
        ['output_short', 'caution'],
      ],
    );
    // A saved warning from before severities reads as its code says.
    assert.equal(validityOf([{ code: 'client_limited', message: 'x' }]).verdict, 'invalid');
  });

  test('failures: caution up to 10 %, invalid past it', () => {
    const failed = (n: number) =>
      validityOf([warning('requests_failed', { failed: n, counted: 100, kinds: 'timeout' })]);
    assert.equal(failed(10).verdict, 'caution');
    assert.equal(failed(11).verdict, 'invalid');
    assert.equal(failed(11).reasons[0].figure, 0.11);
  });

  test('--threshold validity=valid and validity!=invalid', () => {
    const run = (warnings: ReturnType<typeof warning>[]) => ({ warnings }) as never;
    const short = warning('output_short', {
      short: 1,
      completed: 2,
      meanOutput: 1,
      meanRequested: 2,
    });
    const valid = parseThreshold('validity=valid');
    const notInvalid = parseThreshold('validity != invalid');
    assert.equal(evaluateThreshold(run([]), valid).ok, true);
    const failed = evaluateThreshold(run([short]), valid);
    assert.equal(failed.ok, false);
    assert.equal(failed.message, 'validity = caution (output_short), not valid');
    assert.equal(evaluateThreshold(run([short]), notInvalid).ok, true);
    assert.equal(evaluateThreshold(run([warning('no_requests', {})]), notInvalid).ok, false);
    for (const bad of ['validity=caution', 'validity=fine', 'validity>=invalid']) {
      assert.throws(() => parseThreshold(bad), /validity=valid .*validity!=invalid/, bad);
    }
  });
});

describe('each reason from a run that has it', () => {
  let server: ScriptedServer;
  before(async () => {
    server = await startScriptedServer((r) => {
      const body = r.body as { max_tokens?: number };
      const asked = body.max_tokens ?? 8;
      // ~80 ms a request: the last wave of 4 runs alone long enough that a loaded machine's
      // event-loop stalls (tens of ms on CI) cannot blur the two waves into one.
      return { steps: stream(asked, { firstMs: 10, gapMs: 10 }) };
    });
  });
  after(() => server.close());

  test('a closed loop of few requests per slot: load_not_delivered', async () => {
    const run = await runAgainst(server.url, {
      load: { mode: 'closed', concurrency: 16 },
      requests: 20,
      outputTokens: 8,
    });
    const reason = validityOf(run.summary.warnings).reasons.find(
      (r) => r.code === 'load_not_delivered',
    );
    assert.ok(reason, JSON.stringify(run.summary.warnings));
    assert.ok((reason.figure ?? 1) < 0.9 && reason.threshold === 0.9);
  });
});

describe('coordinated omission and unequal work', () => {
  test('a server that stalls one request in ten: the closed loop says so', async () => {
    const server = await startScriptedServer((r) =>
      // Deterministic: every tenth request waits 400 ms for its first token (others ~2 ms).
      ({ steps: stream(8, { firstMs: r.index % 10 === 9 ? 400 : 2, gapMs: 2 }) }),
    );
    try {
      const run = await runAgainst(server.url, {
        load: { mode: 'closed', concurrency: 2 },
        requests: 60,
        outputTokens: 8,
      });
      const co = validityOf(run.summary.warnings).reasons.find(
        (r) => r.code === 'coordinated_omission',
      );
      assert.ok(co, JSON.stringify(run.summary.warnings.map((w) => w.code)));
      // Six stalls of ~400 ms in ~60 requests of ~20 ms plus the stalls: most of the time.
      assert.ok((co.figure ?? 0) > 0.5, String(co.figure));
      assert.equal(co.verdict, 'caution');
    } finally {
      await server.close();
    }
  });

  test('a server that stops short of max_tokens: output_short, caution', async () => {
    const server = await startScriptedServer(() => ({
      steps: stream(3, { usage: { prompt_tokens: 16, completion_tokens: 3 } }),
    }));
    try {
      const run = await runAgainst(server.url, {
        load: { mode: 'closed', concurrency: 2 },
        requests: 20,
        outputTokens: 8,
      });
      const v = validityOf(run.summary.warnings);
      assert.ok(codes(run.summary.warnings).includes('output_short'));
      assert.notEqual(v.verdict, 'valid');
      const text = renderTerminalSummary(run.summary, { color: false });
      assert.match(text.split('\n').at(-1) ?? '', /^Validity: (CAUTION|INVALID) \(/);
    } finally {
      await server.close();
    }
  });
});

describe('beyond capacity and disagreeing counts', () => {
  test('an open loop past the simulated server: caution, the server fell behind', async () => {
    const prepared = prepareRun({
      simulate: true,
      rate: '400',
      requests: '1200',
    }) as PreparedRun & { plan: NonNullable<PreparedRun['plan']> };
    assert.deepEqual(prepared.problems, []);
    const done = await runPlan(prepared, { html: false, save: false });
    const v = done.results[0].summary.validity;
    assert.equal(v?.verdict, 'caution', JSON.stringify(v));
    const found = new Set(v?.reasons.map((r) => r.code));
    assert.ok(
      found.has('below_offered_rate') || found.has('no_steady_state'),
      [...found].join(','),
    );
  });

  test('a server whose usage counts other prompts than the client sent: input_drift', async () => {
    const server = await startScriptedServer(() => ({
      steps: stream(4, { usage: { prompt_tokens: 40, completion_tokens: 4 } }),
    }));
    try {
      const run = await runAgainst(server.url, {
        load: { mode: 'closed', concurrency: 2 },
        requests: 20,
        inputTokens: 16,
        outputTokens: 4,
      });
      const drift = validityOf(run.summary.warnings).reasons.find((r) => r.code === 'input_drift');
      assert.ok(drift, JSON.stringify(run.summary.warnings.map((w) => w.code)));
      assert.ok((drift.figure ?? 0) > 1 && drift.threshold === 0.05, JSON.stringify(drift));
    } finally {
      await server.close();
    }
  });
});

describe('the verdict on the whole run', () => {
  test('run --simulate --concurrency 8 --requests 200: valid, in summary.json and on the terminal', async () => {
    const out = join(tempDir('ig-validity-'), 'run');
    const prepared = prepareRun({
      simulate: true,
      concurrency: '8',
      requests: '200',
      out,
    }) as PreparedRun & { plan: NonNullable<PreparedRun['plan']> };
    assert.deepEqual(prepared.problems, []);
    const done = await runPlan(prepared, { html: false });
    const saved = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
    assert.deepEqual(saved.validity, { verdict: 'valid', reasons: [] });
    assert.deepEqual(done.results[0].summary.validity, { verdict: 'valid', reasons: [] });
  });
});
