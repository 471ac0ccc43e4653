/**
 * The block pool's reset, as vLLM's `BlockPool.reset_prefix_cache`: refused while a block is in
 * use, else every cached block forgotten and its space free; and the engine's prime, which
 * leaves a prompt's blocks cached as a request that ended would.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { findGpuPreset, type GpuSpec } from '../../../src/memory/hardware.js';
import { findModelPreset, type ModelSpec } from '../../../src/memory/model.js';
import { BlockPool } from '../../../src/sim/blockPool.js';
import { EngineModel } from '../../../src/sim/engineModel.js';

test('a reset is refused while blocks are in use, then forgets every cached block', () => {
  const pool = new BlockPool(10);
  const hashes = [11, 12, 13];
  pool.allocate(3);
  pool.publish(hashes, 0, 3);
  assert.deepEqual(pool.resetPrefixCache(), { ok: false, blocksInUse: 3 });
  assert.equal(pool.lookup(hashes), 3, 'a refused reset changes nothing');
  pool.unreference(hashes, 3);
  assert.equal(pool.lookup(hashes), 3, 'freed blocks stay cached until space is needed');
  assert.deepEqual(pool.resetPrefixCache(), { ok: true });
  assert.equal(pool.lookup(hashes), 0);
  assert.equal(pool.available(), 10);
  // The pool works on: all ten blocks can be handed out, none of them a stale cached one.
  pool.allocate(10);
  assert.equal(pool.used(), 10);
});

test("the engine's prime leaves a prompt's blocks cached, idle and uncounted", () => {
  const engine = new EngineModel({
    model: findModelPreset('llama-3.1-8b') as ModelSpec,
    gpu: findGpuPreset('h100') as GpuSpec,
  });
  const hashes = [101, 102, 103, 104];
  engine.warmPrefixCache(hashes);
  engine.warmPrefixCache(hashes.slice(0, 2));
  assert.equal(engine.usedBlocks, 0, 'cached, not in use');
  assert.equal(engine.counters.prefixQueryTokens, 0);
  assert.equal(engine.canResetPrefixCache(), undefined);
  assert.deepEqual(engine.resetPrefixCache(), { ok: true });
});
