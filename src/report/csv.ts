import { closeSync, openSync, writeSync } from 'node:fs';
import { requestMetrics } from '../metrics/requestMetrics.js';
import type { RunSummary } from '../metrics/summary.js';
import type { RequestRecord } from '../record.js';
import type { LoadRunsOptions } from '../results/reader.js';
import { csvField } from './format.js';

function csv(header: string[], rows: unknown[][]): string {
  return `${[header, ...rows].map((row) => row.map(csvField).join(',')).join('\r\n')}\r\n`;
}

const REQUEST_COLUMNS = [
  'id',
  'phase',
  'scheduled_at_ms',
  'sent_at_ms',
  'ttft_ms',
  'ttfc_ms',
  'ttftc_ms',
  'tpot_ms',
  'e2e_ms',
  'queue_delay_ms',
  'max_stall_ms',
  'output_speed_tok_s',
  'requested_input_tokens',
  'input_tokens',
  'requested_output_tokens',
  'output_tokens',
  'token_events',
  'finish_reason',
  'status',
  'error_kind',
  'error_message',
  // queueDelay's parts and a new connection's set-up (docs/metrics.md, "Connection phases"):
  // last, so that the columns before them keep their places.
  'backlog_ms',
  'pool_wait_ms',
  'connection_waited_ms',
  'connection_setup_ms',
  'dns_ms',
  'tcp_ms',
  'tls_ms',
];

/** The header line of requests.csv (with its line end); `sessions` adds their columns. */
export function requestsCsvHeader(sessions: boolean): string {
  const header = sessions
    ? [REQUEST_COLUMNS[0], 'session_id', 'turn', 'call', ...REQUEST_COLUMNS.slice(1)]
    : REQUEST_COLUMNS;
  return `${header.map(csvField).join(',')}\r\n`;
}

/** One request's line of requests.csv (with its line end), so that a reader can stream them. */
export function requestsCsvRow(r: RequestRecord, sessions: boolean): string {
  const m = requestMetrics(r);
  const row = [
    r.id,
    ...(sessions ? [r.sessionId, r.turn, r.call] : []),
    r.phase,
    r.scheduledAt,
    r.sentAt,
    m.ttftMs,
    m.ttfcMs,
    m.ttftcMs,
    m.tpotMs,
    m.e2eMs,
    m.queueDelayMs,
    m.maxStallMs,
    m.outputSpeedTokS,
    r.requestedInputTokens,
    r.inputTokens,
    r.requestedOutputTokens,
    r.outputTokens,
    m.tokenEvents,
    r.finishReason,
    r.status,
    r.error?.kind,
    r.error?.message,
    r.backlogMs,
    r.poolWaitMs,
    r.connection?.waitedMs,
    r.connection?.setupMs,
    r.connection?.dnsMs,
    r.connection?.tcpMs,
    r.connection?.tlsMs,
  ];
  return `${row.map(csvField).join(',')}\r\n`;
}

/**
 * One row per request: our per-request metrics (ms, tokens) and its outcome; a session workload's
 * records also say their session, turn and fan-out call (columns only a session run has).
 * `infergauge report --csv` streams the same lines (requestsCsvHeader, requestsCsvRow).
 */
export function requestsCsv(records: RequestRecord[]): string {
  const sessions = records.some((r) => r.sessionId !== undefined);
  return requestsCsvHeader(sessions) + records.map((r) => requestsCsvRow(r, sessions)).join('');
}

/**
 * requests.csv written as the records of each run stream by (`infergauge report --csv`), never
 * held whole: a sink for loadSavedRuns. Several runs are each headed by a `# name` line; a
 * run's session columns are decided by its first record (a session run's records all carry one).
 */
export function requestsCsvFile(path: string): {
  sink: NonNullable<LoadRunsOptions['sink']>;
  close(): void;
} {
  const file = bufferedFile(path);
  return {
    sink: ({ name, count }) => {
      if (count !== 1) file.write(`# ${name}\r\n`);
      let sessions: boolean | undefined;
      return {
        add(record) {
          if (sessions === undefined) {
            sessions = record.sessionId !== undefined;
            file.write(requestsCsvHeader(sessions));
          }
          file.write(requestsCsvRow(record, sessions));
        },
        end() {
          if (sessions === undefined) file.write(requestsCsvHeader(false));
        },
      };
    },
    close: () => file.close(),
  };
}

