import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { performance } from 'node:perf_hooks';

/** One step of a scripted response: wait, then write bytes (or do something to the socket). */
export type Step =
  | { wait: number }
  | { write: string | Uint8Array }
  | { destroy: true }
  | { end: true };

export interface ScriptedServer {
  url: string;
  /** Per request: when its body was read and when each write happened (ms, server clock). */
  log: { id: string; arrivedAt: number; writes: number[] }[];
  close(): Promise<void>;
}

/**
 * A loopback server on port 0 that answers each POST with a script of raw writes, so tests can
 * produce any stream quirk, error or broken connection byte for byte. `respond` picks the
 * status, headers and steps per request (by its `x-request-id`).
 */
export async function startScriptedServer(
  respond: (
    id: number,
    body: Record<string, unknown>,
  ) => {
    status?: number;
    headers?: Record<string, string>;
    steps: Step[];
  },
): Promise<ScriptedServer> {
  const log: ScriptedServer['log'] = [];
  const sockets = new Set<Socket>();
  const server = createServer({ noDelay: true }, (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'GET') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"object":"list","data":[{"id":"scripted"}]}');
        return;
      }
      const id = String(req.headers['x-request-id'] ?? '0');
      const entry = { id, arrivedAt: performance.now(), writes: [] as number[] };
      log.push(entry);
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
      const plan = respond(Number(id), body);
      res.writeHead(plan.status ?? 200, {
        'content-type': 'text/event-stream',
        ...plan.headers,
      });
      res.flushHeaders();
      void play(res, plan.steps, entry.writes);
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    log,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

async function play(res: ServerResponse, steps: Step[], writes: number[]): Promise<void> {
  for (const step of steps) {
    if (res.destroyed) return;
    if ('wait' in step) await new Promise((r) => setTimeout(r, step.wait));
    else if ('write' in step) {
      writes.push(performance.now());
      res.write(step.write);
    } else if ('destroy' in step) {
      // An abrupt reset: the chunked body never terminates.
      res.socket?.destroy();
      return;
    } else {
      res.end();
      return;
    }
  }
  res.end();
}

/** `data: <json>\n\n` for a chat delta. */
export function chatEvent(
  delta: Record<string, unknown>,
  extra: Record<string, unknown> = {},
): string {
  return `data: ${JSON.stringify({ object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: null }], ...extra })}\n\n`;
}

/** `data: <json>\n\n` for a completions text piece. */
export function textEvent(text: string, extra: Record<string, unknown> = {}): string {
  return `data: ${JSON.stringify({ object: 'text_completion', choices: [{ index: 0, text, finish_reason: null }], ...extra })}\n\n`;
}

export function usageEvent(prompt: number, completion: number): string {
  return `data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion } })}\n\n`;
}

export const DONE = 'data: [DONE]\n\n';
