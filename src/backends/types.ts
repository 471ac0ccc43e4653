import type { Answer, DecodedStream, StreamFault, ToolCall } from './timeline.js';

export type { Answer, ToolCall };

/** Which OpenAI-compatible route to call (other backends have one route each). */
export type Endpoint = 'chat' | 'completions';

/**
 * One chat message (OpenAI chat API): `content` is null on an assistant message that only calls
 * tools; a `tool` message answers the call `tool_call_id`.
 */
export interface ChatMessage {
  role: string;
  content: string | null;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
}

/** A function the model may call (an entry of the OpenAI chat API's `tools`). */
export interface ToolSchema {
  type: 'function';
  function: { name: string; description?: string; parameters: Record<string, unknown> };
}

/** One request the workload wants sent. */
export interface RequestSpec {
  prompt: string;
  /** A whole conversation for chat endpoints (datasets, sessions); `prompt` is then its text. */
  messages?: ChatMessage[];
  /** Functions offered to the model (chat endpoints). */
  tools?: ToolSchema[];
  /** The chat API's `tool_choice`: 'auto', 'required', 'none', or one named function. */
  toolChoice?: 'auto' | 'required' | 'none' | { type: 'function'; function: { name: string } };
  /** Keep the answer's text and tool calls: a session's next turn is built from them. */
  captureAnswer?: boolean;
  /** Words in `prompt`, when the workload knows it without counting (synthetic prompts). */
  promptWords?: number;
  /**
   * No two prompts of the workload start with the same this many tokens (seeded random draws
   * with no shared prefix): a prefix cache whose blocks are at least this long never hits
   * them, so virtual time need not read and key them.
   */
  distinctPrefixTokens?: number;
  requestedInputTokens: number;
  requestedOutputTokens: number;
}

/** How requests are shaped, whatever the wire format. */
export interface BackendOptions {
  endpoint: Endpoint;
  model: string;
  temperature: number;
  /** Ask the server to generate exactly the requested output tokens. */
  ignoreEos: boolean;
  /** Ask for usage on every event (vLLM `continuous_usage_stats`) to count tokens per event. */
  continuousUsageStats: boolean;
  /** Merged last into the body, so it can override anything the backend sets. */
  extraBody?: Record<string, unknown>;
  /** Reasoning models: `reasoning_effort` (OpenAI, vLLM for gpt-oss). */
  reasoningEffort?: 'low' | 'medium' | 'high';
  /** Reasoning models: `chat_template_kwargs.enable_thinking` (Qwen3, DeepSeek on vLLM/SGLang). */
  enableThinking?: boolean;
  /** The most UTF-8 bytes of answer a request that keeps its answer may hold (`--max-answer-mb`). */
  maxAnswerBytes?: number;
}

/** Turns one response stream into the token-event timeline. */
export interface StreamDecoder {
  /** Parses one piece of the body that arrived at `atUs`; returns the token events it completed. */
  feed(text: string, atUs: number): number;
  /**
   * The body ended cleanly at `atUs`: flush whatever was left unterminated, and judge the answer
   * (a cut event or a missing end marker becomes a `truncated` fault).
   */
  end(atUs: number): void;
  finish(): DecodedStream;
  readonly fault: StreamFault | undefined;
  /** The end-of-stream marker arrived; nothing more is needed. */
  readonly done: boolean;
  readonly eventCount: number;
}

/** A server's wire protocol: how to ask, and how to read the answer. */
export interface Backend {
  readonly name: string;
  /** Path (below the base URL) and JSON body of one request. */
  request(spec: RequestSpec, options: BackendOptions): { path: string; body: string };
  /** The reader of one response; `spec` gives the request's output limit to check counts by. */
  decoder(sentAtUs: number, options: BackendOptions, spec: RequestSpec): StreamDecoder;
  /** A route that lists models and how to pick the first, for a default `--model`. */
  models?: { path: string; first(body: unknown): string | undefined };
  /** A server that answered one JSON body instead of a stream: one event at its end. */
  decodeJson?(
    body: unknown,
    atUs: number,
    options: BackendOptions,
    spec: RequestSpec,
  ): DecodedStream | StreamFault;
  /** Options this server honours; asking for others is a plan error. */
  readonly supports: {
    endpoints: readonly Endpoint[];
    ignoreEos: boolean;
    continuousUsageStats: boolean;
    /** The model name goes in the URL or body, so the server cannot pick one itself. */
    modelRequired: boolean;
  };
}
