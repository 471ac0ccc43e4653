import { createServer, type IncomingMessage, request, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { listenOnLoopback } from './scriptedServer.js';

/** What a test proxy did. */
export interface ProxyCounts {
  /** Requests forwarded (absolute-form `GET http://host/path`). */
  forwarded: number;
  /** CONNECT tunnels opened. */
  tunnels: number;
  /** Requests and CONNECTs refused (407, or the `refuse` status). */
  refused: number;
  /** Each Proxy-Authorization header received, as sent. */
  authorizations: string[];
  /** Each forwarded request's target and each CONNECT's authority. */
  targets: string[];
}

export interface TestProxy {
  /** `http://127.0.0.1:PORT`, without credentials. */
  url: string;
  /** `127.0.0.1:PORT` */
  hostPort: string;
  counts: ProxyCounts;
  close(): Promise<void>;
}

/**
 * A forwarding and CONNECT proxy on loopback that counts what passed through it. `auth`: the
 * `user:password` it asks for (407 without them); `refuse`: the status it answers everything
 * with instead of passing it on (a proxy that cannot reach the target says 502).
 */
export async function startProxy(
  options: { auth?: string; refuse?: number } = {},
): Promise<TestProxy> {
  const counts: ProxyCounts = {
    forwarded: 0,
    tunnels: 0,
    refused: 0,
    authorizations: [],
    targets: [],
  };
  const expected = options.auth
    ? `Basic ${Buffer.from(options.auth).toString('base64')}`
    : undefined;
  const allowed = (req: IncomingMessage): number | undefined => {
    const given = req.headers['proxy-authorization'];
    if (given !== undefined) counts.authorizations.push(given);
    if (expected !== undefined && given !== expected) return 407;
    return options.refuse;
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    counts.targets.push(req.url ?? '');
    const refusal = allowed(req);
    if (refusal !== undefined) {
      counts.refused++;
      res.writeHead(refusal, { 'content-type': 'text/plain', 'proxy-authenticate': 'Basic' });
      res.end(`proxy says ${refusal}`);
      return;
    }
    counts.forwarded++;
    const target = new URL(req.url ?? '');
    const headers = { ...req.headers };
    delete headers['proxy-authorization'];
    const upstream = request(
      {
        host: target.hostname,
        port: target.port,
        path: `${target.pathname}${target.search}`,
        method: req.method,
        headers,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  server.on('connect', (req: IncomingMessage, client: Socket, head: Buffer) => {
    counts.targets.push(req.url ?? '');
    const refusal = allowed(req);
    if (refusal !== undefined) {
      counts.refused++;
      client.end(`HTTP/1.1 ${refusal} Refused\r\ncontent-length: 0\r\n\r\n`);
      return;
    }
    const [host, port] = splitAuthority(req.url ?? '');
    const upstream = connect({ host, port }, () => {
      counts.tunnels++;
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  const listening = await listenOnLoopback(server);
  // listenOnLoopback tracks only the connections the server itself keeps; tunnels too.
  return {
    url: listening.url,
    hostPort: listening.url.slice('http://'.length),
    counts,
    close: listening.close,
  };
}

function splitAuthority(authority: string): [string, number] {
  const colon = authority.lastIndexOf(':');
  return [
    authority.slice(0, colon).replace(/^\[(.*)\]$/, '$1'),
    Number(authority.slice(colon + 1)),
  ];
}

/** A loopback port nothing listens on (opened, then closed). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  const { url, close } = await listenOnLoopback(server);
  await close();
  return Number(new URL(url).port);
}
