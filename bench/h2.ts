/**
 * The client's cost per token event on each protocol it speaks: plain HTTP/1.1 (H1Pool),
 * HTTP/1.1 over TLS (undici's Pool) and HTTP/2 over TLS (H2Pool), against one paced server in a
 * process of its own (bench/fake-server/pacedProtocols.ts), so that the CPU counted is the
 * client's alone. For each protocol, stream count and pacing, a closed loop of that many
 * streams runs in this thread; the row gives the token events received per CPU-second of this
 * process and the CPU microseconds per event. Paced: TTFT 50 ms, ITL 10 ms, each event its own
 * write; unpaced (--itl-ms 0): every event of a stream written at once, so the client is the
 * bottleneck.
 *
 *   node --import tsx bench/h2.ts [--streams 64,256] [--itl-ms 10,0] [--ttft-ms 50]
 *     [--tokens 64] [--rounds 4] [--protocols h1,tls,h2]
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { openaiBackend } from '../src/backends/openai.js';
import type { TargetConfig } from '../src/loadgen/http.js';
import { type Connections, openConnections, runLoadgen } from '../src/loadgen/run.js';
import { createSyntheticWorkload } from '../src/workload/synthetic.js';
import { REPO } from '../tools/repo.js';

const PROTOCOLS = {
  h1: 'HTTP/1.1 (H1Pool)',
  tls: 'HTTP/1.1 + TLS (undici)',
  h2: 'HTTP/2 + TLS (H2Pool)',
} as const;
type Protocol = keyof typeof PROTOCOLS;

const { values } = parseArgs({
  options: {
    streams: { type: 'string', default: '64,256' },
    'itl-ms': { type: 'string', default: '10,0' },
    'ttft-ms': { type: 'string', default: '50' },
    tokens: { type: 'string', default: '64' },
    rounds: { type: 'string', default: '4' },
    protocols: { type: 'string', default: 'h1,tls,h2' },
  },
  strict: true,
});
const streamsList = values.streams.split(',').map(Number);
const itlList = values['itl-ms'].split(',').map(Number);
const ttftMs = Number(values['ttft-ms']);
const tokens = Number(values.tokens);
const rounds = Number(values.rounds);
const protocols = values.protocols.split(',') as Protocol[];
for (const p of protocols) if (!(p in PROTOCOLS)) throw new Error(`unknown protocol ${p}`);

const dir = mkdtempSync(join(tmpdir(), 'ig-bench-h2-'));
const keyPath = join(dir, 'key.pem');
const certPath = join(dir, 'cert.pem');
execFileSync(
  'openssl',
  [
    ...['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'],
    ...['-keyout', keyPath, '-out', certPath, '-days', '1', '-subj', '/CN=localhost'],
    ...['-addext', 'subjectAltName=IP:127.0.0.1'],
  ],
  { stdio: 'ignore' },
);
/** The bench's own throwaway certificate: trusted by turning verification off, here only. */
const TLS = { rejectUnauthorized: false };

async function startServer(itlMs: number) {
  const child = spawn(
    process.execPath,
    [
      ...['--import', 'tsx', join(REPO, 'bench/fake-server/pacedProtocols.ts')],
      ...['--key', keyPath, '--cert', certPath, '--ttft-ms', String(ttftMs)],
      ...['--itl-ms', String(itlMs), '--tokens', String(tokens)],
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const line = await new Promise<string>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout });
    lines.once('line', resolve);
    child.once('exit', (code) => reject(new Error(`server exited (${code})`)));
  });
  return { ports: JSON.parse(line) as Record<Protocol, number>, stop: () => child.kill() };
}

function target(protocol: Protocol, port: number): TargetConfig {
  const scheme = protocol === 'h1' ? 'http' : 'https';
  return {
    backend: openaiBackend,
    baseUrl: `${scheme}://127.0.0.1:${port}`,
    endpoint: 'completions',
    model: 'bench',
    temperature: 0,
    ignoreEos: true,
    continuousUsageStats: false,
    headers: {},
    timeoutMs: 60_000,
    protocol: protocol === 'h2' ? 'h2' : 'http/1.1',
    ...(protocol === 'h1' ? {} : { tls: { insecure: true } }),
  };
}

async function connections(protocol: Protocol, t: TargetConfig, streams: number) {
  const load = { mode: 'closed' as const, concurrency: streams };
  if (protocol !== 'tls') return openConnections(t, load, false);
  // undici's Pool as openConnections makes it, with the bench's certificate trusted.
  return new Pool(new URL(t.baseUrl).origin, {
    connections: streams,
    pipelining: 1,
    connect: TLS,
  }) as unknown as Connections;
}

interface Row {
  protocol: string;
  streams: number;
  itlMs: number;
  events: number;
  failed: number;
  cpuS: number;
  wallS: number;
}

async function measure(protocol: Protocol, port: number, streams: number, itlMs: number) {
  const t = target(protocol, port);
  const pool = await connections(protocol, t, streams);
  // Paced, a round lasts TTFT + tokens x ITL; unpaced, the client sets the pace: more rounds.
  const requests = streams * (itlMs === 0 ? rounds * 5 : rounds);
  let events = 0;
  let failed = 0;
  const cpu = process.cpuUsage();
  const wall = performance.now();
  await runLoadgen({
    target: t,
    connections: pool,
    load: { mode: 'closed', concurrency: streams },
    requests,
    seed: 1,
    nextRequest: createSyntheticWorkload({ inputTokens: 16, outputTokens: tokens, seed: 1 }),
    onRecord: (r) => {
      if (r.error) failed++;
      else events += r.outputTokens;
    },
  });
  const used = process.cpuUsage(cpu);
  return {
    protocol: PROTOCOLS[protocol],
    streams,
    itlMs,
    events,
    failed,
    cpuS: (used.user + used.system) / 1e6,
    wallS: (performance.now() - wall) / 1000,
  } satisfies Row;
}

const rows: Row[] = [];
try {
  for (const itlMs of itlList) {
    const server = await startServer(itlMs);
    try {
      // One short pass per protocol first: the JIT's warm-up is not the protocol's cost.
      for (const p of protocols) await measure(p, server.ports[p], 8, itlMs);
      for (const streams of streamsList) {
        for (const p of protocols) {
          const row = await measure(p, server.ports[p], streams, itlMs);
          rows.push(row);
          const perCpuS = row.events / row.cpuS;
          console.log(
            `${row.protocol.padEnd(24)} ${String(streams).padStart(4)} streams  ${itlMs === 0 ? 'unpaced' : `ITL ${itlMs} ms`}  ${Math.round(perCpuS).toLocaleString('en-US').padStart(9)} events/CPU-s  ${((row.cpuS / row.events) * 1e6).toFixed(2).padStart(6)} CPU µs/event  ${Math.round(
              row.events / row.wallS,
            )
              .toLocaleString('en-US')
              .padStart(8)} events/s${row.failed ? `  ${row.failed} failed` : ''}`,
          );
        }
      }
    } finally {
      server.stop();
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