/** Text to a file through a 1 MiB buffer. */
function bufferedFile(path: string): { write(text: string): void; close(): void } {
  const fd = openSync(path, 'w');
  let parts: string[] = [];
  let size = 0;
  const flush = () => {
    if (parts.length > 0) writeSync(fd, parts.join(''));
    parts = [];
    size = 0;
  };
  return {
    write(text) {
      parts.push(text);
      size += text.length;
      if (size >= 1 << 20) flush();
    },
    close() {
      flush();
      closeSync(fd);
    },
  };
}

/** The columns of a run row: ours, then vLLM `bench serve`'s names for the same numbers. */
export const RUN_COLUMNS = [
  'name',
  'load_mode',
  'concurrency',
  'rate',
  'mean_concurrency',
  'completed',
  'failed',
  'duration_s',
  'output_tokens_per_s',
  'total_tokens_per_s',
  'requests_per_s',
  'ttft_p50_ms',
  'ttft_p90_ms',
  'ttft_p99_ms',
  'itl_p50_ms',
  'itl_p99_ms',
  'tpot_p50_ms',
  'tpot_p99_ms',
  'e2e_p50_ms',
  'e2e_p99_ms',
  'goodput_requests_per_s',
  // vLLM's names (its ITL is per chunk: see --compat vllm for the exact view).
  'mean_ttft_ms',
  'median_ttft_ms',
  'p99_ttft_ms',
  'mean_tpot_ms',
  'median_tpot_ms',
  'p99_tpot_ms',
  'mean_e2el_ms',
  'median_e2el_ms',
  'p99_e2el_ms',
  'request_throughput',
  'output_throughput',
  'total_token_throughput',
] as const;

/** One row per run (a scenario, a sweep point): `runs` pairs a name with its summary. */
export function runsCsv(runs: { name: string; summary: RunSummary }[]): string {
  const rows = runs.map(({ name, summary: s }) => {
    const l = s.latency;
    const t = s.throughput;
    return [
      name,
      s.load.mode,
      s.load.mode === 'closed' ? s.load.concurrency : '',
      s.load.mode === 'open' ? s.load.rate : '',
      s.load.meanConcurrency,
      s.requests.completed,
      s.requests.failed,
      s.durationS,
      t.outputTokensPerS,
      t.totalTokensPerS,
      t.requestsPerS,
      l.ttftMs.p50,
      l.ttftMs.p90,
      l.ttftMs.p99,
      l.itlMs.p50,
      l.itlMs.p99,
      l.tpotMs.p50,
      l.tpotMs.p99,
      l.e2eMs.p50,
      l.e2eMs.p99,
      s.goodput?.requestsPerS,
      l.ttftMs.mean,
      l.ttftMs.p50,
      l.ttftMs.p99,
      l.tpotMs.mean,
      l.tpotMs.p50,
      l.tpotMs.p99,
      l.e2eMs.mean,
      l.e2eMs.p50,
      l.e2eMs.p99,
      t.requestsPerS,
      t.outputTokensPerS,
      t.totalTokensPerS,
    ];
  });
  return csv([...RUN_COLUMNS], rows);
}

/** Reads CSV text back into rows of strings (RFC 4180 quoting), for tests and tools. */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (quoted) {
      if (ch === '"' && text[i + 1] === '"') {
        cell += '"';
        i++;
      } else if (ch === '"') quoted = false;
      else cell += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ',') {
      row.push(cell);
      cell = '';
    } else if (ch === '\n' || ch === '\r') {
      if (ch === '\r' && text[i + 1] === '\n') i++;
      row.push(cell);
      rows.push(row);
      row = [];
      cell = '';
    } else cell += ch;
  }
  if (cell.length > 0 || row.length > 0) {
    row.push(cell);
    rows.push(row);
  }
  return rows;
}
