import { statSync } from 'node:fs';
import { Document, isMap, isScalar, parseDocument, parse as parseYaml, stringify } from 'yaml';
import { SECRET_NAME } from '../backends/request.js';
import { UsageError } from '../errors.js';
import { checkedFlagNumber } from '../flagNumber.js';
import { PlanFileError, type PlanFileOptions, planFileOptions } from '../plan/planFile.js';
import { proxyWithoutUserinfo, RUN_DEFAULTS } from '../plan/runPlan.js';
import { parseProxyUrl } from '../proxy.js';
import {
  readTlsFiles,
  resolveTlsPaths,
  TLS_PLAN_FIELDS,
  type TlsSettings,
  tlsContextProblem,
} from '../tls.js';
import { VERSION } from '../version.js';
import { K8S_DEFAULTS } from './k8sDefaults.js';

/**
 * `infergauge k8s job`: prints a Kubernetes manifest that runs a plan as N shards in parallel
 * pods (an Indexed Job), all starting their schedules at one shared instant, and a second Job
 * that merges the shards' results. Nothing is contacted: the command only writes text (it reads
 * the plan's certificate files, which the manifest carries to the pods in a Secret).
 */

/** The options of `k8s job` as commander parses them (every value a string). */
export interface K8sJobOptions {
  shards?: string;
  /** The plan file's path, named in problems (its text comes in K8sJobInput.planText). */
  plan?: string;
  name?: string;
  image?: string;
  startAt?: string;
  startIn?: string;
  namespace?: string;
  /** The claim's name (default: infergauge-results). */
  pvc?: string;
  /** --no-pvc: the claim exists already, so the manifest has no PVC document. */
  noPvc?: boolean;
  storage?: string;
  storageClass?: string;
  cpu?: string;
  memory?: string;
  workers?: string;
  maxDuration?: string;
  /**
   * `--secret-env NAME=SECRET/KEY`, repeatable: the shard container's environment variable NAME
   * from key KEY of the existing Secret SECRET (an API key, a client key's passphrase, a proxy).
   */
  secretEnv?: string[];
}

export interface K8sJobInput {
  /** The plan file's exact text: it goes into the ConfigMap as written. */
  planText: string;
  options: K8sJobOptions;
  /** When the manifest is generated: the start instant and the merge's wait count from it. */
  now: Date;
}

/** A manifest and what the command tells the user about it. */
export interface K8sJob {
  manifest: string;
  name: string;
  namespace?: string;
  shards: number;
  startAt: string;
  /** Seconds from generation to startAt: the time left to apply the manifest. */
  startsInS: number;
  pvc: string;
  /** Where the merged results land on the claim. */
  mergedDir: string;
  /** Seconds the merge waits for the shards (from now to start + --max-duration + 600). */
  waitS: number;
  /** The merge Job's activeDeadlineSeconds: how long `kubectl wait` may have to wait. */
  mergeDeadlineS: number;
  /** Where the plan goes: a Secret where it holds credentials, else a ConfigMap. */
  planKind: 'ConfigMap' | 'Secret';
  /** The Secret this manifest makes of the plan's certificate files, if it names any. */
  tlsSecret?: string;
  /** The existing Secrets the shards read (--secret-env): `secret/key` each, no values. */
  secretRefs: string[];
  warnings: string[];
}

/** Invalid options or plan: each problem names the option or field and the fix. */
export class K8sJobError extends UsageError {
  constructor(problems: string[]) {
    super(problems, 'IG_K8S_JOB');
  }
}

/** A start closer than this is unlikely to leave time to apply the manifest and pull the image. */
const MIN_LEAD_S = 60;
/** The most a ConfigMap may hold (etcd's object limit). */
const CONFIGMAP_MAX_BYTES = 1024 * 1024;
/** The most a Secret's data may hold, all its keys together (the API server refuses more). */
const SECRET_MAX_BYTES = 1024 * 1024;
/** Where the shards see the plan's certificate files (the Secret `<name>-tls`). */
const TLS_MOUNT = '/tls';
/** Each certificate option of a plan: its field, and its file's name in the Secret and mount. */
const TLS_FILES = [
  { option: 'caCert', field: 'ca-cert', file: 'ca.pem' },
  { option: 'clientCert', field: 'client-cert', file: 'client.pem' },
  { option: 'clientKey', field: 'client-key', file: 'client.key' },
] as const;
/** Read by the owner (root) and the group, fsGroup 1000, which the shards run as: 0440. */
const SECRET_FILE_MODE = 0o440;
/** An environment variable's name, as a container's env takes it from --secret-env. */
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** A key of a Secret's data. */
const SECRET_KEY = /^[-._a-zA-Z0-9]+$/;
/** Job names: 63 minus the suffixes Kubernetes and this manifest append (as CronJob's 52). */
const NAME_MAX = 52;
/** The uid and gid of the `node` user of the node:20 images (the Dockerfile runs as it). */
const NODE_UID = 1000;

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
/** A Kubernetes resource quantity: 2, 500m, 1.5, 2Gi, 512Mi, 1e3. */
const QUANTITY = /^(\d+(\.\d*)?|\.\d+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][-+]?\d+)?$/;
/** An ISO-8601 instant with a date, a time and a zone, so every pod reads the same instant. */
const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/i;

