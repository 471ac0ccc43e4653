import { getPriority, setPriority } from 'node:os';
import { CONTENT_ONLY_CHAT_TEMPLATE, cachedLlamaModel } from '../../tools/llama/model.js';
import type { LlamaServerPriority } from '../../tools/llama/server.js';

/**
 * The one model every test against llama-server loads: 125M parameters in q8_0 with seeded
 * random weights, whose chat template adds no markers (a chat prompt of N words is N + 1
 * tokens, as a completion's). Written once into the cache and shared by the files that use it.
 */
export function testLlamaModel(): Promise<string> {
  return cachedLlamaModel({ preset: '125m', seed: 1, chatTemplate: CONTENT_ONLY_CHAT_TEMPLATE });
}

/**
 * The nice a test that times llama-server starts it at, and raises its own main thread to (the
 * client's event loop stamps the times), in tests only. At -20 a thread weighs 88761 against a
 * nice-0 job's 1024 in the kernel's fair scheduler: about 95 % of a core against four runnable
 * neighbours (at -10, 9548: 70 %), so what is timed is the engine and the client, not the
 * neighbour. With the engine alone raised, its one compute thread took a core and the client,
 * sharing the other with the neighbours, read TTFT 37 ms over llama-server's prompt time.
 */
export const ENGINE_NICE = -20;

/** One line for a test's output: the priority the server runs at, and why not the one asked. */
export function describePriority(p: LlamaServerPriority): string {
  const at = p.nice === undefined ? 'at an unknown nice (no /proc)' : `at nice ${p.nice}`;
  if (p.refused) {
    return `llama-server ${at}: nice ${p.requested} refused (${p.refused}); a CPU-bound neighbour now slows what is timed`;
  }
  return `llama-server ${at}${p.requested !== undefined && p.nice !== p.requested ? ` (asked ${p.requested})` : ''}`;
}

/**
 * Raises this test process's main thread (and the threads it starts after) to ENGINE_NICE, for
 * a file that times llama-server; returns the line to print and a function that restores it.
 */
export function raiseClientPriority(): { line: string; restore: () => void } {
  const own = getPriority();
  try {
    setPriority(ENGINE_NICE);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    return {
      line: `client at nice ${own}: nice ${ENGINE_NICE} refused (${code}; needs root or CAP_SYS_NICE)`,
      restore: () => {},
    };
  }
  return { line: `client at nice ${ENGINE_NICE}`, restore: () => setPriority(own) };
}
