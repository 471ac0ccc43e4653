/**
 * Issue 15, the outputs: what a hostile server (or a hand-made records file) can put in front of a
 * user. Cases 3 (a token count that once expanded into 1e17 samples), 8 (CSV formula injection),
 * 9 (terminal escape injection), and colour only where a terminal asked for it.
 */
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parseCsv } from '../../src/report/csv.js';
import { REPO } from '../../tools/repo.js';
import { runCli, tempDir } from '../helpers/cli.js';
import {
  chatEvent,
  DONE,
  type ScriptedServer,
  startScriptedServer,
  usageEvent,
} from '../helpers/scriptedServer.js';

const FIXTURE = join(REPO, 'test/fixtures/report/run/');
const FORMULA = "=cmd|' /C calc'!A0";
const EVIL_MODEL = 'evil\u001b]0;pwned\u0007\u001b[2Jmodel';
/** ESC, BEL and the 8-bit CSI: what a terminal acts on. */
const hasControl = (text: string) => ['\u0007', '\u001b', '\u009b'].some((c) => text.includes(c));
const ESC = '\u001b';
/** The environment of a user who set neither colour variable. */
const NO_COLOR_VARS = { NO_COLOR: undefined, FORCE_COLOR: undefined };

/** A chat server that lists EVIL_MODEL and ends every stream with FORMULA as its finish reason. */
function hostileServer(): Promise<ScriptedServer> {
  return startScriptedServer((request) => {
    if (request.path.startsWith('/v1/models')) {
      return {
        headers: { 'content-type': 'application/json' },
        steps: [{ write: JSON.stringify({ object: 'list', data: [{ id: EVIL_MODEL }] }) }],
      };
    }
    const finish = `data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: FORMULA }] })}\n\n`;
    return {
      steps: [
        { write: chatEvent({ role: 'assistant', content: '' }) },
        { write: chatEvent({ content: 'a' }) },
        { write: chatEvent({ content: 'b' }) },
        { write: finish },
        { write: usageEvent(4, 2) },
        { write: DONE },
      ],
    };
  });
}

describe('a hostile server against the outputs', () => {
  let server: ScriptedServer;
  const out = join(tempDir('ig-hostile-out-'), 'run');
  let result: Awaited<ReturnType<typeof runCli>>;
  before(async () => {
    server = await hostileServer();
    result = await runCli(
      [
        'run',
        '--url',
        server.url,
        '--requests',
        '4',
        '--concurrency',
        '2',
        '--input-tokens',
        '4',
        '--output-tokens',
        '2',
        '--out',
        out,
      ],
      NO_COLOR_VARS,
    );
  });
  after(() => server.close());

  test('case 9: an escape sequence in the model id never reaches the terminal', () => {
    assert.equal(result.code, 0, result.stderr);
    assert.ok(result.stdout.includes('evilmodel'), result.stdout);
    assert.ok(!hasControl(result.stdout), result.stdout);
    assert.ok(!hasControl(result.stderr), result.stderr);
  });

  test('case 8: a finish reason that is a spreadsheet formula is neutralised in requests.csv', async () => {
    const csvDir = join(out, 'csv');
    const report = await runCli(['report', out, '--csv', csvDir]);
    assert.equal(report.code, 0, report.stderr);
    const text = readFileSync(join(csvDir, 'requests.csv'), 'utf8');
    const rows = parseCsv(text);
    const finish = rows[0].indexOf('finish_reason');
    for (const row of rows.slice(1)) assert.equal(row[finish], `'${FORMULA}`);
    // No cell starts a formula: each line's cells, as a spreadsheet splits them.
    for (const row of rows) for (const cell of row) assert.doesNotMatch(cell, /^[=+@\t\r]/);
  });
});

describe('case 3: a token count from the server bounds no work', () => {
  test('report on records claiming 1e17 tokens in one event ends, in bounded memory', async () => {
    const dir = join(tempDir('ig-hostile-big-'), 'run');
    mkdirSync(dir);
    for (const f of ['manifest.json', 'summary.json']) copyFileSync(join(FIXTURE, f), join(dir, f));
    const lines = readFileSync(join(FIXTURE, 'records.jsonl'), 'utf8').trim().split('\n');
    const i = lines.findIndex((l) => l.includes('"phase":"measure"'));
    const record = JSON.parse(lines[i]) as {
      outputTokens: number;
      events: { tokens: number[] };
    };
    // The second token event claims 1e17 tokens: per-token ITL is 1e17 samples of g / 1e17.
    const second = record.events.tokens.findIndex(
      (k, j) => k > 0 && j > record.events.tokens.indexOf(1),
    );
    record.events.tokens[second] = 1e17;
    record.outputTokens = 1e17;
    lines[i] = JSON.stringify(record);
    writeFileSync(join(dir, 'records.jsonl'), `${lines.join('\n')}\n`);
    // 512 MB of heap: the per-token expansion needed gigabytes before it crashed.
    const result = await runCli(
      ['report', dir, '--csv', join(dir, 'csv'), '--md', join(dir, 's.md')],
      {
        NODE_OPTIONS: '--max-old-space-size=512',
      },
    );
    assert.equal(result.code, 0, result.stderr);
    assert.ok(existsSync(join(dir, 'report.html')));
    assert.match(readFileSync(join(dir, 'report.html'), 'utf8'), /ITL: inter-token latency/);
  });
});

describe('colour only where a terminal or the user asked for it', () => {
  const simulate = (out: string) => [
    'run',
    '--simulate',
    '--requests',
    '4',
    '--concurrency',
    '2',
    '--input-tokens',
    '8',
    '--output-tokens',
    '4',
    '--out',
    out,
  ];

  test('sim --list and run --simulate in a pipe print no escape byte', async () => {
    const list = await runCli(['sim', '--list'], NO_COLOR_VARS);
    assert.equal(list.code, 0, list.stderr);
    assert.ok(!list.stdout.includes(ESC), 'sim --list');
    const run = await runCli(simulate(join(tempDir('ig-color-'), 'run')), NO_COLOR_VARS);
    assert.equal(run.code, 0, run.stderr);
    assert.ok(!run.stdout.includes(ESC), run.stdout);
  });

  test('FORCE_COLOR=1 colours the summary; NO_COLOR wins over it', async () => {
    const forced = await runCli(simulate(join(tempDir('ig-color-'), 'run')), {
      NO_COLOR: undefined,
      FORCE_COLOR: '1',
    });
    assert.equal(forced.code, 0, forced.stderr);
    assert.ok(forced.stdout.includes(ESC), 'FORCE_COLOR=1 colours');
    const both = await runCli(simulate(join(tempDir('ig-color-'), 'run')), {
      NO_COLOR: '1',
      FORCE_COLOR: '1',
    });
    assert.equal(both.code, 0, both.stderr);
    assert.ok(!both.stdout.includes(ESC), 'NO_COLOR=1 wins');
    // Tables never carry colour codes (cli-table3 would colour its heads red by default).
    const list = await runCli(['sim', '--list'], { NO_COLOR: undefined, FORCE_COLOR: '1' });
    assert.ok(!list.stdout.includes(ESC), 'sim --list tables');
  });
});

test('infergauge memory ends its output with a line break (text and --json)', async () => {
  for (const extra of [[], ['--json']]) {
    const result = await runCli(['memory', '--model', 'llama-3-8b', '--gpu', 'h100', ...extra]);
    assert.equal(result.code, 0, result.stderr);
    assert.ok(result.stdout.endsWith('\n'), JSON.stringify(result.stdout.slice(-40)));
  }
});
