import { formatWeightFormat } from '../memory/dtype.js';
import type { EngineModelOptions } from './engineModel.js';

/**
 * One line describing the simulated deployment, e.g. for the summary header: `... on 1x H100`,
 * or with data-parallel replicas `... on 2 x TP1 replicas (1x H100 each), round-robin`.
 */
export function describeEngine(engine: EngineModelOptions): string {
  const weights = engine.weights ? formatWeightFormat(engine.weights) : 'bf16';
  const tp = engine.tp ?? 1;
  const dp = engine.dp ?? 1;
  const gpus = `${tp}x ${engine.gpu.name}`;
  const where =
    dp > 1
      ? `${dp} x TP${tp} replicas (${gpus} each), ${engine.loadBalancer ?? 'round-robin'}`
      : gpus;
  return `${engine.model.name} ${weights} on ${where}`;
}

/** `2 x ` before a per-replica amount when there are replicas, else nothing. */
export function perReplica(engine: EngineModelOptions): string {
  const dp = engine.dp ?? 1;
  return dp > 1 ? `${dp} x ` : '';
}

/** The model id the built-in simulator serves for a model: `sim-<model id>`. */
export function servedModelName(modelId: string): string {
  return `sim-${modelId.replace(/[^A-Za-z0-9._-]+/g, '-')}`;
}
