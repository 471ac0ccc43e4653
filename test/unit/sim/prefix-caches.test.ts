/**
 * The simulator's prefix caches as each engine keeps them: hits at the engine's granularity,
 * what is cached when, eviction under pressure, and reset. The engine model is driven directly
 * with the keys virtual time and the HTTP simulator give it (chained hashes of the words).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { findGpuPreset, type GpuSpec } from '../../../src/memory/hardware.js';
import { findModelPreset, type ModelSpec } from '../../../src/memory/model.js';
import { BlockPool } from '../../../src/sim/blockPool.js';
import { EngineModel, type EngineModelOptions } from '../../../src/sim/engineModel.js';
import type { KvPool } from '../../../src/sim/kvPool.js';
import { promptBlockHashes } from '../../../src/sim/physical.js';
import { RadixCache } from '../../../src/sim/radixCache.js';
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
    // An empty prompt (the simulator counts words: "" is none) reuses nothing, and frees only
    // what the slot held: a reuse of -1 gave back a cell more than the buffer has.
    on.release(0, keys(w), 16, 2);
    assert.deepEqual(on.take([], 0), { slot: 0, reusedTokens: 0, freedCells: 16 });
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

  test('the host-memory cache saves a slot taken by LRU and loads the saved prompt that fits best', () => {
    const a = words('a', 40);
    const b = words('b', 40);
    const serve = (cache: SlotPromptCache, w: string[], free = Number.POSITIVE_INFINITY) => {
      const t = cache.take(keys(w), w.length, free);
      cache.release(t.slot, keys(w), w.length, 0);
      return t.reusedTokens;
    };
    // One slot, two prompts in turn: the slot never holds the next one, the host cache does.
    const host = new SlotPromptCache(1, { unified: true, cachePrompt: true, kvBytesPerToken: 1 });
    assert.deepEqual(
      [a, b, a, b].map((w) => serve(host, w)),
      [0, 0, 39, 39],
    );
    assert.deepEqual(
      host.hostCache,
      { prompts: 1, tokens: 40 },
      'a loaded prompt leaves the cache',
    );
    const none = new SlotPromptCache(1, { unified: true, cachePrompt: true, hostCacheBytes: 0 });
    assert.deepEqual(
      [a, b, a].map((w) => serve(none, w)),
      [0, 0, 0],
    );
    // 60 bytes hold one 40-token prompt at a byte a token: the oldest goes.
    const small = new SlotPromptCache(1, {
      unified: true,
      cachePrompt: true,
      hostCacheBytes: 60,
      kvBytesPerToken: 1,
    });
    const c = words('c', 40);
    assert.deepEqual(
      [a, b, c, a].map((w) => serve(small, w)),
      [0, 0, 0, 0],
    );
    assert.deepEqual(small.hostCache, { prompts: 1, tokens: 40 });
    // Too few free cells to load a longer saved prompt: the slot is cleared.
    const tight = new SlotPromptCache(1, { unified: true, cachePrompt: true, kvBytesPerToken: 1 });
    serve(tight, [...a, ...words('tail', 20)]);
    serve(tight, words('d', 10));
    assert.equal(serve(tight, [...a, ...words('tail', 20)], 5), 0);
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

/** A request through a pool alone: its hit referenced, the rest computed and cached, released. */
function cacheRequest(pool: KvPool, keys: readonly number[]): number {
  const hit = pool.lookup(keys);
  pool.acquire(keys, hit);
  pool.allocate(keys.length - hit);
  pool.publish(keys, hit, keys.length);
  pool.unreference(keys, keys.length);
  return hit;
}

const engineOf = (o: Partial<EngineModelOptions>) =>
  new EngineModel({ model: llama3, gpu: h100, ...o });

