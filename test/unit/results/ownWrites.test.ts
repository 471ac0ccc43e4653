/**
 * A results file this process wrote and reads back unchanged is not checked against its schema
 * (results/layout.ts readOwnJson): a run reads its own summary and manifest for report.html and
 * the history without loading zod. Any other bytes at that path are checked as before.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import {
  ResultFileError,
  readOwnJson,
  resultPath,
  writeJson,
} from '../../../src/results/layout.js';
import { readSummary } from '../../../src/results/reader.js';

const root = mkdtempSync(join(tmpdir(), 'infergauge-own-'));
after(() => rmSync(root, { recursive: true, force: true }));

test('a file read back as this process wrote it is its own write; changed bytes are not', () => {
  const path = join(root, 'a.json');
  writeJson(path, { a: 1 });
  assert.deepEqual(readOwnJson(path), { value: { a: 1 }, ownWrite: true });
  writeFileSync(path, '{"a": 2}\n');
  assert.deepEqual(readOwnJson(path), { value: { a: 2 }, ownWrite: false });
  assert.equal(readOwnJson(join(root, 'missing.json')), undefined);
  // Written by another process (no writeJson here): not ours.
  const other = join(root, 'b.json');
  writeFileSync(other, '{}\n');
  assert.deepEqual(readOwnJson(other), { value: {}, ownWrite: false });
});

test('a summary replaced by other bytes is checked against the schema again', () => {
  const dir = mkdtempSync(join(root, 'run-'));
  const path = resultPath(dir, 'summary');
  // Not a summary: read back as written, it is handed on unchecked...
  writeJson(path, { schemaVersion: 1 });
  assert.deepEqual(readSummary(dir), { schemaVersion: 1 });
  // ...and once anything else wrote the file, the reader checks it and names the field at fault.
  writeFileSync(path, '{ "schemaVersion": 1 }\n');
  assert.throws(
    () => readSummary(dir),
    (err) => err instanceof ResultFileError && /is not a run summary \(load:/.test(err.message),
  );
});
