/**
 * Issue 15, bad input from the user's side: every bad usage exits 2 naming the flag and the fix
 * (case 12), nothing is silently coerced (case 14), a huge plan ends quickly with a bounded
 * list of problems (case 13), credentials never reach an output file (case 10), a run killed
 * with SIGKILL can still be reported (case 6), a header or key with a line break is refused
 * before anything is sent (case 1, the CLI side), and `sweep --concurrency 1,4,16` is a sweep.
 */
import assert from 'node:assert/strict';
import { appendFileSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { RunSummary } from '../../src/metrics/summary.js';
import { collect, runCli, spawnCli, tempDir } from '../helpers/cli.js';

const EXIT_USAGE = 2;

/** Every file under `dir`, as text. */
function allFiles(dir: string): { path: string; text: string }[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => {
      const path = join(e.parentPath, e.name);
      return { path, text: readFileSync(path, 'utf8') };
    });
}

function lineCount(path: string): number {
  return existsSync(path) ? readFileSync(path, 'utf8').split('\n').filter(Boolean).length : 0;
}

describe('case 12: bad usage exits 2', () => {
  test("the argument parser's own errors keep their message and exit 2", async () => {
    const cases: [string[], RegExp][] = [
      [['run', '--bogus'], /unknown option '--bogus'/],
      [['run', '--seed'], /option '--seed <n>' argument missing/],
      [['run', 'extra'], /too many arguments for 'run'/],
      [['nope'], /unknown command 'nope'/],
    ];
    for (const [args, message] of cases) {
      const result = await runCli(args);
      assert.equal(result.code, EXIT_USAGE, `${args.join(' ')}: ${result.stderr}`);
      assert.match(result.stderr, message);
    }
    const help = await runCli(['run', '--help']);
    assert.equal(help.code, 0, 'help is not an error');
  });

  test('--tokenizer /nonexistent, --time-scale 1e309 and sim --port 99999 name the flag', async () => {
    const tokenizer = await runCli(['run', '--tokenizer', '/nonexistent/tokenizer.json']);
    assert.equal(tokenizer.code, EXIT_USAGE, tokenizer.stderr);
    assert.match(tokenizer.stderr, /--tokenizer \/nonexistent\/tokenizer\.json: no such file/);
    const notATokenizer = join(tempDir('ig-tokenizer-'), 'tokenizer.json');
    writeFileSync(notATokenizer, '{"nope": 1}');
    const invalid = await runCli(['run', '--tokenizer', notATokenizer, '--requests', '1']);
    assert.equal(invalid.code, EXIT_USAGE, invalid.stderr);
    assert.match(invalid.stderr, /not a Hugging Face tokenizer\.json/);

    const infinite = await runCli(['run', '--time-scale', '1e309', '--requests', '1']);
    assert.equal(infinite.code, EXIT_USAGE, infinite.stderr);
    assert.match(infinite.stderr, /--time-scale must be a number/);

    const port = await runCli(['sim', '--port', '99999']);
    assert.equal(port.code, EXIT_USAGE, port.stderr);
    assert.match(port.stderr, /--port.*must be a whole number >= 0 and <= 65535/);
    assert.doesNotMatch(port.stderr, /options\.port should be/, 'no raw Node message');
  });
});