describe('each engine hits shared prefixes at its own granularity', () => {
  const shared = words('s', 17);
  const turns: Turn[] = [
    { prompt: [...shared, ...words('a', 10)], answer: words('x', 4) },
    { prompt: [...shared, ...words('b', 10)], answer: words('y', 4) },
  ];

  test('SGLang (page size 1) hits all 17 shared tokens; vLLM the one full block of 16', () => {
    assert.deepEqual(runTurns(engineOf({ personality: 'sglang' }), turns), [0, 17]);
    assert.deepEqual(runTurns(engineOf({ personality: 'vllm-v1' }), turns), [0, 16]);
    assert.deepEqual(
      runTurns(engineOf({ personality: 'sglang', prefixCaching: false }), turns),
      [0, 0],
    );
  });

  test('TensorRT-LLM: no reuse by default at the modelled release; with it, whole blocks of 64', () => {
    const long = words('t', 70);
    const two: Turn[] = [
      { prompt: [...long, ...words('a', 10)], answer: words('x', 4) },
      { prompt: [...long, ...words('b', 10)], answer: words('y', 4) },
    ];
    assert.deepEqual(runTurns(engineOf({ personality: 'trtllm' }), two), [0, 0]);
    assert.deepEqual(
      runTurns(engineOf({ personality: 'trtllm', prefixCaching: true }), two),
      [0, 64],
    );
  });

  test("SGLang caches a finished request's answer: the next turn hits prompt and answer", () => {
    const engine = engineOf({ personality: 'sglang' });
    const first: Turn = { prompt: words('u', 40), answer: words('a', 12) };
    const second: Turn = {
      prompt: [...first.prompt, ...first.answer, ...words('v', 8)],
      answer: words('b', 3),
    };
    // All but the last answer token, whose KV was never computed (kv_committed_len).
    assert.deepEqual(runTurns(engine, [first, second]), [0, 51]);
    assert.equal(engine.counters.prefixHitTokens, 51);
    assert.equal(engine.usedBlocks, 0, 'nothing held once both finished');
  });
});

describe("SGLang's radix tree", () => {
  const keys = (w: string[]) => promptBlockHashes(w, 1);

  test('evicts unlocked leaves by last access, a whole node at a time, never a locked one', () => {
    const pool = new RadixCache(30);
    const sys = words('sys', 4);
    const a = keys([...sys, ...words('a', 6)]);
    const b = keys([...sys, ...words('b', 6)]);
    const c = keys(words('c', 10));
    assert.deepEqual(
      [a, b, c].map((k) => cacheRequest(pool, k)),
      [0, 4, 0],
    );
    // Tree: sys(4) -> a(6), b(6); c(10). 26 tokens cached, 4 free. a is touched again.
    assert.equal(pool.lookup(a), 10);
    assert.equal(pool.available(), 30);
    assert.equal(pool.used(), 0);
    // A request locks c and needs 16 tokens: 4 free, then b (6, the oldest leaf), then a (6).
    pool.acquire(c, 10);
    pool.allocate(16);
    assert.equal(pool.lookup(b), 4, "b's own tokens went first");
    assert.equal(pool.lookup(a), 4, 'then a, least recently used of what was left');
    assert.equal(pool.lookup(c), 10, 'locked: kept');
    // sys is a leaf now: 4 tokens; c is locked, so 4 is all that can still be freed.
    assert.equal(pool.available(), 4);
    assert.throws(() => pool.allocate(5), /over-allocated/);
    assert.equal(pool.lookup(c), 10);
    assert.deepEqual(pool.resetPrefixCache(), { ok: false, blocksInUse: 26 });
    pool.unreference(c, 10);
    pool.release(16);
    assert.deepEqual(pool.resetPrefixCache(), { ok: true });
    assert.equal(pool.lookup(c), 0);
    assert.equal(pool.available(), 30);
  });

  test('a token computed twice at once is kept once: the second copy goes back to the pool', () => {
    const pool = new RadixCache(20);
    const k = keys(words('p', 8));
    pool.allocate(8);
    pool.allocate(8);
    pool.publish(k, 0, 8);
    pool.publish(k, 0, 8);
    assert.equal(pool.used(), 8);
    pool.unreference(k, 8);
    assert.equal(pool.used(), 8, 'still held by the other');
    pool.unreference(k, 8);
    assert.equal(pool.used(), 0);
    assert.equal(pool.lookup(k), 8);
  });
});

describe("vLLM's hashed blocks", () => {
  test("a finished request's blocks are evicted tail first", () => {
    const pool = new BlockPool(4);
    const k = promptBlockHashes(words('p', 64), 16);
    assert.equal(cacheRequest(pool, k), 0);
    pool.allocate(1);
    assert.equal(pool.lookup(k), 3, 'the last block went, the first three still hit');
  });

  test("a preempted request's own blocks (private keys) lose their tail first too", () => {
    const pool = new BlockPool(6);
    const own = [-1, -2, -3, -4];
    pool.allocate(4);
    pool.publish(own, 0, 4);
    pool.unreference(own, 4);
    assert.equal(pool.available(), 6);
    pool.allocate(3);
    assert.equal(pool.lookup(own), 3, 'one block evicted, from the end');
    pool.acquire(own, 3);
    assert.equal(pool.available(), 0);
    pool.unreference(own, 3);
    pool.release(3);
    assert.equal(pool.available(), 6);
  });
});

