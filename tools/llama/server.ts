import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { getPriority, setPriority } from 'node:os';
import { traceStep } from '../test/trace.js';

export interface LlamaServerOptions {
  binary: string;
  modelPath: string;
  /** A free loopback port is picked when omitted. */
  port?: number;
  /** Parallel slots (continuous batching across them). */
  parallel?: number;
  /** Total context, shared by the slots. */
  ctxSize?: number;
  /**
   * Compute threads. On a 2-core machine use 1: more threads fight the client for the cores and
   * decoding slows down by up to 300x.
   */
  threads?: number;
  extraArgs?: string[];
  /** Seconds to wait for `GET /health` to answer 200. */
  readyTimeoutS?: number;
  /**
   * The nice value (-20 to 19) to start the server at; the caller's when omitted. For tests that
   * time the engine on a shared CPU: below the neighbours' 0 the engine's one compute thread gets
   * its core whenever it is runnable, so what is timed is the engine, not the neighbour. Below the
   * caller's own it needs root or CAP_SYS_NICE; where refused, the server starts at the caller's
   * and `priority.refused` says why.
   */
  nice?: number;
}

/** The priority the server's threads run at, read back from /proc once it serves. */
export interface LlamaServerPriority {
  /** What was asked (`nice`), if anything. */
  requested?: number;
  /** The highest nice among its threads (the least favoured); undefined where /proc has none. */
  nice?: number;
  /** Why the requested nice was not applied (the errno of setpriority), if it was not. */
  refused?: string;
}

/**
 * A process's threads' scheduler accounts at one moment: per thread id, [ns on a CPU, ns
 * runnable but waiting for one] (/proc/<pid>/task/<tid>/schedstat).
 */
export interface CpuSnapshot {
  atMs: number;
  threads: ReadonlyMap<string, readonly [number, number]>;
}

/** What a process's threads did between two snapshots. */
export interface CpuUse {
  wallMs: number;
  onCpuMs: number;
  /** Time its threads were ready to run but another task held the CPU, summed over them. */
  waitingMs: number;
  /**
   * waitingMs / wallMs: for one thread whose work is what is timed, the share of the interval a
   * neighbour took from it. Not over its busy time (on + waiting): a short request's wake-ups
   * would read as most of that, though they stretch the interval little.
   */
  waitShare: number;
}

export interface RunningLlamaServer {
  url: string;
  port: number;
  child: ChildProcess;
  /** The server's recent output, for error messages. */
  output(): string;
  /** SIGTERM, then SIGKILL after 5 s; resolves once it has exited. */
  stop(): Promise<void>;
  priority: LlamaServerPriority;
  /** Its threads' scheduler accounts now (no threads where /proc has no schedstat: not Linux). */
  cpu(): CpuSnapshot;
}

/**
 * The threads of process `pid` (or only thread `tid` of it) with their schedstat; threads gone
 * are skipped.
 */
export function cpuSnapshot(pid: number, tid?: number): CpuSnapshot {
  const atMs = performance.now();
  const threads = new Map<string, readonly [number, number]>();
  for (const t of tid === undefined ? listThreads(pid) : [String(tid)]) {
    const text = readProc(`/proc/${pid}/task/${t}/schedstat`);
    const [onCpu, waiting] = text?.split(' ').map(Number) ?? [];
    if (Number.isFinite(onCpu) && Number.isFinite(waiting)) threads.set(t, [onCpu, waiting]);
  }
  return { atMs, threads };
}

/**
 * The CPU use between two snapshots, over the threads present in both (a thread that exited
 * between them took its counts with it; one born after them has no baseline).
 */
export function cpuUse(before: CpuSnapshot, after: CpuSnapshot): CpuUse {
  let onNs = 0;
  let waitNs = 0;
  for (const [tid, [on, wait]] of after.threads) {
    const base = before.threads.get(tid);
    if (!base) continue;
    onNs += on - base[0];
    waitNs += wait - base[1];
  }
  const wallMs = after.atMs - before.atMs;
  const waitingMs = waitNs / 1e6;
  return {
    wallMs,
    onCpuMs: onNs / 1e6,
    waitingMs,
    waitShare: wallMs > 0 ? waitingMs / wallMs : 0,
  };
}

function listThreads(pid: number): string[] {
  try {
    return readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
}

function readProc(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** The highest nice among `pid`'s threads (field 19 of stat, counted after the command's ")"). */
function threadsNice(pid: number): number | undefined {
  let worst: number | undefined;
  for (const tid of listThreads(pid)) {
    const stat = readProc(`/proc/${pid}/task/${tid}/stat`);
    if (!stat) continue;
    const nice = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
    if (Number.isFinite(nice)) worst = worst === undefined ? nice : Math.max(worst, nice);
  }
  return worst;
}

/**
 * Spawns with the calling thread's nice lowered to `nice` for the fork: a child inherits the
 * forking thread's nice and llama-server's threads, made after it starts, inherit the child's,
 * so every one of them runs at it (setpriority on the child's pid afterwards would miss the
 * threads it had already made: on Linux it sets one thread).
 */
function spawnAt(
  nice: number | undefined,
  binary: string,
  args: string[],
): { child: ChildProcess; refused?: string } {
  const spawnIt = () => spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  if (nice === undefined) return { child: spawnIt() };
  const own = getPriority();
  try {
    setPriority(nice);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return { child: spawnIt(), refused: `${code ?? String(err)} (needs root or CAP_SYS_NICE)` };
  }
  try {
    return { child: spawnIt() };
  } finally {
    setPriority(own);
  }
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** Starts llama-server on loopback and waits until it serves (model loaded, slots ready). */
export async function startLlamaServer(options: LlamaServerOptions): Promise<RunningLlamaServer> {
  const startedMs = Date.now();
  const port = options.port ?? (await freePort());
  const parallel = options.parallel ?? 4;
  const args = [
    '-m',
    options.modelPath,
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    '-t',
    String(options.threads ?? 1),
    '-tb',
    String(options.threads ?? 1),
    '-np',
    String(parallel),
    '-c',
    String(options.ctxSize ?? 4096),
    '--metrics',
    '--slots',
    '--no-webui',
    ...(options.extraArgs ?? []),
  ];
  const { child, refused } = spawnAt(options.nice, options.binary, args);
  let recent = '';
  const keep = (chunk: Buffer) => {
    recent = (recent + chunk.toString()).slice(-8000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const priority: LlamaServerPriority = {
    ...(options.nice !== undefined ? { requested: options.nice } : {}),
    ...(refused ? { refused } : {}),
  };
  const running: RunningLlamaServer = {
    url,
    port,
    child,
    priority,
    cpu: () =>
      child.pid === undefined
        ? { atMs: performance.now(), threads: new Map() }
        : cpuSnapshot(child.pid, child.pid),
    output: () => recent,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
  const deadline = Date.now() + (options.readyTimeoutS ?? 120) * 1000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`llama-server exited before it was ready:\n${recent.slice(-2000)}`);
    }
    try {
      const response = await fetch(`${url}/health`);
      await response.arrayBuffer();
      if (response.status === 200) {
        // Read back once its threads exist: what the kernel applied, not what was asked.
        if (child.pid !== undefined) priority.nice = threadsNice(child.pid);
        traceStep('llama-server start', startedMs);
        return running;
      }
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await running.stop();
      throw new Error(
        `llama-server not ready after ${options.readyTimeoutS ?? 120} s:\n${recent.slice(-2000)}`,
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
