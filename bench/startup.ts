/**
 * Start-up CPU of the built command line (`npm run build` first): what `infergauge --version`
 * costs, what a one-request `run --url` costs in all, and what it has cost when its first request
 * reaches the server (read from /proc/<pid>/stat by a minimal OpenAI server at that moment).
 * CPU, not wall time, so the figures hold on a busy machine; each is the median and range of
 * `--repeats` runs. Linux only (/proc, /usr/bin/time).
 *
 *   node --import tsx bench/startup.ts [--repeats 5] [--main dist/cli/main.js]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { processCpuS } from './processCpu.js';

const { values } = parseArgs({
  options: {
    repeats: { type: 'string', default: '5' },
    main: { type: 'string', default: 'dist/cli/main.js' },
  },
});
const repeats = Number(values.repeats);
const main = values.main;

/** The node process under /usr/bin/time (its only child). */
function childPid(pid: number): number {
  const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
  return Number(children.split(' ')[0]);
}

/** Runs `node args` under /usr/bin/time; returns its whole user+system CPU in seconds. */
function timedNode(args: string[], onSpawn: (timePid: number) => void = () => {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn('/usr/bin/time', ['-f', 'CPU %U %S', process.execPath, ...args], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, OPENAI_API_KEY: undefined },
    });
    if (child.pid !== undefined) onSpawn(child.pid);
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.on('close', (code) => {
      const m = /CPU ([\d.]+) ([\d.]+)/.exec(stderr);
      if (code !== 0 || !m) reject(new Error(`node ${args.join(' ')} failed (${code}): ${stderr}`));
      else resolve(Number(m[1]) + Number(m[2]));
    });
  });
}

/**
 * A minimal OpenAI server: lists one model and streams one token per request. On the first
 * request of each run it reads the client's CPU so far.
 */
function fakeServer(): {
  server: Server;
  firstRequestCpuS: () => number | undefined;
  arm: (timePid: number) => void;
} {
  let timePid: number | undefined;
  let cpuAtFirst: number | undefined;
  const server = createServer((req, res) => {
    if (timePid !== undefined && cpuAtFirst === undefined) {
      cpuAtFirst = processCpuS(childPid(timePid));
    }
    if (req.url?.startsWith('/v1/models')) {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ object: 'list', data: [{ id: 'fake', object: 'model' }] }));
      return;
    }
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = (delta: object, extra: object = {}) =>
        `data: ${JSON.stringify({ id: 'x', object: 'chat.completion.chunk', model: 'fake', choices: [{ index: 0, delta, finish_reason: null, ...extra }] })}\n\n`;
      res.write(chunk({ role: 'assistant', content: '' }));
      res.write(chunk({ content: 'hi' }));
      res.write(
        `data: ${JSON.stringify({ id: 'x', object: 'chat.completion.chunk', model: 'fake', choices: [{ index: 0, delta: {}, finish_reason: 'length' }], usage: { prompt_tokens: 8, completion_tokens: 1, total_tokens: 9 } })}\n\n`,
      );
      res.end('data: [DONE]\n\n');
    });
  });
  return {
    server,
    firstRequestCpuS: () => cpuAtFirst,
    arm: (pid) => {
      timePid = pid;
      cpuAtFirst = undefined;
    },
  };
}

function summary(xs: number[]): string {
  const sorted = [...xs].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
  return `median ${median.toFixed(2)} s  (range ${sorted[0]?.toFixed(2)}-${sorted.at(-1)?.toFixed(2)})`;
}

async function main_(): Promise<void> {
  const fake = fakeServer();
  await new Promise<void>((r) => fake.server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(fake.server.address() as AddressInfo).port}`;
  const out = mkdtempSync(join(tmpdir(), 'infergauge-startup-'));
  const version: number[] = [];
  const whole: number[] = [];
  const first: number[] = [];
  try {
    for (let i = 0; i < repeats; i++) {
      version.push(await timedNode([main, '--version']));
      whole.push(
        await timedNode(
          [main, 'run', '--url', url, '--requests', '1', '--out', join(out, String(i))],
          fake.arm,
        ),
      );
      const cpu = fake.firstRequestCpuS();
      if (cpu !== undefined) first.push(cpu);
    }
  } finally {
    fake.server.close();
    rmSync(out, { recursive: true, force: true });
  }
  console.log(`${main}, ${repeats} repeats, CPU (user + system):`);
  console.log(`  --version                        ${summary(version)}`);
  console.log(`  run --requests 1, whole          ${summary(whole)}`);
  console.log(`  run, at the server's 1st request ${summary(first)}`);
}

await main_();
