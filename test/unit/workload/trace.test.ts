/**
 * Issue 55 item 1: Mooncake's hash_ids read and checked, BurstGPT CSV, and the window and
 * idle-gap cap that shape a long trace before it is replayed.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
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
