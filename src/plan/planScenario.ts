/**
 * A scenario as a plan file writes it (`scenarios:` in plan.yaml, validated for shape by
 * planFile.ts) and its reading into a Scenario. Apart from planFile.ts so that `run` reads
 * scenarios without loading YAML or zod.
 */
import { type LengthDistribution, parseLengthDistribution } from '../workload/distributions.js';
import {
  type AgentShape,
  findScenario,
  type Scenario,
  type SessionShape,
} from '../workload/scenarios.js';

/** One scenario in a plan file: a preset, optionally reshaped, or one written from scratch. */
export interface PlanScenario {
  name?: string | undefined;
  preset?: string | undefined;
  'input-tokens'?: number | string | undefined;
  'output-tokens'?: number | string | undefined;
  'shared-prefix'?: number | undefined;
  description?: string | undefined;
  session?:
    | {
        turns?: number | string | undefined;
        'think-time-ms'?: number | string | undefined;
        history?: 'actual' | 'reference' | undefined;
        'system-prompt-tokens'?: number | undefined;
      }
    | undefined;
  agent?:
    | {
        steps?: number | string | undefined;
        'fan-out'?: number | undefined;
        'system-prompt-tokens'?: number | undefined;
        tools?: number | undefined;
        'tool-latency-ms'?: number | string | undefined;
        'tool-output-tokens'?: number | string | undefined;
        'answer-tokens'?: number | string | undefined;
      }
    | undefined;
  reasoning?:
    | { effort?: 'low' | 'medium' | 'high' | undefined; thinking?: boolean | undefined }
    | undefined;
}

/** A plan-file scenario as a Scenario; throws an Error naming its index on bad lengths. */
export function scenarioFromPlan(s: PlanScenario, index: number): Scenario {
  const base = s.preset ? findScenario(s.preset) : undefined;
  const name = s.name ?? base?.name;
  const where = `scenarios[${index}]${name ? ` ("${name}")` : ''}`;
  if (!name) throw new Error(`${where}: needs a name (or a preset)`);
  const length = (field: 'input-tokens' | 'output-tokens') => {
    const v = s[field];
    if (v === undefined) {
      const fromPreset = field === 'input-tokens' ? base?.input : base?.output;
      if (!fromPreset) throw new Error(`${where}: needs ${field} (or a preset)`);
      return fromPreset;
    }
    try {
      return parseLengthDistribution(String(v));
    } catch (err) {
      throw new Error(`${where}.${field}: ${(err as Error).message}`);
    }
  };
  /** A distribution field, or the preset's, or `fallback`. */
  const dist = (
    value: string | number | undefined,
    field: string,
    fallback: LengthDistribution,
  ): LengthDistribution => {
    if (value === undefined) return fallback;
    try {
      return parseLengthDistribution(String(value));
    } catch (err) {
      throw new Error(`${where}.${field}: ${(err as Error).message}`);
    }
  };
  const scenario: Scenario = {
    name,
    input: length('input-tokens'),
    output: length('output-tokens'),
    ...(s['shared-prefix'] !== undefined ? { sharedPrefixTokens: s['shared-prefix'] } : {}),
    ...((s.description ?? base?.description)
      ? { description: s.description ?? base?.description }
      : {}),
  };
  const session = s.session;
  if (session || base?.session) {
    const b = base?.session ?? DEFAULT_SESSION;
    scenario.session = {
      turns: dist(session?.turns, 'session.turns', b.turns),
      thinkTimeMs: dist(session?.['think-time-ms'], 'session.think-time-ms', b.thinkTimeMs),
      history: session?.history ?? b.history,
      systemPromptTokens: session?.['system-prompt-tokens'] ?? b.systemPromptTokens,
    };
  }
  const agent = s.agent;
  if (agent || base?.agent) {
    const b = base?.agent ?? (findScenario('agent')?.agent as AgentShape);
    scenario.agent = {
      steps: dist(agent?.steps, 'agent.steps', b.steps),
      fanOut: agent?.['fan-out'] ?? b.fanOut,
      systemPromptTokens: agent?.['system-prompt-tokens'] ?? b.systemPromptTokens,
      tools: agent?.tools ?? b.tools,
      toolLatencyMs: dist(agent?.['tool-latency-ms'], 'agent.tool-latency-ms', b.toolLatencyMs),
      toolOutputTokens: dist(
        agent?.['tool-output-tokens'],
        'agent.tool-output-tokens',
        b.toolOutputTokens,
      ),
      answerTokens: dist(agent?.['answer-tokens'], 'agent.answer-tokens', b.answerTokens),
    };
  }
  if (scenario.session && scenario.agent) {
    throw new Error(
      `${where}: has both session and agent; an agent task is a session of its own kind, keep one`,
    );
  }
  const reasoning = s.reasoning;
  if (reasoning || base?.reasoning) {
    scenario.reasoning = {
      ...base?.reasoning,
      ...(reasoning?.effort !== undefined ? { effort: reasoning.effort } : {}),
      ...(reasoning?.thinking !== undefined ? { enableThinking: reasoning.thinking } : {}),
    };
  }
  return scenario;
}

/** A plan scenario's `session:` without the multi-turn preset under it: 5 turns, no pause. */
const DEFAULT_SESSION: SessionShape = {
  turns: { kind: 'fixed', value: 5 },
  thinkTimeMs: { kind: 'fixed', value: 0 },
  history: 'actual',
  systemPromptTokens: 0,
};