describe('case 14: no silent coercions', () => {
  test('an empty value is not 0, for run options, probe options and plan files', async () => {
    for (const args of [
      ['run', '--seed', ''],
      ['run', '--warmup', ' '],
      ['probe', 'decode', '--requests-per-point', ''],
    ]) {
      const result = await runCli(args);
      assert.equal(result.code, EXIT_USAGE, `${args.join(' ')}: ${result.stderr}`);
      assert.match(result.stderr, new RegExp(`${args.at(-2)} was given an empty value`));
    }
    const plan = join(tempDir('ig-hostile-'), 'plan.yaml');
    writeFileSync(plan, "seed: ''\nrequests: 3\n");
    const fromFile = await runCli(['plan', '--plan', plan]);
    assert.equal(fromFile.code, EXIT_USAGE, fromFile.stderr);
    assert.match(fromFile.stderr, /--seed must be a number, not an empty value/);
  });

  test('--input-tokens 0 and --output-tokens 0 are refused (servers refuse them), not made 1', async () => {
    const result = await runCli(['plan', '--input-tokens', '0', '--output-tokens', 'uniform:0:8']);
    assert.equal(result.code, EXIT_USAGE, result.stderr);
    assert.match(result.stderr, /--input-tokens can be 0 .*empty prompt/);
    assert.match(
      result.stderr,
      /--output-tokens can be 0 .*uniform:0:8.*max_tokens must be at least 1/,
    );
  });

  test('a binary file is no --dataset corpus', async () => {
    const dir = tempDir('ig-hostile-');
    const withNul = join(dir, 'corpus.txt');
    writeFileSync(withNul, Buffer.from([0x68, 0x69, 0x00, 0x01, 0x02, 0x20, 0x77]));
    const notUtf8 = join(dir, 'other.txt');
    writeFileSync(notUtf8, Buffer.from([0x68, 0x69, 0x20, 0xff, 0xfe, 0xc3, 0x28]));
    const nul = await runCli(['plan', '--dataset', withNul]);
    assert.equal(nul.code, EXIT_USAGE, nul.stderr);
    assert.match(nul.stderr, /--dataset: .*corpus\.txt holds a NUL byte .*a binary file/);
    const bad = await runCli(['plan', '--dataset', notUtf8]);
    assert.equal(bad.code, EXIT_USAGE, bad.stderr);
    assert.match(bad.stderr, /--dataset: .*other\.txt is not UTF-8 text/);
  });

  test('a wrong-type plan field says the field and what is allowed', async () => {
    const plan = join(tempDir('ig-hostile-'), 'plan.yaml');
    writeFileSync(
      plan,
      'concurrency: [1, 2]\nheader: 5\nscenarios:\n  - name: a\n    input-tokens: true\n',
    );
    const result = await runCli(['plan', '--plan', plan]);
    assert.equal(result.code, EXIT_USAGE, result.stderr);
    assert.match(result.stderr, /concurrency: must be one value .*not a list/);
    assert.match(result.stderr, /header: must be text or a list of text, not the number 5/);
    assert.match(
      result.stderr,
      /scenarios\[0\]\.input-tokens: must be a whole number >= 1 or a distribution/,
    );
    assert.doesNotMatch(result.stderr, /Invalid input$/m);
  });

  test('a trace out of time order or below 0 is replayed sorted and shifted, with a warning', async () => {
    const trace = join(tempDir('ig-hostile-'), 'trace.jsonl');
    writeFileSync(
      trace,
      [
        { at_ms: 1000, input_tokens: 10, output_tokens: 5 },
        { at_ms: -500, input_tokens: 10, output_tokens: 5 },
        { at_ms: 200, input_tokens: 10, output_tokens: 5 },
      ]
        .map((e) => JSON.stringify(e))
        .join('\n'),
    );
    const result = await runCli(['plan', '--trace', trace]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /warning: .*1 of 3 entries come earlier .*sorted by time/);
    assert.match(result.stderr, /warning: .*shifted by \+500 ms/);
  });
});

