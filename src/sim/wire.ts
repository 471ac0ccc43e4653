/**
 * A request in virtual time where its answer's shape matters (sessions build their next turn
 * from it; reasoning and tool calls have records of their own): the body is the client's own
 * (the OpenAI backend's request builder), read as the HTTP simulator reads it (server.ts), and
 * the answer is written by the HTTP simulator's own Generation and read by the client's own
 * decoder. So its record and captured answer are the HTTP ones, less network time, by
 * construction rather than by a copy of either side's rules.
 */
import type { ServerResponse } from 'node:http';
import { openAIBody, openaiBackend } from '../backends/openai.js';
import { type RecordedRequest, streamRecord } from '../backends/timeline.js';
import type { Answer, BackendOptions, RequestSpec } from '../backends/types.js';
import type { RequestRecord } from '../record.js';
import { countWords } from '../workload/words.js';
import { type AnswerOptions, type AnswerPlan, readRequest, tokenText } from './answer.js';
import type { GenerationSink } from './engine.js';
import { Generation } from './generation.js';
import { WordHasher } from './physical.js';

/** One emission of the engine: `tokens` tokens released together at `atUs`. */
export interface Emission {
  atUs: number;
  tokens: number;
}

/** A request as the HTTP simulator read it. */
export class WireRequest {
  private constructor(
    readonly body: Record<string, unknown>,
    readonly endpoint: 'chat' | 'completions',
    /** The texts its prompt's words come from, in order (readRequest). */
    private readonly promptTexts: readonly string[],
    /** Prompt tokens: its words, the simulator's tokenizer. */
    readonly promptTokens: number,
    readonly maxTokens: number,
    readonly plan: AnswerPlan,
  ) {}

  /**
   * The body the client would send for `spec`, read as server.ts reads it; or the message of
   * the HTTP 400 the simulator would answer. `id` is the record id (the `x-request-id`, which
   * seeds the simulator's tool-call draw).
   */
  static read(
    spec: RequestSpec,
    id: number,
    options: BackendOptions,
    answers: AnswerOptions,
  ): WireRequest | string {
    // The object the client would serialise: JSON would give the simulator the same values.
    const body = openAIBody(spec, options);
    const read = readRequest(options.endpoint, body, String(id), answers);
    if (typeof read === 'string') return read;
    let words = 0;
    for (const text of read.promptTexts) words += countWords(text);
    return new WireRequest(
      body,
      options.endpoint,
      read.promptTexts,
      words,
      read.maxTokens,
      read.plan,
    );
  }

  /**
   * Its prefix-cache keys as the HTTP simulator makes them (physical.ts): the prompt's words,
   * then the answer's as the next turn's prompt holds them, hashed as they are read.
   */
  blockHashes(blockSize: number): number[] {
    const hasher = new WordHasher(blockSize);
    for (const text of this.promptTexts) hasher.feed(text);
    for (let t = 0; t < this.maxTokens; t++) hasher.feed(tokenText(this.plan, t).word);
    return hasher.hashes;
  }

  /**
   * The record the client writes, and the answer it keeps when the spec asks, for an answer
   * streamed in these emissions (at least one). The simulator's writes of one emission reach
   * the client as one read at its time.
   */
  record(
    request: RecordedRequest & { spec: RequestSpec },
    sentAtUs: number,
    emissions: readonly Emission[],
    options: BackendOptions,
    model: string,
  ): { record: RequestRecord; answer?: Answer } {
    const writes: string[] = [];
    const res = {
      writeHead: () => res,
      flushHeaders: () => {},
      write: (text: string) => writes.push(text) > 0,
      end: () => res,
      on: () => res,
    };
    let nowMs = sentAtUs / 1000;
    // Streamed whatever the body says: the client always asks for a stream.
    const generation = new Generation(
      {
        endpoint: this.endpoint,
        body: { ...this.body, stream: true },
        plan: this.plan,
        engineRequest: { inputTokens: this.promptTokens, maxOutputTokens: this.maxTokens },
        fault: undefined,
        model,
        created: 0,
        now: () => nowMs,
      },
      {
        requestId: String(request.id),
        endpoint: this.endpoint,
        arrivedAt: nowMs,
        events: [],
        inputTokens: this.promptTokens,
        outputTokens: 0,
        reasoningTokens: 0,
        toolCallTokens: 0,
        toolCalls: this.plan.calls.length,
      },
      res as unknown as ServerResponse,
    );
    let sink: GenerationSink | undefined;
    generation.start(
      {
        submit: (_request, s) => {
          sink = s;
          return { cancel: () => {} };
        },
      },
      `cmpl-${request.id}`,
    );
    const decoder = openaiBackend.decoder(sentAtUs, options, request.spec);
    let atUs = sentAtUs;
    emissions.forEach((e, i) => {
      atUs = e.atUs;
      nowMs = atUs / 1000;
      writes.length = 0;
      (sink as GenerationSink).onTokens(e.tokens, i === emissions.length - 1);
      decoder.feed(writes.join(''), atUs);
    });
    if (!decoder.done) decoder.end(atUs);
    const decoded = decoder.finish();
    const endAtUs = decoded.doneUs !== undefined ? sentAtUs + decoded.doneUs : atUs;
    const record = streamRecord(request, sentAtUs, sentAtUs, endAtUs, 200, decoded, decoder.fault);
    return { record, ...(decoded.answer ? { answer: decoded.answer } : {}) };
  }
}
