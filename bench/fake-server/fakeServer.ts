/**
 * The fake OpenAI server of bench/side-by-side.ts (fake-openai.c beside this file): build it,
 * start it, stop it and read what it logged of its own sends.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { REPO } from '../../tools/repo.js';

const SOURCE = join(REPO, 'bench/fake-server/fake-openai.c');

/**
 * Compiles the server into `dir` unless an up-to-date binary is there; returns its path.
 * Throws when no C compiler answers.
 */
export function buildFakeServer(dir: string): string {
  const binary = join(dir, 'fake-openai');
  const built = statSync(binary, { throwIfNoEntry: false });
  if (built && built.mtimeMs >= statSync(SOURCE).mtimeMs) return binary;
  mkdirSync(dir, { recursive: true });
  try {
    execFileSync('cc', ['-O2', '-std=gnu11', '-o', binary, SOURCE], { stdio: 'pipe' });
  } catch (error) {
    const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim();
    throw new Error(`cannot compile ${SOURCE} with cc: ${stderr || (error as Error).message}`);
  }
  return binary;
}

/**
 * A side-by-side harness's start: the fake server built (or `usage` with why not), and the
 * harness itself pinned to the server's cores (`pinServer`, taskset's list), since it only waits
 * and must not share the client's.
 */
export function prepareHarness(
  pinServer: string | undefined,
  usage: (why: string) => never,
): string {
  let binary: string;
  try {
    binary = buildFakeServer(join(REPO, '.bench-out'));
  } catch (error) {
    usage((error as Error).message);
  }
  if (pinServer)
    execFileSync('taskset', ['-cp', pinServer, String(process.pid)], { stdio: 'ignore' });
  return binary;
}

export interface FakeServerOptions {
  binary: string;
  ttftMs: number;
  itlMs: number;
  tokensPerEvent: number;
  /** A cap on the server's token events a second, each in a write of its own (0 or absent: none). */
  eventsPerS?: number;
  /** Engine steps: every due time moved up to a multiple of this (fake-openai --step-ms; 0: none). */
  stepMs?: number;
  model: string;
  /** Where the server writes its send log when stopped. */
  statsPath: string;
  /** taskset CPU list, e.g. "0"; unpinned when absent. */
  cpus?: string;
}

export interface FakeServer {
  port: number;
  /** The server's process (taskset execs it, so this is the server's own). */
  pid: number;
  /** Resolves when the server has read its first completion request. */
  firstRequest: Promise<void>;
  /** SIGTERM: the server writes its log and exits; resolves to that log. */
  stop(): Promise<ServerLog>;
}

export async function startFakeServer(options: FakeServerOptions): Promise<FakeServer> {
  const args = [
    '--port',
    '0',
    '--ttft-ms',
    String(options.ttftMs),
    '--itl-ms',
    String(options.itlMs),
    '--tokens-per-event',
    String(options.tokensPerEvent),
    '--events-per-s',
    String(options.eventsPerS ?? 0),
    '--step-ms',
    String(options.stepMs ?? 0),
    '--model',
    options.model,
    '--stats',
    options.statsPath,
  ];
  const child = options.cpus
    ? spawn('taskset', ['-c', options.cpus, options.binary, ...args], {
        stdio: ['ignore', 'pipe', 'pipe'],
      })
    : spawn(options.binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const exited = new Promise<number | null>((resolve) =>
    child.on('close', (code) => resolve(code)),
  );
  let onFirst = () => {};
  const firstRequest = new Promise<void>((resolve) => {
    onFirst = resolve;
  });
  const port = await new Promise<number>((resolve, reject) => {
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (line.startsWith('port ')) resolve(Number(line.slice(5)));
      else if (line === 'first') onFirst();
    });
    void exited.then((code) =>
      reject(new Error(`fake server exited (${code}) before listening: ${stderr}`)),
    );
  });
  return {
    port,
    pid: child.pid as number,
    firstRequest,
    async stop() {
      child.kill('SIGTERM');
      const code = await exited;
      if (code !== 0) throw new Error(`fake server exited with ${code}: ${stderr}`);
      return readServerLog(options.statsPath, options.tokensPerEvent);
    },
  };
}

/** What the server logged of its own sends, in milliseconds. */
export interface ServerLog {
  requests: number;
  /** Requests that got every event their max_tokens called for. */
  completeRequests: number;
  /** Token events written (the usage and [DONE] events not counted). */
  events: number;
  /** Output tokens of the complete requests. */
  tokens: number;
  /** Per request: first token event written minus request read. */
  ttftMs: Float64Array;
  /** Gaps between consecutive token events of one request. */
  eventGapMs: Float64Array;
  /** Per event: how late the server started writing it against its own schedule. */
  lagMs: Float64Array;
  /**
   * By the request's x-request-id (clients that send one): when the server read it and wrote
   * each token event, in microseconds on its own clock.
   */
  sends: Map<number, { readUs: number; writesUs: Float64Array }>;
}

/** Parses the stats file (layout in fake-openai.c's header comment). */
export function readServerLog(path: string, tokensPerEvent: number): ServerLog {
  const bytes = readFileSync(path);
  const values = new Float64Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 8);
  let events = 0;
  let requests = 0;
  /** Requests with at least one event: each has one gap fewer than events. */
  let started = 0;
  for (let i = 0; i < values.length; i += 4 + 2 * values[i + 1]) {
    events += values[i + 1];
    requests++;
    if (values[i + 1] > 0) started++;
  }
  const log: ServerLog = {
    requests,
    completeRequests: 0,
    events,
    tokens: 0,
    ttftMs: new Float64Array(requests),
    eventGapMs: new Float64Array(events - started),
    lagMs: new Float64Array(events),
    sends: new Map(),
  };
  let ttfts = 0;
  let gaps = 0;
  let lags = 0;
  for (let i = 0; i < values.length; ) {
    const readUs = values[i];
    const count = values[i + 1];
    const tokens = values[i + 2];
    const requestId = values[i + 3];
    const writes = i + 4;
    if (requestId >= 0) {
      log.sends.set(requestId, { readUs, writesUs: values.subarray(writes, writes + count) });
    }
    if (count === Math.ceil(tokens / tokensPerEvent)) {
      log.completeRequests++;
      log.tokens += tokens;
    }
    if (count > 0) log.ttftMs[ttfts++] = (values[writes] - readUs) / 1000;
    for (let e = 1; e < count; e++) {
      log.eventGapMs[gaps++] = (values[writes + e] - values[writes + e - 1]) / 1000;
    }
    for (let e = 0; e < count; e++) log.lagMs[lags++] = values[writes + count + e] / 1000;
    i = writes + 2 * count;
  }
  log.ttftMs = log.ttftMs.subarray(0, ttfts);
  return log;
}
