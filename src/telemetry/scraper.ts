import { requestText } from '../httpText.js';
import type { ProxySettings } from '../proxy.js';
import type { TlsMaterial } from '../tls.js';
import { type NvidiaSmiCommand, runNvidiaSmi } from './gpu.js';
import { readProcStatus } from './process.js';
import { parsePrometheusText } from './prometheus.js';
import { snapshotValues, type TelemetrySnapshot } from './snapshot.js';
import { type ServerMetricsSummary, summarizeTelemetry } from './summary.js';

/**
 * One thing to sample during the run: an HTTP endpoint (the server's Prometheus `/metrics`, a
 * DCGM exporter, llama.cpp's `/slots`), the local `nvidia-smi`, or a local process's memory.
 */
export type TelemetrySource =
  | { kind: 'prometheus' | 'dcgm' | 'llamacpp-slots'; url: string }
  | { kind: 'nvidia-smi'; command?: NvidiaSmiCommand }
  | { kind: 'process'; pid: number; procRoot?: string };

export interface ScraperOptions {
  sources: TelemetrySource[];
  intervalMs: number;
  /** The run clock, in ms, so snapshots line up with the records. */
  nowMs: () => number;
  /**
   * Request headers (the API key) for the server's own endpoints; a DCGM exporter is another
   * service and gets none.
   */
  headers?: Record<string, string>;
  /**
   * The run's TLS options (src/tls.ts) for the server's endpoints; a DCGM exporter gets
   * the CA and certificate but not --tls-servername, which names the server.
   */
  tls?: TlsMaterial;
  /** The run's proxy settings (src/proxy.ts), for every URL source. */
  proxy?: ProxySettings;
  onSnapshot: (snapshot: TelemetrySnapshot) => void;
}

/**
 * Scrapes every source at once every `intervalMs` until stopped, and once more on stop so the
 * last counters cover the whole run. A failed scrape is a snapshot with an error; it never
 * stops the run. One scrape of a source at a time: a slow server is not piled on.
 */
export function startScraper(options: ScraperOptions): { stop(): Promise<void> } {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let inFlight: Promise<void> = Promise.resolve();
  const { servername: _servername, ...elsewhere } = options.tls ?? {};
  const tls = { server: options.tls, elsewhere: options.tls ? elsewhere : undefined };
  const scrapeAll = () =>
    Promise.all(options.sources.map((source) => scrape(source, options, tls))).then(
      () => undefined,
    );
  const tick = () => {
    inFlight = scrapeAll().then(() => {
      if (!stopped) timer = setTimeout(tick, options.intervalMs);
    });
  };
  tick();
  return {
    stop: async () => {
      stopped = true;
      clearTimeout(timer);
      await inFlight;
      await scrapeAll();
    },
  };
}

/** What a source is, in an error message. */
export function describeSource(source: TelemetrySource): string {
  switch (source.kind) {
    case 'nvidia-smi':
      return source.command?.file ?? 'nvidia-smi';
    case 'process':
      return `process ${source.pid}`;
    default:
      return source.url;
  }
}

type ScrapeTls = { server?: TlsMaterial; elsewhere?: TlsMaterial };

async function scrape(
  source: TelemetrySource,
  options: ScraperOptions,
  tls: ScrapeTls,
): Promise<void> {
  const at = options.nowMs();
  try {
    const body = await read(source, options.headers ?? {}, tls, options.proxy);
    options.onSnapshot({ at, source: source.kind, values: snapshotValues(source.kind, body) });
  } catch (err) {
    const code = (err as { code?: string }).code;
    const message = `${describeSource(source)}: ${code ? `${code}: ` : ''}${(err as Error).message}`;
    options.onSnapshot({ at, source: source.kind, error: message });
  }
}

async function read(
  source: TelemetrySource,
  headers: Record<string, string>,
  tls: ScrapeTls,
  proxy: ProxySettings | undefined,
): Promise<string> {
  switch (source.kind) {
    case 'nvidia-smi':
      return runNvidiaSmi(source.command);
    case 'process':
      return readProcStatus(source.pid, source.procRoot);
    default: {
      const response = await requestText(source.url, {
        headers: source.kind === 'dcgm' ? {} : headers,
        timeoutMs: 5_000,
        ...(source.kind === 'dcgm'
          ? tls.elsewhere && { tls: tls.elsewhere }
          : tls.server && { tls: tls.server }),
        ...(proxy ? { proxy } : {}),
      });
      if (response.statusCode !== 200) throw new Error(`HTTP ${response.statusCode}`);
      return response.body;
    }
  }
}

/** What probing a `/metrics` URL found. */
export type MetricsProbe = { ok: true; series: number } | { ok: false; reason: string };

/**
 * Asks `url` once, within `timeoutMs`, whether it serves Prometheus text: HTTP 200 and a body
 * that is neither JSON (trtllm-serve's `/metrics` is JSON; its Prometheus text is under
 * `/prometheus/metrics`) nor HTML, with at least one sample in it.
 */
export async function probeMetrics(
  url: string,
  headers: Record<string, string> = {},
  timeoutMs = 1_500,
  tls?: TlsMaterial,
  proxy?: ProxySettings,
): Promise<MetricsProbe> {
  try {
    const { statusCode, body } = await requestText(url, {
      headers,
      timeoutMs,
      ...(tls && { tls }),
      ...(proxy ? { proxy } : {}),
    });
    if (statusCode !== 200) return { ok: false, reason: `HTTP ${statusCode}` };
    const start = body.trimStart()[0];
    if (start === '{' || start === '[' || start === '<') {
      return { ok: false, reason: 'not Prometheus text' };
    }
    const series = parsePrometheusText(body).length;
    return series > 0 ? { ok: true, series } : { ok: false, reason: 'no samples' };
  } catch (err) {
    const code = (err as { code?: string }).code;
    return { ok: false, reason: code ?? (err as Error).message };
  }
}

/** Where snapshots go as they come (telemetry.jsonl: the results store's JsonlWriter). */
export interface SnapshotSink {
  write(snapshot: TelemetrySnapshot): void;
  close(): void;
}

/**
 * Telemetry of one run: scrapes `sources` on the run's clock, hands every snapshot to `sink`
 * as it comes, and summarises them once stopped.
 */
export function recordTelemetry(
  options: Omit<ScraperOptions, 'onSnapshot'> & { sink: SnapshotSink },
): {
  stop(): Promise<ServerMetricsSummary>;
} {
  const snapshots: TelemetrySnapshot[] = [];
  const { sink, ...scraperOptions } = options;
  const scraper = startScraper({
    ...scraperOptions,
    onSnapshot: (snapshot) => {
      snapshots.push(snapshot);
      sink.write(snapshot);
    },
  });
  return {
    stop: async () => {
      await scraper.stop();
      sink.close();
      return summarizeTelemetry(snapshots);
    },
  };
}
