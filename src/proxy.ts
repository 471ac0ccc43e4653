/**
 * Proxies, as curl and the other HTTP tools take them: `HTTPS_PROXY` for https:// targets,
 * `HTTP_PROXY` for http:// ones, `NO_PROXY` for the targets that go direct (lower case wins
 * over upper, as in curl), or `--proxy URL` for both (NO_PROXY still applies) and `--no-proxy`
 * for none. The decision is made once per target origin (`proxyFor`), never per request, so a
 * run without a proxy sends exactly as before.
 *
 * A plain http:// target goes through a forwarding proxy (the request line in absolute form,
 * `GET http://host:port/path`); an https:// one through a CONNECT tunnel, TLS then running end
 * to end inside it. Only http:// proxies are spoken to (the common corporate kind).
 *
 * The proxy URL's `user:password@` become `Proxy-Authorization: Basic`, and appear nowhere
 * else: what is printed or saved of a proxy is its `host:port` (`ProxyRoute.shown`).
 */
import { BlockList, connect, isIP, type Socket } from 'node:net';
import { InfergaugeError } from './errors.js';

/** Which proxy a process uses, before any target is known. */
export interface ProxySettings {
  /** The proxy URL for http:// targets (HTTP_PROXY, or --proxy). */
  http?: string;
  /** The proxy URL for https:// targets (HTTPS_PROXY, or --proxy). */
  https?: string;
  /** Targets that go direct (NO_PROXY), in curl's syntax (noProxyMatches). */
  noProxy?: string;
}

/** The proxy one target's connections go through. */
export interface ProxyRoute {
  /** The proxy's host name or address (an IPv6 one without brackets). */
  host: string;
  port: number;
  /** `host:port` of the proxy, without credentials: what output may say of it. */
  shown: string;
  /** `Basic ...` from the proxy URL's credentials, for Proxy-Authorization. */
  authorization?: string;
}

/** The stable code of every proxy failure; such a request's error kind is `proxy`. */
export const PROXY_ERROR_CODE = 'IG_PROXY';

/** A failure of the proxy itself: unreachable, refused a tunnel, asked for credentials. */
export class ProxyError extends InfergaugeError {
  constructor(message: string) {
    super(message, PROXY_ERROR_CODE);
  }
}

/** What a proxy failure message ends with: how to do without the proxy. */
export const PROXY_FIX = 'bypass it with --no-proxy or NO_PROXY';

/** What a 407 says: where the proxy's credentials go. */
export const PROXY_CREDENTIALS_FIX =
  'it wants credentials: give them in its URL (http://user:password@host:port)';

/** The environment's proxy settings: lower-case names win over upper-case, empty means unset. */
export function proxyEnv(env: NodeJS.ProcessEnv): ProxySettings {
  const read = (name: string) => {
    const value = env[name.toLowerCase()] || env[name.toUpperCase()];
    return value?.trim() || undefined;
  };
  const http = read('http_proxy');
  const https = read('https_proxy');
  const noProxy = read('no_proxy');
  return {
    ...(http ? { http } : {}),
    ...(https ? { https } : {}),
    ...(noProxy ? { noProxy } : {}),
  };
}

/**
 * A run's proxy settings: `--no-proxy` none; `--proxy URL` that URL for every target, the
 * environment's NO_PROXY still applying (as in curl); else the environment's. Undefined: direct.
 */
export function proxySettings(
  choice: { proxy?: string; noProxy?: boolean },
  env: NodeJS.ProcessEnv,
): ProxySettings | undefined {
  if (choice.noProxy) return undefined;
  const fromEnv = proxyEnv(env);
  const settings: ProxySettings =
    choice.proxy !== undefined
      ? {
          http: choice.proxy,
          https: choice.proxy,
          ...(fromEnv.noProxy ? { noProxy: fromEnv.noProxy } : {}),
        }
      : fromEnv;
  return settings.http || settings.https ? settings : undefined;
}

/**
 * The proxy for `target` (a URL or origin) under `settings`, or undefined to go direct. Throws
 * a ProxyError for a proxy URL that cannot be used (proxySettingsProblems says so up front).
 */
