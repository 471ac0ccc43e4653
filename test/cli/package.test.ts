/**
 * The package ships what its README and docs link to: once installed from the tarball, every
 * relative link in README.md and docs/*.md still leads to a file (npm's `files` list, plus what
 * npm always packs), and the license package.json names is there.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import { test } from 'node:test';
import { REPO } from '../../tools/repo.js';

const pkg = JSON.parse(readFileSync(resolve(REPO, 'package.json'), 'utf8')) as {
  files: string[];
  license: string;
};

/** Whether npm packs `file` (relative to the root): always-packed names, or under `files`. */
function shipped(file: string): boolean {
  if (['package.json', 'README.md', 'LICENSE'].includes(file)) return true;
  return pkg.files.some((entry) => file === entry || file.startsWith(`${entry}/`));
}

test('every relative link of README.md and docs/*.md leads to a file the package ships', () => {
  const pages = [
    'README.md',
    ...readdirSync(resolve(REPO, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ];
  const missing: string[] = [];
  for (const page of pages) {
    assert.ok(shipped(page), `${page} is not in package.json files`);
    const markdown = readFileSync(resolve(REPO, page), 'utf8');
    for (const [, target] of markdown.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target) || target.startsWith('#')) continue;
      const file = relative(REPO, resolve(dirname(resolve(REPO, page)), target.split('#')[0]));
      if (file.startsWith('..') || !shipped(file)) missing.push(`${page}: ${target}`);
    }
  }
  assert.deepEqual(missing, [], `links to files not in the package:\n  ${missing.join('\n  ')}`);
});

test('the Apache-2.0 license package.json names is the LICENSE file', () => {
  assert.equal(pkg.license, 'Apache-2.0');
  const text = readFileSync(resolve(REPO, 'LICENSE'), 'utf8');
  assert.match(text, /^\s+Apache License\n\s+Version 2\.0, January 2004/);
  assert.match(text, /END OF TERMS AND CONDITIONS/);
  assert.match(text, /Copyright the infergauge authors/);
  for (const entry of pkg.files)
    assert.ok(existsSync(resolve(REPO, entry)) || entry === 'dist', entry);
});
