/**
 * Issue 52, `--output prometheus` and `--output otlp` in whole runs against the in-process
 * simulator: what a scrape and a collector receive equals summary.json; a collector that never
 * answers does not hold the run and is told once; one that fails is told once and the run
 * completes; neither exporter is in the module graph of a plain run.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { createServer as createNetServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { UsageError } from '../../../src/errors.js';
import type { RunSummary } from '../../../src/metrics/summary.js';
import type { RunPlan } from '../../../src/plan/runPlan.js';
import { parseRunPlan } from '../../../src/plan/runPlan.js';
import type { Output } from '../../../src/session/events.js';
import { FLUSH_WITHIN_MS } from '../../../src/session/outputs/otlp.js';
import { prepareSweep, runSweep } from '../../../src/session/profiles/sweep.js';
import { benchmark } from '../../../src/session/run.js';
import type { PreparedRun } from '../../../src/session/target.js';
import { loadOutputs } from '../../../src/session/userOutputs.js';
import { type RunningSimulator, startSimulator } from '../../../src/sim/simulator.js';
import { parsePrometheusText } from '../../../src/telemetry/prometheus.js';
import { REPO } from '../../../tools/repo.js';
import { strictExpositionCheck } from '../../helpers/exposition.js';

const dir = mkdtempSync(join(tmpdir(), 'ig-exporters-'));
let sim: RunningSimulator;
before(async () => {
  sim = await startSimulator({ port: 0, host: '127.0.0.1' });
});
after(async () => {
  await sim.stop();
  rmSync(dir, { recursive: true, force: true });
});

const summaryOf = (pointDir: string) =>
  JSON.parse(readFileSync(join(pointDir, 'summary.json'), 'utf8')) as RunSummary;

function listen(server: Server | ReturnType<typeof createNetServer>): Promise<number> {
  return new Promise((done) => {
    server.listen(0, '127.0.0.1', () => done((server.address() as { port: number }).port));
  });
}

describe('--output prometheus in a sweep', () => {
  test('each point scraped at its end equals its summary.json; the server closes with the run', async () => {
    const notices: string[] = [];
    const [prometheus] = await loadOutputs(['prometheus=0'], { onNotice: (n) => notices.push(n) });
    assert.equal(notices.length, 1);
    const url = /http:\/\/127\.0\.0\.1:\d+\/metrics/.exec(notices[0])?.[0];
    assert.ok(url, notices[0]);
    const scrapes: string[] = [];
    // After prometheus in the list: it hears pointFinished first, as outputs are told in turn.
    const scraper: Output = {
      name: 'scraper',
      async pointFinished() {
        const res = await fetch(url);
        assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
        scrapes.push(await res.text());
      },
    };
    const root = join(dir, 'sweep');
    const { settings, prepared, problems } = prepareSweep({
      url: sim.url,
      levels: '1,3',
      requests: '12',
      inputTokens: '16',
      outputTokens: '6',
      out: root,
    });
    assert.deepEqual(problems, []);
    const outcome = await runSweep(prepared as PreparedRun & { plan: RunPlan }, settings, {
      stop: new AbortController().signal,
      say: () => {},
      html: false,
      outputs: [prometheus, scraper],
    });
    assert.equal(outcome.code, 0);
    const top = JSON.parse(readFileSync(join(root, 'manifest.json'), 'utf8')) as {
      id: string;
      points: { id: string; dir: string }[];
    };
    const { points } = top;
    assert.equal(points.length, 2);
    assert.equal(scrapes.length, 2);
    for (const [i, text] of scrapes.entries()) {
      strictExpositionCheck(text);
      const samples = parsePrometheusText(text);
      // Each scrape has every point finished so far, the earlier ones unchanged.
      for (const p of points.slice(0, i + 1)) {
        const summary = summaryOf(join(root, p.dir));
        const of = (name: string, more: Record<string, string> = {}) =>
          samples.filter(
            (s) =>
              s.name === name &&
              s.labels.infergauge_point_id === p.id &&
              Object.entries(more).every(([k, v]) => s.labels[k] === v),
          );
        const done = of('infergauge_client_requests_total', { outcome: 'completed' });
        assert.equal(done[0]?.value, summary.requests.completed, `${p.id} completed`);
        assert.equal(summary.requests.completed, 12);
        assert.equal(of('infergauge_client_requests_total', { outcome: 'failed' }).length, 0);
        assert.equal(
          of('gen_ai_client_operation_duration_seconds_count')[0]?.value,
          summary.requests.completed,
        );
        assert.equal(
          of('gen_ai_client_token_usage_sum', { gen_ai_token_type: 'output' })[0]?.value,
          summary.tokens.output,
        );
        assert.equal(done[0].labels.infergauge_run_id, top.id);
        const manifest = JSON.parse(readFileSync(join(root, p.dir, 'manifest.json'), 'utf8'));
        assert.equal(done[0].labels.gen_ai_request_model, manifest.model);
        assert.ok(manifest.model);
        assert.equal(done[0].labels.server_address, '127.0.0.1');
        assert.match(done[0].labels.infergauge_load, /^closed:[13]$/);
        assert.equal(of('infergauge_client_requests_in_flight')[0]?.value, 0);
        assert.ok(of('infergauge_run_validity').length === 1);
      }
    }
    await assert.rejects(fetch(url), 'the server is closed with the session');
  });

  test('a port in use fails the command before it runs, saying what to do', async () => {
    const busy = createServer();
    const port = await listen(busy);
    try {
      await assert.rejects(loadOutputs([`prometheus=${port}`]), (err: unknown) => {
        assert.ok(err instanceof UsageError);
        assert.match(err.message, /in use.*prometheus=PORT/s);
        return true;
      });
    } finally {
      busy.close();
    }
  });
});

interface Received {
  headers: IncomingHttpHeaders;
  path: string;
  body: OtlpRequest;
}

interface OtlpAttribute {
  key: string;
  value: { stringValue?: string; intValue?: string | number };
}
interface OtlpPoint {
  attributes: OtlpAttribute[];
  asInt?: string | number;
  asDouble?: number;
  count?: string | number;
  sum?: number;
  bucketCounts?: (string | number)[];
  explicitBounds?: number[];
}
interface OtlpMetric {
  name: string;
  unit: string;
  sum?: { dataPoints: OtlpPoint[]; isMonotonic: boolean; aggregationTemporality: number };
  gauge?: { dataPoints: OtlpPoint[] };
  histogram?: { dataPoints: OtlpPoint[]; aggregationTemporality: number };
}
interface OtlpRequest {
  resourceMetrics: {
    resource: { attributes: OtlpAttribute[] };
    scopeMetrics: { scope: { name: string }; metrics: OtlpMetric[] }[];
  }[];
}

/** A loopback OTLP/HTTP receiver: decodes each JSON request; answers `status`. */
async function receiver(status = 200) {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => {
      text += c;
    });
    req.on('end', () => {
      assert.equal(req.headers['content-type'], 'application/json');
      received.push({ headers: req.headers, path: req.url ?? '', body: JSON.parse(text) });
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(status === 200 ? '{}' : '{"code":13,"message":"collector \\u001b[31mbroken"}');
    });
  });
  const port = await listen(server);
  return { received, port, close: () => new Promise((r) => server.close(r)) };
}

