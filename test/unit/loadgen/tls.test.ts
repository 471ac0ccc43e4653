/**
 * TLS towards the target (src/loadgen/tls.ts): the options read and checked, the https pool
 * trusting a private CA, presenting a client certificate, skipping verification or checking
 * another name, and every handshake failure recorded as kind `tls` with the flag that fixes it.
 * Loopback https servers with the committed test certificates (test/fixtures/tls).
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { requestText } from '../../../src/httpText.js';
import { readPlanFile } from '../../../src/plan/planFile.js';
import { type PlanError, parseRunPlan, redactPlan } from '../../../src/plan/runPlan.js';
import { prepareCapacity } from '../../../src/session/profiles/capacity.js';
import { discoverModel } from '../../../src/session/target.js';
import { loadTls, type TlsSettings } from '../../../src/tls.js';
import { tempDir } from '../../helpers/cli.js';
import { runAgainst } from '../../helpers/run.js';
import { fixture, startTlsServer, type TlsTestServer } from '../../helpers/tlsServer.js';

const CA = fixture('ca.pem');
const CLIENT = { clientCert: fixture('client.pem'), clientKey: fixture('client.key') };
const PASSPHRASE = 's3cret-pass';

function material(settings: TlsSettings, env: NodeJS.ProcessEnv = {}) {
  const problems: string[] = [];
  const tls = loadTls(settings, env, problems);
  assert.deepEqual(problems, []);
  return tls;
}

function problemsOf(settings: TlsSettings, env: NodeJS.ProcessEnv = {}): string {
  const problems: string[] = [];
  assert.equal(loadTls(settings, env, problems), undefined);
  assert.ok(problems.length > 0);
  return problems.join('\n');
}

const servers: TlsTestServer[] = [];
async function server(options: Parameters<typeof startTlsServer>[0] = {}) {
  const s = await startTlsServer(options);
  servers.push(s);
  return s;
}
after(async () => {
  await Promise.all(servers.map((s) => s.close()));
});

/** Three requests, two at a time, through the https pool; every record's error, or 'ok'. */
async function outcomes(url: string, settings?: TlsSettings, env?: NodeJS.ProcessEnv) {
  const tls = settings ? material(settings, env) : undefined;
  const { records } = await runAgainst(url, {
    target: tls ? { tls } : {},
    requests: 3,
    load: { mode: 'closed', concurrency: 2 },
  });
  return records.map((r) => (r.error ? `${r.error.kind}: ${r.error.message}` : 'ok'));
}

