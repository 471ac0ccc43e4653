/**
 * The local HTTP server behind the live dashboard (`--output ui`) and `infergauge ui`: where it
 * listens, who may ask it anything, and how it answers. Loopback by default; any other address
 * only with a random token, required on every request, so that a page on the network cannot read
 * a run or stop it. On loopback the Host header must name loopback too: a site that rebinds its
 * own name to 127.0.0.1 (DNS rebinding) is refused.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { UsageError } from '../../errors.js';

/** Where the server listens: `[HOST:]PORT` parsed. */
export interface UiAddress {
  host: string;
  port: number;
}

export const LOOPBACK_HOST = '127.0.0.1';

/** The custom header a state-changing request must carry (a cross-site form cannot set one). */
export const UI_STOP_HEADER = 'x-infergauge-stop';
/** Where a client may give the token instead of `?token=` (the page's own fetches). */
export const UI_TOKEN_HEADER = 'x-infergauge-token';

/**
 * `ui=[HOST:]PORT` (`0`, `8080`, `0.0.0.0:8080`, `[::1]:0`); undefined is loopback, a free
 * port. `label` names what was given, for the usage error (`--output ui=abc`).
 */
export function parseUiAddress(arg: string | undefined, label: string): UiAddress {
  if (arg === undefined || arg === '') return { host: LOOPBACK_HOST, port: 0 };
  const m = /^(?:(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):)?(\d{1,5})$/.exec(arg);
  const port = m ? Number(m[2]) : Number.NaN;
  if (!m || port > 65535) {
    throw new UsageError([
      `${label}: give [HOST:]PORT, a port from 0 (a free one) to 65535 (8080, 0.0.0.0:8080)`,
    ]);
  }
  const host = m[1] ? m[1].replace(/^\[|\]$/g, '') : LOOPBACK_HOST;
  return { host, port };
}

/** Whether `host` reaches this machine only (a token is needed for anything else). */
export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127(\.\d{1,3}){3}$/.test(host);
}

/** A request the server answers, after the access rule passed. */
export type UiHandler = (req: IncomingMessage, res: ServerResponse, url: URL) => void;

export interface UiServer {
  /** The URL to open, with `?token=` where one is required. */
  url: string;
  /** Set when the address is not loopback: required on every request. */
  token?: string;
  server: Server;
  /** Closes the listener and every open connection. */
  close(): Promise<void>;
}

/**
 * Starts listening. The server and its connections never hold the process open on their own: a
 * run ends when its session does, and what must wait for a tab (the report's grace) holds a
 * timer of its own.
 */
export async function startUiServer(
  address: UiAddress,
  handle: UiHandler,
  /** Hold the process open while listening (a command that only serves: `infergauge ui`). */
  hold = false,
): Promise<UiServer> {
  const token = isLoopback(address.host) ? undefined : randomBytes(18).toString('base64url');
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://ui.invalid');
    const refused = accessProblem(req, url, address.host, token);
    if (refused) {
      send(res, refused.status, 'text/plain; charset=utf-8', refused.text);
      return;
    }
    try {
      handle(req, res, url);
    } catch (err) {
      if (!res.headersSent) send(res, 500, 'text/plain; charset=utf-8', 'internal error');
      else res.destroy(err as Error);
    }
  });
  if (!hold) server.on('connection', (socket) => socket.unref());
  // Headers of a slow client may not hold a connection for long.
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  server.maxHeadersCount = 64;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        // A port in use is the user's choice to change (exit 2, as prometheus's); the rest is not.
        err.code === 'EADDRINUSE'
          ? new UsageError([
              `port ${address.port} on ${address.host} is in use: give another, or 0 for a free one`,
            ])
          : new Error(
              `the dashboard cannot listen on ${address.host}:${address.port}: ${err.message}`,
            ),
      ),
    );
    server.listen(address.port, address.host, () => {
      server.removeAllListeners('error');
      resolve();
    });
  });
  if (!hold) server.unref();
  const { port } = server.address() as AddressInfo;
  const shownHost = address.host.includes(':') ? `[${address.host}]` : address.host;
  const url = `http://${shownHost}:${port}/${token ? `?token=${token}` : ''}`;
  return {
    url,
    ...(token ? { token } : {}),
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * Why a request is refused, or undefined when it may be answered. Loopback: the Host header
 * names loopback (DNS rebinding). Elsewhere: the token, in `?token=` or the token header.
 */
export function accessProblem(
  req: Pick<IncomingMessage, 'headers'>,
  url: URL,
  host: string,
  token: string | undefined,
): { status: number; text: string } | undefined {
  if (token === undefined) {
    const named = (req.headers.host ?? '').toLowerCase();
    const hostOnly = named.startsWith('[')
      ? named.slice(1, named.indexOf(']'))
      : named.split(':')[0];
    if (!isLoopback(hostOnly) && hostOnly !== host) {
      return { status: 403, text: 'refused: the Host header does not name this machine' };
    }
    return undefined;
  }
  const header = req.headers[UI_TOKEN_HEADER];
  const given = url.searchParams.get('token') ?? (typeof header === 'string' ? header : '');
  if (!sameSecret(given, token)) return { status: 403, text: 'refused: a valid token is required' };
  return undefined;
}

function sameSecret(given: string, token: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * Headers for everything the server sends: no caching (live numbers, a token in the URL), no
 * referrer (the token stays here), no sniffing, and a page that may load from itself only.
 */
export function baseHeaders(type: string): Record<string, string> {
  return {
    'content-type': type,
    'cache-control': 'no-store',
    'referrer-policy': 'no-referrer',
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
  };
}

/** The page's policy: its own scripts, its own connections, nothing from elsewhere. */
export const PAGE_POLICY =
  "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export function send(
  res: ServerResponse,
  status: number,
  type: string,
  body: string | Buffer,
  extra: Record<string, string> = {},
): void {
  res.writeHead(status, { ...baseHeaders(type), ...extra });
  res.end(body);
}

/** Whether a request may change state: POST with the custom header (forces a CORS preflight). */
export function isDeliberatePost(req: IncomingMessage): boolean {
  return req.method === 'POST' && req.headers[UI_STOP_HEADER] === '1';
}
