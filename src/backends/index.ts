import { llamaCppBackend } from './llamacpp.js';
import { ollamaBackend } from './ollama.js';
import { openaiBackend } from './openai.js';
import { sglangBackend } from './sglang.js';
import { tgiBackend } from './tgi.js';
import { tritonBackend } from './triton.js';
import type { Backend } from './types.js';

/** Every wire protocol infergauge speaks, by its `--backend` name. */
export const BACKENDS = {
  openai: openaiBackend,
  llamacpp: llamaCppBackend,
  tgi: tgiBackend,
  triton: tritonBackend,
  ollama: ollamaBackend,
  sglang: sglangBackend,
} as const satisfies Record<string, Backend>;

export type BackendName = keyof typeof BACKENDS;
export const BACKEND_NAMES = Object.keys(BACKENDS) as BackendName[];