describe('TLS options are read and checked before anything is sent', () => {
  test('a missing file, a file that is not PEM, a key without its certificate', () => {
    assert.match(
      problemsOf({ caCert: '/nonexistent/ca.pem' }),
      /--ca-cert \/nonexistent\/ca.pem: no such file/,
    );
    assert.match(problemsOf({ caCert: fixture('README.md') }), /--ca-cert .*not a PEM certificate/);
    assert.match(
      problemsOf({ clientCert: CLIENT.clientCert }),
      /--client-cert needs its private key: add --client-key/,
    );
    assert.match(problemsOf({ clientKey: CLIENT.clientKey }), /--client-key needs its certificate/);
    // A certificate given as the key: named, and its contents never shown.
    const asKey = problemsOf({ clientCert: CLIENT.clientCert, clientKey: CLIENT.clientCert });
    assert.match(asKey, /--client-key .*not a PEM key/);
    assert.doesNotMatch(asKey, /MII|BEGIN CERTIFICATE-----\n/);
  });

  test('an encrypted key: its passphrase from the named variable, never in a message', () => {
    const key = { clientCert: CLIENT.clientCert, clientKey: fixture('client-encrypted.key') };
    assert.match(problemsOf(key), /the key is encrypted; .*--client-key-passphrase-env NAME/);
    const unset = problemsOf({ ...key, clientKeyPassphraseEnv: 'IG_TEST_PASS' });
    assert.match(unset, /names IG_TEST_PASS, which is not set/);
    const wrong = problemsOf(
      { ...key, clientKeyPassphraseEnv: 'IG_TEST_PASS' },
      { IG_TEST_PASS: 'not-it' },
    );
    assert.match(wrong, /the passphrase in IG_TEST_PASS does not open it/);
    assert.doesNotMatch(wrong, /not-it/);
    const tls = material(
      { ...key, clientKeyPassphraseEnv: 'IG_TEST_PASS' },
      { IG_TEST_PASS: PASSPHRASE },
    );
    assert.equal(tls?.passphrase, PASSPHRASE);
  });

  test('a key that is not the certificate’s, and an address as --tls-servername', () => {
    const mismatch = problemsOf({ clientCert: CLIENT.clientCert, clientKey: fixture('leaf.key') });
    assert.match(mismatch, /is not the private key of --client-cert/);
    assert.match(problemsOf({ servername: '127.0.0.1' }), /--tls-servername must be a DNS name/);
  });

  test('the plan refuses TLS options without an https URL, and never writes the material', () => {
    assert.throws(
      () => parseRunPlan({ url: 'http://127.0.0.1:8000', caCert: CA }),
      (err: PlanError) => /--ca-cert: TLS options apply to an https:\/\/ server/.test(err.message),
    );
    assert.throws(
      () => parseRunPlan({ insecure: true }),
      (err: PlanError) => /--insecure: .*pass its --url/.test(err.message),
    );
    const plan = parseRunPlan(
      {
        url: 'https://127.0.0.1:8443',
        caCert: CA,
        clientCert: CLIENT.clientCert,
        clientKey: fixture('client-encrypted.key'),
        clientKeyPassphraseEnv: 'IG_TEST_PASS',
        insecure: true,
      },
      { IG_TEST_PASS: PASSPHRASE },
    );
    assert.equal(plan.tls?.material?.passphrase, PASSPHRASE);
    const written = JSON.stringify(redactPlan(plan));
    assert.doesNotMatch(written, new RegExp(PASSPHRASE));
    assert.doesNotMatch(written, /PRIVATE KEY|BEGIN CERTIFICATE/);
    assert.deepEqual(redactPlan(plan).tls, {
      caCert: CA,
      clientCert: CLIENT.clientCert,
      clientKey: fixture('client-encrypted.key'),
      clientKeyPassphraseEnv: 'IG_TEST_PASS',
      insecure: true,
    });
  });

  test('capacity reads the same options, and refuses them for a plain-http server', () => {
    const bad = prepareCapacity({ url: 'http://127.0.0.1:8000', caCert: CA, modelName: 'm' }, {});
    assert.match(bad.problems.join('\n'), /--ca-cert: TLS options apply to an https:\/\/ server/);
    const ok = prepareCapacity({ url: 'https://127.0.0.1:8443', caCert: CA, insecure: true }, {});
    assert.deepEqual(ok.problems, []);
    assert.equal(ok.run.tls?.insecure, true);
    assert.match(ok.run.tls?.material.ca ?? '', /BEGIN CERTIFICATE/);
  });

  test("a plan file's certificate paths are relative to the plan", () => {
    const dir = tempDir('ig-tls-plan-');
    writeFileSync(join(dir, 'ca.pem'), readFileSync(CA));
    const path = join(dir, 'plan.yaml');
    writeFileSync(path, 'url: https://127.0.0.1:8443\nca-cert: ca.pem\ninsecure: true\n');
    const { options } = readPlanFile(path);
    assert.equal(options.caCert, join(dir, 'ca.pem'));
    assert.equal(options.insecure, true);
  });
});