export function proxyFor(
  target: string | URL,
  settings: ProxySettings | undefined,
): ProxyRoute | undefined {
  if (!settings) return undefined;
  const url = typeof target === 'string' ? new URL(target) : target;
  const proxy = url.protocol === 'https:' ? settings.https : settings.http;
  if (!proxy) return undefined;
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  if (settings.noProxy && noProxyMatches(settings.noProxy, url.hostname, port)) return undefined;
  return parseProxyUrl(proxy);
}

/** What is wrong with the proxy URLs of `settings`, one line each, naming `source`. */
export function proxySettingsProblems(
  settings: ProxySettings | undefined,
  source: string,
): string[] {
  const problems = new Set<string>();
  for (const url of [settings?.http, settings?.https]) {
    if (url === undefined) continue;
    try {
      parseProxyUrl(url);
    } catch (err) {
      problems.add(`${source}: ${(err as Error).message}`);
    }
  }
  return [...problems];
}

/**
 * A proxy URL as a route. A URL without a scheme is http:// (as curl takes `proxy:3128`); the
 * port defaults to 80. Messages show the URL without its credentials.
 */
export function parseProxyUrl(text: string): ProxyRoute {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text : `http://${text}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new ProxyError(`the proxy URL ${safeProxyText(text)} is not a URL`);
  }
  if (url.protocol !== 'http:') {
    throw new ProxyError(
      `the proxy ${proxyUrlShown(url)} is ${url.protocol.slice(0, -1)}://, and infergauge speaks to http:// proxies only`,
    );
  }
  if (url.hostname === '') throw new ProxyError('the proxy URL has no host');
  const port = Number(url.port || 80);
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const route: ProxyRoute = { host, port, shown: `${url.hostname}:${port}` };
  if (url.username !== '' || url.password !== '') {
    const credentials = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
    route.authorization = `Basic ${Buffer.from(credentials).toString('base64')}`;
  }
  return route;
}

/** A proxy URL without credentials, path or query, for messages. */
function proxyUrlShown(url: URL): string {
  return `${url.protocol}//${url.host}`;
}

/** Text that is not even a URL, its credentials (`...@`) and control characters taken out. */
function safeProxyText(text: string): string {
  const at = text.lastIndexOf('@');
  const shown = at < 0 ? text : text.slice(at + 1);
  return JSON.stringify(shown.slice(0, 100));
}

/**
 * Whether NO_PROXY `list` sends `hostname:port` direct, by curl's rules: entries separated by
 * commas or spaces; `*` alone matches every host; a name matches itself and its subdomains
 * (`example.com` and `.example.com` both match `api.example.com`; `*.example.com` is taken as
 * `.example.com`); an IP address matches only that address, or its network with `/bits`
 * (`10.0.0.0/8`); an entry with `:port` matches only that port (`[::1]:8000` for IPv6).
 * Case-insensitive; a trailing dot is ignored. Loopback is not special: `localhost` and
 * `127.0.0.1` go through the proxy unless listed.
 */
export function noProxyMatches(list: string, hostname: string, port: number): boolean {
  const host = hostname
    .toLowerCase()
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '');
  const hostIp = isIP(host);
  for (const raw of list.toLowerCase().split(/[\s,]+/)) {
    if (raw === '') continue;
    if (raw === '*') return true;
    const entry = noProxyEntry(raw);
    if (entry.port !== undefined && entry.port !== port) continue;
    if (hostIp !== 0) {
      if (ipMatches(entry, host, hostIp)) return true;
      continue;
    }
    const name = entry.name.replace(/^\*?\./, '').replace(/\.$/, '');
    if (name !== '' && (host === name || host.endsWith(`.${name}`))) return true;
  }
  return false;
}

interface NoProxyEntry {
  name: string;
  port?: number;
  bits?: number;
}

function noProxyEntry(raw: string): NoProxyEntry {
  let name = raw;
  let port: number | undefined;
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(raw);
  if (bracketed) {
    name = bracketed[1] as string;
    if (bracketed[2] !== undefined) port = Number(bracketed[2]);
  } else {
    // One colon: host:port; more: an IPv6 address without a port.
    const colon = raw.indexOf(':');
    if (colon >= 0 && colon === raw.lastIndexOf(':')) {
      name = raw.slice(0, colon);
      port = Number(raw.slice(colon + 1));
    }
  }
  let bits: number | undefined;
  const slash = name.indexOf('/');
  if (slash >= 0) {
    bits = Number(name.slice(slash + 1));
    name = name.slice(0, slash);
  }
  return {
    name,
    ...(port !== undefined && Number.isInteger(port) ? { port } : {}),
    ...(bits !== undefined && Number.isInteger(bits) ? { bits } : {}),
  };
}

