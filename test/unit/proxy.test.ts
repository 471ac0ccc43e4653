import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  noProxyMatches,
  openTunnel,
  PROXY_ERROR_CODE,
  parseProxyUrl,
  proxyEnv,
  proxyFor,
  proxySettings,
} from '../../src/proxy.js';
import { closedPort, startProxy } from '../helpers/proxyServer.js';
import { startScriptedServer } from '../helpers/scriptedServer.js';

describe('NO_PROXY matching (curl rules)', () => {
  const cases: [list: string, host: string, port: number, matches: boolean][] = [
    ['*', 'anything.example', 443, true],
    ['example.com', 'example.com', 443, true],
    ['example.com', 'api.example.com', 443, true],
    ['.example.com', 'api.example.com', 443, true],
    ['.example.com', 'example.com', 443, true],
    ['*.example.com', 'api.example.com', 443, true],
    ['example.com', 'notexample.com', 443, false],
    ['example.com', 'example.com.evil.org', 443, false],
    ['EXAMPLE.com', 'Api.Example.COM.', 443, true],
    ['foo.org, example.com', 'x.example.com', 80, true],
    ['foo.org example.com', 'x.example.com', 80, true],
    ['foo.org,,  ,bar.org', 'x.example.com', 80, false],
    ['example.com:8443', 'example.com', 8443, true],
    ['example.com:8443', 'example.com', 443, false],
    ['127.0.0.1', '127.0.0.1', 8000, true],
    ['127.0.0.1', '127.0.0.2', 8000, false],
    ['127.0.0.1:8000', '127.0.0.1', 8001, false],
    ['10.0.0.0/8', '10.2.3.4', 80, true],
    ['10.0.0.0/8', '11.2.3.4', 80, false],
    // An address matches no name, and a name no address: no suffix matching of digits.
    ['0.0.1', '10.0.0.1', 80, false],
    ['::1', '[::1]', 80, true],
    ['[::1]:8000', '[::1]', 8000, true],
    ['[::1]:8000', '[::1]', 8001, false],
    ['fd00::/8', '[fd12::3]', 80, true],
    ['0:0:0:0:0:0:0:1', '::1', 80, true],
    // Loopback is not special: proxied unless listed.
    ['example.com', 'localhost', 80, false],
    ['example.com', '127.0.0.1', 80, false],
    ['', 'example.com', 80, false],
  ];
  for (const [list, host, port, matches] of cases) {
    test(`${JSON.stringify(list)} ${matches ? 'matches' : 'does not match'} ${host}:${port}`, () => {
      assert.equal(noProxyMatches(list, host, port), matches);
    });
  }
});

describe('proxy settings', () => {
  test('lower-case names win over upper-case; empty is unset', () => {
    assert.deepEqual(
      proxyEnv({
        http_proxy: 'http://low:1',
        HTTP_PROXY: 'http://up:2',
        HTTPS_PROXY: 'http://up:3',
        no_proxy: '',
        NO_PROXY: 'a.org',
      }),
      { http: 'http://low:1', https: 'http://up:3', noProxy: 'a.org' },
    );
  });

  test('--proxy overrides the environment for both schemes, NO_PROXY still applies; --no-proxy: none', () => {
    const env = { HTTPS_PROXY: 'http://env:1', NO_PROXY: 'internal.org' };
    assert.deepEqual(proxySettings({ proxy: 'http://flag:2' }, env), {
      http: 'http://flag:2',
      https: 'http://flag:2',
      noProxy: 'internal.org',
    });
    assert.equal(proxySettings({ noProxy: true }, env), undefined);
    assert.equal(proxySettings({}, { NO_PROXY: '*' }), undefined);
    const settings = proxySettings({}, env);
    assert.equal(proxyFor('https://api.example.com', settings)?.shown, 'env:1');
    // HTTPS_PROXY alone leaves http:// targets direct.
    assert.equal(proxyFor('http://api.example.com', settings), undefined);
    assert.equal(proxyFor('https://x.internal.org', settings), undefined);
  });

  test('a proxy URL: Basic credentials, default port 80, bare host:port, http:// only', () => {
    const route = parseProxyUrl('http://me:p%40ss@proxy.corp:3128');
    assert.equal(route.shown, 'proxy.corp:3128');
    assert.equal(route.authorization, `Basic ${Buffer.from('me:p@ss').toString('base64')}`);
    assert.equal(parseProxyUrl('proxy.corp:3128').shown, 'proxy.corp:3128');
    assert.equal(parseProxyUrl('http://proxy.corp').port, 80);
    assert.equal(parseProxyUrl('http://[::1]:3128').host, '::1');
    assert.throws(
      () => parseProxyUrl('socks5://me:secret@proxy.corp:1080'),
      (err: Error) => /http:\/\/ proxies only/.test(err.message) && !err.message.includes('secret'),
    );
    assert.throws(
      () => parseProxyUrl('http://me:secret@'),
      (err: Error) => !err.message.includes('secret'),
    );
  });
});

describe('CONNECT tunnels', () => {
  test('a tunnel carries the bytes to the target, with the credentials to the proxy only', async () => {
    const server = await startScriptedServer(() => ({
      headers: { 'content-type': 'text/plain' },
      steps: [{ write: 'through' }],
    }));
    const proxy = await startProxy({ auth: 'me:secret' });
    try {
      const port = Number(new URL(server.url).port);
      const socket = await openTunnel(
        parseProxyUrl(`http://me:secret@${proxy.hostPort}`),
        '127.0.0.1',
        port,
        2000,
      );
      socket.resume();
      let text = '';
      socket.on('data', (d: Buffer) => {
        text += d.toString();
      });
      socket.write('GET /x HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n');
      await new Promise((resolve) => socket.on('close', resolve));
      assert.match(text, /^HTTP\/1\.1 200/);
      assert.match(text, /through/);
      assert.equal(proxy.counts.tunnels, 1);
      assert.deepEqual(proxy.counts.targets, [`127.0.0.1:${port}`]);
      assert.equal(server.requests.length, 1);
    } finally {
      await proxy.close();
      await server.close();
    }
  });

  test('refused (407, 502) or unreachable: a proxy error naming the proxy and the fix, never its credentials', async () => {
    for (const options of [{ auth: 'me:right' }, { refuse: 502 }]) {
      const proxy = await startProxy(options);
      try {
        await assert.rejects(
          openTunnel(parseProxyUrl(`http://me:wrong@${proxy.hostPort}`), 'example.com', 443, 2000),
          (err: Error & { code?: string }) => {
            assert.equal(err.code, PROXY_ERROR_CODE);
            assert.match(
              err.message,
              new RegExp(
                `the proxy ${proxy.hostPort} refused the tunnel to example.com:443: HTTP ${options.auth ? 407 : 502}`,
              ),
            );
            assert.match(err.message, /--no-proxy or NO_PROXY/);
            assert.doesNotMatch(err.message, /wrong/);
            return true;
          },
        );
      } finally {
        await proxy.close();
      }
    }
    const port = await closedPort();
    await assert.rejects(
      openTunnel(parseProxyUrl(`http://127.0.0.1:${port}`), 'example.com', 443, 2000),
      /the proxy 127\.0\.0\.1:\d+ cannot be reached \(ECONNREFUSED\)/,
    );
  });
});
