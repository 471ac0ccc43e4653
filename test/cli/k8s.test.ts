/**
 * `infergauge k8s job`: the manifest that runs a plan as N shards in an Indexed Job and merges
 * them, checked as Kubernetes would read it; the options and plans it refuses.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import {
  K8sJobError,
  type K8sJobOptions,
  k8sJob,
  k8sJobHowTo,
  k8sJobManifest,
} from '../../src/deploy/k8s.js';
import { VERSION } from '../../src/version.js';
import { runCli, tempDir } from '../helpers/cli.js';

const NOW = new Date('2026-11-29T23:00:00.000Z');
const PLAN = [
  '# 256 in flight against the vLLM Service',
  'url: http://vllm.default.svc:8000',
  'concurrency: 256',
  'requests: 10000',
  'input-tokens: uniform:128:512',
  '',
].join('\n');

/** The parts of the manifest's objects that the tests read. */
interface Container {
  name: string;
  image: string;
  imagePullPolicy: string;
  args: string[];
  env?: unknown[];
  resources: { requests: Record<string, string>; limits: Record<string, string> };
  volumeMounts: unknown[];
}
interface Volume {
  name: string;
  configMap?: { name: string };
  persistentVolumeClaim?: { claimName: string };
}
interface PodSpec {
  restartPolicy: string;
  containers: Container[];
  volumes: Volume[];
  affinity?: {
    podAntiAffinity: {
      preferredDuringSchedulingIgnoredDuringExecution: {
        podAffinityTerm: {
          labelSelector: { matchLabels: Record<string, string> };
          topologyKey: string;
        };
      }[];
    };
  };
}
interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels: Record<string, string> };
  data: Record<string, string>;
  spec: {
    accessModes: string[];
    storageClassName?: string;
    resources: { requests: { storage: string } };
    completionMode?: string;
    completions?: number;
    parallelism?: number;
    backoffLimit?: number;
    ttlSecondsAfterFinished?: number;
    template: { metadata: { labels: Record<string, string> }; spec: PodSpec };
  };
}
type Obj = K8sObject;

function docs(manifest: string): Obj[] {
  const parsed = parseAllDocuments(manifest);
  assert.ok(Array.isArray(parsed), 'a multi-document stream');
  for (const doc of parsed) assert.deepEqual(doc.errors, [], 'valid YAML');
  return parsed.map((doc) => doc.toJS() as Obj);
}

function manifest(options: K8sJobOptions, planText = PLAN): Obj[] {
  return docs(k8sJobManifest({ planText, options: { plan: 'plan.yaml', ...options }, now: NOW }));
}

function problems(options: K8sJobOptions, planText = PLAN): string[] {
  try {
    k8sJob({ planText, options: { plan: 'plan.yaml', ...options }, now: NOW });
  } catch (err) {
    assert.ok(err instanceof K8sJobError);
    return err.problems;
  }
  assert.fail('expected problems');
}

const byKind = (all: Obj[], kind: string) => all.filter((d) => d.kind === kind);
const container = (job: Obj) => job.spec.template.spec.containers[0];
const after = (args: string[], flag: string) => args[args.indexOf(flag) + 1];

