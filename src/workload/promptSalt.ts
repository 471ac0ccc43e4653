/**
 * The prompt salt: a per-run number mixed into every generated prompt text, so that no two
 * runs (and no two points of a session) send the same words by accident. A server that caches
 * prefixes (vLLM V1, SGLang, llama-server's slots) would otherwise serve a later run's prefills
 * from the cache a former run filled, and its TTFT would read as an improvement. `--seed` with
 * the salt recorded in manifest.json repeats a run's prompts exactly; salt 0 is the unsalted
 * stream that runs made before salts existed. Pure: a run's fresh salt is drawn where the run
 * starts (session/target.ts randomPromptSalt).
 */
import { mix32, streamSeed } from './distributions.js';

/** The largest salt: salts are unsigned 32-bit numbers. */
export const MAX_PROMPT_SALT = 0xffff_ffff;

/**
 * The seed of a prompt-text stream (`prompts`, a probe's `probe-prompts`): the run's seed and
 * salt together. Salt 0 gives `streamSeed(seed, stream)`, the stream of unsalted runs.
 */
export function promptStreamSeed(seed: number, salt: number, stream = 'prompts'): number {
  const base = streamSeed(seed, stream);
  return salt === 0 ? base : mix32((base ^ mix32((salt ^ 0x9e3779b9) >>> 0)) >>> 0);
}

/**
 * The salt of point `index` of a session (sweep levels, probe points, capacity batches): the
 * first point keeps the run's salt (a `run` is a session of one point, so its manifest's salt
 * is the one given), later points derive theirs, so no two points send the same prompts.
 */
export function pointPromptSalt(salt: number, index: number): number {
  if (index === 0) return salt >>> 0;
  return mix32((mix32(salt >>> 0) + Math.imul(index, 0x85ebca6b)) >>> 0);
}
