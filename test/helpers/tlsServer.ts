import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { REPO } from '../../tools/repo.js';

/** The committed test certificates (test/fixtures/tls/README.md). */
export const TLS_FIXTURES = join(REPO, 'test', 'fixtures', 'tls');
export const fixture = (name: string) => join(TLS_FIXTURES, name);

export interface TlsTestServer {
  url: string;
  /** Requests answered, and how many came with a client certificate. */
  requests: number;
  withClientCert: number;
  /** TLS handshakes the server completed. */
  handshakes: number;
  close(): Promise<void>;
}

/**
 * An https server on 127.0.0.1, port 0, speaking just enough of the OpenAI API: GET /v1/models
 * and a streamed (SSE) answer of `tokens` tokens to any POST, with usage. `cert` names the
 * fixture pair it serves (leaf, wrong, expired, self); `requireClientCert` asks for a client
 * certificate signed by the test CA and refuses the handshake without one.
 */
export async function startTlsServer(
  options: { cert?: string; requireClientCert?: boolean; tokens?: number } = {},
): Promise<TlsTestServer> {
  const name = options.cert ?? 'leaf';
  const tokens = options.tokens ?? 3;
  const state = { requests: 0, withClientCert: 0, handshakes: 0 };
  const server: Server = createServer(
    {
      cert: readFileSync(fixture(`${name}.pem`)),
      key: readFileSync(fixture(`${name}.key`)),
      ...(options.requireClientCert
        ? { requestCert: true, rejectUnauthorized: true, ca: readFileSync(fixture('ca.pem')) }
        : {}),
    },
    (req, res) => {
      state.requests++;
      if ((req.socket as TLSSocket).getPeerCertificate?.()?.subject) state.withClientCert++;
      req.resume();
      req.on('end', () => {
        if (req.method === 'GET' && req.url === '/v1/models') {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ object: 'list', data: [{ id: 'tls-model', object: 'model' }] }));
          return;
        }
        if (req.method === 'GET' && req.url === '/metrics') {
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.end('vllm:num_requests_running{model_name="tls-model"} 0\n');
          return;
        }
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        for (let i = 0; i < tokens; i++) {
          const chunk = { choices: [{ index: 0, text: `w${i} `, delta: { content: `w${i} ` } }] };
          res.write(`data: ${JSON.stringify(chunk)}\n\n`);
        }
        const usage = { prompt_tokens: 16, completion_tokens: tokens, total_tokens: 16 + tokens };
        res.write(`data: ${JSON.stringify({ choices: [], usage })}\n\n`);
        res.end('data: [DONE]\n\n');
      });
    },
  );
  server.on('secureConnection', () => state.handshakes++);
  // A refused handshake is the test's point, not the server's error.
  server.on('tlsClientError', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://127.0.0.1:${port}`,
    get requests() {
      return state.requests;
    },
    get withClientCert() {
      return state.withClientCert;
    },
    get handshakes() {
      return state.handshakes;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