/** An instant as the pods get it: UTC, without milliseconds when they are zero. */
const iso = (d: Date) => d.toISOString().replace(/\.000Z$/, 'Z');

/** The default Job name: infergauge-20261129t2300z (the generation minute, UTC). */
function defaultJobName(now: Date): string {
  return `infergauge-${now.toISOString().slice(0, 16).replace(/[-:]/g, '').toLowerCase()}z`;
}

/** A DNS-1123 label close to `name`, to suggest as the fix. */
function asDnsLabel(name: string): string {
  const label = name
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .slice(0, NAME_MAX)
    .replace(/^-+|-+$/g, '');
  return label || 'infergauge-run';
}

interface Resolved {
  shards: number;
  name: string;
  image: string;
  startAt: Date;
  namespace?: string;
  pvc: string;
  createPvc: boolean;
  storage: string;
  storageClass?: string;
  cpu: string;
  memory: string;
  workers?: number;
  maxDurationS: number;
  secretEnv: SecretEnv[];
}

/** One --secret-env: the variable `name` from key `key` of the Secret `secret`. */
interface SecretEnv {
  name: string;
  secret: string;
  key: string;
}

/** --secret-env NAME=SECRET/KEY, each checked as Kubernetes will check it. */
function secretEnvOf(values: readonly string[], problems: string[]): SecretEnv[] {
  const out: SecretEnv[] = [];
  for (const value of values) {
    const m = /^([^=]*)=([^/]*)\/(.*)$/.exec(value);
    const fix = 'e.g. --secret-env KEY_PASS=client-key-pass/passphrase';
    if (!m) {
      problems.push(`--secret-env must be NAME=SECRET/KEY, ${fix} (got "${value}")`);
      continue;
    }
    const [, name, secret, key] = m as unknown as [string, string, string, string];
    if (!ENV_NAME.test(name)) {
      problems.push(
        `--secret-env ${value}: "${name}" is not an environment variable name (letters, digits and _, not starting with a digit), ${fix}`,
      );
    } else if (name === 'JOB_COMPLETION_INDEX') {
      problems.push(
        `--secret-env ${value}: JOB_COMPLETION_INDEX is the shard's index, set by the Job`,
      );
    } else if (out.some((e) => e.name === name)) {
      problems.push(`--secret-env ${name} is given twice: keep one`);
    }
    if (secret.length > 253 || !DNS_SUBDOMAIN.test(secret)) {
      problems.push(
        `--secret-env ${value}: "${secret}" is not a Secret's name (lowercase letters, digits, '-' and '.'; kubectl get secrets), ${fix}`,
      );
    }
    if (key.length > 253 || !SECRET_KEY.test(key)) {
      problems.push(
        `--secret-env ${value}: "${key}" is not a key of a Secret (letters, digits, '-', '_' and '.'; kubectl describe secret ${secret || 'NAME'}), ${fix}`,
      );
    }
    out.push({ name, secret, key });
  }
  return out;
}

