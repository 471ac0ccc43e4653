/**
 * `plan --print`: the effective plan of a run written as a plan file, so that
 * `run --plan printed.yaml` runs exactly it. What the user set (flags over the file) is kept
 * under its flag's name, the run's defaults are filled in, and every scenario is spelled out
 * whole, with the length and session flags that applied over it.
 */

import { SECRET_NAME } from '../backends/request.js';
import { formatLengthDistribution, type LengthDistribution } from '../workload/distributions.js';
import type { Scenario } from '../workload/scenarios.js';
import { PLAN_KEYS } from './planFile.js';
import type { PlanScenario } from './planScenario.js';
import { proxyWithoutUserinfo, type RunPlan } from './runPlan.js';

const camel = (key: string) => key.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());
const FLAG_OF = new Map<string, string>([
  ...PLAN_KEYS.map((k): [string, string] => [camel(k), k]),
  // --output's list is the file's `outputs:` (`export:` is read as its old name).
  ['output', 'outputs'],
  // --tag, repeatable, is the file's `tags:` list.
  ['tag', 'tags'],
]);

/**
 * Options that shape the scenarios: spelled out in `scenarios:` instead (a plan's `scenarios`
 * and `--scenario` cannot be combined, and the others are already applied in them).
 */
const IN_SCENARIOS = new Set([
  'scenario',
  'inputTokens',
  'outputTokens',
  'sharedPrefix',
  'turns',
  'thinkTime',
  'history',
  'systemPrompt',
  'reasoningEffort',
  'thinking',
  'planScenarios',
]);

/** A number where the text reads back as the same text, so `label: "007"` stays text. */
function plain(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  const n = Number(value);
  return value.trim() !== '' && Number.isFinite(n) && String(n) === value ? n : value;
}

const length = (d: LengthDistribution) => plain(formatLengthDistribution(d));

/** A scenario as a plan file writes it, every field given, so no preset fills anything in. */
export function planScenarioOf(s: Scenario): PlanScenario {
  const out: PlanScenario = {
    name: s.name,
    'input-tokens': length(s.input) as string | number,
    'output-tokens': length(s.output) as string | number,
  };
  if (s.sharedPrefixTokens !== undefined) out['shared-prefix'] = s.sharedPrefixTokens;
  if (s.description !== undefined) out.description = s.description;
  if (s.session) {
    out.session = {
      turns: length(s.session.turns) as string | number,
      'think-time-ms': length(s.session.thinkTimeMs) as string | number,
      history: s.session.history,
      'system-prompt-tokens': s.session.systemPromptTokens,
    };
  }
  if (s.agent) {
    const a = s.agent;
    out.agent = {
      steps: length(a.steps) as string | number,
      'fan-out': a.fanOut,
      'system-prompt-tokens': a.systemPromptTokens,
      tools: a.tools,
      'tool-latency-ms': length(a.toolLatencyMs) as string | number,
      'tool-output-tokens': length(a.toolOutputTokens) as string | number,
      'answer-tokens': length(a.answerTokens) as string | number,
    };
  }
  if (s.reasoning) {
    out.reasoning = {
      ...(s.reasoning.effort !== undefined ? { effort: s.reasoning.effort } : {}),
      ...(s.reasoning.enableThinking !== undefined ? { thinking: s.reasoning.enableThinking } : {}),
    };
  }
  return out;
}

/**
 * The plan file of a run: `options` are the options `run` reads (camelCase, flags merged over
 * the plan file, commander's own defaults left out), `plan` what they made. Keys a plan file
 * cannot hold (`--shard`, `--start-at`, `--json`: one invocation's, not the plan's) are left
 * out. Secrets never reach it: the API key is named by its variable, and header and body
 * fields named like credentials come from `plan`, redacted.
 */
export function planFileOf(
  options: Record<string, unknown>,
  plan: RunPlan,
): Record<string, unknown> {
  const set: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(options)) {
    const flag = FLAG_OF.get(key);
    if (value === undefined || !flag || IN_SCENARIOS.has(key)) continue;
    set[flag] = Array.isArray(value) ? value : plain(value);
  }
  // The defaults `run` fills in, where the user left them: the plan then reads the same on any
  // later version whose defaults differ.
  const fill = (flag: string, value: unknown) => {
    if (value !== undefined && set[flag] === undefined) set[flag] = value;
  };
  fill('backend', plan.backend);
  fill('endpoint', plan.endpoint);
  const load = plan.load;
  if (load.mode === 'closed' && set.rate === undefined && set.trace === undefined)
    fill('concurrency', load.concurrency);
  if (load.mode === 'open' && set.trace === undefined && Number.isFinite(load.rate))
    fill('arrival', load.arrival);
  // Requests count the plain scenarios, sessions the session ones (multi-turn, agent): each
  // only where a scenario counts in it, as the plan refuses the other.
  if (set.duration === undefined) {
    const sessionScenario = (sc: Scenario) => sc.session !== undefined || sc.agent !== undefined;
    if (plan.scenarios.some((sc) => !sessionScenario(sc))) fill('requests', plan.requests);
    if (plan.scenarios.some(sessionScenario)) fill('sessions', plan.sessions);
  }
  fill('warmup', plan.warmupRequests);
  fill('tokenizer', plan.tokenizer);
  fill('temperature', plan.temperature);
  fill('ignore-eos', plan.ignoreEos);
  if (plan.resetCache) fill('reset-cache', true);
  if (plan.prefixHitRate !== undefined) fill('prefix-hit-rate', plan.prefixHitRate);
  fill('continuous-usage-stats', plan.continuousUsageStats);
  fill('timeout', plan.timeoutS);
  fill('grace', plan.graceS);
  fill('seed', plan.seed);
  fill('label', plan.label);
  // As validated: tags once each, the note trimmed, server facts as a mapping a reader can use.
  if (plan.tags.length > 0) set.tags = plan.tags;
  if (plan.note !== undefined) set.note = plan.note;
  if (plan.serverInfo !== undefined) set['server-info'] = plan.serverInfo;
  // A header named like a credential is left out (a placeholder would be sent as the secret);
  // body fields named so are redacted, as the manifest keeps them.
  if (set.header !== undefined) {
    const headers = Object.entries(plan.headers).filter(([k]) => !SECRET_NAME.test(k));
    if (headers.length > 0) set.header = headers.map(([k, v]) => `${k}: ${v}`);
    else delete set.header;
  }
  if (plan.extraBody !== undefined) set['extra-body'] = plan.extraBody;
  // Proxy credentials are left out, as credential headers are.
  if (typeof plan.proxy === 'string') set.proxy = proxyWithoutUserinfo(plan.proxy);
  const ordered: Record<string, unknown> = {};
  for (const k of PLAN_KEYS) if (set[k] !== undefined) ordered[k] = set[k];
  // An agentic trace sets the workload itself (its scenario is no preset to write out), and a
  // plan file's scenarios beside it are refused: the file names the trace alone.
  if (plan.scenarios.length > 0 && plan.scenarios.every((s) => s.shapedByTrace)) {
    return ordered;
  }
  return { ...ordered, scenarios: plan.scenarios.map(planScenarioOf) };
}