describe('case 13: huge plans', () => {
  test('60,000 unknown keys: ends in seconds, prints 20 problems and a count, exit 2', async () => {
    const plan = join(tempDir('ig-hostile-'), 'plan.yaml');
    writeFileSync(plan, Array.from({ length: 60_000 }, (_, i) => `k${i}: 1\n`).join(''));
    const started = Date.now();
    const result = await runCli(['plan', '--plan', plan]);
    // Before the fix this took minutes (a quadratic duplicate-key check); 60 s allows a busy machine.
    assert.ok(Date.now() - started < 60_000, `${Date.now() - started} ms`);
    assert.equal(result.code, EXIT_USAGE, result.stderr.slice(0, 500));
    const lines = result.stderr.trim().split('\n');
    assert.ok(lines.length <= 25, `${lines.length} lines`);
    assert.match(result.stderr, /\.\.\. and 59,980 more problems/);
  });

  test('a plan over 1 MiB (200,000 keys) is refused at once, naming the cap', async () => {
    const plan = join(tempDir('ig-hostile-'), 'plan.yaml');
    writeFileSync(plan, Array.from({ length: 200_000 }, (_, i) => `k${i}: 1\n`).join(''));
    const result = await runCli(['plan', '--plan', plan]);
    assert.equal(result.code, EXIT_USAGE, result.stderr.slice(0, 500));
    assert.match(result.stderr, /too large for a plan \(at most 1,048,576, 1 MiB\)/);
    assert.ok(result.stderr.trim().split('\n').length <= 3);
  });

  test('a duplicate key is named with its line', async () => {
    const plan = join(tempDir('ig-hostile-'), 'plan.yaml');
    writeFileSync(plan, 'requests: 3\nseed: 1\nseed: 2\n');
    const result = await runCli(['plan', '--plan', plan]);
    assert.equal(result.code, EXIT_USAGE, result.stderr);
    assert.match(result.stderr, /the key "seed" is given twice \(line 3\)/);
  });
});