describe('k8s job manifest', () => {
  test('ConfigMap, PVC, the Indexed shard Job and the merge Job, wired to each other', () => {
    const all = manifest({ shards: '8', name: 'bench-a', startAt: '2026-11-29T23:10:00Z' });
    assert.deepEqual(
      all.map((d) => `${d.kind}/${d.metadata.name}`),
      [
        'ConfigMap/bench-a-plan',
        'PersistentVolumeClaim/infergauge-results',
        'Job/bench-a',
        'Job/bench-a-merge',
      ],
    );
    for (const d of all) {
      assert.equal(d.metadata.labels['app.kubernetes.io/name'], 'infergauge');
      assert.equal(d.metadata.labels['infergauge/job'], 'bench-a');
      assert.equal(d.metadata.namespace, undefined);
    }
    const [configMap, pvc, job, merge] = all;
    assert.equal(configMap.data['plan.yaml'], PLAN, 'the plan exactly as written');

    assert.deepEqual(pvc.spec.accessModes, ['ReadWriteMany']);
    assert.equal(pvc.spec.resources.requests.storage, '10Gi');
    assert.equal(pvc.spec.storageClassName, undefined);

    assert.equal(job.apiVersion, 'batch/v1');
    assert.equal(job.spec.completionMode, 'Indexed');
    assert.equal(job.spec.completions, 8);
    assert.equal(job.spec.parallelism, 8);
    assert.equal(job.spec.backoffLimit, 0);
    assert.equal(job.spec.ttlSecondsAfterFinished, undefined);
    const pod = job.spec.template.spec;
    assert.equal(pod.restartPolicy, 'Never');
    assert.equal(pod.containers.length, 1);
    const c = container(job);
    assert.equal(c.name, 'infergauge');
    assert.equal(c.image, `infergauge:${VERSION}`);
    assert.equal(c.imagePullPolicy, 'IfNotPresent');
    assert.deepEqual(c.args.slice(0, 3), ['run', '--plan', '/plan/plan.yaml']);
    assert.equal(after(c.args, '--shard'), '$(JOB_COMPLETION_INDEX)/8');
    assert.equal(after(c.args, '--start-at'), '2026-11-29T23:10:00Z');
    assert.equal(after(c.args, '--out'), '/results/bench-a/shard-$(JOB_COMPLETION_INDEX)');
    assert.ok(c.args.includes('--no-html'));
    assert.ok(!c.args.includes('--workers'));
    assert.deepEqual(c.env, [
      {
        name: 'JOB_COMPLETION_INDEX',
        valueFrom: {
          fieldRef: {
            fieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']",
          },
        },
      },
    ]);
    assert.deepEqual(c.resources, {
      requests: { cpu: '2', memory: '2Gi' },
      limits: { cpu: '2', memory: '2Gi' },
    });
    assert.deepEqual(c.volumeMounts, [
      { name: 'plan', mountPath: '/plan', readOnly: true },
      { name: 'results', mountPath: '/results' },
    ]);
    assert.deepEqual(pod.volumes, [
      { name: 'plan', configMap: { name: 'bench-a-plan' } },
      { name: 'results', persistentVolumeClaim: { claimName: 'infergauge-results' } },
    ]);
    const spread = pod.affinity?.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution;
    assert.deepEqual(spread?.[0].podAffinityTerm.labelSelector.matchLabels, {
      'infergauge/job': 'bench-a',
    });
    assert.equal(spread?.[0].podAffinityTerm.topologyKey, 'kubernetes.io/hostname');
    assert.equal(job.spec.template.metadata.labels['infergauge/job'], 'bench-a');

    assert.equal(merge.spec.backoffLimit, 3);
    const mergePod = merge.spec.template.spec;
    assert.equal(mergePod.restartPolicy, 'OnFailure');
    const m = container(merge);
    assert.equal(m.image, c.image);
    // 600 s to the start, the default --max-duration 3600 s, then 600 s of slack.
    assert.deepEqual(m.args, [
      'merge',
      '--out',
      '/results/bench-a/merged',
      '--shards',
      '8',
      '--wait',
      String(600 + 3600 + 600),
      '/results/bench-a',
    ]);
    assert.deepEqual(m.volumeMounts, [{ name: 'results', mountPath: '/results' }]);
    assert.deepEqual(mergePod.volumes, [
      { name: 'results', persistentVolumeClaim: { claimName: 'infergauge-results' } },
    ]);
  });

  test('the RWX requirement is stated in the manifest', () => {
    const text = k8sJobManifest({ planText: PLAN, options: { shards: '2' }, now: NOW });
    assert.match(text, /ReadWriteMany storage class \(NFS, EFS, Filestore, Azure Files/);
    assert.equal(text.split(/^---$/m).length, 4);
  });

  test('--no-pvc, --namespace, --pvc, --storage-class and the sizing options', () => {
    const noPvc = manifest({ shards: '3', name: 'x', noPvc: true, pvc: 'shared-results' });
    assert.deepEqual(
      noPvc.map((d) => d.kind),
      ['ConfigMap', 'Job', 'Job'],
    );
    for (const job of byKind(noPvc, 'Job')) {
      const claims = job.spec.template.spec.volumes.filter((v) => v.persistentVolumeClaim);
      assert.deepEqual(
        claims.map((v) => v.persistentVolumeClaim?.claimName),
        ['shared-results'],
      );
    }

    const all = manifest({
      shards: '4',
      name: 'nsrun',
      namespace: 'bench',
      storage: '50Gi',
      storageClass: 'nfs-client',
      cpu: '4',
      memory: '8Gi',
      workers: '2',
      image: 'registry.example.com/infergauge:1.2.3',
      startIn: '300',
      maxDuration: '1200',
    });
    assert.equal(all.length, 4);
    for (const d of all) assert.equal(d.metadata.namespace, 'bench');
    const [, pvc, job, merge] = all;
    assert.equal(pvc.spec.storageClassName, 'nfs-client');
    assert.equal(pvc.spec.resources.requests.storage, '50Gi');
    const c = container(job);
    assert.equal(c.image, 'registry.example.com/infergauge:1.2.3');
    assert.equal(container(merge).image, 'registry.example.com/infergauge:1.2.3');
    assert.deepEqual(c.resources.limits, { cpu: '4', memory: '8Gi' });
    assert.equal(after(c.args, '--workers'), '2');
    assert.equal(after(c.args, '--shard'), '$(JOB_COMPLETION_INDEX)/4');
    assert.equal(after(c.args, '--start-at'), '2026-11-29T23:05:00Z');
    assert.equal(after(container(merge).args, '--wait'), String(300 + 1200 + 600));
  });

  test('default name and start: the generation minute, 180 s ahead', () => {
    const job = k8sJob({ planText: PLAN, options: { shards: '1' }, now: NOW });
    assert.equal(job.name, 'infergauge-20261129t2300z');
    assert.equal(job.startAt, '2026-11-29T23:03:00Z');
    assert.equal(job.startsInS, 180);
    assert.ok(job.warnings.some((w) => /no --image/.test(w)));
    const howTo = k8sJobHowTo(job);
    assert.match(howTo, /kubectl apply -f job\.yaml/);
    assert.match(
      howTo,
      /kubectl wait --for=condition=complete job\/infergauge-20261129t2300z-merge --timeout=\d+s/,
    );
    assert.match(howTo, /\/results\/infergauge-20261129t2300z\/merged/);
    const ns = k8sJobHowTo(
      k8sJob({ planText: PLAN, options: { shards: '1', namespace: 'bench' }, now: NOW }),
    );
    assert.match(ns, /kubectl -n bench wait/);
  });

  test('a plan that YAML quotes or folds still lands in the ConfigMap byte for byte', () => {
    const plan = `url: "http://vllm.bench.svc:8000"\t\nheader:\n  - 'X-Run: ${'a'.repeat(150)}'\nrate: 50\nduration: 300\n\n\n`;
    const [configMap] = manifest({ shards: '2' }, plan);
    assert.equal(configMap.data['plan.yaml'], plan);
  });

  test('invalid options and plans: every problem, each naming the fix', () => {
    const noUrl = problems({ shards: '2' }, 'concurrency: 8\n');
    assert.equal(noUrl.length, 1);
    assert.match(noUrl[0], /plan\.yaml: has no url/);
    assert.match(noUrl[0], /url: http:\/\/vllm\.default\.svc:8000/);
    assert.match(
      problems({ shards: '2' }, 'url: http://127.0.0.1:8000\n')[0],
      /is the pod itself.*Service DNS name/,
    );

    const bad = problems({ shards: '2', name: 'My_Bench' });
    assert.equal(bad.length, 1);
    assert.match(bad[0], /--name "My_Bench" must be a DNS-1123 label.*e\.g\. --name my-bench/);
    assert.match(problems({ shards: '2', name: 'a'.repeat(53) })[0], /at most 52 characters/);
    assert.match(problems({ shards: '2', name: '-lead' })[0], /DNS-1123/);

    assert.match(problems({ shards: '0' })[0], /--shards must be a whole number >= 1 \(got "0"\)/);
    assert.match(problems({ shards: '2.5' })[0], /--shards must be a whole number/);
    assert.match(problems({})[0], /--shards is required/);

    assert.match(
      problems({ shards: '2', startAt: '2026-11-29T22:59:00Z' })[0],
      /--start-at 2026-11-29T22:59:00Z is in the past \(now is 2026-11-29T23:00:00Z\).*--start-in/,
    );
    assert.match(
      problems({ shards: '2', startAt: 'tomorrow' })[0],
      /--start-at must be an ISO-8601 instant with a time zone, e\.g\. 2026-11-29T23:10:00Z \(got "tomorrow"\)/,
    );
    assert.match(
      problems({ shards: '2', startAt: '2026-11-29T23:10:00' })[0],
      /with a time zone/,
      'no zone: each node would read its own local time',
    );
    assert.match(
      problems({ shards: '2', startAt: '2026-11-29T23:10:00Z', startIn: '60' })[0],
      /give --start-at or --start-in, not both/,
    );
    assert.match(problems({ shards: '2', startIn: '-5' })[0], /--start-in must be a number/);

    assert.match(problems({ shards: '2', cpu: 'two' })[0], /--cpu must be a Kubernetes quantity/);
    assert.match(problems({ shards: '2', memory: '2GB' })[0], /--memory .*e\.g\. 2Gi/);
    assert.match(problems({ shards: '2', namespace: 'Bench' })[0], /--namespace "Bench"/);
    assert.match(
      problems({ shards: '2', noPvc: true, storage: '5Gi' })[0],
      /--no-pvc uses an existing one/,
    );
    assert.match(problems({ shards: '2', workers: '0' })[0], /--workers must be a whole number/);

    assert.match(
      problems({ shards: '8' }, 'url: http://vllm:8000\nconcurrency: 4\n')[0],
      /concurrency 4 is split across 8 shards.*--shards 4 or fewer/,
    );
    assert.match(
      problems({ shards: '17' }, 'url: http://vllm:8000\n')[0],
      /concurrency 16 \(the default\) is split across 17 shards/,
    );
    assert.match(
      problems({ shards: '8' }, 'url: http://vllm:8000\nrate: 20\nmax-concurrency: 4\n')[0],
      /max-concurrency 4 is split across 8 shards.*--shards 4 or fewer/,
    );
    assert.match(
      problems({ shards: '2' }, 'url: http://vllm:8000\nrate: 5\nduration: 7200\n')[0],
      /duration 7200 s is longer than --max-duration 3600 s.*--max-duration 7500/,
    );
    assert.match(problems({ shards: '2' }, 'url: [unclosed\n')[0], /plan\.yaml: not valid YAML/);
    assert.match(
      problems({ shards: '2' }, 'url: http://vllm:8000\nconcurency: 8\n')[0],
      /unknown field "concurency" \(did you mean "concurrency"\?\)/,
    );

    // Everything at once: one try shows all of it.
    assert.equal(
      problems({ shards: '0', name: 'Bad', startAt: '2020-01-01T00:00:00Z' }, 'rate: 5\n').length,
      4,
    );
  });

  test('files the pods cannot see and keys they lack are warned about', () => {
    const job = k8sJob({
      planText: 'url: http://vllm:8000\ndataset: ./sharegpt.json\napi-key-env: VLLM_KEY\n',
      options: { shards: '2', image: 'r/ig:1' },
      now: NOW,
    });
    assert.equal(job.warnings.length, 2);
    assert.match(job.warnings[0], /dataset: \.\/sharegpt\.json .* only \/plan\/plan\.yaml/);
    assert.match(job.warnings[1], /api-key-env: VLLM_KEY must be set in the pods.*Secret/);
    const idle = k8sJob({
      planText: 'url: http://vllm:8000\nrate: 20\nrequests: 5\n',
      options: { shards: '8', image: 'r/ig:1' },
      now: NOW,
    });
    assert.deepEqual(idle.warnings, [
      'plan.yaml: requests 5 is split across 8 shards, so some send none: --shards 5 is enough',
    ]);
  });
});

describe('infergauge k8s job (the command)', () => {
  test('YAML on stdout, the how-to on stderr, exit 0', async () => {
    const dir = tempDir('ig-k8s-');
    const plan = join(dir, 'plan.yaml');
    writeFileSync(plan, PLAN);
    const r = await runCli([
      'k8s',
      'job',
      '--shards',
      '4',
      '--plan',
      plan,
      '--name',
      'cli-run',
      '--image',
      'registry/infergauge:0.1.0',
      '--pvc',
      'mine',
      '--no-pvc',
    ]);
    assert.equal(r.code, 0, r.stderr);
    const all = docs(r.stdout);
    assert.deepEqual(
      all.map((d) => d.kind),
      ['ConfigMap', 'Job', 'Job'],
    );
    assert.equal(all[0].data['plan.yaml'], PLAN);
    assert.equal(all[1].spec.template.spec.volumes[1].persistentVolumeClaim?.claimName, 'mine');
    assert.doesNotMatch(r.stdout, /kubectl/);
    assert.match(r.stderr, /kubectl apply -f job\.yaml/);
    assert.match(r.stderr, /kubectl wait --for=condition=complete job\/cli-run-merge --timeout=/);
    assert.match(r.stderr, /\/results\/cli-run\/merged/);
  });

  test('a plan without url: exit 2 and the fix', async () => {
    const dir = tempDir('ig-k8s-');
    const plan = join(dir, 'plan.yaml');
    writeFileSync(plan, 'concurrency: 16\n');
    const r = await runCli(['k8s', 'job', '--shards', '2', '--plan', plan]);
    assert.equal(r.code, 2);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /^infergauge k8s job: invalid options\n {2}- .*has no url/);
    assert.match(r.stderr, /url: http:\/\/vllm\.default\.svc:8000/);
  });
});
