/**
 * The records-damage matrix (issue 48): a records file truncated, with garbage appended, with a
 * byte flipped, with a line past the bound (a gzip bomb), or with lines that are JSON but no
 * record, in both formats, read by every reader of records: report (loadSavedRuns and the HTML
 * report), compare (readCompareTarget), merge (mergeShards) and calibrate (streamRecords, its
 * record-reading entry point). Every case keeps every complete record outside the damage, says
 * the damage once naming the file's real name, and carries it into the summary built again; a
 * merge writes what was kept with the count in its summary and manifest, and never leaves a
 * partial records file.
 */
import assert from 'node:assert/strict';
import { cpSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { gzipSync } from 'node:zlib';
import type { RequestRecord } from '../../../src/record.js';
import { renderHtmlReport } from '../../../src/report/html.js';
import { readCompareTarget } from '../../../src/results/compareInput.js';
import { MAX_RECORD_LINE_BYTES } from '../../../src/results/lineReader.js';
import { loadReportInput } from '../../../src/results/load.js';
import { mergeShards, readShard } from '../../../src/results/merge.js';
import { loadSavedRuns } from '../../../src/results/reader.js';
import { streamRecords } from '../../../src/results/runView.js';
import { REPO } from '../../../tools/repo.js';
import { tempDir } from '../../helpers/cli.js';

const RUN = join(REPO, 'test/fixtures/report/run');
const LINES = readFileSync(join(RUN, 'records.jsonl'), 'utf8').trim().split('\n').slice(0, 40);
const RECORDS = LINES.map((line) => JSON.parse(line) as RequestRecord);
const N = LINES.length;
const measured = (ids: Set<number>) =>
  RECORDS.filter((r) => ids.has(r.id) && r.phase === 'measure').length;

type Format = 'jsonl' | 'jsonl.gz';
type Damage = 'truncate' | 'append' | 'flip' | 'bomb' | 'not records';
const DAMAGES: Damage[] = ['truncate', 'append', 'flip', 'bomb', 'not records'];
const FORMATS: Format[] = ['jsonl', 'jsonl.gz'];

/** A line longer than the bound: in a gzip file, ~50 KB that inflate to 50 MiB. */
const BOMB_BYTES = MAX_RECORD_LINE_BYTES + (1 << 20);
let bomb: { plain: Buffer; gz: Buffer } | undefined;
const bombs = () => {
  if (!bomb) {
    const plain = Buffer.alloc(BOMB_BYTES + 1, 0x61);
    plain[BOMB_BYTES] = 10;
    bomb = { plain, gz: gzipSync(plain, { level: 1 }) };
  }
  return bomb;
};

const NOT_RECORDS = [
  'null',
  '{}',
  '[1,2]',
  JSON.stringify({ ...RECORDS[3], id: 9001, error: { kind: 'http_5xx' } }),
  JSON.stringify({ ...RECORDS[3], id: 9002, endAt: 1e300 }),
];

/**
 * The records file of `format` with `damage`, as a run writes it (gzip: one member a record),
 * and the ids of the records that must be read back (every one outside the damage).
 */
function damaged(format: Format, damage: Damage): { bytes: Buffer; kept: Set<number> } {
  const all = new Set(RECORDS.map((r) => r.id));
  const without = (i: number) => new Set([...all].filter((id) => id !== RECORDS[i].id));
  const mid = N >> 1;
  if (format === 'jsonl') {
    const text = (lines: string[]) => Buffer.from(lines.map((l) => `${l}\n`).join(''));
    switch (damage) {
      case 'truncate': {
        const whole = text(LINES);
        return { bytes: whole.subarray(0, whole.length - 10), kept: without(N - 1) };
      }
      case 'append':
        return {
          bytes: Buffer.concat([text(LINES), Buffer.from('\u0000garbage{"id":')]),
          kept: all,
        };
      case 'flip': {
        const lines = [...LINES];
        lines[mid] = `.${lines[mid].slice(1)}`;
        return { bytes: text(lines), kept: without(mid) };
      }
      case 'bomb':
        return {
          bytes: Buffer.concat([text(LINES.slice(0, mid)), bombs().plain, text(LINES.slice(mid))]),
          kept: all,
        };
      case 'not records':
        return {
          bytes: text([...LINES.slice(0, mid), ...NOT_RECORDS, ...LINES.slice(mid)]),
          kept: all,
        };
    }
  }
  const members = LINES.map((l) => gzipSync(`${l}\n`));
  switch (damage) {
    case 'truncate': {
      const whole = Buffer.concat(members);
      const last = members[N - 1].length;
      return { bytes: whole.subarray(0, whole.length - (last >> 1)), kept: without(N - 1) };
    }
    case 'append':
      return {
        bytes: Buffer.concat([...members, Buffer.from('\u0000garbage appended \u00ff\u00fe')]),
        kept: all,
      };
    case 'flip': {
      const hit = Buffer.from(members[mid]);
      hit[hit.length >> 1] ^= 0x55;
      return {
        bytes: Buffer.concat([...members.slice(0, mid), hit, ...members.slice(mid + 1)]),
        kept: without(mid),
      };
    }
    case 'bomb':
      return {
        bytes: Buffer.concat([...members.slice(0, mid), bombs().gz, ...members.slice(mid)]),
        kept: all,
      };
    case 'not records':
      return {
        bytes: Buffer.concat([
          ...members.slice(0, mid),
          gzipSync(`${NOT_RECORDS.join('\n')}\n`),
          ...members.slice(mid),
        ]),
        kept: all,
      };
  }
}

/** A run directory (the fixture's manifest and summary) holding the damaged records file. */
function runDir(format: Format, damage: Damage) {
  const dir = tempDir('ig-damage-');
  cpSync(join(RUN, 'manifest.json'), join(dir, 'manifest.json'));
  cpSync(join(RUN, 'summary.json'), join(dir, 'summary.json'));
  const file = join(dir, format === 'jsonl' ? 'records.jsonl' : 'records.jsonl.gz');
  const { bytes, kept } = damaged(format, damage);
  writeFileSync(file, bytes);
  return { dir, file, kept };
}

/** The one sentence a reader said of the damaged file: it names the file as it is. */
function saidOnce(said: string[], file: string, damage: Damage) {
  const about = said.filter((m) => m.includes('records.jsonl'));
  assert.equal(about.length, 1, `said once: ${JSON.stringify(said)}`);
  assert.ok(about[0].startsWith(`${file}: `), about[0]);
  const expect = {
    truncate: /skipped|cut short/,
    append: /skipped/,
    flip: /skipped/,
    bomb: /longer than 49 MiB/,
    'not records': /5 lines skipped \(5 JSON but no request record\)/,
  }[damage];
  assert.match(about[0], expect);
}

const hasDamageWarning = (warnings: { code: string }[]) =>
  warnings.some((w) => w.code === 'records_damaged');

describe('the records-damage matrix: every reader, both formats', () => {
  for (const format of FORMATS) {
    for (const damage of DAMAGES) {
      const name = `${damage}, ${format}`;

      test(`report: ${name}`, async () => {
        const { dir, file, kept } = runDir(format, damage);
        const said: string[] = [];
        const runs = await loadSavedRuns(dir, (m) => said.push(m), { charts: true });
        assert.equal(runs[0].requests, kept.size);
        assert.equal(
          runs[0].summary.requests.completed + runs[0].summary.requests.failed,
          measured(kept),
        );
        assert.ok(hasDamageWarning(runs[0].summary.warnings));
        saidOnce(said, file, damage);
        // The HTML report draws what was kept (an impossible time never reaches a chart).
        const input = await loadReportInput(dir, () => {}, { runs });
        assert.match(renderHtmlReport(input), /<html/);
      });

      test(`compare: ${name}`, async () => {
        const { dir, file, kept } = runDir(format, damage);
        const target = await readCompareTarget(dir);
        assert.equal(target.units[0].sample.counted, measured(kept));
        saidOnce(target.warnings, file, damage);
      });

      test(`merge: ${name}`, async () => {
        const { dir, file, kept } = runDir(format, damage);
        const shard = readShard(dir);
        const out = tempDir('ig-damage-merged-');
        const said: string[] = [];
        const summary = await mergeShards([shard], out, { onProblem: (m) => said.push(m) });
        saidOnce(said, file, damage);
        const merged = readFileSync(join(out, 'records.jsonl'), 'utf8').trim().split('\n');
        assert.deepEqual(new Set(merged.map((l) => (JSON.parse(l) as RequestRecord).id)), kept);
        assert.ok(!existsSync(join(out, 'records.jsonl.partial')));
        assert.equal(summary.requests.completed + summary.requests.failed, measured(kept));
        assert.ok(hasDamageWarning(summary.warnings));
        const manifest = JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8'));
        assert.ok(manifest.merged[0].damaged.lines + manifest.merged[0].damaged.gzipStretches > 0);
      });

      test(`calibrate (streamRecords): ${name}`, async () => {
        const { dir, file, kept } = runDir(format, damage);
        const ids = new Set<number>();
        const said: string[] = [];
        const read = await streamRecords(
          join(dir, 'records.jsonl'),
          { add: (r) => ids.add(r.id) },
          (m) => said.push(m),
        );
        assert.deepEqual(ids, kept);
        assert.equal(read.records, kept.size);
        assert.equal(read.damage.file, file);
        saidOnce(said, file, damage);
      });
    }
  }
});