/** The options checked and defaulted; every problem found, not just the first. */
export function resolveOptions(
  o: K8sJobOptions,
  now: Date,
): { resolved?: Resolved; problems: string[]; warnings: string[] } {
  const problems: string[] = [];
  const warnings: string[] = [];
  const whole = (flag: string, value: string | undefined) =>
    checkedFlagNumber(
      value,
      { min: 1, max: Number.MAX_SAFE_INTEGER, integer: true },
      problems,
      `${flag} must be a whole number >= 1 (got "${value}")`,
    );
  const seconds = (flag: string, value: string | undefined) =>
    checkedFlagNumber(
      value,
      { above: 0 },
      problems,
      `${flag} must be a number of seconds above 0 (got "${value}")`,
    );
  const quantity = (flag: string, value: string, example: string) => {
    if (!QUANTITY.test(value)) {
      problems.push(`${flag} must be a Kubernetes quantity, e.g. ${example} (got "${value}")`);
    }
  };

  if (o.shards === undefined) problems.push('--shards is required, e.g. --shards 8');
  const shards = whole('--shards', o.shards);

  const name = o.name ?? defaultJobName(now);
  if (name.length > NAME_MAX || !DNS_LABEL.test(name)) {
    problems.push(
      `--name "${name}" must be a DNS-1123 label of at most ${NAME_MAX} characters (lowercase letters, digits and '-', starting and ending with a letter or digit): e.g. --name ${asDnsLabel(name)}`,
    );
  }

  const image = o.image ?? `infergauge:${VERSION}`;
  if (image.trim() === '' || /\s/.test(image)) {
    problems.push(`--image must be an image reference, e.g. registry/infergauge:${VERSION}`);
  }
  if (o.image === undefined) {
    warnings.push(
      `no --image: the nodes must be able to pull ${image}; build and push the image (docs/kubernetes.md), then pass --image registry/infergauge:${VERSION}`,
    );
  }

  let startAt: Date | undefined;
  if (o.startAt !== undefined && o.startIn !== undefined) {
    problems.push('give --start-at or --start-in, not both');
  } else if (o.startAt !== undefined) {
    const at = new Date(o.startAt);
    if (!ISO_INSTANT.test(o.startAt.trim()) || Number.isNaN(at.getTime())) {
      problems.push(
        `--start-at must be an ISO-8601 instant with a time zone, e.g. ${iso(new Date(Math.ceil(now.getTime() / 60_000) * 60_000 + 600_000))} (got "${o.startAt}")`,
      );
    } else if (at.getTime() <= now.getTime()) {
      problems.push(
        `--start-at ${iso(at)} is in the past (now is ${iso(now)}): give a later instant, or --start-in <seconds>`,
      );
    } else startAt = at;
  } else {
    const inS = o.startIn === undefined ? K8S_DEFAULTS.startInS : seconds('--start-in', o.startIn);
    // Whole seconds: the instant is easier to read and to compare across pods' logs.
    if (inS !== undefined)
      startAt = new Date(Math.ceil((now.getTime() + inS * 1000) / 1000) * 1000);
  }
  if (startAt && startAt.getTime() - now.getTime() < MIN_LEAD_S * 1000) {
    warnings.push(
      `the shards start in ${Math.round((startAt.getTime() - now.getTime()) / 1000)} s: applying the manifest and pulling the image may take longer, and a shard that starts more than a few seconds late fails`,
    );
  }

  if (o.namespace !== undefined && (o.namespace.length > 63 || !DNS_LABEL.test(o.namespace))) {
    problems.push(
      `--namespace "${o.namespace}" must be a DNS-1123 label (lowercase letters, digits and '-'), e.g. --namespace ${asDnsLabel(o.namespace)}`,
    );
  }
  const pvc = o.pvc ?? K8S_DEFAULTS.pvc;
  if (pvc.length > 253 || !DNS_SUBDOMAIN.test(pvc)) {
    problems.push(
      `--pvc "${pvc}" must be a DNS-1123 name (lowercase letters, digits, '-' and '.'), e.g. --pvc ${asDnsLabel(pvc)}`,
    );
  }
  const storage = o.storage ?? K8S_DEFAULTS.storage;
  quantity('--storage', storage, '10Gi');
  if (o.storageClass !== undefined && !DNS_SUBDOMAIN.test(o.storageClass)) {
    problems.push(
      `--storage-class "${o.storageClass}" must be the name of a StorageClass (kubectl get storageclass), e.g. --storage-class nfs-client`,
    );
  }
  if (o.noPvc === true && (o.storage !== undefined || o.storageClass !== undefined)) {
    problems.push(
      '--storage and --storage-class size a new claim; --no-pvc uses an existing one: drop one or the other',
    );
  }
  const cpu = o.cpu ?? K8S_DEFAULTS.cpu;
  quantity('--cpu', cpu, '2 or 500m');
  const memory = o.memory ?? K8S_DEFAULTS.memory;
  quantity('--memory', memory, '2Gi');
  const workers = whole('--workers', o.workers);
  const maxDurationS = seconds('--max-duration', o.maxDuration) ?? K8S_DEFAULTS.maxDurationS;
  const secretEnv = secretEnvOf(o.secretEnv ?? [], problems);

  if (problems.length > 0 || shards === undefined || startAt === undefined) {
    return { problems, warnings };
  }
  return {
    resolved: {
      shards,
      name,
      image,
      startAt,
      ...(o.namespace !== undefined ? { namespace: o.namespace } : {}),
      pvc,
      createPvc: o.noPvc !== true,
      storage,
      ...(o.storageClass !== undefined ? { storageClass: o.storageClass } : {}),
      cpu,
      memory,
      ...(workers !== undefined ? { workers } : {}),
      maxDurationS,
      secretEnv,
    },
    problems,
    warnings,
  };
}

const LOCALHOST = /^[a-z][a-z0-9+.-]*:\/\/(localhost|127(\.\d+){3}|0\.0\.0\.0|\[::1?\])(:|\/|$)/i;