describe('reset, as each engine resets (or refuses)', () => {
  const turn: Turn = { prompt: words('r', 40), answer: words('o', 4) };
  for (const personality of ['vllm-v1', 'sglang', 'llamacpp'] as const) {
    test(`${personality}: refused while a request runs; afterwards nothing hits`, () => {
      const engine = engineOf({
        personality,
        ...(personality === 'llamacpp' ? { ctxTokens: 4096 } : {}),
      });
      assert.deepEqual(
        runTurns(engine, [turn, turn]).map((h) => h > 0),
        [false, true],
      );
      engine.add(
        {
          arrivalNs: engine.now,
          promptTokens: 40,
          maxTokens: 4,
          blockHashes: promptBlockHashes(turn.prompt, engine.config.blockSize),
        },
        { onToken: () => {} },
      );
      if (personality === 'sglang') {
        // SGLang's flush_cache refuses even while the request only waits.
        assert.match(
          String((engine.resetPrefixCache() as { reason: string }).reason),
          /pending requests/,
        );
      }
      engine.advanceTo(engine.nextWorkNs() as number);
      engine.step();
      const refused = engine.resetPrefixCache();
      assert.equal(refused.ok, false);
      while (engine.runningCount > 0) {
        engine.advanceTo(engine.nextWorkNs() as number);
        engine.step();
      }
      assert.deepEqual(engine.resetPrefixCache(), { ok: true });
      assert.equal(engine.usedBlocks, 0);
      assert.deepEqual(runTurns(engine, [turn]), [0]);
    });
  }
});

test('llama.cpp with one shared buffer: an idle slot is purged when a prompt needs its cells', () => {
  const engine = engineOf({ personality: 'llamacpp', ctxTokens: 1024 });
  const a: Turn = { prompt: words('a', 900), answer: words('x', 10) };
  const b: Turn = { prompt: words('b', 900), answer: words('y', 10) };
  runTurns(engine, [a]);
  assert.equal(engine.usedBlocks, 909, 'the idle slot keeps its cells');
  runTurns(engine, [b]);
  assert.equal(engine.usedBlocks, 909, "a's slot was purged; b's cells are kept in its place");
  assert.deepEqual(runTurns(engine, [a]), [0], 'so a finds nothing');
});

describe('under pressure, every cache stays consistent', () => {
  for (const personality of ['vllm-v1', 'sglang', 'trtllm', 'llamacpp'] as const) {
    test(`${personality}: 150 requests over shared prefixes in a small pool all finish and leave it empty`, () => {
      // A pool of a few requests' worth: 1,024 to 2,048 tokens.
      const blocks = { 'vllm-v1': 64, sglang: 2048, trtllm: 32 } as const;
      const engine = engineOf({
        personality,
        prefixCaching: true,
        maxModelLen: 1024,
        ...(personality === 'llamacpp'
          ? { ctxTokens: 2048 }
          : { numGpuBlocksOverride: blocks[personality] }),
        ...(personality === 'sglang' ? { maxNumSeqs: 8 } : {}),
      });
      let seed = 7;
      const rand = (n: number) => {
        seed = (seed * 1103515245 + 12345) >>> 0;
        // The high bits: an LCG's low bits repeat with a short period.
        return (seed >>> 16) % n;
      };
      const prefixes = Array.from({ length: 4 }, (_, i) => words(`p${i}x`, 50 + 40 * i));
      let finished = 0;
      const total = 150;
      for (let r = 0; r < total; r++) {
        const prompt = [
          ...prefixes[rand(4)].slice(0, 20 + rand(150)),
          ...words(`t${r}x`, 1 + rand(60)),
        ];
        const answer = words(`o${r}x`, 1 + rand(30));
        engine.add(
          {
            arrivalNs: r * 2e6,
            promptTokens: prompt.length,
            maxTokens: answer.length,
            blockHashes: promptBlockHashes([...prompt, ...answer], engine.config.blockSize),
          },
          { onToken: (_at, _i, last) => void (last && finished++) },
        );
      }
      for (let guard = 0; finished < total && guard < 1e6; guard++) {
        const next = engine.nextWorkNs();
        if (next === undefined) break;
        engine.advanceTo(next);
        engine.step();
      }
      assert.equal(finished, total);
      assert.ok(engine.counters.prefixHitTokens > 0, 'shared prefixes hit');
      assert.ok(engine.counters.prefixHitTokens < engine.counters.prefixQueryTokens);
      if (personality !== 'llamacpp') assert.equal(engine.usedBlocks, 0, 'nothing held');
      assert.deepEqual(engine.resetPrefixCache(), { ok: true });
      assert.equal(engine.usedBlocks, 0);
    });
  }
});