const attr = (p: { attributes: OtlpAttribute[] }, key: string) => {
  const v = p.attributes.find((a) => a.key === key)?.value;
  return v?.stringValue ?? (v?.intValue !== undefined ? Number(v.intValue) : undefined);
};

describe('--output otlp in a run', () => {
  test('the collector decodes names, units and attributes; final counts equal summary.json', async () => {
    const collector = await receiver();
    const saved = process.env.OTEL_EXPORTER_OTLP_HEADERS;
    process.env.OTEL_EXPORTER_OTLP_HEADERS = 'authorization=Bearer s3cret-token';
    const notices: string[] = [];
    try {
      const outputs = await loadOutputs([`otlp=http://127.0.0.1:${collector.port}`], {
        onNotice: (n) => notices.push(n),
      });
      const out = join(dir, 'otlp-run');
      const plan = parseRunPlan({
        url: sim.url,
        requests: '30',
        concurrency: '4',
        workers: '2',
        inputTokens: '16',
        outputTokens: '5',
        out,
      });
      const result = await benchmark(plan, {
        outputs,
        html: false,
        onNotice: (n) => notices.push(n),
      });
      assert.equal(result.code, 0);
      const summary = summaryOf(out);
      assert.ok(collector.received.length >= 1);
      const last = collector.received.at(-1) as Received;
      assert.equal(last.path, '/v1/metrics');
      assert.equal(
        last.headers.authorization,
        'Bearer s3cret-token',
        'the environment headers are sent',
      );
      assert.ok(!notices.join('\n').includes('s3cret'), 'headers are never said');
      assert.equal(notices.filter((n) => n.startsWith('otlp:')).length, 1, notices.join('\n'));
      const rm = last.body.resourceMetrics[0];
      assert.equal(attr(rm.resource, 'service.name'), 'infergauge');
      const metrics = new Map(rm.scopeMetrics.flatMap((s) => s.metrics).map((m) => [m.name, m]));
      const requests = metrics.get('infergauge.client.requests');
      assert.ok(requests?.sum?.isMonotonic);
      assert.equal(requests.unit, '{request}');
      const done = requests.sum.dataPoints.find((p) => attr(p, 'outcome') === 'completed');
      assert.ok(done);
      assert.equal(Number(done.asInt), summary.requests.completed);
      assert.equal(summary.requests.completed, 30);
      const manifest = JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8'));
      assert.ok(manifest.model);
      assert.equal(attr(done, 'gen_ai.request.model'), manifest.model);
      assert.equal(attr(done, 'infergauge.run.id'), manifest.id);
      assert.equal(attr(done, 'server.address'), '127.0.0.1');
      assert.equal(attr(done, 'server.port'), Number(new URL(sim.url).port));
      assert.equal(attr(done, 'infergauge.load'), 'closed:4');
      assert.equal(attr(done, 'gen_ai.operation.name'), 'chat');
      for (const [name, unit] of [
        ['gen_ai.client.operation.duration', 's'],
        ['gen_ai.client.operation.time_to_first_chunk', 's'],
        ['gen_ai.client.operation.time_per_output_chunk', 's'],
        ['infergauge.client.time_per_output_token', 's'],
      ] as const) {
        const h = metrics.get(name)?.histogram;
        assert.ok(h, name);
        assert.equal(metrics.get(name)?.unit, unit);
        const [p] = h.dataPoints;
        const counts = (p.bucketCounts ?? []).map(Number);
        assert.equal(counts.length, (p.explicitBounds ?? []).length + 1);
        assert.equal(
          counts.reduce((a, b) => a + b, 0),
          Number(p.count),
        );
        if (name !== 'gen_ai.client.operation.time_per_output_chunk') {
          assert.equal(Number(p.count), summary.requests.completed, name);
        }
      }
      const tokens = metrics.get('gen_ai.client.token.usage')?.histogram?.dataPoints ?? [];
      const output = tokens.find((p) => attr(p, 'gen_ai.token.type') === 'output');
      assert.equal(output?.sum, summary.tokens.output);
      assert.equal(metrics.get('infergauge.run.validity')?.gauge?.dataPoints.length, 1);
    } finally {
      if (saved === undefined) delete process.env.OTEL_EXPORTER_OTLP_HEADERS;
      else process.env.OTEL_EXPORTER_OTLP_HEADERS = saved;
      await collector.close();
    }
  });

  test('a collector that never answers holds the run no longer than the bound, told once', async () => {
    const sockets: Socket[] = [];
    // Takes the connection and the request, and never replies.
    const silent = createNetServer((s) => {
      sockets.push(s);
      s.resume();
    });
    const port = await listen(silent);
    const notices: string[] = [];
    try {
      const outputs = await loadOutputs([`otlp=http://127.0.0.1:${port}`], {
        onNotice: (n) => notices.push(n),
      });
      const out = join(dir, 'otlp-silent');
      const plan = parseRunPlan({
        url: sim.url,
        requests: '8',
        concurrency: '2',
        outputTokens: '4',
        out,
      });
      const started = performance.now();
      const result = await benchmark(plan, {
        outputs,
        html: false,
        onNotice: (n) => notices.push(n),
      });
      const tookMs = performance.now() - started;
      assert.equal(result.code, 0);
      assert.equal(summaryOf(out).requests.completed, 8);
      const late = notices.filter((n) => /did not take/.test(n));
      assert.equal(late.length, 1, notices.join('\n'));
      // The point's flush waits out the bound once; the shutdown does not wait again. A
      // generous ceiling: the run itself is a few requests.
      assert.ok(tookMs < 3 * FLUSH_WITHIN_MS + 5000, `took ${tookMs} ms`);
      assert.ok(sockets.length >= 1, 'the exporter did connect');
    } finally {
      for (const s of sockets) s.destroy();
      silent.close();
    }
  });

  test('a collector that fails is told once, without its control characters; the run completes', async () => {
    const collector = await receiver(400);
    const notices: string[] = [];
    try {
      const outputs = await loadOutputs([`otlp=http://127.0.0.1:${collector.port}/`], {
        onNotice: (n) => notices.push(n),
      });
      const out = join(dir, 'otlp-failing');
      const plan = parseRunPlan({
        url: sim.url,
        requests: '8',
        concurrency: '2',
        outputTokens: '4',
        out,
      });
      const result = await benchmark(plan, {
        outputs,
        html: false,
        onNotice: (n) => notices.push(n),
      });
      assert.equal(result.code, 0);
      assert.equal(summaryOf(out).requests.completed, 8);
      assert.ok(collector.received.length >= 1);
      const failed = notices.filter((n) => /failed/.test(n));
      assert.equal(failed.length, 1, notices.join('\n'));
      assert.ok(!failed[0].includes('\u001b'));
    } finally {
      await collector.close();
    }
  });
});