/** The plan validated as `run` reads it, plus what pods in a cluster need of it. */
function checkPlan(
  text: string,
  path: string,
  r: Resolved | undefined,
): { problems: string[]; warnings: string[]; options?: Record<string, unknown> } {
  const problems: string[] = [];
  const warnings: string[] = [];
  if (Buffer.byteLength(text) > CONFIGMAP_MAX_BYTES) {
    problems.push(`${path}: larger than a ConfigMap may hold (1 MiB)`);
  }
  // Parsed and validated exactly as readPlanFile does, from the text that goes into the
  // ConfigMap: what the pods read is what was checked.
  let value: unknown;
  try {
    value = parseYaml(text);
  } catch (err) {
    return {
      problems: [...problems, `${path}: not valid YAML: ${(err as Error).message}`],
      warnings,
    };
  }
  let plan: PlanFileOptions;
  try {
    plan = planFileOptions(value ?? {}, path);
  } catch (err) {
    if (!(err instanceof PlanFileError)) throw err;
    return { problems: [...problems, ...err.problems], warnings };
  }
  const o = plan.options;
  const url = o.url as string | undefined;
  if (url === undefined) {
    // Without url, run would start the built-in simulator in each pod: N simulators, not a load.
    problems.push(
      `${path}: has no url: the pods need the server's address in the cluster, e.g. url: http://vllm.default.svc:8000 (a Service's DNS name) in the plan`,
    );
  } else if (LOCALHOST.test(url)) {
    problems.push(
      `${path}: url ${url} is the pod itself in a cluster: use the server's Service DNS name, e.g. url: http://vllm.default.svc:8000`,
    );
  }
  if (o.simulate === true) {
    problems.push(`${path}: simulate: true runs without a server: drop it to load a real one`);
  }
  for (const key of ['trace', 'dataset'] as const) {
    if (typeof o[key] === 'string') {
      warnings.push(
        `${path}: ${key}: ${String(o[key])} is read inside the pods, which see only /plan/plan.yaml: put the file in the image (or mount it) at that path`,
      );
    }
  }
  if (typeof o.tokenizer === 'string' && /[/\\]|\.json$/i.test(o.tokenizer)) {
    warnings.push(
      `${path}: tokenizer: ${o.tokenizer} is a file read inside the pods, which see only /plan/plan.yaml: put it in the image (or mount it) at that path`,
    );
  }
  const fromSecret = (name: string) => r?.secretEnv.some((e) => e.name === name) === true;
  if (typeof o.apiKeyEnv === 'string' && !fromSecret(o.apiKeyEnv)) {
    warnings.push(
      `${path}: api-key-env: ${o.apiKeyEnv} must be set in the pods: keep the key in a Secret and pass --secret-env ${o.apiKeyEnv}=SECRET/KEY (docs/kubernetes.md)`,
    );
  }
  // Without it every shard would stop at its start, before sending anything: refused here.
  const passEnv = o.clientKeyPassphraseEnv;
  if (typeof passEnv === 'string' && r && !fromSecret(passEnv)) {
    problems.push(
      `${path}: client-key-passphrase-env: ${passEnv} must be set in the pods: keep the passphrase in a Secret (kubectl create secret generic client-key-pass --from-file=passphrase=FILE) and pass --secret-env ${passEnv}=client-key-pass/passphrase`,
    );
  }
  // As run reads them, so that N pods do not each fail on them; messages show no credentials.
  if (typeof o.proxy === 'string') {
    try {
      parseProxyUrl(o.proxy);
    } catch (err) {
      problems.push(`${path}: proxy: ${(err as Error).message}`);
    }
  }
  if (o.http2 !== undefined && !['auto', 'on', 'off'].includes(String(o.http2))) {
    problems.push(`${path}: http2 must be auto, on or off (got ${JSON.stringify(o.http2)})`);
  }
  if (r) {
    // As run fills them in (RUN_DEFAULTS): the parts each shard gets must not be empty.
    const closedLoop = o.rate === undefined && o.trace === undefined;
    // Read as run reads them; a value run would refuse is a problem here, before N pods fail.
    const given = (key: string, field: string, fallback: number | undefined) => {
      if (o[key] === undefined) {
        return fallback !== undefined
          ? { n: fallback, text: `${fallback} (the default)` }
          : undefined;
      }
      const n = checkedFlagNumber(
        o[key],
        { min: 1, integer: true },
        problems,
        `${path}: ${field} must be a whole number >= 1 (got ${JSON.stringify(o[key])})`,
      );
      return n !== undefined ? { n, text: String(o[key]) } : undefined;
    };
    const concurrency = closedLoop
      ? given('concurrency', 'concurrency', RUN_DEFAULTS.concurrency)
      : undefined;
    if (concurrency && concurrency.n < r.shards) {
      problems.push(
        `${path}: concurrency ${concurrency.text} is split across ${r.shards} shards, so some would keep no request in flight: use --shards ${Math.max(1, Math.floor(concurrency.n))} or fewer`,
      );
    }
    const requests = given(
      'requests',
      'requests',
      o.trace === undefined && o.duration === undefined ? RUN_DEFAULTS.requests : undefined,
    );
    // run accepts it (a shard with nothing to send), but it is a pod doing nothing.
    if (requests && requests.n < r.shards) {
      warnings.push(
        `${path}: requests ${requests.text} is split across ${r.shards} shards, so some send none: --shards ${Math.max(1, Math.floor(requests.n))} is enough`,
      );
    }
    // An open loop's cap on requests in flight is split like a concurrency (held per shard).
    const cap = closedLoop ? undefined : given('maxConcurrency', 'max-concurrency', undefined);
    if (cap && cap.n < r.shards) {
      problems.push(
        `${path}: max-concurrency ${cap.text} is split across ${r.shards} shards, so some would have no request slot: use --shards ${Math.max(1, Math.floor(cap.n))} or fewer, or a larger max-concurrency`,
      );
    }
    const duration = checkedFlagNumber(
      o.duration,
      { above: 0 },
      problems,
      `${path}: duration must be a number of seconds above 0 (got ${JSON.stringify(o.duration)})`,
    );
    if (duration !== undefined && duration > r.maxDurationS) {
      problems.push(
        `${path}: duration ${duration} s is longer than --max-duration ${r.maxDurationS} s, so the merge would stop waiting before the shards finish: pass --max-duration ${Math.ceil(duration) + 300} (the duration plus time for in-flight requests)`,
      );
    }
  }
  return { problems, warnings, options: o };
}

