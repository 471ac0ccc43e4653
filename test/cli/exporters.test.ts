/**
 * Issue 52, `--output otlp` as a process: with no URL it goes where OTEL_EXPORTER_OTLP_ENDPOINT
 * says, sends OTEL_EXPORTER_OTLP_HEADERS without ever printing them, and a collector that takes
 * the request and never answers neither holds the process open nor changes the exit code.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { RunSummary } from '../../src/metrics/summary.js';
import { type RunningSimulator, startSimulator } from '../../src/sim/simulator.js';
import { runCli, tempDir } from '../helpers/cli.js';

const dir = tempDir('ig-exporters-cli-');
let sim: RunningSimulator;
before(async () => {
  sim = await startSimulator({ port: 0, host: '127.0.0.1' });
});
after(() => sim.stop());

test('otlp from the environment, a silent collector: told once, secret unsaid, exit 0', async () => {
  const sockets: Socket[] = [];
  let seen = '';
  const silent = createServer((s) => {
    sockets.push(s);
    s.on('data', (d: Buffer) => {
      seen += d.toString();
    });
  });
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
  const port = (silent.address() as { port: number }).port;
  const out = join(dir, 'run');
  try {
    const r = await runCli(
      [
        'run',
        '--url',
        sim.url,
        '--requests',
        '4',
        '--concurrency',
        '2',
        '--output-tokens',
        '4',
        '--no-html',
        '--out',
        out,
        '--output',
        'otlp',
      ],
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
        OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=s3cret-value',
      },
    );
    // The process ended by itself: nothing the exporter opened kept it alive.
    assert.equal(r.code, 0, r.stderr);
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as RunSummary;
    assert.equal(summary.requests.completed, 4);
    assert.match(seen, /^POST \/v1\/metrics HTTP\/1\.1/);
    assert.match(seen, /x-api-key: s3cret-value/i);
    assert.ok(!`${r.stdout}${r.stderr}`.includes('s3cret'), 'a header value was printed');
    assert.equal(r.stderr.match(/did not take/g)?.length, 1, r.stderr);
  } finally {
    for (const s of sockets) s.destroy();
    silent.close();
  }
});
