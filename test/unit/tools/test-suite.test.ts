/**
 * The pieces npm test (tools/test/run.ts) stands on: the repository root found from a file's
 * source and from its compiled copy alike, the mirror's paths, and the turn that the files which
 * run alone wait for.
 */
import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { REPO } from '../../../tools/repo.js';
import { BUILD, compiledPath, sourcePath, testFiles } from '../../../tools/test/suite.js';
import { runAlone } from '../../helpers/alone.js';
import { tempDir } from '../../helpers/cli.js';

describe('the test suite', () => {
  test('the root is the checkout, whether this file runs from source or compiled', () => {
    const self = fileURLToPath(import.meta.url);
    assert.ok(self.startsWith(REPO), `${self} is under ${REPO}`);
    for (const f of ['package.json', 'tsconfig.json', 'test/helpers/alone.ts']) {
      assert.ok(existsSync(join(REPO, f)), `${f} in ${REPO}`);
    }
  });

  test('every test file is listed once, and maps to its compiled copy and back', () => {
    const files = testFiles();
    assert.equal(new Set(files).size, files.length);
    assert.ok(files.includes(join(REPO, 'test/unit/tools/test-suite.test.ts')));
    assert.ok(files.every((f) => f.endsWith('.test.ts')));
    const source = join(REPO, 'test/cli/cli.test.ts');
    assert.equal(compiledPath(source), join(BUILD, 'test/cli/cli.test.js'));
    assert.equal(sourcePath(compiledPath(source)), source);
  });

  test('runAlone waits until the turn names this file, and not when no suite passes turns', async () => {
    const saved = process.env.INFERGAUGE_TEST_TURN;
    const turn = join(tempDir('ig-turn-'), 'turn');
    const self = pathToFileURL(join(REPO, 'test/integration/accuracy.test.ts')).href;
    try {
      delete process.env.INFERGAUGE_TEST_TURN;
      await runAlone(self);
      process.env.INFERGAUGE_TEST_TURN = turn;
      writeFileSync(turn, join(REPO, 'test/integration/llama-server.test.ts'));
      let started = false;
      const waiting = runAlone(self).then(() => {
        started = true;
      });
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(started, false, "another file's turn");
      writeFileSync(turn, fileURLToPath(self));
      await waiting;
      assert.equal(started, true);
    } finally {
      if (saved === undefined) delete process.env.INFERGAUGE_TEST_TURN;
      else process.env.INFERGAUGE_TEST_TURN = saved;
    }
  });
});
