/**
 * The wire shapes of the simulator's answers, as vLLM's OpenAI server writes them: stream
 * events (a chunk per kind of token and per tool call), the usage event and a non-streamed body.
 */
import { simWord } from '../workload/words.js';
import {
  type AnswerPlan,
  type PlannedCall,
  type TokenKind,
  type TokenText,
  tokenText,
  wholeCalls,
} from './answer.js';

/** A run of an emission's tokens of one kind (and one tool call), sent as one event. */
export interface Part {
  kind: TokenKind;
  tokens: number;
  /** The chat delta (or the completion text) that carries them. */
  delta: Record<string, unknown> | string;
}

/** Consecutive tokens of one kind and call; `opens` when it holds the call's first token. */
type Run = TokenText & { tokens: number; opens: boolean };

/** Builds the JSON of stream events in the OpenAI/vLLM shape, keeping the answer's place. */
export class EventFormat {
  private readonly head: string;
  /** Tokens written so far. */
  private at = 0;

  constructor(
    private readonly endpoint: 'chat' | 'completions',
    model: string,
    readonly id: string,
    created: number,
    private readonly plan: AnswerPlan,
  ) {
    const object = endpoint === 'chat' ? 'chat.completion.chunk' : 'text_completion';
    this.head = `{"id":"${id}","object":"${object}","created":${created},"model":${JSON.stringify(model)},"choices":`;
  }

  /** The next `tokens` tokens, split where their kind or tool call changes. */
  parts(tokens: number): Part[] {
    // A plain answer (most of every benchmark): one content part, built without per-token objects.
    if (this.plan.reasoningTokens === 0 && this.plan.calls.length === 0) {
      let text = '';
      for (let i = 0; i < tokens; i++) text += simWord(this.at++);
      return [
        { kind: 'content', tokens, delta: this.endpoint === 'chat' ? { content: text } : text },
      ];
    }
    const runs: Run[] = [];
    for (let i = 0; i < tokens; i++) {
      const t = tokenText(this.plan, this.at++);
      const prev = runs[runs.length - 1];
      if (prev && prev.kind === t.kind && prev.call === t.call) {
        prev.tokens++;
        prev.text += t.text;
      } else {
        runs.push({ ...t, tokens: 1, opens: t.call?.first === this.at - 1 });
      }
    }
    return runs.map((run) => ({ kind: run.kind, tokens: run.tokens, delta: this.delta(run) }));
  }

  private delta(run: Run): Part['delta'] {
    if (this.endpoint === 'completions') return run.text;
    if (run.kind === 'content') return { content: run.text };
    if (run.kind === 'reasoning') return { reasoning: run.text, reasoning_content: run.text };
    const call = run.call as PlannedCall;
    // The first delta of a call names it (vLLM's DeltaToolCall); later ones add arguments.
    const head = run.opens ? { id: call.id, type: 'function' } : {};
    const fn = run.opens ? { name: call.name, arguments: run.text } : { arguments: run.text };
    return { tool_calls: [{ index: call.index, ...head, function: fn }] };
  }

  /** Every token of a non-streamed answer, as one part per kind (for the truth). */
  totals(): Part[] {
    const counts = new Map<TokenKind, number>();
    for (let t = 0; t < this.at; t++) {
      const kind = tokenText(this.plan, t).kind;
      counts.set(kind, (counts.get(kind) ?? 0) + 1);
    }
    return [...counts].map(([kind, tokens]) => ({ kind, tokens, delta: '' }));
  }

  event(delta: Part['delta'], finishReason: string | null, usage?: object): string {
    const finish = finishReason === null ? 'null' : `"${finishReason}"`;
    const choice =
      this.endpoint === 'chat'
        ? `{"index":0,"delta":${JSON.stringify(delta)},"logprobs":null,"finish_reason":${finish}}`
        : `{"index":0,"text":${JSON.stringify(delta)},"logprobs":null,"finish_reason":${finish}}`;
    const tail = usage ? `,"usage":${JSON.stringify(usage)}}` : '}';
    return `data: ${this.head}[${choice}]${tail}\n\n`;
  }

  usageEvent(usage: object): string {
    return `data: ${this.head}[],"usage":${JSON.stringify(usage)}}\n\n`;
  }

  /** The non-streamed body of the answer so far (every token was counted by `parts`). */
  whole(usage: object): object {
    const plan = this.plan;
    let content = '';
    let reasoning = '';
    for (let t = 0; t < this.at; t++) {
      const { kind, text } = tokenText(plan, t);
      if (kind === 'content') content += text;
      if (kind === 'reasoning') reasoning += text;
    }
    const calls = plan.calls.length > 0;
    // vLLM's full generator: content '' for named/required tool calls, null for auto ones.
    const message = {
      role: 'assistant',
      content: calls ? (plan.forced ? '' : null) : content,
      ...(plan.reasoning ? { reasoning, reasoning_content: reasoning } : {}),
      ...(calls ? { tool_calls: wholeCalls(plan) } : {}),
    };
    const choice =
      this.endpoint === 'chat'
        ? { index: 0, message, finish_reason: plan.finishReason }
        : { index: 0, text: content, finish_reason: 'length' };
    return {
      ...JSON.parse(`${this.head}[]}`),
      object: this.endpoint === 'chat' ? 'chat.completion' : 'text_completion',
      choices: [choice],
      usage,
    };
  }
}