test('a plain run never loads the exporters: no static import reaches them', () => {
  // The sources themselves (the suite runs these tests compiled, beside compiled sources).
  const src = join(REPO, 'src');
  const seen = new Set<string>();
  // A run loads the command line and, when named, the run command (program.ts imports each
  // command only when it is the one asked for).
  const stack = [join(src, 'cli/main.ts'), join(src, 'cli/run.ts')];
  const external = new Set<string>();
  while (stack.length > 0) {
    const file = stack.pop() as string;
    if (seen.has(file)) continue;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    // Static imports and re-exports only: `import('...')` is what loads a module when asked.
    for (const m of text.matchAll(/\bfrom\s+'([^']+)'/g)) {
      const spec = m[1];
      if (!spec.startsWith('.')) {
        external.add(spec);
        continue;
      }
      stack.push(resolve(dirname(file), spec.replace(/\.js$/, '.ts')));
    }
  }
  assert.ok(seen.has(join(src, 'session/userOutputs.ts')), 'the walk reaches the output registry');
  assert.ok(!seen.has(join(src, 'session/outputs/otlp.ts')));
  assert.ok(!seen.has(join(src, 'session/outputs/prometheus.ts')));
  assert.deepEqual(
    [...external].filter((s) => s.startsWith('@opentelemetry/')),
    [],
  );
  // The walk is real: the exporters themselves import the SDK.
  assert.ok(readdirSync(join(src, 'session/outputs')).includes('otlp.ts'));
});
