/**
 * Issue 55 item 1: Mooncake's hash_ids read and checked, BurstGPT CSV, and the window and
 * idle-gap cap that shape a long trace before it is replayed.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { parseRunPlan } from '../../../src/plan/runPlan.js';
import { traceImpliedHitRate } from '../../../src/workload/blockPrompts.js';
import {
  capTraceGaps,
  parseTrace,
  readTrace,
  type TraceEntry,
  traceWindow,
} from '../../../src/workload/trace.js';
import { REPO } from '../../../tools/repo.js';

const fixture = (name: string) => join(REPO, 'test/fixtures/workload', name);
const at = (...ms: number[]): TraceEntry[] =>
  ms.map((atMs) => ({ atMs, inputTokens: 1, outputTokens: 1 }));

describe('Mooncake hash_ids', () => {
  test('the published conversation trace: every line has ceil(input / 512) ids', () => {
    const entries = readTrace(fixture('mooncake-conversation-200.jsonl'));
    assert.equal(entries.length, 200);
    for (const e of entries) {
      assert.equal(e.hashIds?.length, Math.ceil(e.inputTokens / 512));
    }
    // The first five requests arrive together and share block 0 (a system prompt).
    assert.deepEqual(
      entries.slice(0, 5).map((e) => e.hashIds?.[0]),
      [0, 0, 0, 0, 0],
    );
  });

  test('bad ids are problems with their line, never skipped', () => {
    const lines = [
      '{"timestamp": 0, "input_length": 1000, "output_length": 1, "hash_ids": [0, 1]}',
      '{"timestamp": 1, "input_length": 1000, "output_length": 1, "hash_ids": [0, 1, 2]}',
      '{"timestamp": 2, "input_length": 1000, "output_length": 1, "hash_ids": [0, -1]}',
      '{"timestamp": 3, "input_length": 1000, "output_length": 1, "hash_ids": [0, 1.5]}',
      '{"timestamp": 4, "input_length": 1000, "output_length": 1, "hash_ids": "0,1"}',
      '{"timestamp": 5, "input_length": 0, "output_length": 1, "hash_ids": []}',
    ].join('\n');
    assert.throws(
      () => parseTrace(lines, { source: 't.jsonl' }),
      (err: Error) => {
        const m = err.message;
        return (
          m.startsWith('t.jsonl: 4 problems') &&
          m.includes(
            "line 2: hash_ids has 3 blocks but input_length 1000 needs 2 of 512 tokens (is --trace-block-tokens the trace's block size?)",
          ) &&
          m.includes('line 3: hash_ids[1] must be a whole number >= 0, got -1') &&
          m.includes('line 4: hash_ids[1] must be a whole number >= 0, got 1.5') &&
          m.includes('line 5: hash_ids must be a list of whole numbers >= 0, got "0,1"')
        );
      },
    );
    // The count follows the block size asked for.
    const { entries } = parseTrace(
      '{"timestamp": 0, "input_length": 1000, "output_length": 1, "hash_ids": [0, 1, 2, 3]}',
      { blockTokens: 256 },
    );
    assert.deepEqual(entries[0].hashIds, [0, 1, 2, 3]);
  });
});

describe('BurstGPT CSV', () => {
  test('seconds, request and response tokens; failed rows (0 response tokens) left out and said', () => {
    const notes: string[] = [];
    const { format, entries } = parseTrace(
      '\nTimestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,Conversation log\n6.25,GPT-4,10,0,10,API log\n7.5,GPT-4,20,3,23,API log\n',
      { onNote: (n) => notes.push(n) },
    );
    assert.equal(format, 'burstgpt');
    assert.deepEqual(entries, [
      { atMs: 0, inputTokens: 472, outputTokens: 18 },
      { atMs: 2500, inputTokens: 20, outputTokens: 3 },
    ]);
    assert.equal(notes.length, 1);
    assert.match(notes[0], /1 rows with 0 Response tokens \(requests that failed/);
    assert.equal(readTrace(fixture('burstgpt.csv')).length, 4);
  });

  test('BurstGPT_3: Session ID names the conversation', () => {
    const entries = readTrace(fixture('burstgpt3.csv'));
    assert.deepEqual(
      entries.map((e) => [e.atMs, e.sessionId]),
      [
        [0, '7f2c1a'],
        [12_000, '7f2c1a'],
        [15_000, undefined],
      ],
    );
  });

  test('bad rows are problems with their line', () => {
    assert.throws(
      () =>
        parseTrace(
          'Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\nsoon,ChatGPT,1,1,2,API log\n1,ChatGPT,-1,1,0,API log\n2,ChatGPT\n',
        ),
      (err: Error) =>
        err.message.includes('3 problems') &&
        err.message.includes('line 2: Timestamp must be seconds (a number >= 0), got "soon"') &&
        err.message.includes('line 3: Request tokens must be a whole number') &&
        err.message.includes('line 4: expected 6 fields, got 2'),
    );
    assert.throws(
      () => parseTrace('Timestamp,Model,Request tokens\n', { format: 'burstgpt' }),
      /lacks Response tokens/,
    );
  });
});

describe('window and idle-gap cap', () => {
  test('a window keeps arrivals in [start, end) and starts them at 0', () => {
    const kept = traceWindow(at(0, 900, 1000, 1500, 2000, 2999, 3000), 1, 3);
    assert.deepEqual(
      kept.map((e) => e.atMs),
      [0, 500, 1000, 1999],
    );
    assert.throws(
      () => traceWindow(at(0, 1000), 5, 6),
      /--trace-window 5:6 holds no arrival: the trace spans 1\.000 s/,
    );
  });

  test('gaps over the cap shrink to it; later arrivals move earlier by what was removed', () => {
    const { entries, removedMs, cappedGaps } = capTraceGaps(
      at(0, 100, 10_100, 10_150, 70_150),
      1000,
    );
    assert.deepEqual(
      entries.map((e) => e.atMs),
      [0, 100, 1100, 1150, 2150],
    );
    assert.equal(removedMs, 9000 + 59_000);
    assert.equal(cappedGaps, 2);
    // Under the cap nothing moves.
    const same = capTraceGaps(at(0, 5, 10), 1000);
    assert.equal(same.removedMs, 0);
    assert.deepEqual(
      same.entries.map((e) => e.atMs),
      [0, 5, 10],
    );
  });
});

describe('the plan: --trace-window, --trace-max-gap-s, --trace-block-tokens', () => {
  test('window, then gap cap, then speed; the manifest keeps what shaped the replay', () => {
    const plan = parseRunPlan({
      trace: fixture('mooncake-conversation-200.jsonl'),
      traceWindow: '10:60',
      traceMaxGapS: '0.5',
      traceSpeed: 2,
    });
    const trace = plan.trace;
    assert.ok(trace);
    const all = readTrace(fixture('mooncake-conversation-200.jsonl'));
    const inWindow = all.filter((e) => e.atMs >= 10_000 && e.atMs < 60_000);
    assert.equal(trace.entries.length, inWindow.length);
    assert.equal(trace.entries[0].atMs, 0);
    const gaps = trace.entries.slice(1).map((e, i) => e.atMs - trace.entries[i].atMs);
    assert.ok(Math.max(...gaps) <= 500, `${Math.max(...gaps)}`);
    const before = inWindow[inWindow.length - 1].atMs - inWindow[0].atMs;
    const after = trace.entries[trace.entries.length - 1].atMs;
    assert.equal(trace.removedGapMs, before - after);
    assert.ok(
      trace.notices?.some((n) => /^--trace-window 10:60: \d+ of 200 arrivals replayed/.test(n)),
    );
    assert.ok(trace.notices?.some((n) => /^--trace-max-gap-s 0\.5: \d+ idle gaps cut/.test(n)));
    assert.ok(
      trace.notices?.some((n) => /hash_ids imply a prefix-cache hit rate of \d+\.\d%/.test(n)),
    );
    const json = JSON.parse(JSON.stringify(plan.load)) as { trace: Record<string, unknown> };
    assert.equal(json.trace.speed, 2);
    assert.deepEqual(json.trace.window, { startS: 10, endS: 60 });
    assert.equal(json.trace.maxGapS, 0.5);
    assert.equal(json.trace.removedGapMs, before - after);
    assert.equal(json.trace.blockTokens, 512);
    assert.equal(typeof json.trace.impliedHitRate, 'number');
  });

  test('the implied rate is of the requests sent (warm-up and measured, from the first entry)', () => {
    const path = fixture('mooncake-synthetic-3881.jsonl');
    const plan = parseRunPlan({ trace: path, requests: '30', warmup: '10' });
    const expected = traceImpliedHitRate(readTrace(path).slice(0, 40), {
      blockTokens: 512,
      engineBlockTokens: 16,
    });
    assert.equal(plan.trace?.impliedHitRate, expected);
    assert.ok(
      plan.trace?.notices?.some((n) => n.startsWith("the first 40 requests' hash_ids imply")),
    );
  });

  test('--max-concurrency caps a trace replay as it caps a rate', () => {
    const plan = parseRunPlan({ trace: fixture('mooncake.jsonl'), maxConcurrency: '1' });
    assert.equal(plan.load.mode === 'open' ? plan.load.maxConcurrency : undefined, 1);
    assert.throws(
      () => parseRunPlan({ maxConcurrency: '4' }),
      /--max-concurrency applies only with --rate or --trace/,
    );
  });

  test('bad values and flags without --trace are problems naming the flag', () => {
    assert.throws(
      () => parseRunPlan({ trace: fixture('mooncake.jsonl'), traceWindow: '60:10' }),
      /--trace-window END must come after START, got 60:10/,
    );
    assert.throws(
      () => parseRunPlan({ trace: fixture('mooncake.jsonl'), traceWindow: '5:6' }),
      /--trace-window 5:6 holds no arrival: the trace spans 3\.053 s/,
    );
    assert.throws(
      () => parseRunPlan({ trace: fixture('mooncake.jsonl'), traceBlockTokens: '256' }),
      /line 1: hash_ids has 14 blocks but input_length 6955 needs 28 of 256 tokens/,
    );
    assert.throws(
      () => parseRunPlan({ traceMaxGapS: '5', traceBlockTokens: '16' }),
      (err: Error) =>
        /--trace-max-gap-s.*applies only with --trace/.test(err.message) &&
        /--trace-block-tokens.*applies only with --trace/.test(err.message),
    );
  });
});

test('hash_ids under the words tokenizer against a real server: said to be approximate', () => {
  const plan = parseRunPlan({
    url: 'http://127.0.0.1:9',
    trace: fixture('mooncake.jsonl'),
  });
  assert.ok(
    plan.trace?.notes?.some((n) => /--tokenizer words: requests share their blocks' text/.test(n)),
  );
  const exact = parseRunPlan({ trace: fixture('mooncake.jsonl') });
  assert.ok(!exact.trace?.notes?.some((n) => /--tokenizer words/.test(n)));
});
