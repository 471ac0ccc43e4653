/**
 * The byte-level line reader under the records readers (src/results/lineReader.ts): a gzip
 * records file as a run writes it (one member a record, or a worker's batch) keeps every
 * record outside the member a damage hit, and resumes at the next intact member; a gzip bomb
 * (hundreds of MiB of one line) is skipped at the line bound, fast and in bounded memory; lines
 * cross members and read chunks whole; a CRLF line reads as its LF twin.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { gzipSync } from 'node:zlib';
import { ReadDamage, readJsonLines } from '../../../src/results/jsonl.js';
import { type CUT_LINE, type LineDamage, readLines } from '../../../src/results/lineReader.js';
import { tempDir } from '../../helpers/cli.js';

/** 8,000 small records as a run writes them: one gzip member a record, or one a batch. */
const LINES = Array.from(
  { length: 8000 },
  (_, i) => `${JSON.stringify({ id: i, pad: 'x'.repeat(100 + (i % 50)) })}\n`,
);
function members(batch: number): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < LINES.length; i += batch) {
    out.push(gzipSync(LINES.slice(i, i + batch).join(''), batch > 1 ? { level: 1 } : {}));
  }
  return out;
}

async function readIds(bytes: Buffer) {
  const path = join(tempDir('ig-lines-'), 'records.jsonl.gz');
  writeFileSync(path, bytes);
  const damage = new ReadDamage(path);
  const ids: number[] = [];
  for await (const v of readJsonLines<{ id: number }>(path, damage.onBadLine)) ids.push(v.id);
  return { ids, damage };
}

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

describe('gzip damage costs only the member it hits', () => {
  for (const batch of [1, 64]) {
    test(`a byte flipped in a member (${batch} record(s) a member): every other member's records are kept`, async () => {
      const parts = members(batch);
      const hit = parts.length >> 1;
      for (const at of [0, 3, 0.5, -3]) {
        const damaged = parts.map((m) => Buffer.from(m));
        const m = damaged[hit];
        // The magic, the flags, the deflate data, the checksum.
        m[at < 0 ? m.length + at : at < 1 ? Math.floor(m.length * at) : at] ^= 0x55;
        const { ids, damage } = await readIds(Buffer.concat(damaged));
        const lost = range(hit * batch, (hit + 1) * batch);
        const kept = range(0, LINES.length).filter((id) => !lost.includes(id));
        // All records outside the hit member, in order; of the hit one, at most what precedes
        // the damage.
        assert.deepEqual(
          ids.filter((id) => !lost.includes(id)),
          kept,
          `byte ${at}`,
        );
        assert.ok(ids.length <= LINES.length);
        assert.ok(damage.damaged, `byte ${at}`);
        assert.match(damage.message() ?? '', /records\.jsonl\.gz: .*damaged/);
      }
    });

    test(`bytes appended (${batch} record(s) a member) cost no record`, async () => {
      const parts = members(batch);
      for (const tail of [
        Buffer.from('garbage'),
        Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3]),
        Buffer.alloc(64),
      ]) {
        const { ids, damage } = await readIds(Buffer.concat([...parts, tail]));
        assert.deepEqual(ids, range(0, LINES.length));
        assert.ok(damage.damaged);
      }
    });
  }

  test('garbage between members is one damaged stretch, with its size; the members around it are whole', async () => {
    const parts = members(1);
    const garbage = Buffer.alloc(5000, 0x20);
    const { ids, damage } = await readIds(
      Buffer.concat([...parts.slice(0, 100), garbage, ...parts.slice(100)]),
    );
    assert.deepEqual(ids, range(0, LINES.length));
    assert.equal(damage.gzipStretches, 1);
    assert.equal(damage.gzipBytes, 5000);
    assert.equal(damage.skippedLines, 0);
  });
});

describe('one line is bounded', () => {
  test('a gzip bomb (300 MiB of one line, 300 KB on disk) is skipped at the bound: fast, bounded memory, every record around it kept', async () => {
    const part = gzipSync(Buffer.alloc(1 << 20, 0x61));
    const parts = members(1);
    const bomb = Buffer.concat(Array.from({ length: 300 }, () => part));
    const before = process.memoryUsage.rss();
    let peak = before;
    const path = join(tempDir('ig-lines-'), 'records.jsonl.gz');
    writeFileSync(path, Buffer.concat([...parts.slice(0, 10), bomb, ...parts.slice(10, 20)]));
    const damage = new ReadDamage(path);
    const ids: number[] = [];
    const started = performance.now();
    for await (const v of readJsonLines<{ id: number }>(path, (line, err) => {
      peak = Math.max(peak, process.memoryUsage.rss());
      damage.onBadLine(line, err);
    })) {
      ids.push(v.id);
    }
    const ms = performance.now() - started;
    // The bomb's line ran into the first record after it (no newline between): that one is cut.
    assert.deepEqual(ids, [...range(0, 10), ...range(11, 20)]);
    assert.equal(damage.tooLong, 1);
    assert.match(damage.message() ?? '', /longer than 49 MiB/);
    assert.ok(peak - before < 400 * 2 ** 20, `${((peak - before) / 2 ** 20).toFixed(0)} MiB more`);
    assert.ok(ms < 20_000, `${ms.toFixed(0)} ms`);
  });

  test('a bomb inside one member (a file gzipped whole) costs only its line: the records after it in the member are kept', async () => {
    const text = Buffer.concat([
      Buffer.from(LINES.slice(0, 5).join('')),
      Buffer.alloc(60 << 20, 0x61),
      Buffer.from(`\n${LINES.slice(5, 10).join('')}`),
    ]);
    const path = join(tempDir('ig-lines-'), 'records.jsonl.gz');
    writeFileSync(path, gzipSync(text, { level: 1 }));
    const damage = new ReadDamage(path);
    const ids: number[] = [];
    for await (const v of readJsonLines<{ id: number }>(path, damage.onBadLine)) ids.push(v.id);
    assert.deepEqual(ids, range(0, 10));
    assert.equal(damage.tooLong, 1);
    assert.equal(damage.gzipStretches, 0);
  });

  test('a plain line past the bound is skipped without holding it; a line across read chunks and gzip members reads whole', async () => {
    const dir = tempDir('ig-lines-');
    const long = `${'{"id":1,"pad":"'}${'y'.repeat(3 << 20)}"}`;
    const plain = join(dir, 'a.jsonl');
    writeFileSync(plain, `{"id":0}\r\n${long}\n${'z'.repeat(3000)}\n{"id":2}`);
    const got: (string | typeof CUT_LINE)[] = [];
    const damages: LineDamage[] = [];
    for await (const line of readLines(plain, false, (d) => damages.push(d), 2000)) got.push(line);
    assert.deepEqual(got, ['{"id":0}', '{"id":2}']);
    assert.deepEqual(
      damages.map((d) => [d.kind, d.line]),
      [
        ['too_long', 2],
        ['too_long', 3],
      ],
    );
    // The same long line split across gzip members and read chunks is one line.
    const gz = join(dir, 'a.jsonl.gz');
    const text = Buffer.from(`${long}\n{"id":2}\n`);
    const cuts = [0, 5, 1 << 20, (2 << 20) + 7, text.length];
    writeFileSync(
      gz,
      Buffer.concat(cuts.slice(1).map((end, i) => gzipSync(text.subarray(cuts[i], end)))),
    );
    const lines: (string | typeof CUT_LINE)[] = [];
    for await (const line of readLines(gz, true, () => assert.fail('no damage'))) lines.push(line);
    assert.deepEqual(lines, [long, '{"id":2}']);
  });
});
