/**
 * `run` against loopback https servers, as a user types it: exit codes and terminal text of a
 * TLS failure and of bad TLS options, --insecure's warning in every output, worker threads
 * carrying the TLS options, and a key passphrase in none of the outputs.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { runCli, tempDir } from '../helpers/cli.js';
import { fixture, startTlsServer, type TlsTestServer } from '../helpers/tlsServer.js';

const PASSPHRASE = 's3cret-pass';
const QUICK = ['--requests', '4', '--concurrency', '2', '--workers', '1', '--no-server-metrics'];

describe('run over https', () => {
  let privateCa: TlsTestServer;
  let selfSigned: TlsTestServer;
  let mtls: TlsTestServer;
  before(async () => {
    [privateCa, selfSigned, mtls] = await Promise.all([
      startTlsServer(),
      startTlsServer({ cert: 'self' }),
      startTlsServer({ requireClientCert: true }),
    ]);
  });
  after(async () => {
    await Promise.all([privateCa.close(), selfSigned.close(), mtls.close()]);
  });

  test('an untrusted CA: exit 1, the message names --ca-cert, not --model', async () => {
    const out = tempDir('ig-tls-');
    const r = await runCli(['run', '--url', privateCa.url, ...QUICK, '--out', join(out, 'a')]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(
      r.stderr,
      /TLS: the server's certificate is not signed by a CA this client trusts/,
    );
    assert.match(r.stderr, /--ca-cert FILE/);
    assert.doesNotMatch(r.stderr, /pass --model/);
    // With --model the requests go out and each fails as tls: nothing succeeded, exit 1.
    const withModel = await runCli([
      'run',
      '--url',
      privateCa.url,
      '--model',
      'tls-model',
      ...QUICK,
      '--out',
      join(out, 'b'),
    ]);
    assert.equal(withModel.code, 1, withModel.stderr);
    const summary = JSON.parse(readFileSync(join(out, 'b', 'summary.json'), 'utf8'));
    assert.deepEqual(summary.requests.errorsByKind, { tls: 4 });
  });

  test('--insecure: measured in worker threads, the warning in terminal, summary, manifest, report', async () => {
    const out = join(tempDir('ig-tls-'), 'run');
    const r = await runCli(['run', '--url', selfSigned.url, '--insecure', ...QUICK, '--out', out]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout + r.stderr, /--insecure: the server's TLS certificate was not verified/);
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
    assert.equal(summary.requests.completed, 4);
    assert.ok(summary.warnings.some((w: { code: string }) => w.code === 'tls_unverified'));
    const manifest = JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8'));
    assert.equal(manifest.plan.tls.insecure, true);
    assert.match(readFileSync(join(out, 'report.html'), 'utf8'), /certificate was not verified/);
  });

  test('mTLS with an encrypted key: it runs, and the passphrase is in no output', async () => {
    const out = join(tempDir('ig-tls-'), 'run');
    const r = await runCli(
      [
        'run',
        '--url',
        mtls.url,
        '--ca-cert',
        fixture('ca.pem'),
        '--client-cert',
        fixture('client.pem'),
        '--client-key',
        fixture('client-encrypted.key'),
        '--client-key-passphrase-env',
        'IG_TEST_KEY_PASS',
        ...QUICK,
        '--out',
        out,
      ],
      { IG_TEST_KEY_PASS: PASSPHRASE },
    );
    assert.equal(r.code, 0, r.stderr);
    assert.ok(mtls.withClientCert >= 4);
    for (const text of [
      r.stdout,
      r.stderr,
      ...readdirSync(out).map((f) => readFileSync(join(out, f), 'utf8')),
    ]) {
      assert.ok(!text.includes(PASSPHRASE), 'the passphrase was written');
      assert.ok(!text.includes('PRIVATE KEY'), 'the key was written');
    }
  });

  test('bad TLS options: exit 2 naming the flag and the fix', async () => {
    const r = await runCli(['run', '--url', privateCa.url, '--client-cert', fixture('client.pem')]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /--client-cert needs its private key: add --client-key FILE/);
  });
});
