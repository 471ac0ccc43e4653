/**
 * Serving-engine personalities: which engine's defaults, memory rule, scheduler and costs the
 * simulated engine follows. `vllm-v1` is the default (today's vLLM).
 */
export const PERSONALITY_IDS = ['vllm-v1', 'vllm-v0', 'sglang', 'trtllm', 'tgi'] as const;
export type PersonalityId = (typeof PERSONALITY_IDS)[number];
export const DEFAULT_PERSONALITY: PersonalityId = 'vllm-v1';

/** How a data-parallel front end picks a replica for each request. */
export const LOAD_BALANCERS = ['round-robin', 'least-loaded'] as const;
export type LoadBalancer = (typeof LOAD_BALANCERS)[number];

export function isPersonalityId(id: string): id is PersonalityId {
  return (PERSONALITY_IDS as readonly string[]).includes(id);
}
