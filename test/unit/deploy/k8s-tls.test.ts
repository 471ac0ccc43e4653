/**
 * `k8s job` with a plan that names certificate files, a key's passphrase, a proxy or headers
 * with credentials: what the pods get (a Secret of the files, mounted read-only, the plan's paths
 * pointing at it; variables from the user's Secrets; a plan with credentials in a Secret), and
 * what is refused before N pods would each fail. The committed test certificates
 * (test/fixtures/tls) are the files.
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import {
  K8sJobError,
  type K8sJobOptions,
  k8sJob,
  k8sJobHowTo,
  withFieldValues,
} from '../../../src/deploy/k8s.js';
import { planFileOptions } from '../../../src/plan/planFile.js';
import { resolveTlsPaths } from '../../../src/tls.js';
import { runCli, tempDir } from '../../helpers/cli.js';
import { fixture } from '../../helpers/tlsServer.js';

const NOW = new Date('2026-11-29T23:00:00.000Z');
const URL = 'url: https://vllm.bench.svc:8443';

interface Obj {
  kind: string;
  type?: string;
  metadata: { name: string };
  data?: Record<string, string>;
  stringData?: Record<string, string>;
  spec: {
    template: {
      spec: {
        containers: {
          env: { name: string; valueFrom: Record<string, Record<string, string>> }[];
          volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[];
        }[];
        volumes: {
          name: string;
          configMap?: { name: string };
          secret?: { secretName: string; defaultMode?: number };
        }[];
      };
    };
  };
}

/** A directory holding `plan.yaml` (`text`) and the test certificates under certs/. */
function planDir(text: string): string {
  const dir = tempDir('ig-k8s-tls-');
  mkdirSync(join(dir, 'certs'));
  for (const f of ['ca.pem', 'client.pem', 'client.key', 'client-encrypted.key', 'leaf.key']) {
    copyFileSync(fixture(f), join(dir, 'certs', f));
  }
  const plan = join(dir, 'plan.yaml');
  writeFileSync(plan, text);
  return plan;
}

function job(planText: string, options: K8sJobOptions = {}) {
  const plan = planDir(planText);
  return k8sJob({
    planText,
    options: { shards: '2', name: 'tls-run', image: 'r/ig:1', plan, ...options },
    now: NOW,
  });
}

function docs(manifest: string): Obj[] {
  return parseAllDocuments(manifest as string).map((d) => {
    assert.deepEqual(d.errors, []);
    return d.toJS() as Obj;
  });
}

function problems(planText: string, options: K8sJobOptions = {}): string[] {
  try {
    job(planText, options);
  } catch (err) {
    assert.ok(err instanceof K8sJobError, String(err));
    return err.problems;
  }
  assert.fail('expected problems');
}

const shardPod = (all: Obj[]) => all.filter((d) => d.kind === 'Job')[0].spec.template.spec;
const mergePod = (all: Obj[]) => all.filter((d) => d.kind === 'Job')[1].spec.template.spec;

