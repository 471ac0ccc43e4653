/**
 * What some test files need and a fresh machine takes minutes to get: llama-server built from
 * source (and the model it loads), Debian's chromium. tools/test/run.ts starts this in the
 * background at the lowest CPU priority before the test files, so the other files run beside
 * it; the files that need these things ask for them too, and wait for this process's work
 * (a lock file, dpkg's lock) instead of doing it again.
 *
 *   node --import tsx tools/test/prepare.ts [--llama-server] [--chromium]
 *
 * Prints one JSON line at the end (Prepared): how long a build took, and what failed.
 */
import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { testLlamaModel } from '../../test/helpers/llama.js';
import { ensureChromium } from '../browser/chromium.js';
import { ensureLlamaServer, llamaServerPath } from '../llama/build.js';

export interface Prepared {
  llamaServer?: { builtS?: number; error?: string };
  chromium?: { error?: string };
}

const { values } = parseArgs({
  options: { 'llama-server': { type: 'boolean' }, chromium: { type: 'boolean' } },
});

const prepared: Prepared = {};
const tasks: Promise<void>[] = [];
if (values['llama-server']) {
  tasks.push(
    (async () => {
      const cached = existsSync(llamaServerPath());
      const started = Date.now();
      try {
        await Promise.all([ensureLlamaServer(), testLlamaModel()]);
        prepared.llamaServer = cached ? {} : { builtS: (Date.now() - started) / 1000 };
      } catch (err) {
        prepared.llamaServer = { error: (err as Error).message };
      }
    })(),
  );
}
if (values.chromium) {
  tasks.push(
    (async () => {
      prepared.chromium = (await ensureChromium()) ? {} : { error: 'chromium is unavailable' };
    })(),
  );
}
await Promise.all(tasks);
process.stdout.write(`${JSON.stringify(prepared)}\n`);
