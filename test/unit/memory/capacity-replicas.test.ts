import assert from 'node:assert/strict';
import { test } from 'node:test';
import { predictCapacity } from '../../../src/memory/capacity.js';
import { planVllmMemory } from '../../../src/memory/footprint.js';
import { findGpuPreset, type GpuSpec } from '../../../src/memory/hardware.js';
import { findModelPreset, type ModelSpec } from '../../../src/memory/model.js';
import { resolveEngineConfig } from '../../../src/sim/engineModel.js';

test('capacity with data-parallel replicas: each holds whole sequences in its own pool', () => {
  const config = resolveEngineConfig({
    model: findModelPreset('llama-3.1-8b') as ModelSpec,
    gpu: findGpuPreset('rtx4090') as GpuSpec,
    maxModelLen: 8192,
    dp: 3,
  });
  const plan = planVllmMemory(config);
  const one = predictCapacity(plan, 2304, config.blockSize);
  const three = predictCapacity(plan, 2304, config.blockSize, config.dp);
  assert.equal(three.numGpuBlocks, 3 * one.numGpuBlocks);
  assert.equal(three.blocksPerSequence, one.blocksPerSequence);
  // Not floor(3 x blocks / per sequence): a sequence cannot span two replicas' pools.
  assert.equal(three.maxBatch, 3 * one.maxBatch);
  assert.ok(
    3 * plan.numGpuBlocks - three.maxBatch * three.blocksPerSequence < 3 * three.blocksPerSequence,
  );
});
