/** `infergauge k8s` defaults, apart from the Job builder so that help text does not load YAML. */
export const K8S_DEFAULTS = {
  startInS: 180,
  pvc: 'infergauge-results',
  storage: '10Gi',
  cpu: '2',
  memory: '2Gi',
  maxDurationS: 3600,
  /** Slack the merge waits beyond start + --max-duration: late finishers, slow storage. */
  mergeSlackS: 600,
} as const;
