/**
 * requireCached (src/codeCache.ts): a CommonJS bundle loaded as require would, compiled from its
 * V8 code cache once one was saved; a cache that is not private to this user, or that V8 refuses,
 * is not used (and a refused one is written again).
 */
import assert from 'node:assert/strict';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { defaultCodeCacheDir, requireCached } from '../../src/codeCache.js';

const root = mkdtempSync(join(tmpdir(), 'infergauge-code-cache-'));
after(() => rmSync(root, { recursive: true, force: true }));

let copies = 0;

/**
 * A bundle with a function big enough that V8 keeps its compiled code in the cache, at a new
 * path each call: V8 reuses a script it compiled before in this process (same source, same
 * name) without reading the cache, so each load is of a new copy, under the same file name.
 */
function bundle(name: string): string {
  const folder = join(root, `copy-${++copies}`);
  mkdirSync(folder);
  const path = join(folder, name);
  const body = Array.from({ length: 200 }, (_, i) => `s += x * ${i};`).join('\n');
  writeFileSync(
    path,
    `const { join } = require('node:path');\nmodule.exports = { sum(x) { let s = 0; ${body} return s; }, self: join('a', 'b'), file: __filename, thisIsExports: this === exports };\n`,
  );
  return path;
}

test('a bundle loads as require loads it, then from the cache saved after its use', () => {
  const path = bundle('a.js');
  const dir = join(root, 'cache-a');
  const first = requireCached(path, dir);
  const m = first.exports as {
    sum(x: number): number;
    self: string;
    file: string;
    thisIsExports: boolean;
  };
  assert.equal(m.sum(1), 19_900);
  assert.deepEqual([m.self, m.file, m.thisIsExports], [join('a', 'b'), path, true]);
  assert.equal(first.fromCache, false);
  first.save();
  const [file] = readdirSync(dir);
  assert.ok(file?.startsWith('a.js-'), `no cache file in ${dir}`);
  if (process.platform !== 'win32') {
    assert.equal(statSync(dir).mode & 0o777, 0o700);
    assert.equal(statSync(join(dir, file)).mode & 0o777, 0o600);
  }
  const second = requireCached(bundle('a.js'), dir);
  assert.equal(second.fromCache, true);
  assert.equal((second.exports as typeof m).sum(2), 39_800);
});

test('a cache others may write is not read; a damaged one is refused by V8 and written again', {
  skip: process.platform === 'win32',
}, () => {
  const dir = join(root, 'cache-b');
  const load = () => requireCached(bundle('b.js'), dir);
  load().save();
  const file = join(dir, readdirSync(dir)[0] as string);
  chmodSync(file, 0o666);
  assert.equal(load().fromCache, false);
  chmodSync(file, 0o600);
  assert.equal(load().fromCache, true);
  writeFileSync(file, Buffer.alloc(4096, 7), { mode: 0o600 });
  const refused = load();
  assert.equal(refused.fromCache, false);
  assert.equal((refused.exports as { sum(x: number): number }).sum(1), 19_900);
  refused.save();
  assert.equal(load().fromCache, true);
});

test('the cache folder: INFERGAUGE_CACHE, and none when turned off', () => {
  assert.equal(defaultCodeCacheDir({ INFERGAUGE_CACHE: '/c' }), join('/c', 'code-cache'));
  assert.equal(
    defaultCodeCacheDir({ INFERGAUGE_CACHE: '/c', INFERGAUGE_CODE_CACHE: 'off' }),
    undefined,
  );
});