describe('requests over https', () => {
  test('a private CA: refused as tls naming --ca-cert, then trusted with --ca-cert', async () => {
    const s = await server();
    const refused = await outcomes(s.url);
    assert.equal(refused.length, 3);
    for (const o of refused) {
      assert.match(
        o,
        /^tls: TLS: the server's certificate is not signed by a CA this client trusts/,
      );
      assert.match(o, /--ca-cert FILE \(or set NODE_EXTRA_CA_CERTS=FILE\)/);
    }
    assert.deepEqual(await outcomes(s.url, { caCert: CA }), ['ok', 'ok', 'ok']);
    assert.equal(s.requests, 3);
  });

  test('a self-signed certificate: tls; --insecure skips the check', async () => {
    const s = await server({ cert: 'self' });
    for (const o of await outcomes(s.url)) assert.match(o, /^tls: .*DEPTH_ZERO_SELF_SIGNED_CERT/);
    assert.deepEqual(await outcomes(s.url, { insecure: true }), ['ok', 'ok', 'ok']);
  });

  test('an expired certificate: tls, saying expired', async () => {
    const s = await server({ cert: 'expired' });
    for (const o of await outcomes(s.url, { caCert: CA })) {
      assert.match(o, /^tls: TLS: the server's certificate has expired \(CERT_HAS_EXPIRED/);
    }
    assert.equal(s.requests, 0);
  });

  test('a certificate for another name: tls naming --tls-servername, which then fixes it', async () => {
    const s = await server({ cert: 'wrong' });
    for (const o of await outcomes(s.url, { caCert: CA })) {
      assert.match(o, /^tls: TLS: the server's certificate is not for .*--tls-servername NAME/);
    }
    assert.deepEqual(await outcomes(s.url, { caCert: CA, servername: 'elsewhere.test' }), [
      'ok',
      'ok',
      'ok',
    ]);
  });

  test('a server that requires a client certificate: tls naming --client-cert, then mTLS', async () => {
    const s = await server({ requireClientCert: true });
    for (const o of await outcomes(s.url, { caCert: CA })) {
      assert.match(
        o,
        /^tls: TLS: the server refused the handshake, asking for a client certificate/,
      );
      assert.match(o, /--client-cert FILE --client-key FILE/);
    }
    assert.deepEqual(await outcomes(s.url, { caCert: CA, ...CLIENT }), ['ok', 'ok', 'ok']);
    const encrypted = {
      caCert: CA,
      clientCert: CLIENT.clientCert,
      clientKey: fixture('client-encrypted.key'),
      clientKeyPassphraseEnv: 'IG_TEST_PASS',
    };
    const env = { IG_TEST_PASS: PASSPHRASE };
    assert.deepEqual(await outcomes(s.url, encrypted, env), ['ok', 'ok', 'ok']);
    assert.equal(s.withClientCert, 6);
  });

  test('a plain-http server behind an https URL: tls, saying it does not speak TLS', async () => {
    const { createServer } = await import('node:http');
    const plain = createServer((_req, res) => res.end('{}'));
    await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
    const { port } = plain.address() as { port: number };
    try {
      const [first] = await outcomes(`https://127.0.0.1:${port}`);
      assert.match(first, /^tls: TLS: the server does not speak TLS on this port .*http:\/\//);
    } finally {
      plain.closeAllConnections();
      plain.close();
    }
  });
});

describe('model discovery and the small requests use the same TLS options', () => {
  test('discovery names the TLS fix, not --model; with --ca-cert it learns the model', async () => {
    const s = await server();
    const bare = parseRunPlan({ url: s.url });
    await assert.rejects(discoverModel(bare, s.url, undefined), (err: Error) => {
      assert.match(err.message, /could not reach .*\/v1\/models: TLS: .*--ca-cert FILE/);
      assert.doesNotMatch(err.message, /pass --model/);
      return true;
    });
    const trusted = parseRunPlan({ url: s.url, caCert: CA });
    assert.equal((await discoverModel(trusted, s.url, undefined)).model, 'tls-model');
  });

  test('discovery of a server that wants a client certificate names --client-cert', async () => {
    const s = await server({ requireClientCert: true });
    const plan = parseRunPlan({ url: s.url, caCert: CA });
    await assert.rejects(
      discoverModel(plan, s.url, undefined),
      /--client-cert FILE --client-key FILE/,
    );
    const mtls = parseRunPlan({ url: s.url, caCert: CA, ...CLIENT });
    assert.equal((await discoverModel(mtls, s.url, undefined)).model, 'tls-model');
  });

  test('requestText (the scraper, the tokenizer) trusts the CA it is given', async () => {
    const s = await server();
    const tls = material({ caCert: CA });
    const { statusCode, body } = await requestText(`${s.url}/metrics`, {
      timeoutMs: 5_000,
      ...(tls ? { tls } : {}),
    });
    assert.equal(statusCode, 200);
    assert.match(body, /num_requests_running/);
    await assert.rejects(requestText(`${s.url}/metrics`, { timeoutMs: 5_000 }), {
      code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
    });
  });
});
