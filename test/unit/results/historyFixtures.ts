/**
 * Run directories for the history's tests, written as a run writes them (manifest, records,
 * summary through results/runFiles.ts), small: synthetic records of known distributions.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { LoadSpec } from '../../../src/load.js';
import { summarize } from '../../../src/metrics/summary.js';
import type { RequestRecord } from '../../../src/record.js';
import { writeManifest, writeSummary } from '../../../src/results/runFiles.js';
import { createRng, type Rng } from '../../../src/rng.js';

function gaussian(rng: Rng): number {
  return Math.sqrt(-2 * Math.log(1 - rng.next())) * Math.cos(2 * Math.PI * rng.next());
}

/**
 * A closed loop of `concurrency` slots: log-normal TTFT (median `ttftMs`) and per-request ITL
 * level (median `itlMs`), `tokens` output tokens each.
 */
export function records(
  seed: number,
  o: { requests?: number; concurrency?: number; ttftMs?: number; itlMs?: number } = {},
): RequestRecord[] {
  const rng = createRng(seed);
  const slots = new Array<number>(o.concurrency ?? 4).fill(0);
  const tokens = 16;
  const out: RequestRecord[] = [];
  for (let id = 0; id < (o.requests ?? 400); id++) {
    const slot = slots.indexOf(Math.min(...slots));
    const sentUs = Math.round(slots[slot] * 1000);
    const ttftUs = Math.round((o.ttftMs ?? 100) * 1000 * Math.exp(0.3 * gaussian(rng)));
    const levelUs = Math.round((o.itlMs ?? 10) * 1000 * Math.exp(0.2 * gaussian(rng)));
    const dtUs = [ttftUs, ...new Array<number>(tokens - 1).fill(levelUs)];
    const lastUs = sentUs + dtUs.reduce((a, b) => a + b, 0);
    out.push({
      id,
      phase: 'measure',
      scheduledAt: sentUs / 1000,
      sentAt: sentUs / 1000,
      requestedInputTokens: 128,
      requestedOutputTokens: tokens,
      firstTokenAt: (sentUs + ttftUs) / 1000,
      firstContentAt: (sentUs + ttftUs) / 1000,
      lastTokenAt: lastUs / 1000,
      endAt: lastUs / 1000,
      status: 200,
      outputTokens: tokens,
      outputTokensSource: 'server',
      events: { dtUs, tokens: dtUs.map(() => 1), contentChars: dtUs.map(() => 4) },
    });
    slots[slot] = lastUs / 1000;
  }
  return out;
}

export interface FixtureRun {
  id: string;
  startedAt: string;
  seed: number;
  ttftMs?: number;
  model?: string;
  url?: string;
  tags?: string[];
  engineVersion?: string;
  gpu?: string;
  serverInfo?: Record<string, string>;
  scenario?: string;
  concurrency?: number;
  /** Killed mid-way: no summary.json, no end time. */
  killed?: boolean;
  /** Only the summary kept (records deleted). */
  summaryOnly?: boolean;
  requests?: number;
  /** A sweep point's own load (its plan's is the sweep's). */
  pointConcurrency?: number;
}

/** Writes one run's directory `root/name` as `infergauge run --out` would; returns its path. */
export function writeRun(root: string, name: string, r: FixtureRun): string {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  const load: LoadSpec = { mode: 'closed', concurrency: r.concurrency ?? 4 };
  const own: LoadSpec = { mode: 'closed', concurrency: r.pointConcurrency ?? r.concurrency ?? 4 };
  const recs = records(r.seed, {
    concurrency: own.concurrency,
    ttftMs: r.ttftMs ?? 100,
    requests: r.requests ?? 400,
  });
  const header = { id: r.id, kind: 'run' as const, command: 'run' };
  const about = {
    startedAt: r.startedAt,
    server: {
      url: r.url ?? 'http://gpu-1:8000',
      engine: 'vllm',
      engineVersion: r.engineVersion ?? '0.6.1',
      gpu: { type: r.gpu ?? 'H100', count: 1, source: 'dcgm' },
    },
    model: r.model ?? 'llama-3.1-8b',
    ...(r.pointConcurrency !== undefined ? { load: own } : {}),
    scenario: r.scenario ?? 'chat',
    plan: {
      load,
      label: 'run',
      tags: r.tags ?? [],
      ...(r.serverInfo ? { serverInfo: r.serverInfo } : {}),
    },
  };
  if (!r.summaryOnly) {
    writeFileSync(join(dir, 'records.jsonl'), recs.map((x) => `${JSON.stringify(x)}\n`).join(''));
  }
  if (r.killed) {
    writeManifest(dir, header, about);
    return dir;
  }
  writeSummary(dir, summarize(recs, { load: own }), undefined);
  const ended = new Date(Date.parse(r.startedAt) + 60_000).toISOString();
  writeManifest(dir, { ...header, endedAt: ended }, about);
  return dir;
}

/** `2026-11-0<day>T02:00:00Z`: a nightly run's start. */
export const night = (day: number) => new Date(Date.UTC(2026, 10, day, 2, 0, 0)).toISOString();
