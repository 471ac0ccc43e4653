/**
 * capacity --http2, against a node:http2 server that also speaks HTTP/1.1 (allowHTTP1): the
 * protocol is chosen once for the search as run chooses it, and the server sees it.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { EXIT } from '../../../src/errors.js';
import { prepareCapacity, runCapacity } from '../../../src/session/profiles/capacity.js';
import { tempDir } from '../../helpers/cli.js';
import { DONE, textEvent, usageEvent } from '../../helpers/scriptedServer.js';
import { fixture } from '../../helpers/tlsServer.js';

let server: http2.Http2SecureServer;
let url: string;
/** The HTTP version of each completion request the server answered. */
const versions: string[] = [];

before(async () => {
  server = http2.createSecureServer({
    key: readFileSync(fixture('leaf.key')),
    cert: readFileSync(fixture('leaf.pem')),
    allowHTTP1: true,
  });
  server.on('request', (req, res) => {
    if (!req.url.endsWith('/completions')) {
      res.writeHead(404).end();
      return;
    }
    versions.push(req.httpVersion);
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(`${textEvent('a')}${textEvent('b')}${usageEvent(16, 2)}${DONE}`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** One step of batch 1 against the server with `http2`, as the command line gives it. */
async function search(http2Flag: string | undefined) {
  versions.length = 0;
  const prepared = prepareCapacity(
    {
      url,
      modelName: 'm',
      caCert: fixture('ca.pem'),
      batches: '1',
      requestsPerStep: '2',
      inputTokens: '16',
      outputTokens: '2',
      promptSalt: '1',
      ...(http2Flag !== undefined ? { http2: http2Flag } : {}),
    },
    {},
  );
  assert.deepEqual(prepared.problems, []);
  const notices: string[] = [];
  const out = join(tempDir('ig-capacity-h2-'), 'search');
  const result = await runCapacity(
    prepared.settings,
    { ...prepared.run, out, onNotice: (m) => notices.push(m) },
    new AbortController().signal,
  );
  const manifest = JSON.parse(readFileSync(join(out, 'batch-1', 'manifest.json'), 'utf8'));
  return { ...result, notices, manifest, versions: [...versions] };
}

describe('capacity --http2', () => {
  test('off: HTTP/1.1 to a server that offers h2, and the manifest says so', async () => {
    const { code, report, notices, manifest, versions } = await search('off');
    assert.equal(code, EXIT.ok);
    assert.equal(report.steps[0]?.completed, 2);
    assert.deepEqual(versions, ['1.1', '1.1']);
    assert.equal(manifest.server.protocol, 'http/1.1');
    assert.ok(notices.includes('HTTP/1.1 (--http2 off)'), notices.join('\n'));
  });

  test('auto (no flag): HTTP/2 where the server offers it', async () => {
    const { code, manifest, versions } = await search(undefined);
    assert.equal(code, EXIT.ok);
    assert.deepEqual(versions, ['2.0', '2.0']);
    assert.equal(manifest.server.protocol, 'h2');
  });

  test('a mode run would refuse is refused', () => {
    const bad = prepareCapacity({ url, http2: 'yes' }, {}).problems;
    assert.deepEqual(bad, ['--http2 must be auto, on or off (got "yes")']);
    assert.equal(prepareCapacity({ url, http2: 'on' }, {}).run.http2, 'on');
    assert.equal(prepareCapacity({ url, http2: 'auto' }, {}).run.http2, undefined);
  });
});