/** The plan's certificate files as the shards get them: a Secret, and the plan's new paths. */
interface PodTls {
  /** The Secret's data: file name to base64 of the file's exact bytes. */
  data: Record<string, string>;
  /** The plan's fields and the mounted paths they now name (`ca-cert: /tls/ca.pem`). */
  paths: Record<string, string>;
  /** Whether the Secret holds a private key (job.yaml then does too). */
  holdsKey: boolean;
}

/**
 * The certificate files a plan names, read once (paths relative to the plan, as `run` takes
 * them) and checked as `run` will check them in the pods: missing, unreadable or not PEM files,
 * a key without its certificate or not its certificate's, all more than a Secret holds. The
 * key's passphrase is the cluster's (--secret-env): with one named, the key is not opened here.
 */
function tlsForPods(
  o: Record<string, unknown>,
  path: string,
  problems: string[],
): PodTls | undefined {
  const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);
  const files: Record<string, unknown> = {
    caCert: o.caCert,
    clientCert: o.clientCert,
    clientKey: o.clientKey,
  };
  resolveTlsPaths(files, path);
  const settings: TlsSettings = {
    ...(str(files.caCert) ? { caCert: str(files.caCert) } : {}),
    ...(str(files.clientCert) ? { clientCert: str(files.clientCert) } : {}),
    ...(str(files.clientKey) ? { clientKey: str(files.clientKey) } : {}),
    ...(str(o.clientKeyPassphraseEnv)
      ? { clientKeyPassphraseEnv: str(o.clientKeyPassphraseEnv) }
      : {}),
    ...(o.insecure === true ? { insecure: true } : {}),
    ...(str(o.tlsServername) ? { servername: str(o.tlsServername) } : {}),
  };
  const given = Object.keys(settings) as (keyof TlsSettings)[];
  if (given.length === 0) return undefined;
  const url = o.url;
  // As run takes them (tls.ts readTlsOptions): for the server or a scraped https:// endpoint.
  const https = [url, o.metricsUrl, o.dcgmUrl, o.serverMetrics].some(
    (u) => typeof u === 'string' && /^\s*https:/i.test(u),
  );
  if (typeof url === 'string' && !https) {
    problems.push(
      `${path}: ${given.map((k) => TLS_PLAN_FIELDS[k].slice(0, -1)).join(', ')}: TLS options apply to an https:// server, and url is not one: use url: https://${url.replace(/^\s*http:\/\//i, '')} or drop them`,
    );
    return undefined;
  }
  // Sized before reading: a Secret holds at most 1 MiB, all its files together.
  let bytes = 0;
  for (const { option } of TLS_FILES) {
    const file = settings[option];
    if (file === undefined) continue;
    try {
      bytes += statSync(file).size;
    } catch {
      // readTlsFiles names it, with the fix.
    }
  }
  if (bytes > SECRET_MAX_BYTES) {
    problems.push(
      `${path}: ${TLS_FILES.filter((f) => settings[f.option] !== undefined)
        .map((f) => f.field)
        .join(
          ', ',
        )}: ${bytes.toLocaleString('en-US')} bytes together, more than a Secret holds (1 MiB, ${SECRET_MAX_BYTES.toLocaleString('en-US')} bytes): give ca-cert only the CA that signs the server, not a whole bundle`,
    );
    return undefined;
  }
  const found: string[] = [];
  const material = readTlsFiles(settings, found, TLS_PLAN_FIELDS);
  problems.push(...found.map((p) => `${path}: ${p}`));
  if (!material) return undefined;
  if (material.key !== undefined && settings.clientKeyPassphraseEnv === undefined) {
    // An encrypted key, or one that is not the certificate's, would stop every shard.
    const problem = /ENCRYPTED/.test(material.key)
      ? `client-key: ${settings.clientKey} is encrypted: name the variable that holds its passphrase with client-key-passphrase-env: NAME in the plan, and give it to the pods with --secret-env NAME=SECRET/KEY`
      : tlsContextProblem(settings, material);
    if (problem !== undefined) {
      problems.push(`${path}: ${problem}`);
      return undefined;
    }
  }
  const data: Record<string, string> = {};
  const paths: Record<string, string> = {};
  for (const { option, field, file } of TLS_FILES) {
    const text = { caCert: material.ca, clientCert: material.cert, clientKey: material.key }[
      option
    ];
    if (text === undefined) continue;
    // latin1 both ways: the file's bytes exactly, whatever its comments are written in.
    data[file] = Buffer.from(text, 'latin1').toString('base64');
    paths[field] = `${TLS_MOUNT}/${file}`;
  }
  if (Object.keys(data).length === 0) return undefined;
  return { data, paths, holdsKey: material.key !== undefined };
}

