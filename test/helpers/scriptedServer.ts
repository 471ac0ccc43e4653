import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** One step of a scripted response: wait, then write bytes (or do something to the socket). */
export type Step =
  | { wait: number }
  | { write: string | Uint8Array }
  | { destroy: true }
  | { end: true };

/** What the server was asked. */
export interface ScriptedRequest {
  /** Order of arrival, from 0. */
  index: number;
  /** The client's `x-request-id`, as a number (NaN without one). */
  id: number;
  method: string;
  path: string;
  body: Record<string, unknown>;
}

export interface ScriptedReply {
  status?: number;
  /** Response headers; `content-type` defaults to `text/event-stream`. */
  headers?: Record<string, string>;
  steps: Step[];
}

export interface ScriptedServer {
  url: string;
  requests: ScriptedRequest[];
  close(): Promise<void>;
}

/**
 * A loopback server on port 0 that records each request and answers it with a script of raw
 * writes, so tests can produce any wire format, stream quirk, error or broken connection byte
 * for byte, and check what the client sent.
 */
export async function startScriptedServer(
  respond: (request: ScriptedRequest) => ScriptedReply,
): Promise<ScriptedServer> {
  const requests: ScriptedRequest[] = [];
  const server = createServer({ noDelay: true }, (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const request: ScriptedRequest = {
        index: requests.length,
        id: Number(req.headers['x-request-id']),
        method: req.method ?? 'GET',
        path: req.url ?? '/',
        body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
      };
      requests.push(request);
      const reply = respond(request);
      res.writeHead(reply.status ?? 200, { 'content-type': 'text/event-stream', ...reply.headers });
      res.flushHeaders();
      void play(res, reply.steps);
    });
  });
  return { ...(await listenOnLoopback(server)), requests };
}

/** A test server on a loopback port. */
export interface LoopbackServer {
  url: string;
  /** Stops listening and ends every open connection (kept-alive ones would hold it open). */
  close(): Promise<void>;
  /** The same, at once and from inside a handler: the server dies mid-run. */
  kill(): void;
}

/** Listens on 127.0.0.1, port 0, keeping track of connections so `close` can end them. */
export async function listenOnLoopback(server: Server): Promise<LoopbackServer> {
  const sockets = new Set<Socket>();
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const kill = () => {
    server.close();
    for (const s of sockets) s.destroy();
  };
  return {
    url: `http://127.0.0.1:${port}`,
    kill,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        if (server.listening) server.close(() => resolve());
        else resolve();
      }),
  };
}

async function play(res: ServerResponse, steps: Step[]): Promise<void> {
  for (const step of steps) {
    if (res.destroyed) return;
    if ('wait' in step) await new Promise((r) => setTimeout(r, step.wait));
    else if ('write' in step) res.write(step.write);
    else if ('destroy' in step) {
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
