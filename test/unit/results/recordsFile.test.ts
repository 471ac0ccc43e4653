/**
 * The records file in both formats (src/results/jsonl.ts, `--records-format`): plain
 * `records.jsonl` and `records.jsonl.gz`, one gzip member per write, read back the same; a
 * gzip file cut inside its last member (a killed run) keeps every earlier record and reports
 * one bad line; a line that parses but is no record is skipped and said; the compressed file of
 * a simulated run is at least twice smaller.
 */
import assert from 'node:assert/strict';
import { readFileSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { gunzipSync, gzipSync } from 'node:zlib';
import type { RequestRecord } from '../../../src/record.js';
import { openRecordsWriter, readRecords } from '../../../src/results/jsonl.js';
import { hasResult, recordsPath } from '../../../src/results/layout.js';
import { REPO } from '../../../tools/repo.js';
import { runCli, tempDir } from '../../helpers/cli.js';

/** Records a simulated run wrote (one token per event, 128 output tokens). */
const FIXTURE: RequestRecord[] = readFileSync(
  join(REPO, 'test/fixtures/report/run/records.jsonl'),
  'utf8',
)
  .trim()
  .split('\n')
  .map((line) => JSON.parse(line) as RequestRecord);

async function readBack(path: string) {
  const records: RequestRecord[] = [];
  const bad: { line: number; message: string }[] = [];
  for await (const r of readRecords(path, (line, err) =>
    bad.push({ line, message: err.message }),
  )) {
    records.push(r);
  }
  return { records, bad };
}

/** Writes `records` into a fresh directory, as single records and as batches of `batch`. */
function write(format: 'jsonl' | 'jsonl.gz', records: RequestRecord[], batch = 0) {
  const dir = tempDir('ig-records-');
  const writer = openRecordsWriter(dir, format);
  const ends: number[] = [];
  for (let i = 0; i < records.length; ) {
    const n = batch > 0 ? Math.min(batch, records.length - i) : 1;
    const part = records.slice(i, i + n);
    if (batch > 0) writer.writeLines(part.map((r) => `${JSON.stringify(r)}\n`).join(''), n);
    else writer.write(part[0]);
    i += n;
    ends.push(statSync(writer.path).size);
  }
  writer.close();
  assert.equal(writer.written, records.length);
  return { dir, path: writer.path, ends };
}

describe('records file formats', () => {
  test('records.jsonl and records.jsonl.gz read back the same records, written one by one or in batches', async () => {
    const records = FIXTURE.slice(0, 40);
    const plain = write('jsonl', records);
    const gz = write('jsonl.gz', records);
    const batched = write('jsonl.gz', records, 16);
    assert.equal(plain.path, join(plain.dir, 'records.jsonl'));
    assert.equal(gz.path, join(gz.dir, 'records.jsonl.gz'));
    for (const { dir, path } of [plain, gz, batched]) {
      assert.equal(recordsPath(dir), path, 'the directory finds its records file');
      assert.ok(hasResult(dir, 'records'));
      assert.deepEqual(await readBack(path), { records, bad: [] });
    }
    // A plain reader (zcat) sees the plain file, whatever the members.
    assert.equal(gunzipSync(readFileSync(gz.path)).toString(), readFileSync(plain.path, 'utf8'));
    assert.equal(
      gunzipSync(readFileSync(batched.path)).toString(),
      readFileSync(plain.path, 'utf8'),
    );
    // records.jsonl named but records.jsonl.gz written: read from the .gz.
    assert.deepEqual((await readBack(join(gz.dir, 'records.jsonl'))).records, records);
    // An empty file (a run killed before its first record) has no records and no bad line.
    const empty = tempDir('ig-records-');
    openRecordsWriter(empty, 'jsonl.gz').close();
    assert.deepEqual(await readBack(recordsPath(empty)), { records: [], bad: [] });
    assert.throws(() => openRecordsWriter(gz.dir, 'jsonl'), /already holds a run/);
  });

  test('a gzip file cut at any byte of its last member keeps every earlier record and says the cut', async () => {
    for (const batch of [0, 4]) {
      const records = FIXTURE.slice(0, 12);
      const { path, ends } = write('jsonl.gz', records, batch);
      const whole = readFileSync(path);
      const lastStart = ends[ends.length - 2];
      const earlier = batch > 0 ? records.length - batch : records.length - 1;
      for (let cut = lastStart; cut < whole.length; cut++) {
        writeFileSync(path, whole);
        truncateSync(path, cut);
        const { records: read, bad } = await readBack(path);
        const at = `batch ${batch}, cut at byte ${cut} of ${whole.length} (last member from ${lastStart})`;
        assert.ok(read.length >= earlier, at);
        // A member cut in its last bytes (the checksum) may already hold its whole records.
        assert.deepEqual(read, records.slice(0, read.length), at);
        if (cut === lastStart) {
          assert.deepEqual(bad, [], at);
          assert.equal(read.length, earlier, at);
        } else {
          // The cut member is said once; a line it had begun is said as cut too.
          assert.ok(bad.length >= 1 && bad.length <= 2, at);
          for (const b of bad) assert.equal(b.line, read.length + 1, at);
          assert.match(bad[bad.length - 1].message, /cut short in its last member/, at);
        }
      }
    }
  });

  test('lines that parse but are no record (other JSON, a column that disagrees) are skipped and said; every record is kept', async () => {
    const records = FIXTURE.slice(0, 4);
    const short = { ...records[1], events: { ...records[1].events, tokens: [1] } };
    const lines = [
      JSON.stringify(records[0]),
      '{"hello":1}',
      '[1,2,3]',
      '42',
      JSON.stringify(short),
      JSON.stringify({ ...records[2], phase: 'other' }),
      JSON.stringify({ ...records[2], sentAt: '12' }),
      ...records.slice(1).map((r) => JSON.stringify(r)),
    ];
    for (const format of ['jsonl', 'jsonl.gz'] as const) {
      const { path } = write(format, []);
      writeFileSync(
        path,
        format === 'jsonl' ? `${lines.join('\n')}\n` : gzipSync(`${lines.join('\n')}\n`),
      );
      const { records: read, bad } = await readBack(path);
      assert.deepEqual(read, records, format);
      assert.deepEqual(
        bad.map((b) => b.line),
        [2, 3, 4, 5, 6, 7],
        format,
      );
      assert.match(bad[0].message, /its id is not a number/);
      assert.match(bad[1].message, /a JSON array, not a record object/);
      assert.match(bad[2].message, /a JSON number, not a record object/);
      assert.match(bad[3].message, /events\.tokens is not a column as long as events\.dtUs/);
      assert.match(bad[4].message, /phase/);
      assert.match(bad[5].message, /sentAt is not a number/);
    }
  });

  test('a simulated run writes the same records in either format, compressed at least 2x', async () => {
    const plainOut = join(tempDir('ig-records-run-'), 'plain');
    const gzOut = join(tempDir('ig-records-run-'), 'gz');
    const args = ['run', '--simulate', '--requests', '50', '--no-html', '--json'];
    const plain = await runCli([...args, '--out', plainOut]);
    assert.equal(plain.code, 0, plain.stderr);
    const gz = await runCli([...args, '--records-format', 'jsonl.gz', '--out', gzOut]);
    assert.equal(gz.code, 0, gz.stderr);
    assert.equal(recordsPath(gzOut), join(gzOut, 'records.jsonl.gz'));
    const a = await readBack(recordsPath(plainOut));
    const b = await readBack(recordsPath(gzOut));
    assert.equal(a.records.length, 50);
    assert.deepEqual(b, a);
    const ratio = statSync(recordsPath(plainOut)).size / statSync(recordsPath(gzOut)).size;
    assert.ok(ratio >= 2, `compressed ${ratio.toFixed(2)}x`);
    const bad = await runCli([...args, '--records-format', 'zip', '--out', `${gzOut}-bad`]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--records-format must be jsonl or jsonl\.gz/);
  });
});
