import { formatWeightFormat } from '../memory/dtype.js';
import type { EngineModelOptions } from './engineModel.js';

/** One line describing the simulated deployment, e.g. for the summary header. */
export function describeEngine(engine: EngineModelOptions): string {
  const weights = engine.weights ? formatWeightFormat(engine.weights) : 'bf16';
  return `${engine.model.name} ${weights} on ${engine.tp ?? 1}x ${engine.gpu.name}`;
}

/** The model id the built-in simulator serves for a model: `sim-<model id>`. */
export function servedModelName(modelId: string): string {
  return `sim-${modelId.replace(/[^A-Za-z0-9._-]+/g, '-')}`;
}