/**
 * The plan's text with `values` in place of its top-level fields' values, every other byte as
 * written (comments, quoting, order). A value YAML writes over several lines (a block scalar)
 * cannot be cut out by its range: then the plan is written again from its parsed document.
 */
export function withFieldValues(text: string, values: Record<string, string>): string {
  const doc = parseDocument(text);
  const edits: { start: number; end: number; value: string }[] = [];
  if (isMap(doc.contents)) {
    for (const pair of doc.contents.items) {
      const key = isScalar(pair.key) ? String(pair.key.value) : undefined;
      if (key === undefined || !Object.hasOwn(values, key)) continue;
      if (isScalar(pair.value) && pair.value.range) {
        const [start, end] = pair.value.range;
        // A double-quoted YAML scalar is a JSON string.
        edits.push({ start, end, value: JSON.stringify(values[key]) });
      }
    }
  }
  let out = text;
  for (const e of edits.sort((a, b) => b.start - a.start)) {
    out = out.slice(0, e.start) + e.value + out.slice(e.end);
  }
  const expected = JSON.stringify({ ...(parseYaml(text) as Record<string, unknown>), ...values });
  try {
    if (JSON.stringify(parseYaml(out)) === expected) return out;
  } catch {
    // Cut where YAML does not allow it: written again below.
  }
  for (const [key, value] of Object.entries(values)) doc.set(key, value);
  return doc.toString({ lineWidth: 0 });
}

/**
 * Whether a plan holds credentials (a proxy's user:password, a header named like a credential):
 * such a plan goes into a Secret, because a ConfigMap is readable by every role that may view
 * the namespace (the built-in `view` role reads ConfigMaps, not Secrets).
 */
function holdsCredentials(o: Record<string, unknown>): boolean {
  if (typeof o.proxy === 'string' && proxyWithoutUserinfo(o.proxy) !== o.proxy) return true;
  const headers = Array.isArray(o.header) ? o.header : [];
  return headers.some(
    (h) => typeof h === 'string' && SECRET_NAME.test(h.slice(0, Math.max(0, h.indexOf(':')))),
  );
}

