/**
 * The simulator's prefix caches as each engine keeps them: hits at the engine's granularity,
 * what is cached when, eviction under pressure, and reset. The engine model is driven directly
 * with the keys virtual time and the HTTP simulator give it (chained hashes of the words).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { findGpuPreset, type GpuSpec } from '../../../src/memory/hardware.js';
import { findModelPreset, type ModelSpec } from '../../../src/memory/model.js';
import { EngineModel, type EngineModelOptions } from '../../../src/sim/engineModel.js';
import { promptBlockHashes } from '../../../src/sim/physical.js';
import { commonPrefixLength, SlotPromptCache } from '../../../src/sim/slotCache.js';

const h100 = findGpuPreset('h100') as GpuSpec;
const llama3 = findModelPreset('llama-3-8b') as ModelSpec;

/** `n` distinct words named after `tag`. */
const words = (tag: string, n: number): string[] =>
  Array.from({ length: n }, (_, i) => `${tag}${i}`);

interface Turn {
  /** The prompt's words. */
  prompt: string[];
  /** The answer's words (their count is the output length). */
  answer: string[];
}

/**
 * Runs each turn alone, one after the other, as virtual time keys them (the prompt's words,
 * then the answer's: wire.ts); returns the cached prompt tokens each one found.
 */
function runTurns(engine: EngineModel, turns: readonly Turn[]): number[] {
  const hits: number[] = [];
  for (const turn of turns) {
    let done = false;
    const seq = engine.add(
      {
        arrivalNs: engine.now,
        promptTokens: turn.prompt.length,
        maxTokens: turn.answer.length,
        blockHashes: promptBlockHashes([...turn.prompt, ...turn.answer], engine.config.blockSize),
      },
      { onToken: (_at, _i, last) => (done ||= last) },
    );
    while (!done) {
      const next = engine.nextWorkNs();
      if (next === undefined) throw new Error('engine stalled');
      engine.advanceTo(next);
      engine.step();
    }
    hits.push(seq.prefixHitTokens);
  }
  return hits;
}

describe('commonPrefixLength: chained keys share a prefix, found by bisection', () => {
  test('counts the leading equal keys, within the limit', () => {
    const a = promptBlockHashes(['a', 'b', 'c', 'd'], 1);
    const b = promptBlockHashes(['a', 'b', 'x', 'd'], 1);
    assert.equal(commonPrefixLength(a, b), 2);
    assert.equal(commonPrefixLength(a, a), 4);
    assert.equal(commonPrefixLength(a, a, 3), 3);
    assert.equal(commonPrefixLength(a, a.slice(0, 1)), 1);
    assert.equal(commonPrefixLength(a, []), 0);
  });
});

describe("llama.cpp: each slot keeps its last request's tokens", () => {
  const keys = (w: string[]) => promptBlockHashes(w, 1);

  test('a prompt takes the idle slot sharing the largest share of it, above 0.1', () => {
    const slots = new SlotPromptCache(3, { unified: true, cachePrompt: true });
    // Never used: equals, of which llama.cpp's `<=` takes the last.
    assert.deepEqual(
      [0, 1, 2].map(() => slots.take(undefined, 10).slot),
      [2, 1, 0],
    );
    const sys = words('sys', 20);
    slots.release(2, keys(words('c', 40)), 40, 1);
    slots.release(1, keys([...sys.slice(0, 5), ...words('b', 35)]), 40, 2);
    slots.release(0, keys([...sys, ...words('a', 20)]), 40, 3);
    // 20 of 30 tokens shared with slot 0, 5 with slot 1: slot 0, the most recently released.
    const t = slots.take(keys([...sys, ...words('q', 10)]), 30);
    assert.deepEqual(t, { slot: 0, reusedTokens: 20, freedCells: 20 });
    // 1 token of 30 shared with slot 1 (below 0.1): the least recently released idle slot, 2.
    const lru = slots.take(keys([...sys.slice(0, 1), ...words('r', 29)]), 30);
    assert.deepEqual(lru, { slot: 2, reusedTokens: 0, freedCells: 40 });
  });

  test('a wholly cached prompt recomputes its last token; cache_prompt off reuses nothing', () => {
    const w = words('p', 16);
    const on = new SlotPromptCache(1, { unified: true, cachePrompt: true });
    on.take(undefined, 16);
    on.release(0, keys(w), 16, 1);
    assert.deepEqual(on.take(keys(w), 16), { slot: 0, reusedTokens: 15, freedCells: 1 });
    const off = new SlotPromptCache(1, { unified: true, cachePrompt: false });
    off.take(undefined, 16);
    off.release(0, keys(w), 16, 1);
    assert.deepEqual(off.take(keys(w), 16), { slot: 0, reusedTokens: 0, freedCells: 16 });
  });

  test('under pressure idle slots are purged one by one in slot order, with a unified buffer only', () => {
    const unified = new SlotPromptCache(2, { unified: true, cachePrompt: true });
    const split = new SlotPromptCache(2, { unified: false, cachePrompt: true });
    for (const s of [unified, split]) {
      s.take(undefined, 8);
      s.take(undefined, 8);
      s.release(1, keys(words('x', 8)), 8, 1);
      s.release(0, keys(words('y', 8)), 6, 2);
    }
    assert.equal(unified.idleCells, 14);
    assert.equal(unified.purgeIdle(), 6);
    assert.equal(unified.purgeIdle(), 8);
    assert.equal(unified.purgeIdle(), 0);
    assert.equal(split.purgeIdle(), 0, 'a stream per slot: nothing to purge for another slot');
  });

  test('a multi-turn follow-up reuses its previous prompt and answer on the same slot', () => {
    const engine = new EngineModel({
      model: llama3,
      gpu: h100,
      personality: 'llamacpp',
      ctxTokens: 8192,
    } satisfies EngineModelOptions);
    const first: Turn = { prompt: words('u', 100), answer: words('a', 20) };
    const second: Turn = {
      prompt: [...first.prompt, ...first.answer, ...words('v', 30)],
      answer: words('b', 5),
    };
    const hits = runTurns(engine, [first, second]);
    // The slot holds the prompt and all but the last answer token (it was never decoded).
    assert.deepEqual(hits, [0, 119]);
    assert.equal(engine.counters.prefixQueryTokens, 100 + 150);
    assert.equal(engine.counters.prefixHitTokens, 119);
    const off = new EngineModel({
      model: llama3,
      gpu: h100,
      personality: 'llamacpp',
      ctxTokens: 8192,
      prefixCaching: false,
    });
    assert.deepEqual(runTurns(off, [first, second]), [0, 0]);
  });
});