function ipMatches(entry: NoProxyEntry, host: string, hostIp: number): boolean {
  const entryIp = isIP(entry.name);
  if (entryIp !== hostIp) return false;
  const type = hostIp === 4 ? 'ipv4' : 'ipv6';
  const list = new BlockList();
  try {
    if (entry.bits !== undefined) list.addSubnet(entry.name, entry.bits, type);
    else list.addAddress(entry.name, type);
  } catch {
    return false;
  }
  return list.check(host, type);
}

/** `host:port` as a request target, an IPv6 address in brackets. */
export function authority(host: string, port: number): string {
  return isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
}

/** The longest CONNECT answer head read before the proxy is taken to be talking nonsense. */
const MAX_TUNNEL_HEAD_BYTES = 16 * 1024;

/**
 * Opens a CONNECT tunnel through `route` to `host:port`, resolving with the socket once the
 * proxy answered 2xx: what is written on it then reaches the target (a TLS handshake next).
 * Rejects with a ProxyError naming the proxy and the fix: unreachable, refused (407, 502...),
 * closed, or no answer within `timeoutMs`.
 */
export function openTunnel(
  route: ProxyRoute,
  host: string,
  port: number,
  timeoutMs: number,
): Promise<Socket> {
  const target = authority(host, port);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: route.host, port: route.port, noDelay: true });
    let head = Buffer.alloc(0);
    let settled = false;
    const fail = (why: string) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      reject(new ProxyError(`the proxy ${route.shown} ${why}; ${PROXY_FIX}`));
    };
    socket.setTimeout(timeoutMs, () =>
      fail(`opened no tunnel to ${target} within ${timeoutMs} ms`),
    );
    socket.once('connect', () => {
      socket.write(
        `CONNECT ${target} HTTP/1.1\r\nhost: ${target}\r\n${
          route.authorization ? `proxy-authorization: ${route.authorization}\r\n` : ''
        }\r\n`,
      );
    });
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > MAX_TUNNEL_HEAD_BYTES) fail('answered CONNECT with no HTTP head');
        return;
      }
      const statusLine = head.toString('latin1', 0, head.indexOf('\r\n'));
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine);
      if (!status) {
        fail('answered CONNECT with no HTTP status line');
        return;
      }
      const code = Number(status[1]);
      if (code < 200 || code >= 300) {
        const reason = statusLine
          .slice(status[0].length)
          .replace(/[^\x20-\x7e]/g, '')
          .trim();
        const credentials = code === 407 ? `; ${PROXY_CREDENTIALS_FIX}` : '';
        fail(
          `refused the tunnel to ${target}: HTTP ${code}${reason ? ` ${reason.slice(0, 100)}` : ''}${credentials}`,
        );
        return;
      }
      settled = true;
      socket.off('data', onData);
      socket.off('error', onError);
      socket.off('close', onClose);
      socket.setTimeout(0);
      socket.pause();
      // Bytes past the head are the target's (none before the client speaks, normally).
      const rest = head.subarray(end + 4);
      if (rest.length > 0) socket.unshift(rest);
      resolve(socket);
    };
    const onError = (err: Error) => {
      const code = (err as { code?: string }).code;
      fail(`cannot be reached (${code ?? err.message})`);
    };
    const onClose = () => fail(`closed the connection before opening a tunnel to ${target}`);
    socket.on('data', onData);
    socket.on('error', onError);
    socket.on('close', onClose);
  });
}

/**
 * `socket`, made over a CONNECT `tunnel` (TLS over it), with the tunnel destroyed when it
 * closes: a TLS socket made over another does not close it, and each tunnel left open held the
 * process for the server's idle timeout (two minutes after a run had finished).
 */
export function closingTunnel<S extends Socket>(socket: S, tunnel: Socket): S {
  socket.once('close', () => tunnel.destroy());
  return socket;
}

/** A socket error on the way to a forwarding proxy, as the ProxyError it is. */
export function proxyUnreachable(route: ProxyRoute, err: Error): ProxyError {
  const code = (err as { code?: string }).code;
  return new ProxyError(
    `the proxy ${route.shown} cannot be reached (${code ?? err.message}); ${PROXY_FIX}`,
  );
}
