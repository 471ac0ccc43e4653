import { request } from 'undici';
import { snapshotValues, type TelemetrySnapshot, type TelemetrySourceKind } from './snapshot.js';

export interface TelemetrySource {
  kind: TelemetrySourceKind;
  url: string;
}

export interface ScraperOptions {
  sources: TelemetrySource[];
  intervalMs: number;
  /** The run clock, in ms, so snapshots line up with the records. */
  nowMs: () => number;
  headers?: Record<string, string>;
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
  const scrapeAll = () =>
    Promise.all(options.sources.map((source) => scrape(source, options))).then(() => undefined);
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

async function scrape(source: TelemetrySource, options: ScraperOptions): Promise<void> {
  const at = options.nowMs();
  try {
    const response = await request(source.url, {
      headers: options.headers ?? {},
      headersTimeout: 5_000,
      bodyTimeout: 5_000,
    });
    const body = await response.body.text();
    if (response.statusCode !== 200) throw new Error(`HTTP ${response.statusCode}`);
    options.onSnapshot({ at, source: source.kind, values: snapshotValues(source.kind, body) });
  } catch (err) {
    const code = (err as { code?: string }).code;
    const message = `${source.url}: ${code ? `${code}: ` : ''}${(err as Error).message}`;
    options.onSnapshot({ at, source: source.kind, error: message });
  }
}
