/**
 * The values a simulated engine's efficiencies and overheads can have, one table for every way
 * they arrive: the engine flags (options.ts ENGINE_FLAGS), a program's SimulatorOptions (read
 * through the same flags' rules), and a calibration file's fitted and held values
 * (calibrationFile.ts). A value outside is no engine's: 1e308 ms per step once gave "virtual
 * time: Infinity s" and a run of 0 requests that exited 0. Each bound says why it is there.
 */
import type { NumberRule } from '../flagNumber.js';

export const ENGINE_LIMITS = {
  /**
   * Shares of a peak: above 1 is more than the hardware moves; below 1 % is a model that is not
   * of this GPU (the slowest measured serving kernels reach several per cent).
   */
  mbu: { min: 0.01, max: 1 },
  mfu: { min: 0.01, max: 1 },
  mfu8bit: { min: 0.01, max: 1 },
  /**
   * Tokens per step at half the best MFU: a step holds at most its token budget, and no
   * engine's budget reaches a million tokens (vLLM's largest defaults are 16k-64k).
   */
  mfuHalfTokens: { min: 0, max: 1_000_000 },
  /**
   * The fixed time of one engine step (scheduling, kernel launches): measured 0.1-50 ms, CPU
   * engines included. Ten seconds a step would hold decode under 0.1 token/s on its own.
   */
  stepOverheadMs: { min: 0, max: 10_000 },
  /** Time per sequence per step: measured in microseconds; a second each is no engine. */
  perSeqOverheadUs: { min: 0, max: 1_000_000 },
  /**
   * The HTTP front end, arrival to scheduler, and the chat template's CPU time: milliseconds
   * measured; a minute is past every client's default timeout.
   */
  frontendLatencyMs: { min: 0, max: 60_000 },
  engineHopMs: { min: 0, max: 60_000 },
  frontendChatCpuMs: { min: 0, max: 60_000 },
  /** Tokenising a prompt token takes about a microsecond; a millisecond is a thousand times that. */
  tokenizeUsPerToken: { min: 0, max: 1_000 },
  /** Activations and runtime memory beside the KV cache: no accelerator holds a terabyte. */
  nonKvOverheadGb: { min: 0, max: 1_000 },
} as const satisfies Record<string, NumberRule>;

export type EngineLimitKey = keyof typeof ENGINE_LIMITS;

/**
 * The scripted engine's fixed timing and the simulator's answer knobs (simulatorOptions.ts
 * SIM_FLAGS), held to the same rule: a time past every client's timeout, or a count past any
 * context, is a typo, and ran as one.
 */
export const SIMULATOR_LIMITS = {
  /** Ten minutes to a first token is past every client's timeout. */
  ttftBaseMs: { min: 0, max: 600_000 },
  /** A second per prompt token: slower than any engine's prefill on a CPU. */
  ttftPerInputTokenMs: { min: 0, max: 1_000 },
  /** A minute between two tokens is a stall, not a rate. */
  itlMs: { min: 0, max: 60_000 },
  /** No context holds ten million tokens: no template, event or answer adds more. */
  chatTemplateTokens: { min: 0, max: 10_000_000 },
  tokensPerEvent: { min: 1, max: 10_000_000 },
  /** OpenAI's API allows 128 tools a request, so no more calls in one answer. */
  parallelToolCalls: { min: 1, max: 128 },
} as const satisfies Record<string, NumberRule>;
