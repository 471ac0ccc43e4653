/**
 * Virtual time keys a trace's prompts by their block ids (TraceBlockKeys), where the HTTP
 * simulator hashes the words of prompts built from the same ids (promptBlockHashes): two
 * requests must share an engine block under one exactly when they share it under the other.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createRng } from '../../../src/rng.js';
import { promptBlockHashes } from '../../../src/sim/physical.js';
import { TraceBlockKeys, tracePrefixKeys } from '../../../src/sim/traceKeys.js';

/** A prompt as an HTTP replay builds it: block j's text is its id's, the last block cut short. */
function promptWords(ids: readonly number[], tokens: number, traceBlock: number): string[] {
  const words: string[] = [];
  for (let t = 0; t < tokens; t++) {
    const j = Math.floor(t / traceBlock);
    words.push(`b${ids[j]}_${t % traceBlock}`);
  }
  return words;
}

/** The simulator's answer words depend only on their place. */
const answer = (n: number) => Array.from({ length: n }, (_, i) => `a${i}`);

interface Req {
  ids: number[];
  prompt: number;
  output: number;
}

/** Requests whose ids form a tree (chains that share a start, then part), with odd lengths. */
function randomTrace(seed: number, traceBlock: number, n: number): Req[] {
  const rng = createRng(seed);
  const reqs: Req[] = [];
  let nextId = 0;
  for (let i = 0; i < n; i++) {
    const base = reqs.length > 0 && rng.next() < 0.7 ? reqs[rng.int(reqs.length)] : undefined;
    const keep = base ? rng.int(base.ids.length + 1) : 0;
    const ids = base ? base.ids.slice(0, keep) : [];
    const blocks = Math.max(1, keep + rng.int(4));
    // Sometimes a chain is reused whole with a different length (an id names a block's text).
    while (ids.length < blocks) ids.push(nextId++);
    const full = base && rng.next() < 0.3 && keep === base.ids.length && blocks === keep;
    const prompt = full ? base.prompt : (blocks - 1) * traceBlock + 1 + rng.int(traceBlock);
    reqs.push({ ids, prompt, output: 1 + rng.int(3 * traceBlock) });
  }
  return reqs;
}

test('two requests share an engine block under the trace keys exactly when their words do', () => {
  for (const [engineBlock, traceBlock] of [
    [16, 64],
    [5, 24],
    [7, 7],
    [9, 4],
  ]) {
    for (const seed of [1, 2, 3]) {
      const reqs = randomTrace(seed, traceBlock, 60);
      const keys = new TraceBlockKeys(engineBlock, traceBlock);
      const byIds = reqs.map((r) => keys.keys(r.ids, r.prompt, r.output));
      const byWords = reqs.map((r) =>
        promptBlockHashes(
          [...promptWords(r.ids, r.prompt, traceBlock), ...answer(r.output)],
          engineBlock,
        ),
      );
      let shared = 0;
      for (let a = 0; a < reqs.length; a++) {
        assert.equal(byIds[a].length, byWords[a].length, `request ${a}: one key per full block`);
        for (let b = 0; b < a; b++) {
          for (let k = 0; k < Math.min(byIds[a].length, byIds[b].length); k++) {
            const sameWords = byWords[a][k] === byWords[b][k];
            if (sameWords) shared++;
            assert.equal(
              byIds[a][k] === byIds[b][k],
              sameWords,
              `b ${engineBlock}, B ${traceBlock}, seed ${seed}: requests ${b} and ${a}, block ${k}`,
            );
          }
        }
      }
      assert.ok(shared > 0, 'the trace shares blocks (the test tests something)');
    }
  }
});

test('an engine block across two trace blocks is shared only when both are', () => {
  // b 16, B 24: engine block 1 holds tokens 16..31, in trace blocks 0 and 1.
  const keys = new TraceBlockKeys(16, 24);
  const a = keys.keys([1, 2], 48, 0);
  const b = keys.keys([1, 3], 48, 0);
  assert.equal(a.length, 3);
  assert.equal(a[0], b[0]);
  assert.notEqual(a[1], b[1]);
  assert.notEqual(a[2], b[2]);
});

test('the same id after different blocks is a different block (ids are chained here)', () => {
  const keys = new TraceBlockKeys(16, 32);
  const a = keys.keys([1, 9], 64, 0);
  const b = keys.keys([2, 9], 64, 0);
  assert.notEqual(a[2], b[2]);
  assert.notEqual(a[3], b[3]);
});

test('no ids, or a prompt past its ids: nothing is shared past what the ids name', () => {
  const keys = new TraceBlockKeys(16, 32);
  const none1 = keys.keys(undefined, 64, 16);
  const none2 = keys.keys(undefined, 64, 16);
  assert.equal(none1.length, 5);
  assert.ok(none1.every((k) => !none2.includes(k)));
  // 100 tokens on one 32-token id: the first two blocks are named, the rest are its own.
  const over1 = keys.keys([5], 100, 0);
  const over2 = keys.keys([5], 100, 0);
  assert.deepEqual(over1.slice(0, 2), over2.slice(0, 2));
  assert.notEqual(over1[2], over2[2]);
  for (const k of [...none1, ...over1]) assert.ok(Number.isSafeInteger(k) && k > 0);
});

test('tracePrefixKeys: none for a trace without ids; entry id for request id', () => {
  assert.equal(tracePrefixKeys([{}, {}], 16, 512), undefined);
  const f = tracePrefixKeys([{ hashIds: [1] }, { hashIds: [1] }, {}], 16, 512);
  assert.ok(f);
  const spec = { requestedOutputTokens: 1 };
  assert.deepEqual(f(0, spec, 100), f(1, spec, 100));
  assert.equal(f(2, spec, 100).length, 6);
});

// --trace-block-tokens takes any whole number: a huge one must not hand out keys past 2^53,
// where distinct keys round to one and unrelated prompts would share blocks.
test('a huge trace block size keeps every key distinct and safe', () => {
  const keys = new TraceBlockKeys(16, 1e15);
  const seen = new Set<number>();
  for (let r = 0; r < 300; r++) {
    for (const key of keys.keys([r], 64, 0)) {
      assert.ok(Number.isSafeInteger(key), `${key}`);
      assert.ok(!seen.has(key), `key ${key} handed out twice`);
      seen.add(key);
    }
  }
  assert.deepEqual(keys.keys([7], 64, 0), keys.keys([7], 64, 0), 'the same ids, the same keys');
});