/** The manifest and what to tell the user; throws K8sJobError with every problem found. */
export function k8sJob(input: K8sJobInput): K8sJob {
  const { options, now, planText } = input;
  const opts = resolveOptions(options, now);
  const planPath = options.plan ?? 'plan.yaml';
  const plan = checkPlan(planText, planPath, opts.resolved);
  const problems = [...opts.problems, ...plan.problems];
  const tls = plan.options ? tlsForPods(plan.options, planPath, problems) : undefined;
  // The pods' plan names the certificates where they are mounted; every other byte as written.
  const podPlan = tls ? withFieldValues(planText, tls.paths) : planText;
  if (podPlan !== planText && Buffer.byteLength(podPlan) > CONFIGMAP_MAX_BYTES) {
    problems.push(`${planPath}: with the certificates' paths in the pods, larger than 1 MiB`);
  }
  if (problems.length > 0 || !opts.resolved) throw new K8sJobError(problems);
  const r = opts.resolved;
  const planKind = plan.options && holdsCredentials(plan.options) ? 'Secret' : 'ConfigMap';
  const tlsSecret = tls ? `${r.name}-tls` : undefined;

  const labels = { 'app.kubernetes.io/name': 'infergauge', 'infergauge/job': r.name };
  const metadata = (name: string, component?: string) => ({
    name,
    ...(r.namespace !== undefined ? { namespace: r.namespace } : {}),
    labels: { ...labels, ...(component ? { 'app.kubernetes.io/component': component } : {}) },
  });
  const startAt = iso(r.startAt);
  const resultsDir = `/results/${r.name}`;
  const waitS =
    Math.ceil((r.startAt.getTime() - now.getTime()) / 1000) +
    Math.ceil(r.maxDurationS) +
    K8S_DEFAULTS.mergeSlackS;
  // Room to merge after the wait, and a bound on restarts that would each wait again.
  const mergeDeadlineS = waitS + 900;
  // The node image's user owns what the pods write; fsGroup makes block-backed volumes writable
  // to it (NFS-like servers ignore fsGroup: their export must allow uid 1000, see the docs).
  const securityContext = {
    runAsNonRoot: true,
    runAsUser: NODE_UID,
    runAsGroup: NODE_UID,
    fsGroup: NODE_UID,
    fsGroupChangePolicy: 'OnRootMismatch',
  };
  const resultsVolume = { name: 'results', persistentVolumeClaim: { claimName: r.pvc } };
  const resultsMount = { name: 'results', mountPath: '/results' };

  // stringData: the plan stays readable in job.yaml, as the ConfigMap's would be.
  const planDoc = new Document({
    apiVersion: 'v1',
    kind: planKind,
    metadata: metadata(`${r.name}-plan`),
    ...(planKind === 'Secret'
      ? { type: 'Opaque', stringData: { 'plan.yaml': podPlan } }
      : { data: { 'plan.yaml': podPlan } }),
  });
  planDoc.commentBefore = [
    ` infergauge ${VERSION} k8s job: plan ${planPath} as ${r.shards} shard${r.shards === 1 ? '' : 's'} starting at ${startAt}, then one merge.`,
    ' Apply it before that instant: a shard that starts more than a few seconds late fails.',
    '',
    ' The plan, mounted read-only at /plan/plan.yaml in every shard.',
    ...(planKind === 'Secret'
      ? [
          " A Secret, not a ConfigMap: the plan holds credentials (a proxy's user:password or a",
          ' header named like a credential), and roles that may view a namespace read its ConfigMaps.',
        ]
      : []),
    ...(tls
      ? [
          ` Its ${Object.keys(tls.paths).join(', ')} name the files of the Secret ${tlsSecret}, at ${TLS_MOUNT}.`,
        ]
      : []),
  ].join('\n');

  const tlsDoc =
    tls && tlsSecret
      ? new Document({
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: metadata(tlsSecret),
          type: 'Opaque',
          data: tls.data,
        })
      : undefined;
  if (tlsDoc) {
    tlsDoc.commentBefore = [
      ` The plan's certificate files, exactly as read (base64), mounted read-only at ${TLS_MOUNT}.`,
      ...(tls?.holdsKey
        ? [
            ' It holds the client key: base64 is no encryption, so keep this file out of version control.',
          ]
        : []),
    ].join('\n');
  }

  const pvc = new Document({
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: metadata(r.pvc),
    spec: {
      accessModes: ['ReadWriteMany'],
      ...(r.storageClass !== undefined ? { storageClassName: r.storageClass } : {}),
      resources: { requests: { storage: r.storage } },
    },
  });
  pvc.commentBefore = [
    ' Every shard and the merge write to this claim from different nodes: it needs a',
    ' ReadWriteMany storage class (NFS, EFS, Filestore, Azure Files; --storage-class NAME).',
    ' It outlives the Jobs and holds the results: delete it when they are copied out.',
  ].join('\n');

  const args = [
    'run',
    '--plan',
    '/plan/plan.yaml',
    // Kubernetes expands $(VAR) in args from the container's env (below).
    '--shard',
    `$(JOB_COMPLETION_INDEX)/${r.shards}`,
    '--start-at',
    startAt,
    '--out',
    `${resultsDir}/shard-$(JOB_COMPLETION_INDEX)`,
    '--no-html',
    ...(r.workers !== undefined ? ['--workers', String(r.workers)] : []),
  ];
  const shardJob = new Document({
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: metadata(r.name, 'shard'),
    spec: {
      completionMode: 'Indexed',
      completions: r.shards,
      parallelism: r.shards,
      backoffLimit: 0,
      template: {
        metadata: { labels: { ...labels, 'app.kubernetes.io/component': 'shard' } },
        spec: {
          restartPolicy: 'Never',
          securityContext,
          affinity: {
            podAntiAffinity: {
              preferredDuringSchedulingIgnoredDuringExecution: [
                {
                  weight: 100,
                  podAffinityTerm: {
                    labelSelector: { matchLabels: { 'infergauge/job': r.name } },
                    topologyKey: 'kubernetes.io/hostname',
                  },
                },
              ],
            },
          },
          containers: [
            {
              name: 'infergauge',
              image: r.image,
              imagePullPolicy: 'IfNotPresent',
              args,
              env: [
                {
                  name: 'JOB_COMPLETION_INDEX',
                  valueFrom: {
                    fieldRef: {
                      fieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']",
                    },
                  },
                },
                // Values the manifest must not hold: read from Secrets the user made.
                ...r.secretEnv.map((e) => ({
                  name: e.name,
                  valueFrom: { secretKeyRef: { name: e.secret, key: e.key } },
                })),
              ],
              resources: {
                requests: { cpu: r.cpu, memory: r.memory },
                limits: { cpu: r.cpu, memory: r.memory },
              },
              volumeMounts: [
                { name: 'plan', mountPath: '/plan', readOnly: true },
                ...(tlsSecret ? [{ name: 'tls', mountPath: TLS_MOUNT, readOnly: true }] : []),
                resultsMount,
              ],
            },
          ],
          volumes: [
            planKind === 'Secret'
              ? { name: 'plan', secret: { secretName: `${r.name}-plan` } }
              : { name: 'plan', configMap: { name: `${r.name}-plan` } },
            ...(tlsSecret
              ? [{ name: 'tls', secret: { secretName: tlsSecret, defaultMode: SECRET_FILE_MODE } }]
              : []),
            resultsVolume,
          ],
        },
      },
    },
  });
  shardJob.commentBefore = [
    ` ${r.shards} shard${r.shards === 1 ? '' : 's'}, one pod each, all starting their schedules at ${startAt}.`,
    ' backoffLimit 0: a retried shard would start late and miss the shared instant.',
    ' The preferred anti-affinity spreads the shards over nodes so they do not share CPUs.',
  ].join('\n');

  const mergeJob = new Document({
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: metadata(`${r.name}-merge`, 'merge'),
    spec: {
      backoffLimit: 3,
      activeDeadlineSeconds: mergeDeadlineS,
      template: {
        metadata: { labels: { ...labels, 'app.kubernetes.io/component': 'merge' } },
        spec: {
          restartPolicy: 'OnFailure',
          securityContext,
          containers: [
            {
              name: 'infergauge',
              image: r.image,
              imagePullPolicy: 'IfNotPresent',
              args: [
                'merge',
                '--out',
                `${resultsDir}/merged`,
                '--shards',
                String(r.shards),
                '--wait',
                String(waitS),
                resultsDir,
              ],
              // It mostly waits; at the end it reads every shard's records.
              resources: {
                requests: { cpu: '500m', memory: r.memory },
                limits: { memory: r.memory },
              },
              volumeMounts: [resultsMount],
            },
          ],
          volumes: [resultsVolume],
        },
      },
    },
  });
  mergeJob.commentBefore = [
    ` Waits up to ${waitS} s (until start + --max-duration ${r.maxDurationS} s + ${K8S_DEFAULTS.mergeSlackS} s) for`,
    ` ${resultsDir}/shard-0..${r.shards - 1}, then merges them into ${resultsDir}/merged.`,
  ].join('\n');

  const docs = [
    planDoc,
    ...(tlsDoc ? [tlsDoc] : []),
    ...(r.createPvc ? [pvc] : []),
    shardJob,
    mergeJob,
  ];
  // lineWidth 0: no folded lines, so args and the plan stay byte for byte as given.
  const manifest = docs.map((doc) => stringify(doc, { lineWidth: 0 })).join('---\n');
  return {
    manifest,
    name: r.name,
    ...(r.namespace !== undefined ? { namespace: r.namespace } : {}),
    shards: r.shards,
    startAt,
    startsInS: Math.round((r.startAt.getTime() - now.getTime()) / 1000),
    pvc: r.pvc,
    mergedDir: `${resultsDir}/merged`,
    waitS,
    mergeDeadlineS,
    planKind,
    ...(tlsSecret ? { tlsSecret } : {}),
    secretRefs: r.secretEnv.map((e) => `${e.secret}/${e.key}`),
    warnings: [
      ...opts.warnings,
      ...plan.warnings,
      ...(tls?.holdsKey
        ? [
            `the manifest holds the client key (Secret ${tlsSecret}, base64 is no encryption): keep job.yaml out of version control`,
          ]
        : []),
    ],
  };
}

