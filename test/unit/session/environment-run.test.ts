/**
 * A whole run against the in-process simulator records its environment in manifest.json: the
 * engine and version the server answered, --server-info as server.info, the tags and note in
 * the plan, and the GPUs a DCGM exporter named (telemetry that arrives after the manifest is
 * first written, added when the point ends).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { parseRunPlan } from '../../../src/plan/runPlan.js';
import { prepareRun } from '../../../src/session/prepare.js';
import { benchmark, runPlan } from '../../../src/session/run.js';
import { type RunningSimulator, startSimulator } from '../../../src/sim/simulator.js';
import { VERSION } from '../../../src/version.js';
import { REPO } from '../../../tools/repo.js';
import { type LoopbackServer, listenOnLoopback } from '../../helpers/scriptedServer.js';

const dir = mkdtempSync(join(tmpdir(), 'ig-environment-run-'));
let sim: RunningSimulator;
let dcgm: LoopbackServer;
before(async () => {
  sim = await startSimulator({ port: 0, host: '127.0.0.1' });
  const text = readFileSync(join(REPO, 'test/fixtures/dcgm-exporter-metrics.txt'));
  dcgm = await listenOnLoopback(
    createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end(text)),
  );
});
after(async () => {
  await sim.stop();
  await dcgm.close();
  rmSync(dir, { recursive: true, force: true });
});

const manifest = (out: string) =>
  JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8')) as {
    endedAt?: string;
    server: Record<string, unknown>;
    plan: Record<string, unknown>;
  };

test('a live run: engine, version, server-info, tags, note, and the GPUs DCGM named', async () => {
  const out = join(dir, 'live');
  const plan = parseRunPlan({
    url: sim.url,
    requests: '8',
    concurrency: '2',
    inputTokens: '16',
    outputTokens: '4',
    dcgmUrl: `${dcgm.url}/metrics`,
    scrapeInterval: '0.05',
    tag: ['nightly', 'h100'],
    note: 'first of the series',
    serverInfo: ['tp=1', 'gpu=A100x4'],
    out,
  });
  await benchmark(plan, { html: false });
  const m = manifest(out);
  assert.ok(m.endedAt);
  assert.equal(m.server.engine, 'infergauge-sim');
  assert.equal(m.server.engineVersion, VERSION);
  assert.deepEqual(m.server.info, { tp: '1', gpu: 'A100x4' });
  // What DCGM measured, not what --server-info stated.
  assert.deepEqual(m.server.gpu, { type: 'NVIDIA H100 80GB HBM3', count: 2, source: 'dcgm' });
  assert.deepEqual(m.plan.tags, ['nightly', 'h100']);
  assert.equal(m.plan.note, 'first of the series');
  assert.deepEqual(m.plan.serverInfo, { tp: '1', gpu: 'A100x4' });
});

test('virtual time: the simulated engine at the tool version, the stated GPUs', async () => {
  const out = join(dir, 'virtual');
  const prepared = prepareRun({
    simulate: true,
    requests: '4',
    outputTokens: '4',
    serverInfo: ['gpu=8xH200'],
    out,
  });
  assert.deepEqual(prepared.problems, []);
  await runPlan(prepared as never, { html: false });
  const m = manifest(out);
  assert.equal(m.server.engine, 'infergauge-sim');
  assert.equal(m.server.engineVersion, VERSION);
  assert.deepEqual(m.server.gpu, { type: 'H200', count: 8, source: 'server-info' });
  assert.deepEqual(m.plan.tags, []);
});
