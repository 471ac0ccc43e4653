import { readFileSync } from 'node:fs';
import { Command, Option } from '@commander-js/extra-typings';
import type { K8sJob, K8sJobOptions } from '../deploy/k8s.js';
import { K8S_DEFAULTS } from '../deploy/k8sDefaults.js';
import { EXIT } from '../errors.js';
import { VERSION } from '../version.js';
import { collect, printProblems, printWarnings } from './common.js';

/** `infergauge k8s job`: prints the manifest of src/deploy/k8s.ts and what to do with it. */
async function k8sJobAction(o: K8sJobOptions): Promise<number> {
  // Loaded when the command is chosen (YAML), so that other commands start without it.
  const { K8sJobError, k8sJob, k8sJobHowTo, resolveOptions } = await import('../deploy/k8s.js');
  const now = new Date();
  const invalid = (problems: string[]) => printProblems('k8s job', problems);
  let planText: string | undefined;
  if (o.plan !== undefined) {
    try {
      planText = readFileSync(o.plan, 'utf8');
    } catch (err) {
      // The options are still checked, so that one try shows every problem.
      return invalid([
        `${o.plan}: cannot read the plan (${(err as Error).message})`,
        ...resolveOptions(o, now).problems,
      ]);
    }
  }
  if (planText === undefined) {
    return invalid([
      '--plan is required, e.g. --plan plan.yaml',
      ...resolveOptions(o, now).problems,
    ]);
  }
  let job: K8sJob;
  try {
    job = k8sJob({ planText, options: o, now });
  } catch (err) {
    if (!(err instanceof K8sJobError)) throw err;
    return invalid(err.problems);
  }
  printWarnings('k8s job', job.warnings);
  process.stdout.write(job.manifest);
  process.stderr.write(k8sJobHowTo(job));
  return EXIT.ok;
}

export function k8sCommand(): Command {
  const job = new Command('job')
    .description(
      'Print a Kubernetes manifest (the plan and its certificate files, a PVC, an Indexed Job, a merge Job) that runs a plan as N shards in parallel pods, all starting at one instant, then merges their results. Nothing is contacted.',
    )
    .option('--shards <n>', 'pods to split the load over (required)')
    .option(
      '--plan <file>',
      'plan file (required); it must hold url, the server as the pods reach it',
    )
    .option(
      '--name <name>',
      'Job name, a DNS-1123 label of at most 52 characters (default: infergauge-<UTC time>)',
    )
    .option('--image <ref>', `infergauge image the pods run (default: infergauge:${VERSION})`)
    .option('--start-at <iso>', 'the instant every shard starts, e.g. 2026-11-29T23:00:00Z')
    .option(
      '--start-in <s>',
      `or: start that many seconds from now (default: ${K8S_DEFAULTS.startInS}, time to apply and pull the image)`,
    )
    .option('--namespace <ns>', "namespace of every object (default: kubectl's current one)")
    .option('--pvc <name>', `ReadWriteMany claim the results go to (default: ${K8S_DEFAULTS.pvc})`)
    .option('--no-pvc', 'do not create the claim: one of that name exists already')
    .option('--storage <size>', `size of the new claim (default: ${K8S_DEFAULTS.storage})`)
    .option(
      '--storage-class <name>',
      "the new claim's StorageClass, one with ReadWriteMany (NFS, EFS, Filestore, Azure Files) (default: the cluster's default class)",
    )
    .option('--cpu <q>', `CPU of each shard, requested and limit (default: ${K8S_DEFAULTS.cpu})`)
    .option(
      '--memory <q>',
      `memory of each shard, requested and limit (default: ${K8S_DEFAULTS.memory})`,
    )
    .option('--workers <n>', "passed to each shard's run as --workers")
    .option(
      '--max-duration <s>',
      `longest a shard may run, bounds the merge's wait (default: ${K8S_DEFAULTS.maxDurationS})`,
    )
    .addOption(
      new Option(
        '--secret-env <NAME=SECRET/KEY>',
        "set the shards' variable NAME from key KEY of your Secret SECRET (the plan's api-key-env, client-key-passphrase-env, HTTPS_PROXY), repeatable",
      ).argParser(collect),
    )
    .addHelpText(
      'after',
      '\nExample:\n  infergauge k8s job --shards 8 --plan plan.yaml --image registry/infergauge:0.1.0 > job.yaml\n  kubectl apply -f job.yaml\n\nThe manifest goes to stdout, what to do next to stderr. See docs/kubernetes.md.\nExit codes: 0 printed, 2 invalid options or plan.',
    )
    .action(async (options) => {
      const { pvc: _pvc, ...rest } = options;
      process.exitCode = await k8sJobAction({
        ...rest,
        ...(pvcName !== undefined ? { pvc: pvcName } : {}),
        noPvc,
      });
    });
  // --pvc NAME and --no-pvc share commander's attribute, so the later flag would silently drop
  // the other: `--pvc mine --no-pvc` must mean "the existing claim mine", so both are kept.
  let pvcName: string | undefined;
  let noPvc = false;
  job.on('option:pvc', (name: string) => {
    pvcName = name;
  });
  job.on('option:no-pvc', () => {
    noPvc = true;
  });
  return new Command('k8s')
    .description('Run a plan on Kubernetes: manifests to apply with kubectl.')
    .addCommand(job);
}
