/**
 * One small HTTP exchange whose answer is read whole as text: the model list, a `/metrics`
 * scrape, a `/tokenize` call. On node:http(s) so that a run loads no HTTP library for these
 * (the load itself goes through src/loadgen). Redirects are not followed: a 3xx comes back as
 * its status, as every other answer does.
 */
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { type TlsMaterial, tlsConnectOptions } from './tls.js';

export interface TextRequest {
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
  /** The whole exchange, connect to the last byte, must end within this. */
  timeoutMs: number;
  /** An answer longer than this is cut off with an error. */
  maxBytes?: number;
  /** https:// only: the run's TLS options (src/loadgen/tls.ts). */
  tls?: TlsMaterial;
}

export interface TextResponse {
  statusCode: number;
  body: string;
}

/** Large enough for any model list, metrics page or tokenize answer. */
const DEFAULT_MAX_BYTES = 64 * 1024 * 1024;

/** An exchange that failed, with a code as node's own errors have (ETIMEDOUT, ECONNREFUSED...). */
function failure(message: string, code: string): Error {
  return Object.assign(new Error(message), { code });
}

/** Sends one request to `url` and reads its answer as UTF-8 text. */
export function requestText(url: string, options: TextRequest): Promise<TextResponse> {
  const { method = 'GET', headers = {}, body, timeoutMs, maxBytes = DEFAULT_MAX_BYTES } = options;
  return new Promise((resolve, reject) => {
    const fail = (err: Error) => {
      clearTimeout(timer);
      reject(err);
    };
    const target = new URL(url);
    const https = target.protocol === 'https:';
    const send = https ? httpsRequest : httpRequest;
    // Its own socket with the run's TLS options: the global agent would pool it with others'.
    const tls = https && options.tls ? { ...tlsConnectOptions(options.tls), agent: false } : {};
    const req = send(target, { method, headers, ...tls }, (res) => {
      const chunks: Buffer[] = [];
      let bytes = 0;
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        if (bytes > maxBytes) {
          req.destroy(failure(`the answer is larger than ${maxBytes} bytes`, 'ETOOBIG'));
        } else chunks.push(chunk);
      });
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ statusCode: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') });
      });
      res.on('error', fail);
    });
    const timer = setTimeout(
      () => req.destroy(failure(`no whole answer within ${timeoutMs} ms`, 'ETIMEDOUT')),
      timeoutMs,
    );
    // A failure after the answer began is also reported here (a promise settles once).
    req.on('error', fail);
    req.end(body);
  });
}
