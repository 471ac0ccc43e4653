/**
 * `infergauge ui [DIR]` (issue 52): a folder of results is listed (the outermost results
 * directories only, names escaped), each linking to its report, rendered from its records when
 * it has no report.html; one results directory is served as its report; off loopback the token
 * rule holds, and nothing but a listed index names a directory.
 */
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { listResults, serveResults } from '../../../../src/session/outputs/uiResults.js';
import { REPO } from '../../../../tools/repo.js';
import { tempDir } from '../../../helpers/cli.js';

const FIXTURES = join(REPO, 'test/fixtures/report');
const HOSTILE = '<img src=x onerror=alert(1)>';

async function get(url: string): Promise<{ status: number; body: string }> {
  const res = await fetch(url);
  return { status: res.status, body: await res.text() };
}

function resultsRoot(): string {
  const root = tempDir('infergauge-ui-results-');
  cpSync(join(FIXTURES, 'run'), join(root, HOSTILE), { recursive: true });
  cpSync(join(FIXTURES, 'sweep'), join(root, 'a-sweep'), { recursive: true });
  mkdirSync(join(root, 'not-results'));
  return root;
}

describe('infergauge ui', () => {
  test('lists the outermost results directories: a sweep, not its points', () => {
    const root = resultsRoot();
    const names = listResults(root)
      .map((e) => e.name)
      .sort();
    assert.deepEqual(names, [HOSTILE, 'a-sweep'].sort());
  });

  test('a folder of results: the list links each report; a name is text, never markup', async () => {
    const root = resultsRoot();
    const served = await serveResults(root, { host: '127.0.0.1', port: 0 }, () => {});
    try {
      const list = await get(served.url);
      assert.equal(list.status, 200);
      assert.ok(!list.body.includes(HOSTILE), 'the folder name is escaped');
      assert.match(list.body, /&#60;img src=x onerror=alert\(1\)&#62;/);
      const links = [...list.body.matchAll(/href="(r\/\d+\/)"/g)].map((m) => m[1]);
      assert.equal(links.length, 2);
      for (const link of links) {
        const report = await get(new URL(link, served.url).href);
        assert.equal(report.status, 200, link);
        assert.match(report.body, /^<!doctype html>/i);
      }
      assert.equal((await get(new URL('r/2/', served.url).href)).status, 404);
      assert.equal((await get(new URL('r/..%2F/', served.url).href)).status, 404);
    } finally {
      await served.close();
    }
  });

  test('one results directory: its report.html at /, as saved', async () => {
    const dir = tempDir('infergauge-ui-run-');
    cpSync(join(FIXTURES, 'run'), dir, { recursive: true });
    writeFileSync(join(dir, 'report.html'), '<!doctype html><title>saved</title>');
    const served = await serveResults(dir, { host: '127.0.0.1', port: 0 }, () => {});
    try {
      assert.equal((await get(served.url)).body, '<!doctype html><title>saved</title>');
    } finally {
      await served.close();
    }
  });

  test('off loopback: the token is required', async () => {
    const served = await serveResults(resultsRoot(), { host: '0.0.0.0', port: 0 }, () => {});
    try {
      assert.ok(served.token);
      const bare = new URL(served.url);
      bare.search = '';
      assert.equal((await get(bare.href)).status, 403);
      const list = await get(served.url);
      assert.equal(list.status, 200);
      // The list's links carry the token on.
      const link = /href="(r\/\d+\/[^"]*)"/.exec(list.body)?.[1] ?? '';
      assert.equal((await get(new URL(link, served.url).href)).status, 200);
    } finally {
      await served.close();
    }
  });

  test('a folder without results is refused', async () => {
    const empty = tempDir('infergauge-ui-empty-');
    await assert.rejects(
      serveResults(empty, { host: '127.0.0.1', port: 0 }, () => {}),
      /holds no infergauge results/,
    );
  });
});
