import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
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
}

export interface RunningLlamaServer {
  url: string;
  port: number;
  child: ChildProcess;
  /** The server's recent output, for error messages. */
  output(): string;
  /** SIGTERM, then SIGKILL after 5 s; resolves once it has exited. */
  stop(): Promise<void>;
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
  const child = spawn(options.binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let recent = '';
  const keep = (chunk: Buffer) => {
    recent = (recent + chunk.toString()).slice(-8000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const running: RunningLlamaServer = {
    url,
    port,
    child,
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