describe('case 1 (CLI side): a header or API key with a line break', () => {
  test('exits 2 naming the flag, never the value, before the server is asked for its model', async () => {
    let connections = 0;
    const server = createServer((socket) => {
      connections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    const url = `http://127.0.0.1:${port}`;
    try {
      const header = await runCli(['run', '--url', url, '--header', 'X-Tenant: sek\r\nrit-1']);
      assert.equal(header.code, EXIT_USAGE, header.stderr);
      assert.match(
        header.stderr,
        /--header "x-tenant" contains a line break or control character \(e\.g\. a Windows line end read from a file\)/,
      );
      const key = await runCli(['run', '--url', url], { OPENAI_API_KEY: 'sk-sek\rrit-2\n' });
      assert.equal(key.code, EXIT_USAGE, key.stderr);
      assert.match(key.stderr, /the API key in OPENAI_API_KEY .*contains a line break/);
      const named = await runCli(['run', '--url', url, '--api-key-env', 'MY_KEY'], {
        MY_KEY: 'sk-sek\u001brit-3',
      });
      assert.equal(named.code, EXIT_USAGE, named.stderr);
      assert.match(named.stderr, /--api-key-env MY_KEY: the API key in MY_KEY contains/);
      for (const r of [header, key, named]) assert.doesNotMatch(r.stderr + r.stdout, /sek|rit-/);
      assert.equal(connections, 0, 'nothing was sent: not even the model discovery');
    } finally {
      server.close();
    }
  });
});

describe('case 10: credentials never reach an output', () => {
  test('--url with user:password@ is refused with the fix', async () => {
    const result = await runCli(['plan', '--url', 'http://user:hunter2@127.0.0.1:8000']);
    assert.equal(result.code, EXIT_USAGE, result.stderr);
    assert.match(result.stderr, /--url holds credentials .*--header 'authorization: Basic \.\.\.'/);
    assert.doesNotMatch(result.stderr + result.stdout, /hunter2/);
  });

  test('secret-named --extra-body fields and headers are in no output file nor plan --print', async () => {
    const out = join(tempDir('ig-hostile-'), 'run');
    const secrets = {
      extraBody: JSON.stringify({
        api_key: 'sk-SECRET-one',
        top_p: 1,
        nested: { auth: { Password: 'SECRET-two' }, tools: [{ token: 'SECRET-three' }] },
      }),
      header: 'X-Api-Key: SECRET-four',
    };
    const args = ['--extra-body', secrets.extraBody, '--header', secrets.header];
    const run = await runCli(['run', '--simulate', '--requests', '4', '--out', out, ...args]);
    assert.equal(run.code, 0, run.stderr);
    const files = allFiles(out);
    for (const name of ['manifest.json', 'summary.json', 'report.html']) {
      assert.ok(
        files.some((f) => f.path.endsWith(name)),
        `${name} written`,
      );
    }
    for (const f of files) assert.doesNotMatch(f.text, /SECRET/, f.path);
    assert.doesNotMatch(run.stdout + run.stderr, /SECRET/);
    const manifest = JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8'));
    assert.equal(manifest.plan.extraBody.top_p, 1, 'other fields are kept');
    assert.equal(manifest.plan.extraBody.api_key, '<redacted>');

    const printed = await runCli(['plan', '--print', ...args]);
    assert.equal(printed.code, 0, printed.stderr);
    assert.doesNotMatch(printed.stdout, /SECRET/);
    assert.match(printed.stdout, /top_p: 1/);
  });
});

describe('case 6: a run killed with SIGKILL can be reported', () => {
  test('report re-summarises from the records, says so, skips a torn line; --write-summary saves it', async () => {
    const out = join(tempDir('ig-hostile-'), 'run');
    const child = spawnCli(
      ['run', '--requests', '100000', '--concurrency', '4', '--output-tokens', '32', '--out', out],
      { detached: true },
    );
    const done = collect(child);
    const records = join(out, 'records.jsonl');
    const deadline = Date.now() + 60_000;
    while (lineCount(records) < 8) {
      assert.ok(Date.now() < deadline, 'fewer than 8 records after 60 s');
      await new Promise((r) => setTimeout(r, 50));
    }
    // The whole group, as a kill of a terminal session would: the simulator goes too.
    process.kill(-(child.pid as number), 'SIGKILL');
    const killed = await done;
    assert.equal(killed.signal, 'SIGKILL');
    assert.ok(!existsSync(join(out, 'summary.json')), 'the killed run wrote no summary');
    // Killed mid-write: a last line cut short.
    appendFileSync(records, '{"id":123456,"scheduledAt');
    const whole = lineCount(records) - 1;

    const report = await runCli(['report', out]);
    assert.equal(report.code, 0, report.stderr);
    assert.match(
      report.stderr,
      /warning: .*records\.jsonl: line \d+ is not whole JSON \(.*\): skipped \(a run killed/,
    );
    assert.match(
      report.stderr,
      new RegExp(`warning: .* did not finish .*rebuilt from the ${whole} records`),
    );
    assert.match(report.stderr, /--write-summary/);
    assert.ok(existsSync(join(out, 'report.html')));

    const saved = await runCli(['report', out, '--write-summary']);
    assert.equal(saved.code, 0, saved.stderr);
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as RunSummary;
    assert.equal(summary.interrupted, true);
    assert.equal(summary.requests.completed + summary.requests.failed, whole);
  });
});

describe('sweep --concurrency LIST', () => {
  test('is the levels, as GuideLLM and vLLM users write a sweep; with --levels too, exit 2', async () => {
    const out = join(tempDir('ig-hostile-'), 'sweep');
    const result = await runCli([
      'sweep',
      '--simulate',
      '--concurrency',
      '1,2',
      '--requests',
      '4',
      '--out',
      out,
      '--json',
    ]);
    assert.equal(result.code, 0, result.stderr);
    const saved = JSON.parse(readFileSync(join(out, 'sweep.json'), 'utf8'));
    const levels = saved.scenarios[0].points.map((p: { level: number }) => p.level);
    assert.deepEqual(levels, [1, 2]);
    const both = await runCli(['sweep', '--concurrency', '1,2', '--levels', '1,4']);
    assert.equal(both.code, EXIT_USAGE, both.stderr);
    assert.match(both.stderr, /--concurrency 1,2 and --levels 1,4 both give the levels/);
  });
});

describe('case 14: one reading of numbers everywhere', () => {
  test('hex, 1e309 and empty values are refused with exit 2 naming the flag, in every command', async () => {
    const dir = tempDir('ig-numbers-');
    // Each command collects its problems: one run shows each bad value refused by its flag.
    const cases: { args: string[]; refused: Record<string, string> }[] = [
      {
        args: ['sweep', '--simulate', '--levels', '1,0x10', '--repeats', '1e309'],
        refused: { '--levels': '1,0x10', '--repeats': '1e309' },
      },
      {
        args: ['sweep', '--simulate', '--rates', '1,0x10'],
        refused: { '--rates': '1,0x10' },
      },
      {
        args: ['probe', 'decode', '--simulate', '--levels', '1,0x10'].concat([
          '--requests-per-point',
          '1e309',
          '--input-tokens',
          '0x10',
        ]),
        refused: {
          '--levels': '1,0x10',
          '--requests-per-point': '1e309',
          '--input-tokens': '0x10',
        },
      },
      {
        args: ['memory', '--batch', '0x10', '--context', '1e309', '--tp', '0x2'],
        refused: { '--batch': '0x10', '--context': '1e309', '--tp': '0x2' },
      },
      {
        args: ['compare', join(dir, 'a'), join(dir, 'b'), '--min-effect', '0x1'].concat([
          '--resamples',
          '1e309',
          '--seed',
          '0x1',
        ]),
        refused: { '--min-effect': '0x1', '--resamples': '1e309', '--seed': '0x1' },
      },
      {
        args: ['merge', join(dir, 'a'), '--shards', '0x2', '--wait', '1e309'],
        refused: { '--shards': '0x2', '--wait': '1e309' },
      },
      {
        args: ['capacity', '--batches', '1,0x10', '--timeout', '1e309', '--max-batch', '0x10'],
        refused: { '--batches': '1,0x10', '--timeout': '1e309', '--max-batch': '0x10' },
      },
      {
        args: ['sim', '--tp', '0x2', '--max-num-seqs', '1e309'],
        refused: { '--tp': '0x2', '--max-num-seqs': '1e309' },
      },
      { args: ['sweep', '--simulate', '--levels', ''], refused: { '--levels': '' } },
      { args: ['merge', join(dir, 'a'), '--shards', ''], refused: { '--shards': '' } },
    ];
    for (const { args, refused } of cases) {
      const result = await runCli(args);
      assert.equal(result.code, EXIT_USAGE, `${args.join(' ')}: ${result.stderr}`);
      for (const [flag, value] of Object.entries(refused)) {
        // An empty value stops the command line at once (the program's own check), before any reading.
        const named = value === '' ? `${flag} was given an empty value` : `${flag} must be`;
        assert.ok(
          result.stderr.includes(named) && (value === '' || result.stderr.includes(`"${value}"`)),
          `${args.join(' ')}: ${flag} ${JSON.stringify(value)} not refused:\n${result.stderr}`,
        );
      }
    }
  });

  test("k8s job reads a plan's numbers as run does: hex, 1e309 and empty values are problems", async () => {
    const plan = join(tempDir('ig-numbers-'), 'plan.yaml');
    writeFileSync(
      plan,
      'url: http://vllm.default.svc:8000\nconcurrency: "0x10"\nrequests: "1e309"\nduration: ""\n',
    );
    const result = await runCli(['k8s', 'job', '--shards', '2', '--plan', plan]);
    assert.equal(result.code, EXIT_USAGE, result.stderr);
    assert.match(result.stderr, /concurrency must be a whole number >= 1 \(got "0x10"\)/);
    assert.match(result.stderr, /requests must be a whole number >= 1 \(got "1e309"\)/);
    assert.match(result.stderr, /duration must be a number of seconds above 0 \(got ""\)/);
  });
});
