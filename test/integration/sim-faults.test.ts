import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { ErrorKind, RequestRecord } from '../../src/record.js';
import type { SimulatorProcess } from '../../src/session/simulator.js';
import { FAULT_KINDS, type FaultKind, faultFor, parseFaults } from '../../src/sim/faults.js';
import type { TruthRecord } from '../../src/sim/server.js';
import { runAgainst } from '../helpers/run.js';
import { fetchTruth, startSim } from '../helpers/sim.js';

const SPEC = '429=0.1,500=0.05,reset=0.05@4,malformed=0.05@3,stall=0.05:300@2,slow-start=0.05:200';
const SEED = 3;

/** The client's error kind for each fault (undefined: the request still succeeds). */
const CLIENT_KIND: Record<FaultKind, ErrorKind | undefined> = {
  http429: 'http_4xx',
  http500: 'http_5xx',
  reset: 'stream_broken',
  malformed: 'bad_stream',
  stall: undefined,
  'slow-start': undefined,
};

/** Arrival offsets (ms from sentAt) of each event of a record. */
function eventTimes(r: RequestRecord): number[] {
  let at = 0;
  return r.events.dtUs.map((dt) => {
    at += dt / 1000;
    return at;
  });
}

function sum(values: number[]): number {
  return values.reduce((a, b) => a + b, 0);
}

