import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The repository's root, the same from a file's source (run through tsx) and from its compiled
 * copy in `.test-build/` (tools/test/suite.ts), which mirrors the tree but holds no
 * tsconfig.json: paths to fixtures, docs and sources go through it, not through the file's own
 * place.
 */
export const REPO: string = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'tsconfig.json'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error(`no tsconfig.json above ${fileURLToPath(import.meta.url)}`);
    dir = up;
  }
  return dir;
})();
