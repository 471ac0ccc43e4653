import { parseNvidiaSmiCsv } from './gpu.js';
import { parseProcStatus } from './process.js';
import { type MetricSample, parsePrometheusText, seriesKey } from './prometheus.js';

/**
 * Where server-side numbers come from: the server's Prometheus `/metrics`, a DCGM exporter (also
 * Prometheus text), llama.cpp's `/slots`, the local `nvidia-smi`, or `/proc/<pid>/status` of a
 * local server process.
 */
export type TelemetrySourceKind =
  | 'prometheus'
  | 'dcgm'
  | 'llamacpp-slots'
  | 'nvidia-smi'
  | 'process';

/** One scrape, on the run's clock (ms), as stored line by line in `telemetry.jsonl`. */
export interface TelemetrySnapshot {
  at: number;
  source: TelemetrySourceKind;
  /** Series key (`name{labels}`) to value. */
  values?: Record<string, number>;
  error?: string;
}

/** Turns what a source gave (a body, a command's output, a status file) into series values. */
export function snapshotValues(kind: TelemetrySourceKind, body: string): Record<string, number> {
  const samples = parseSource(kind, body);
  const values: Record<string, number> = {};
  for (const s of samples) values[seriesKey(s.name, s.labels)] = s.value;
  return values;
}

function parseSource(kind: TelemetrySourceKind, body: string): MetricSample[] {
  switch (kind) {
    case 'prometheus':
    case 'dcgm':
      return parsePrometheusText(body);
    case 'llamacpp-slots':
      return slotsSamples(body);
    case 'nvidia-smi':
      return parseNvidiaSmiCsv(body);
    case 'process':
      return parseProcStatus(body);
  }
}

/**
 * llama.cpp's `GET /slots` (one object per parallel slot) as gauges: slots in total, slots
 * processing, and per slot the context size and tokens decoded so far.
 */
export function slotsSamples(body: string): MetricSample[] {
  const slots = JSON.parse(body) as unknown;
  if (!Array.isArray(slots)) throw new Error('/slots did not answer a JSON array');
  let processing = 0;
  const samples: MetricSample[] = [];
  for (const slot of slots as Record<string, unknown>[]) {
    if (slot.is_processing === true) processing++;
    const id = String(slot.id ?? samples.length);
    if (typeof slot.n_ctx === 'number') {
      samples.push({ name: 'llamacpp_slot:n_ctx', labels: { slot: id }, value: slot.n_ctx });
    }
    const next = (slot.next_token as Record<string, unknown>[] | undefined)?.[0];
    if (typeof next?.n_decoded === 'number') {
      samples.push({
        name: 'llamacpp_slot:n_decoded',
        labels: { slot: id },
        value: next.n_decoded,
      });
    }
  }
  samples.push({ name: 'llamacpp_slots:total', labels: {}, value: slots.length });
  samples.push({ name: 'llamacpp_slots:processing', labels: {}, value: processing });
  return samples;
}
