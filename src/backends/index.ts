import { openaiBackend } from './openai.js';
import type { Backend } from './types.js';

/** Every wire protocol infergauge speaks, by its `--backend` name. */
export const BACKENDS = {
  openai: openaiBackend,
} as const satisfies Record<string, Backend>;

export type BackendName = keyof typeof BACKENDS;
export const BACKEND_NAMES = Object.keys(BACKENDS) as BackendName[];