describe('fault specs and draws', () => {
  test('parseFaults reads kinds, fractions, ms and token counts, with per-kind defaults', () => {
    const plan = parseFaults(
      ' 429=0.05 , 500=0.01,reset=0.01,stall=0.02,malformed=0.03,slow-start=0.1:2000,reset=0.01@10,stall=0.02:1500@7',
      9,
    );
    assert.equal(plan.seed, 9);
    assert.deepEqual(plan.rules, [
      { kind: 'http429', fraction: 0.05, ms: 0, afterTokens: 0 },
      { kind: 'http500', fraction: 0.01, ms: 0, afterTokens: 0 },
      { kind: 'reset', fraction: 0.01, ms: 0, afterTokens: 5 },
      { kind: 'stall', fraction: 0.02, ms: 2000, afterTokens: 3 },
      { kind: 'malformed', fraction: 0.03, ms: 0, afterTokens: 2 },
      { kind: 'slow-start', fraction: 0.1, ms: 2000, afterTokens: 0 },
      { kind: 'reset', fraction: 0.01, ms: 0, afterTokens: 10 },
      { kind: 'stall', fraction: 0.02, ms: 1500, afterTokens: 7 },
    ]);
    assert.deepEqual(parseFaults('', 1).rules, []);
    assert.equal(faultFor(parseFaults('', 1), '0'), undefined, 'no rules, no faults');
    assert.deepEqual(parseFaults('reset=1@3', 1).rules, [
      { kind: 'reset', fraction: 1, ms: 0, afterTokens: 3 },
    ]);
  });

  test('parseFaults errors name the bad part', () => {
    assert.throws(() => parseFaults('429=0.1,bogus=0.1', 1), {
      message: /cannot read "bogus=0\.1" \(KIND=FRACTION/,
    });
    assert.throws(() => parseFaults('404=0.1', 1), { message: /cannot read "404=0\.1"/ });
    assert.throws(() => parseFaults('reset=0.1@x', 1), { message: /cannot read "reset=0\.1@x"/ });
    assert.throws(() => parseFaults('stall=0.1:abc', 1), {
      message: /cannot read "stall=0\.1:abc"/,
    });
    assert.throws(() => parseFaults('500=0.1,429=1.5', 1), {
      message: /fraction of "429=1\.5" must be between 0 and 1/,
    });
    assert.throws(() => parseFaults('429=1.2.3', 1), { message: /fraction of "429=1\.2\.3"/ });
    assert.throws(() => parseFaults('429=0.6,reset=0.3,500=0.2', 1), {
      message: /fractions add up to 1\.1, more than 1 \(each request gets at most one fault\)/,
    });
    // Exactly 1 is allowed, float rounding included.
    assert.doesNotThrow(() => parseFaults('429=0.7,500=0.1,reset=0.1,stall=0.1', 1));
  });

  test('faultFor depends only on seed and id, not on call order', () => {
    const ids = Array.from({ length: 2_000 }, (_, i) => String(i));
    const forward = ids.map((id) => faultFor(parseFaults(SPEC, SEED), id));
    const plan = parseFaults(SPEC, SEED);
    const backward = [...ids].reverse().map((id) => faultFor(plan, id));
    backward.reverse();
    assert.deepEqual(backward, forward);
    // Interleaved with draws for other ids and another seed: still the same answers.
    const other = parseFaults(SPEC, SEED + 1);
    for (let i = 0; i < ids.length; i += 7) {
      faultFor(other, ids[i]);
      faultFor(plan, `x${i}`);
      assert.deepEqual(faultFor(plan, ids[i]), forward[i]);
    }
    const otherSeed = ids.map((id) => faultFor(other, id));
    assert.notDeepEqual(otherSeed, forward, 'the seed changes the draws');
    // What a request gets carries the rule's parameters, not its fraction.
    const stall = forward.find((f) => f?.kind === 'stall');
    assert.deepEqual(stall, { kind: 'stall', afterTokens: 2, ms: 300 });
  });

  test('over 20,000 ids each kind gets its share (within 4 binomial standard deviations)', () => {
    const n = 20_000;
    for (const seed of [SEED, 12345]) {
      const plan = parseFaults(SPEC, seed);
      const counts = new Map<string, number>();
      for (let i = 0; i < n; i++) {
        const kind = faultFor(plan, String(i))?.kind ?? 'none';
        counts.set(kind, (counts.get(kind) ?? 0) + 1);
      }
      const expected: Record<string, number> = { none: 1 - sum(plan.rules.map((r) => r.fraction)) };
      for (const r of plan.rules) expected[r.kind] = r.fraction;
      assert.deepEqual(
        [...counts.keys()].sort(),
        Object.keys(expected).sort(),
        'no kind outside the plan',
      );
      for (const [kind, p] of Object.entries(expected)) {
        const got = counts.get(kind) ?? 0;
        const sd = Math.sqrt(n * p * (1 - p));
        assert.ok(
          Math.abs(got - n * p) <= 4 * sd,
          `seed ${seed}: ${kind} drawn ${got} times, expected ${n * p} +- ${(4 * sd).toFixed(0)}`,
        );
      }
    }
  });

  test('the simulator refuses a bad --faults spec with the parser message', async () => {
    await assert.rejects(startSim({ engine: 'scripted', faults: '429=0.5,oops=0.1' }), {
      message: /cannot start: invalid options\n\s+- --faults: cannot read "oops=0\.1"/,
    });
  });
});

describe('seeded faults against the real client', () => {
  let sim: SimulatorProcess;
  before(async () => {
    sim = await startSim({
      engine: 'scripted',
      'itl-ms': 2,
      'ttft-base-ms': 2,
      faults: SPEC,
      'fault-seed': SEED,
    });
  });
  after(() => sim.stop());

  test('every request is categorised exactly as the ground truth says', async () => {
    const requests = 200;
    const output = 12;
    const { records, summary, result } = await runAgainst(sim.url, {
      load: { mode: 'closed', concurrency: 8 },
      requests,
      outputTokens: output,
    });
    const truth = await fetchTruth(sim.url);

    // The run finished and lost nothing; nothing was sent twice.
    assert.equal(result.stoppedBy, 'plan');
    assert.equal(records.length, requests);
    assert.deepEqual(
      records.map((r) => r.id),
      Array.from({ length: requests }, (_, i) => i),
    );
    assert.ok(
      records.every((r) => !r.resent),
      'no request was resent',
    );
    assert.equal(truth.length, requests, 'one truth record per request');

    const byId = new Map<string, TruthRecord>(truth.map((t) => [t.requestId, t]));
    assert.equal(byId.size, requests, 'truth request ids are unique');
    const plan = parseFaults(SPEC, SEED);
    const truthCounts = new Map<string, number>();
    for (const r of records) {
      const t = byId.get(String(r.id));
      assert.ok(t, `truth for request ${r.id}`);
      const what = `request ${r.id} (${t.fault?.kind ?? 'no fault'})`;
      // The server applied exactly the documented draw for this id.
      assert.deepEqual(t.fault, faultFor(plan, String(r.id)), `${what}: fault as drawn`);
      const kind = t.fault?.kind ?? 'none';
      truthCounts.set(kind, (truthCounts.get(kind) ?? 0) + 1);
      switch (t.fault?.kind) {
        case 'http429':
          assert.equal(r.error?.kind, 'http_4xx', what);
          assert.equal(r.error?.status, 429, what);
          assert.equal(r.status, 429, what);
          assert.match(r.error?.message ?? '', /HTTP 429: Too many requests/, what);
          assert.equal(r.outputTokens, 0, what);
          assert.deepEqual(t.rejected?.status, 429, what);
          break;
        case 'http500':
          assert.equal(r.error?.kind, 'http_5xx', what);
          assert.equal(r.error?.status, 500, what);
          assert.equal(r.status, 500, what);
          assert.match(r.error?.message ?? '', /HTTP 500: Internal server error/, what);
          assert.equal(r.outputTokens, 0, what);
          assert.deepEqual(t.rejected?.status, 500, what);
          break;
        case 'reset':
          assert.equal(r.error?.kind, 'stream_broken', what);
          assert.match(r.error?.message ?? '', /mid-stream/, what);
          assert.equal(r.status, 200, what);
          // The tokens before the reset are kept, counted from the events (no usage arrived).
          assert.equal(r.outputTokens, 4, what);
          assert.equal(r.outputTokensSource, 'events', what);
          assert.equal(sum(r.events.tokens), 4, what);
          assert.equal(t.outputTokens, 4, `${what}: truth`);
          assert.equal(sum(t.events.map((e) => e.tokens)), 4, `${what}: truth events`);
          assert.equal(t.cancelled, undefined, `${what}: the server reset, the client stayed`);
          assert.ok(r.firstTokenAt !== undefined && r.lastTokenAt !== undefined, what);
          break;
        case 'malformed':
          assert.equal(r.error?.kind, 'bad_stream', what);
          assert.match(r.error?.message ?? '', /malformed JSON in event/, what);
          assert.equal(r.status, 200, what);
          assert.equal(r.outputTokens, 3, what);
          assert.equal(t.outputTokens, 3, `${what}: truth`);
          break;
        case 'stall': {
          assert.equal(r.error, undefined, what);
          assert.equal(r.outputTokens, output, what);
          assert.equal(r.finishReason, 'length', what);
          // The stall is found by its tokens, not by the largest gap: a late read of the second
          // token (the client's thread held up on a busy machine) or a late write of it (the
          // server's) makes the gap before it the largest, and the test once read "1 token
          // before the stall" on a loaded 2-core machine. What no delay can change: the event
          // that carries the third token is a new event after exactly 2 tokens, and it is never
          // early, at least the 300 ms stall after the send (a late read only makes it later).
          const times = eventTimes(r);
          let before = 0;
          let held = 0;
          while (held < r.events.tokens.length && before < 2) before += r.events.tokens[held++];
          assert.equal(before, 2, `${what}: tokens before the stall`);
          assert.ok(times[held] >= 300, `${what}: held tokens ${times[held]} ms after the send`);
          assert.equal(sum(r.events.tokens.slice(held)), output - 2, what);
          // The truth agrees: 1 + 1 tokens, then the other 10, the first of them >= 300 ms later.
          assert.deepEqual(
            t.events.slice(0, 2).map((e) => e.tokens),
            [1, 1],
            `${what}: truth events`,
          );
          assert.equal(sum(t.events.slice(2).map((e) => e.tokens)), output - 2, what);
          assert.ok(t.events[2].at - t.events[1].at >= 295, `${what}: truth stall`);
          // Held tokens the server released in one write arrive together (a server held up
          // past the stall's end releases those generated by then and writes the rest after).
          if (t.events.length === 3) {
            const spread = times[times.length - 1] - times[held];
            assert.ok(spread < 100, `${what}: held events spread over ${spread} ms`);
          }
          break;
        }
        case 'slow-start': {
          assert.equal(r.error, undefined, what);
          assert.equal(r.outputTokens, output, what);
          const ttft = (r.firstTokenAt as number) - r.sentAt;
          assert.ok(ttft >= 195, `${what}: TTFT ${ttft} ms`);
          assert.ok((r.headersAt as number) - r.sentAt >= 195, `${what}: headers came late`);
          break;
        }
        case undefined:
          assert.equal(r.error, undefined, `${what}: ${r.error?.message}`);
          assert.equal(r.status, 200, what);
          assert.equal(r.outputTokens, output, what);
          assert.equal(r.outputTokensSource, 'server', what);
          assert.equal(r.finishReason, 'length', what);
          assert.equal(t.outputTokens, output, what);
          break;
        default:
          assert.fail(`unexpected fault ${JSON.stringify(t.fault)}`);
      }
    }

    // Every kind occurred (seed 3 draws them all for ids 0..199), so each branch above ran.
    for (const kind of FAULT_KINDS) {
      assert.ok((truthCounts.get(kind) ?? 0) > 0, `${kind} drawn at least once`);
    }
    // Count by count: the truth's faults are the client's errors.
    const clientCounts = new Map<string, number>();
    for (const r of records) {
      const kind = r.error?.kind ?? 'ok';
      clientCounts.set(kind, (clientCounts.get(kind) ?? 0) + 1);
    }
    const expectedClient = new Map<string, number>();
    for (const [kind, count] of truthCounts) {
      const clientKind = kind === 'none' ? 'ok' : (CLIENT_KIND[kind as FaultKind] ?? 'ok');
      expectedClient.set(clientKind, (expectedClient.get(clientKind) ?? 0) + count);
    }
    assert.deepEqual(
      Object.fromEntries([...clientCounts].sort()),
      Object.fromEntries([...expectedClient].sort()),
    );
    const { ok: okCount, ...errorCounts } = Object.fromEntries(expectedClient);
    assert.equal(summary.requests.completed, okCount);
    assert.equal(summary.requests.failed, requests - okCount);
    assert.deepEqual(summary.requests.errorsByKind, errorCounts);
  });
});

describe('mid-stream faults that never come', () => {
  let sim: SimulatorProcess;
  before(async () => {
    sim = await startSim({
      engine: 'scripted',
      'itl-ms': 2,
      'ttft-base-ms': 2,
      faults: 'reset=0.4@50,malformed=0.3@12,stall=0.3:400@20',
      'fault-seed': SEED,
    });
  });
  after(() => sim.stop());

  test('a stream that ends before the fault point is clean, and the truth records no fault', async () => {
    const { records } = await runAgainst(sim.url, {
      load: { mode: 'closed', concurrency: 4 },
      requests: 20,
      outputTokens: 12,
    });
    const truth = await fetchTruth(sim.url);
    assert.equal(records.length, 20);
    for (const r of records) {
      assert.equal(r.error, undefined, `request ${r.id}: ${r.error?.message}`);
      assert.equal(r.outputTokens, 12);
    }
    assert.equal(truth.length, 20);
    for (const t of truth) {
      assert.equal(t.fault, undefined, `request ${t.requestId}: ${JSON.stringify(t.fault)}`);
      assert.equal(t.outputTokens, 12);
    }
  });
});

async function tokenize(url: string, body: unknown): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${url}/tokenize`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  assert.match(response.headers.get('content-type') ?? '', /application\/json/);
  return { status: response.status, body: await response.json() };
}

interface Tokenized {
  count: number;
  max_model_len: number | null;
  tokens: number[];
}

describe('POST /tokenize', () => {
  let scripted: SimulatorProcess;
  let physical: SimulatorProcess;
  before(async () => {
    scripted = await startSim({ engine: 'scripted' });
    physical = await startSim({});
  });
  after(() => Promise.all([scripted.stop(), physical.stop()]));

  test('a prompt: one token per word, stable integer ids', async () => {
    const { status, body } = await tokenize(scripted.url, {
      model: 'sim-llama-3-8b',
      prompt: 'the quick brown fox',
    });
    assert.equal(status, 200);
    const t = body as Tokenized;
    assert.equal(t.count, 4);
    assert.equal(t.tokens.length, 4);
    assert.ok(t.tokens.every((id) => Number.isInteger(id) && id >= 0));
    assert.equal(new Set(t.tokens).size, 4, 'different words, different ids');
    assert.equal(t.max_model_len, null, 'the scripted engine has no context limit');

    const again = (await tokenize(scripted.url, { prompt: 'fox  the\nquick the' }))
      .body as Tokenized;
    assert.equal(again.count, 4);
    const [the, quick, , fox] = t.tokens;
    assert.deepEqual(again.tokens, [fox, the, quick, the], 'identical words, identical ids');
  });

  test('chat messages are counted across messages', async () => {
    const { status, body } = await tokenize(scripted.url, {
      model: 'sim-llama-3-8b',
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: [{ type: 'text', text: 'the quick brown fox' }] },
      ],
    });
    assert.equal(status, 200);
    const t = body as Tokenized;
    assert.equal(t.count, 6);
    const prompt = (await tokenize(scripted.url, { prompt: 'the quick brown fox' }))
      .body as Tokenized;
    assert.deepEqual(t.tokens.slice(2), prompt.tokens);
  });

  test('neither prompt nor messages: HTTP 400 with a JSON error', async () => {
    for (const body of [{ model: 'sim-llama-3-8b' }, { prompt: 42 }, { messages: [{}] }]) {
      const answer = await tokenize(scripted.url, body);
      assert.equal(answer.status, 400, JSON.stringify(body));
      const error = (answer.body as { error: { message: string; code: number } }).error;
      assert.match(error.message, /`prompt` or `messages` is missing or not text/);
      assert.equal(error.code, 400);
    }
    const response = await fetch(`${scripted.url}/tokenize`, { method: 'POST', body: '{nope' });
    assert.equal(response.status, 400);
    assert.match(((await response.json()) as { error: { message: string } }).error.message, /JSON/);
  });

  test('the physical engine reports its max_model_len', async () => {
    const t = (await tokenize(physical.url, { prompt: 'the quick brown fox' })).body as Tokenized;
    assert.equal(t.count, 4);
    assert.equal(t.max_model_len, 8192, 'Llama-3-8B on H100 by default');
  });
});

describe('requests over max_model_len', () => {
  let sim: SimulatorProcess;
  before(async () => {
    sim = await startSim({ 'max-model-len': 64 });
  });
  after(() => sim.stop());

  test("answered HTTP 400 with vLLM's message, rejected in the truth, http_4xx in the client", async () => {
    const tokenized = (await tokenize(sim.url, { prompt: 'a b' })).body as Tokenized;
    assert.equal(tokenized.max_model_len, 64);

    const { records } = await runAgainst(sim.url, {
      requests: 1,
      inputTokens: 60,
      outputTokens: 10,
    });
    const [r] = records;
    assert.equal(r.error?.kind, 'http_4xx');
    assert.equal(r.error?.status, 400);
    assert.match(r.error?.message ?? '', /HTTP 400: .*maximum context length is 64 tokens/);
    assert.match(r.error?.message ?? '', /you requested 70 tokens \(60 in the messages, 10 in/);
    assert.equal(r.outputTokens, 0);

    const truth = await fetchTruth(sim.url);
    assert.equal(truth.length, 1);
    const [t] = truth;
    assert.equal(t.requestId, '0');
    assert.equal(t.inputTokens, 60);
    assert.equal(t.rejected?.status, 400);
    assert.match(t.rejected?.message ?? '', /maximum context length is 64 tokens/);
    assert.equal(t.startedAt, undefined, 'never reached the engine');
    assert.deepEqual(t.events, []);

    // Right at the limit it is served.
    const fits = await runAgainst(sim.url, { requests: 1, inputTokens: 54, outputTokens: 10 });
    assert.equal(fits.records[0].error, undefined, fits.records[0].error?.message);
    assert.equal(fits.records[0].outputTokens, 10);
  });
});
