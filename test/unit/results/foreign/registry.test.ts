/**
 * The registry finds llm-d's Benchmark Report by content beside the other formats, and refuses a
 * YAML document nested past any result file before its parser recurses into it.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseForeign } from '../../../../src/results/foreign/index.js';
import { REPO } from '../../../../tools/repo.js';

test('an llm-d Benchmark Report is read through the registry as a summary-only run', () => {
  const path = join(REPO, 'test/fixtures/llm-d/br_v0_2_1_example.yaml');
  const [run] = parseForeign(readFileSync(path, 'utf8'), path);
  assert.equal(run.format, 'llm-d');
  assert.equal(run.perRequest, false);
  assert.ok(run.summary.requests.completed > 0);
});

test('a YAML document nested thousands deep is refused before it is parsed', () => {
  const deep = `${Array.from({ length: 5000 }, (_, i) => `${'  '.repeat(i)}k${i}:`).join('\n')} 1\n`;
  assert.throws(() => parseForeign(deep, 'deep.yaml'), /deep\.yaml: nested over 100 levels deep/);
});
