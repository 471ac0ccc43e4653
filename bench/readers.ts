/**
 * What the readers of a results directory cost on a long run: a simulated open-loop run of
 * `--duration` seconds at `--rate` requests/s (21,600 s at 50/s: ~1.08 M requests, ~1.8 GB of
 * records.jsonl, ~90 s), then `report` (HTML), `compare DIR DIR` and `merge --force` on it, each
 * timed with its peak RSS (/usr/bin/time -v) and exit code. Linux only (/usr/bin/time).
 *
 *   node --import tsx bench/readers.ts [--duration 600] [--rate 50] [--dir DIR] [--keep]
 *       [--main src/cli/main.ts] [--only report,compare,merge]
 *
 * `--dir` reuses a run made before (kept with `--keep`); otherwise the run is made under the
 * system's temp folder and deleted at the end, as is the merged copy.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statfsSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '600' },
    rate: { type: 'string', default: '50' },
    dir: { type: 'string' },
    keep: { type: 'boolean', default: false },
    main: { type: 'string', default: 'src/cli/main.ts' },
    only: { type: 'string', default: 'report,compare,merge' },
  },
});
const main = resolve(values.main);
const nodeArgs = main.endsWith('.ts') ? ['--import', 'tsx', main] : [main];
const steps = new Set(values.only.split(','));

interface Timed {
  code: number;
  wallS: number;
  maxRssMb: number;
  tail: string;
}

/** `node <main> args` under /usr/bin/time -v: exit code, wall time, peak RSS. */
function timed(args: string[]): Promise<Timed> {
  return new Promise((done, fail) => {
    const started = process.hrtime.bigint();
    const child = spawn('/usr/bin/time', ['-v', process.execPath, ...nodeArgs, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => {
      out = (out + b.toString()).slice(-4000);
    });
    child.stderr.on('data', (b: Buffer) => {
      err = (err + b.toString()).slice(-8000);
    });
    child.on('error', fail);
    child.on('close', () => {
      const wallS = Number(process.hrtime.bigint() - started) / 1e9;
      const rssKb = Number(/Maximum resident set size \(kbytes\): (\d+)/.exec(err)?.[1] ?? 0);
      const code = Number(/Exit status: (\d+)/.exec(err)?.[1] ?? -1);
      const signal = /Command terminated by signal (\d+)/.exec(err)?.[1];
      const tail = `${out}\n${err.replace(/\n\s*Command being timed[\s\S]*$/, '')}`
        .trim()
        .split('\n')
        .slice(-6)
        .join('\n');
      done({
        code: signal ? 128 + Number(signal) : code,
        wallS,
        maxRssMb: rssKb / 1024,
        tail,
      });
    });
  });
}

function line(name: string, t: Timed): string {
  return `${name.padEnd(22)} exit ${String(t.code).padStart(3)}  ${t.wallS.toFixed(1).padStart(7)} s  peak RSS ${t.maxRssMb.toFixed(0).padStart(6)} MB`;
}

async function main_(): Promise<void> {
  const work = mkdtempSync(join(values.dir ? tmpdir() : tmpdir(), 'infergauge-readers-'));
  let dir = values.dir;
  const results: string[] = [];
  try {
    if (!dir) {
      const free = statfsSync(work);
      const freeGb = (free.bavail * free.bsize) / 2 ** 30;
      const needGb = (Number(values.duration) * Number(values.rate) * 1700) / 2 ** 30;
      process.stderr.write(
        `temp space: ${freeGb.toFixed(1)} GB free, run needs ~${needGb.toFixed(1)} GB (twice with merge)\n`,
      );
      if (freeGb < needGb * (steps.has('merge') ? 2.2 : 1.2)) {
        throw new Error(`not enough space under ${work}: ${freeGb.toFixed(1)} GB free`);
      }
      dir = join(work, 'run');
      const made = await timed([
        'run',
        '--simulate',
        '--rate',
        values.rate,
        '--duration',
        values.duration,
        '--no-html',
        '--out',
        dir,
      ]);
      results.push(line('run (make records)', made));
      if (made.code !== 0) throw new Error(`the run failed:\n${made.tail}`);
    }
    const records = join(dir, 'records.jsonl');
    if (!existsSync(records)) throw new Error(`${dir} holds no records.jsonl`);
    const lines = await countLines(records);
    process.stderr.write(
      `${dir}: ${lines.toLocaleString('en-US')} records, ${(statSync(records).size / 2 ** 30).toFixed(2)} GiB\n`,
    );
    if (steps.has('report')) {
      const t = await timed(['report', dir, '--html', join(work, 'report.html')]);
      results.push(line('report (HTML)', t));
      if (t.code !== 0) results.push(indent(t.tail));
      else
        results.push(
          `  report.html ${(statSync(join(work, 'report.html')).size / 1024).toFixed(0)} KiB`,
        );
    }
    if (steps.has('compare')) {
      const t = await timed(['compare', dir, dir, '--json']);
      results.push(line('compare DIR DIR', t));
      if (t.code !== 0) results.push(indent(t.tail));
    }
    if (steps.has('merge')) {
      const t = await timed(['merge', '--force', '--out', join(work, 'merged'), dir]);
      results.push(line('merge --force (HTML)', t));
      if (t.code !== 0) results.push(indent(t.tail));
    }
    process.stdout.write(`\n${lines.toLocaleString('en-US')} requests\n${results.join('\n')}\n`);
  } finally {
    if (values.keep && dir && !values.dir) process.stderr.write(`kept ${dir}\n`);
    rmSync(join(work, 'merged'), { recursive: true, force: true });
    if (!values.keep) rmSync(work, { recursive: true, force: true });
  }
}

const indent = (text: string) =>
  text
    .split('\n')
    .map((l) => `    ${l}`)
    .join('\n');

async function countLines(path: string): Promise<number> {
  const { createReadStream } = await import('node:fs');
  let n = 0;
  for await (const chunk of createReadStream(path, {
    highWaterMark: 1 << 20,
  }) as AsyncIterable<Buffer>) {
    for (let i = chunk.indexOf(10); i >= 0; i = chunk.indexOf(10, i + 1)) n++;
  }
  return n;
}

main_().catch((err: Error) => {
  process.stderr.write(`bench/readers: ${err.message}\n`);
  process.exitCode = 1;
});
