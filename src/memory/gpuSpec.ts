import type { GpuSpec } from './hardware.js';

/** Reads a GPU described in a YAML or JSON file (`--gpu-spec`), validated with clear errors. */
export function loadGpuSpec(path: string): GpuSpec {
  throw new Error(`reading ${path}: --gpu-spec is not built yet`);
}
