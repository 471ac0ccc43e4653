import { CONTENT_ONLY_CHAT_TEMPLATE, cachedLlamaModel } from '../../tools/llama/model.js';

/**
 * The one model every test against llama-server loads: 125M parameters in q8_0 with seeded
 * random weights, whose chat template adds no markers (a chat prompt of N words is N + 1
 * tokens, as a completion's). Written once into the cache and shared by the files that use it.
 */
export function testLlamaModel(): Promise<string> {
  return cachedLlamaModel({ preset: '125m', seed: 1, chatTemplate: CONTENT_ONLY_CHAT_TEMPLATE });
}