/** The multi-document YAML manifest; throws K8sJobError with every problem found. */
export function k8sJobManifest(input: K8sJobInput): string {
  return k8sJob(input).manifest;
}

/** What to do with the manifest: printed on stderr so that `> job.yaml` holds only YAML. */
export function k8sJobHowTo(job: K8sJob): string {
  const ns = job.namespace !== undefined ? ` -n ${job.namespace}` : '';
  // Names of Secrets only: no value, nor anything of the plan (a proxy URL may hold a password).
  const secrets = [...new Set(job.secretRefs.map((ref) => ref.split('/')[0]))];
  return [
    `infergauge k8s job: manifest of ${job.name} (${job.shards} shard${job.shards === 1 ? '' : 's'}) on stdout; the shards start at ${job.startAt} (in ${job.startsInS} s), so apply it now:`,
    ...(secrets.length > 0
      ? [
          `  0. the Secret${secrets.length === 1 ? '' : 's'} --secret-env reads must exist${job.namespace !== undefined ? ` in ${job.namespace}` : ''}: ${job.secretRefs.join(', ')} (kubectl${ns} create secret generic NAME --from-file=KEY=FILE)`,
        ]
      : []),
    '  1. kubectl apply -f job.yaml',
    `  2. kubectl${ns} wait --for=condition=complete job/${job.name}-merge --timeout=${job.mergeDeadlineS + 60}s`,
    `  3. the merged results are in ${job.mergedDir} on the claim ${job.pvc}: kubectl${ns} cp <a pod mounting ${job.pvc} at /results>:${job.mergedDir} ./${job.name} (docs/kubernetes.md: a helper pod)`,
    '',
  ].join('\n');
}
