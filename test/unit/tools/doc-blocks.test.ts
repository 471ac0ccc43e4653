import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { logicalLines, parseBlocks, parseMark, splitComment } from '../../../tools/docs/blocks.js';
import { sampleDrift } from '../../../tools/docs/drift.js';
import { localise, sameCommand } from '../../../tools/docs/run.js';
import { rewriteSamples } from '../../../tools/docs/samples.js';

describe('marks: what a block promises, on the line before its fence', () => {
  test('each kind is read with its argument', () => {
    assert.deepEqual(parseMark('run'), { kind: 'run', exitCode: 0 });
    assert.deepEqual(parseMark('run: exit 3'), { kind: 'run', exitCode: 3 });
    assert.deepEqual(parseMark('library'), { kind: 'library' });
    assert.deepEqual(parseMark('file: plan.yaml'), { kind: 'file', name: 'plan.yaml' });
    assert.deepEqual(parseMark('file: p.yaml; check: infergauge plan --print --plan p.yaml'), {
      kind: 'file',
      name: 'p.yaml',
      check: 'infergauge plan --print --plan p.yaml',
    });
    assert.deepEqual(parseMark('output of: infergauge run --url $URL; exact; head 9'), {
      kind: 'output',
      command: 'infergauge run --url $URL',
      exact: true,
      head: 9,
    });
    assert.deepEqual(parseMark('not run: needs a GPU server'), {
      kind: 'notRun',
      reason: 'needs a GPU server',
    });
  });

  test('a mark that promises nothing readable is no mark', () => {
    for (const text of [
      'not run',
      'run: twice',
      'output of:',
      'file: a b',
      'todo',
      'output of: x; y',
    ])
      assert.equal(parseMark(text).kind, 'unmarked', text);
  });

  test('blocks carry their page, lines, language and the mark just above the fence', () => {
    const md = [
      '# Page',
      '<!-- run -->',
      '```sh',
      'infergauge run',
      '```',
      '',
      '<!-- not run: far away -->',
      '',
      '```',
      'text',
      '```',
    ].join('\n');
    const [a, b] = parseBlocks('x.md', md);
    assert.deepEqual(
      { line: a?.line, endLine: a?.endLine, lang: a?.lang, code: a?.code, mark: a?.mark },
      {
        line: 3,
        endLine: 5,
        lang: 'sh',
        code: 'infergauge run',
        mark: { kind: 'run', exitCode: 0 },
      },
    );
    // A blank line between the mark and the fence: the mark belongs to no block.
    assert.equal(b?.mark.kind, 'unmarked');
    assert.throws(() => parseBlocks('y.md', '```sh\nnever closed'), /y\.md:1/);
  });
});

describe('shell lines', () => {
  test('continued lines join into one command; comments split off outside quotes', () => {
    assert.deepEqual(logicalLines('a \\\n  --b 1 \\\n  --c\nd'), ['a --b 1 --c', 'd']);
    assert.deepEqual(splitComment("run --slo 'x#1'   # why"), {
      command: "run --slo 'x#1'",
      comment: '# why',
    });
    assert.deepEqual(splitComment('a#b'), { command: 'a#b', comment: '' });
    assert.ok(sameCommand('a  b\n c', 'a b c'));
    assert.equal(
      localise('node dist/cli/main.js run --url http://127.0.0.1:8000', 'http://127.0.0.1:9'),
      'infergauge run --url http://127.0.0.1:9',
    );
  });
});

describe('drift: a sample against what its command prints now', () => {
  const sample = [
    'Throughput at 16 concurrent requests (measured 15.4), over 13.8 s:',
    '  system       1,851.1 output tok/s',
    'Client health: client CPU 3%: ok',
    'Results: res/before',
  ].join('\n');

  test("figures that move with the machine and its load's lines are no drift", () => {
    const fresh = [
      'CLIENT-LIMITED: the client limited this run.',
      'Throughput at 16 concurrent requests (measured 14.9), over 2.9 s:',
      '  system       8,732.1 output tok/s',
      'Client health: client CPU 7%, stamps late: client-limited',
      '  event-loop delay p99 8.5 ms, near the limit',
      'Warnings:',
      '  - 18.0% of token events arrived in one read',
      'Results: res/before',
    ].join('\n');
    assert.deepEqual(sampleDrift(sample, fresh, false), []);
  });

  test("an interval row's sides and method, and the verdict, follow the run: no drift", () => {
    const withIntervals = [
      '  95% intervals (docs/metrics.md, "Intervals"):',
      '  TTFT             p50 103.1 (70.3-105.4), p99 124.5 (114.1-open) *',
      '  * samples correlated in time: block bootstrap',
      'Validity: VALID: no warning puts these numbers in doubt',
    ].join('\n');
    const fresh = [
      '  95% intervals (docs/metrics.md, "Intervals"):',
      '  TTFT             p50 99.0 (98.1-101.4), p99 120.5 (118.0-122.3)',
      'Validity: INVALID (client_limited): the warnings above say why',
    ].join('\n');
    assert.deepEqual(sampleDrift(withIntervals, fresh, false), []);
    // A row gone is still drift.
    assert.deepEqual(sampleDrift(withIntervals, fresh.replace(/ {2}TTFT .*\n/, ''), false), [
      'sample line 2 is no longer printed: TTFT             p50 103.1 (70.3-105.4), p99 124.5 (114.1-open) *',
    ]);
  });

  test('a renamed label, a line gone, a reordering and an empty sample are drift', () => {
    const fresh = [
      'Results: res/before',
      'Throughput at 16 concurrent requests (measured 14.9), over 2.9 s:',
      '  system       8,732.1 output tokens/s',
      'Client health: ok',
    ].join('\n');
    assert.deepEqual(sampleDrift(sample, fresh, false), [
      'sample line 2 is no longer printed: system       1,851.1 output tok/s',
      'sample line 4 is out of order: Results: res/before',
    ]);
    assert.deepEqual(sampleDrift('', fresh, false), ['the sample is empty']);
  });

  test('an exact sample must match to the digit, but for the seconds the tool took', () => {
    const exact = 'fitted from 15 runs (645 virtual runs, 19.7 s):\n--mbu 0.550';
    assert.deepEqual(
      sampleDrift(exact, 'fitted from 15 runs (645 virtual runs, 31.2 s):\n--mbu 0.550', true),
      [],
    );
    assert.deepEqual(
      sampleDrift(exact, 'fitted from 15 runs (645 virtual runs, 19.7 s):\n--mbu 0.548', true),
      ['sample line 2 is no longer printed: --mbu 0.550'],
    );
  });
});

test("rewriting puts each command's output in its sample block, and again changes nothing", () => {
  const md = [
    '<!-- run -->',
    '```sh',
    'infergauge memory',
    '```',
    '<!-- output of: infergauge memory; head 2 -->',
    '```',
    'old',
    '```',
    'after',
  ].join('\n');
  const blocks = parseBlocks('p.md', md);
  const captured = new Map([
    ['infergauge memory', '\x1b[1mKV\x1b[0m 1 GiB  \nweights 2 GiB\nmore\n'],
  ]);
  const once = rewriteSamples(md, blocks, captured);
  assert.deepEqual(once.missing, []);
  assert.equal(once.text, md.replace('```\nold\n```', '```\nKV 1 GiB\nweights 2 GiB\n```'));
  const twice = rewriteSamples(once.text, parseBlocks('p.md', once.text), captured);
  assert.equal(twice.text, once.text);
  assert.deepEqual(rewriteSamples(md, blocks, new Map()).missing, [
    'p.md:6: "infergauge memory" did not run',
  ]);
});