describe("k8s job: the plan's certificate files reach the pods", () => {
  const PLAN = [
    '# the ingress, signed by the company CA; mTLS',
    URL,
    'ca-cert: certs/ca.pem        # beside the plan',
    "client-cert: 'certs/client.pem'",
    'client-key: "certs/client.key"',
    'tls-servername: llm.internal',
    'http2: off',
    'concurrency: 8',
    '',
  ].join('\n');

  test('a Secret holds the files byte for byte; mounted read-only; the plan names the mount', () => {
    const j = job(PLAN);
    const all = docs(j.manifest);
    assert.deepEqual(
      all.map((d) => `${d.kind}/${d.metadata.name}`),
      [
        'ConfigMap/tls-run-plan',
        'Secret/tls-run-tls',
        'PersistentVolumeClaim/infergauge-results',
        'Job/tls-run',
        'Job/tls-run-merge',
      ],
    );
    const secret = all[1];
    assert.equal(secret.type, 'Opaque');
    const decoded = Object.fromEntries(
      Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64')]),
    );
    assert.deepEqual(Object.keys(decoded), ['ca.pem', 'client.pem', 'client.key']);
    assert.deepEqual(decoded['ca.pem'], readFileSync(fixture('ca.pem')));
    assert.deepEqual(decoded['client.pem'], readFileSync(fixture('client.pem')));
    assert.deepEqual(decoded['client.key'], readFileSync(fixture('client.key')));

    // The key is in the Secret only: not in the ConfigMap, not in plain text anywhere.
    assert.doesNotMatch(j.manifest, /PRIVATE KEY/);
    assert.equal(j.manifest.split(secret.data?.['client.key'] as string).length, 2);

    // Only the three paths changed; comments, quoting and the other fields as written.
    const podPlan = all[0].data?.['plan.yaml'];
    assert.equal(
      podPlan,
      PLAN.replace('certs/ca.pem', '"/tls/ca.pem"')
        .replace("'certs/client.pem'", '"/tls/client.pem"')
        .replace('"certs/client.key"', '"/tls/client.key"'),
    );
    // As run reads it in the pod (/plan/plan.yaml): the mounted files, the rest unchanged.
    const read = planFileOptions(parseAllDocuments(podPlan as string)[0].toJS(), 'p').options;
    resolveTlsPaths(read, '/plan/plan.yaml');
    assert.equal(read.caCert, '/tls/ca.pem');
    assert.equal(read.clientCert, '/tls/client.pem');
    assert.equal(read.clientKey, '/tls/client.key');
    assert.equal(read.tlsServername, 'llm.internal');
    assert.equal(read.http2, 'off');

    const pod = shardPod(all);
    assert.deepEqual(pod.containers[0].volumeMounts, [
      { name: 'plan', mountPath: '/plan', readOnly: true },
      { name: 'tls', mountPath: '/tls', readOnly: true },
      { name: 'results', mountPath: '/results' },
    ]);
    assert.deepEqual(
      pod.volumes.find((v) => v.name === 'tls'),
      { name: 'tls', secret: { secretName: 'tls-run-tls', defaultMode: 0o440 } },
    );
    // The merge reads results only.
    assert.ok(!mergePod(all).volumes.some((v) => v.name === 'tls'));

    assert.equal(j.tlsSecret, 'tls-run-tls');
    assert.ok(j.warnings.some((w) => /holds the client key .*out of version control/.test(w)));
  });

  test('a CA alone: a Secret of one file, no warning about a key', () => {
    const j = job(`${URL}\nca-cert: certs/ca.pem\n`);
    const secret = docs(j.manifest).find((d) => d.metadata.name === 'tls-run-tls');
    assert.deepEqual(Object.keys(secret?.data ?? {}), ['ca.pem']);
    assert.ok(!j.warnings.some((w) => /client key/.test(w)));
  });

  test('insecure, tls-servername, proxy, http2 without files: the plan byte for byte, no Secret', () => {
    const plan = `${URL}\ninsecure: true\ntls-servername: llm.internal\nproxy: http://proxy.corp:3128\nhttp2: on\n`;
    const all = docs(job(plan).manifest);
    assert.deepEqual(
      all.map((d) => d.kind),
      ['ConfigMap', 'PersistentVolumeClaim', 'Job', 'Job'],
    );
    assert.equal(all[0].data?.['plan.yaml'], plan);
    assert.equal(docs(job(`${URL}\nproxy: false\n`).manifest)[0].kind, 'ConfigMap');
  });

  test("an encrypted key: its passphrase from the user's Secret, never from the manifest", () => {
    const plan = `${URL}\nclient-cert: certs/client.pem\nclient-key: certs/client-encrypted.key\nclient-key-passphrase-env: KEY_PASS\napi-key-env: VLLM_KEY\n`;
    const missing = problems(plan);
    assert.equal(missing.length, 1, missing.join('\n'));
    assert.match(
      missing[0],
      /client-key-passphrase-env: KEY_PASS must be set in the pods: .*--secret-env KEY_PASS=client-key-pass\/passphrase/,
    );

    const j = job(plan, { secretEnv: ['KEY_PASS=mtls/passphrase', 'VLLM_KEY=vllm-api/key'] });
    const env = shardPod(docs(j.manifest)).containers[0].env;
    assert.deepEqual(env.slice(1), [
      { name: 'KEY_PASS', valueFrom: { secretKeyRef: { name: 'mtls', key: 'passphrase' } } },
      { name: 'VLLM_KEY', valueFrom: { secretKeyRef: { name: 'vllm-api', key: 'key' } } },
    ]);
    assert.doesNotMatch(j.manifest, /s3cret-pass/);
    assert.ok(!j.warnings.some((w) => /api-key-env/.test(w)), 'covered by --secret-env');
    const howTo = k8sJobHowTo(j);
    assert.match(
      howTo,
      / {2}0\. the Secrets --secret-env reads must exist: mtls\/passphrase, vllm-api\/key/,
    );

    // Encrypted, and no variable named for its passphrase: every shard would stop.
    const noPass = problems(
      `${URL}\nclient-cert: certs/client.pem\nclient-key: certs/client-encrypted.key\n`,
    );
    assert.match(
      noPass[0],
      /client-key: .*client-encrypted\.key is encrypted: .*client-key-passphrase-env: NAME.*--secret-env/,
    );
  });

  test('files that the pods could not use: exit 2, naming the field, the file and the fix', () => {
    const missing = problems(`${URL}\nca-cert: certs/nope.pem\n`);
    assert.equal(missing.length, 1);
    assert.match(
      missing[0],
      /plan\.yaml: ca-cert: \/.*\/certs\/nope\.pem: no such file; pass the path of a PEM file/,
    );

    assert.match(
      problems(`${URL}\nca-cert: certs/client.key\n`)[0],
      /ca-cert: .*client\.key: not a PEM certificate/,
    );
    assert.match(
      problems(`${URL}\nclient-cert: certs/client.pem\n`)[0],
      /client-cert: needs its private key: add client-key: FILE/,
    );
    assert.match(
      problems(`${URL}\nclient-cert: certs/client.pem\nclient-key: certs/leaf.key\n`)[0],
      /is not the private key of --client-cert/,
    );
    assert.match(
      problems('url: http://vllm.bench.svc:8000\nca-cert: certs/ca.pem\ninsecure: true\n')[0],
      /ca-cert, insecure: TLS options apply to an https:\/\/ server, and url is not one: use url: https:\/\/vllm\.bench\.svc:8000/,
    );
    // As run takes them: an https:// metrics endpoint is one they apply to.
    const scraped = job(
      'url: http://vllm:8000\nmetrics-url: https://vllm:8443/metrics\nca-cert: certs/ca.pem\n',
    );
    assert.equal(scraped.tlsSecret, 'tls-run-tls');
  });

  test('more than a Secret holds (1 MiB) is refused before it is read', () => {
    const plan = planDir(`${URL}\nca-cert: certs/bundle.pem\n`);
    writeFileSync(join(plan, '..', 'certs', 'bundle.pem'), Buffer.alloc(1024 * 1024 + 1, 65));
    assert.throws(
      () =>
        k8sJob({
          planText: `${URL}\nca-cert: certs/bundle.pem\n`,
          options: { shards: '2', plan },
          now: NOW,
        }),
      (err: K8sJobError) =>
        /ca-cert: 1,048,577 bytes together, more than a Secret holds \(1 MiB/.test(
          err.problems.join('\n'),
        ),
    );
  });

  test('--secret-env must be NAME=SECRET/KEY, each as Kubernetes takes it', () => {
    const found = problems(`${URL}\n`, {
      secretEnv: [
        'KEY_PASS',
        '1X=s/k',
        'A=Bad_Secret/k',
        'B=s/bad key',
        'A=s/k',
        'JOB_COMPLETION_INDEX=s/k',
      ],
    });
    assert.equal(found.length, 6, found.join('\n'));
    assert.match(found[0], /--secret-env must be NAME=SECRET\/KEY, e\.g\. --secret-env KEY_PASS=/);
    assert.match(found[1], /"1X" is not an environment variable name/);
    assert.match(found[2], /"Bad_Secret" is not a Secret's name/);
    assert.match(found[3], /"bad key" is not a key of a Secret/);
    assert.match(found[4], /--secret-env A is given twice/);
    assert.match(found[5], /JOB_COMPLETION_INDEX is the shard's index/);
  });
});

describe('k8s job: a plan with credentials', () => {
  test('a proxy with user:password: the plan goes into a Secret; nothing printed shows it', () => {
    const plan = `${URL}\nproxy: http://me:hunter2@proxy.corp:3128\nconcurrency: 4\n`;
    const j = job(plan);
    const all = docs(j.manifest);
    assert.deepEqual(all.map((d) => `${d.kind}/${d.metadata.name}`).slice(0, 2), [
      'Secret/tls-run-plan',
      'PersistentVolumeClaim/infergauge-results',
    ]);
    assert.equal(all[0].stringData?.['plan.yaml'], plan, 'as written, in a Secret');
    assert.equal(all[0].data, undefined);
    assert.deepEqual(shardPod(all).volumes[0], {
      name: 'plan',
      secret: { secretName: 'tls-run-plan' },
    });
    assert.equal(j.planKind, 'Secret');
    const printed = [k8sJobHowTo(j), ...j.warnings].join('\n');
    assert.doesNotMatch(printed, /hunter2|me:/);

    const bad = problems(`${URL}\nproxy: socks5://me:hunter2@proxy.corp:1080\n`);
    assert.match(bad[0], /plan\.yaml: proxy: .*http:\/\/ proxies only/);
    assert.doesNotMatch(bad.join('\n'), /hunter2/);
    assert.match(problems(`${URL}\nhttp2: sometimes\n`)[0], /http2 must be auto, on or off/);
  });

  test('a header named like a credential: a Secret too; an ordinary header: a ConfigMap', () => {
    assert.equal(job(`${URL}\nheader: 'Authorization: Bearer abc123456'\n`).planKind, 'Secret');
    assert.equal(job(`${URL}\nheader: ['X-Run: a', 'x-api-key: k123456789']\n`).planKind, 'Secret');
    assert.equal(job(`${URL}\nheader: 'X-Run: nightly'\n`).planKind, 'ConfigMap');
  });
});

describe('withFieldValues', () => {
  test('only the values change; a block scalar or a JSON plan still reads as expected', () => {
    assert.equal(
      withFieldValues('a: 1 # one\nca-cert: x.pem\nb: [1, 2]\n', { 'ca-cert': '/tls/ca.pem' }),
      'a: 1 # one\nca-cert: "/tls/ca.pem"\nb: [1, 2]\n',
    );
    const block = withFieldValues('ca-cert: |\n  x.pem\nb: 2\n', { 'ca-cert': '/tls/ca.pem' });
    assert.deepEqual(parseAllDocuments(block)[0].toJS(), { 'ca-cert': '/tls/ca.pem', b: 2 });
    const json = withFieldValues('{"url": "https://a", "ca-cert": "x.pem"}', {
      'ca-cert': '/tls/ca.pem',
    });
    assert.equal(json, '{"url": "https://a", "ca-cert": "/tls/ca.pem"}');
  });
});

describe('infergauge k8s job with certificates (the command)', () => {
  test('relative to the plan wherever it is run from; --secret-env repeatable', async () => {
    const plan = planDir(
      `${URL}\nclient-cert: certs/client.pem\nclient-key: certs/client-encrypted.key\nclient-key-passphrase-env: KEY_PASS\n`,
    );
    const r = await runCli([
      'k8s',
      'job',
      '--shards',
      '2',
      '--plan',
      plan,
      '--image',
      'r/ig:1',
      '--secret-env',
      'KEY_PASS=mtls/passphrase',
      '--secret-env',
      'OPENAI_API_KEY=vllm/key',
    ]);
    assert.equal(r.code, 0, r.stderr);
    const all = docs(r.stdout);
    const secret = all.find((d) => d.kind === 'Secret');
    assert.deepEqual(Object.keys(secret?.data ?? {}), ['client.pem', 'client.key']);
    assert.deepEqual(
      shardPod(all).containers[0].env.map((e) => e.name),
      ['JOB_COMPLETION_INDEX', 'KEY_PASS', 'OPENAI_API_KEY'],
    );
    assert.match(r.stderr, /holds the client key/);
    assert.match(r.stderr, /mtls\/passphrase, vllm\/key/);
  });
});
