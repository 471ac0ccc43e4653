/**
 * One small HTTP exchange whose answer is read whole as text: the model list, a `/metrics`
 * scrape, a `/tokenize` call. On node:http(s) so that a run loads no HTTP library for these
 * (the load itself goes through src/loadgen). Redirects are not followed: a 3xx comes back as
 * its status, as every other answer does.
 */
import { type ClientRequest, request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import {
  closingTunnel,
  openTunnel,
  type ProxyRoute,
  type ProxySettings,
  proxyFor,
  proxyUnreachable,
} from './proxy.js';
import { type TlsMaterial, tlsConnectOptions } from './tls.js';

export interface TextRequest {
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
  /** The whole exchange, connect to the last byte, must end within this. */
  timeoutMs: number;
  /** An answer longer than this is cut off with an error. */
  maxBytes?: number;
  /** The run's proxy settings: the exchange goes through the proxy `url` is routed to. */
  proxy?: ProxySettings;
  /** https:// only: the run's TLS options (src/tls.ts). */
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

/** Errors of a socket that never connected. */
const UNREACHED = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
]);

/** Sends one request to `url` and reads its answer as UTF-8 text. */
export function requestText(url: string, options: TextRequest): Promise<TextResponse> {
  const { method = 'GET', headers = {}, body, timeoutMs, maxBytes = DEFAULT_MAX_BYTES } = options;
  const target = new URL(url);
  const route = proxyFor(target, options.proxy);
  const started = Date.now();
  return new Promise((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    let answered = false;
    const tunnelled = target.protocol === 'https:';
    const fail = (err: Error) => {
      clearTimeout(timer);
      // A forwarding proxy that could not be reached: the proxy's failure, not the server's.
      const unreached =
        route && !tunnelled && !answered && UNREACHED.has((err as { code?: string }).code ?? '');
      reject(unreached ? proxyUnreachable(route, err) : err);
    };
    const send = (tunnel: Socket | undefined) => {
      const req = sendRequest(target, route, tunnel, method, headers, options.tls, (res) => {
        answered = true;
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
          resolve({
            statusCode: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString('utf8'),
          });
          // Nothing more goes on this connection (no agent): a tunnel waiting on the server's
          // close held the process open for its idle timeout, minutes after a run ended.
          tunnel?.destroy();
        });
        res.on('error', fail);
      });
      timer = setTimeout(
        () => req.destroy(failure(`no whole answer within ${timeoutMs} ms`, 'ETIMEDOUT')),
        Math.max(1, timeoutMs - (Date.now() - started)),
      );
      // A failure after the answer began is also reported here (a promise settles once).
      req.on('error', fail);
      req.end(body);
    };
    // https:// through a proxy: TLS runs inside a CONNECT tunnel opened first.
    if (route && target.protocol === 'https:') {
      const port = Number(target.port || 443);
      openTunnel(route, target.hostname.replace(/^\[(.*)\]$/, '$1'), port, timeoutMs).then(
        send,
        fail,
      );
    } else send(undefined);
  });
}

/**
 * The request itself: direct; to a forwarding proxy (http://, the whole URL as its path); or
 * over a CONNECT tunnel (https://), TLS then made over it as over a socket of its own.
 */
function sendRequest(
  target: URL,
  route: ProxyRoute | undefined,
  tunnel: Socket | undefined,
  method: string,
  headers: Record<string, string>,
  tls: TlsMaterial | undefined,
  onResponse: (res: IncomingMessage) => void,
): ClientRequest {
  if (tunnel) {
    const servername = target.hostname.replace(/^\[(.*)\]$/, '$1');
    return httpsRequest(
      target,
      {
        method,
        headers,
        agent: false,
        createConnection: () =>
          closingTunnel(
            tlsConnect({
              socket: tunnel,
              ...(isName(servername) ? { servername } : {}),
              ...tlsConnectOptions(tls),
            }),
            tunnel,
          ),
      },
      onResponse,
    );
  }
  if (route && target.protocol === 'http:') {
    return httpRequest(
      {
        host: route.host,
        port: route.port,
        path: target.href,
        method,
        agent: false,
        headers: {
          host: target.host,
          ...headers,
          ...(route.authorization ? { 'proxy-authorization': route.authorization } : {}),
        },
      },
      onResponse,
    );
  }
  const https = target.protocol === 'https:';
  // Its own socket with the run's TLS options: the global agent would pool it with others'.
  const options = https && tls ? { ...tlsConnectOptions(tls), agent: false as const } : {};
  return (https ? httpsRequest : httpRequest)(target, { method, headers, ...options }, onResponse);
}

/** SNI carries host names, never addresses. */
function isName(host: string): boolean {
  return isIP(host) === 0;
}
