/**
 * Per-event cost of decoding a response stream: the text of each read goes through the backend's
 * StreamDecoder (SSE framing, the chunk's fields, the token timeline) as http.ts feeds it, then
 * the stream is ended and settled (finish). Streams are shaped like real servers' (vLLM chat and
 * completions, vLLM with continuous usage stats, SGLang, llama.cpp with its final `timings`),
 * with tokens carrying escapes (`\n`, `\"`) and non-ASCII text now and then, and arrive in reads
 * of 1 event or of 8 events. Prints CPU nanoseconds per event (median of the repeats, and range).
 *
 *   node --import tsx bench/decode.ts [--tokens 128] [--seconds 1] [--repeats 5] [--shape NAME]
 *   node --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx bench/decode.ts --shape vllm-chat
 *
 * `--streams N` decodes exactly N streams of each shape and read size and prints only the events
 * decoded, for counting instructions where timings are too noisy (a shared machine): the
 * difference between `valgrind --tool=callgrind` totals at N and at 0, over the events.
 */
import { parseArgs } from 'node:util';
import { openaiBackend } from '../src/backends/openai.js';
import type { BackendOptions, Endpoint, RequestSpec } from '../src/backends/types.js';

const { values } = parseArgs({
  options: {
    tokens: { type: 'string', default: '128' },
    seconds: { type: 'string', default: '1' },
    repeats: { type: 'string', default: '5' },
    shape: { type: 'string' },
    streams: { type: 'string' },
  },
});
const TOKENS = Number(values.tokens);
const SECONDS = Number(values.seconds);
const REPEATS = Number(values.repeats);

/** Token texts as a tokenizer hands them out: mostly words, now and then a newline, a quote, an é. */
function tokenText(i: number): string {
  if (i % 23 === 22) return '\n\n';
  if (i % 31 === 30) return ' "quoted"';
  if (i % 37 === 36) return ' café';
  return ` w${i % 97}`;
}

interface Shape {
  endpoint: Endpoint;
  /** The SSE events of one answer, as the server writes them. */
  events(tokens: number): string[];
}

const sse = (value: unknown) => `data: ${JSON.stringify(value)}\n\n`;
const CREATED = 1_733_100_000;
const MODEL = 'meta-llama/Llama-3.1-8B-Instruct';
const usage = (completion: number) => ({
  prompt_tokens: 128,
  total_tokens: 128 + completion,
  completion_tokens: completion,
});

/** The usage-only chunk (`stream_options.include_usage`) and `[DONE]` that end a stream. */
function usageAndDone(head: object, tokens: number): string[] {
  return [sse({ ...head, choices: [], usage: usage(tokens) }), 'data: [DONE]\n\n'];
}

/** vLLM's chat stream (serving_chat.py): a role-only first event, finish on the last, usage. */
function vllmChat(continuous: boolean): Shape {
  return {
    endpoint: 'chat',
    events(tokens) {
      const head = { id: 'chatcmpl-8f2a9c1e', object: 'chat.completion.chunk', created: CREATED };
      const chunk = (delta: object, finish: string | null, done: number) =>
        sse({
          ...head,
          model: MODEL,
          choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
          ...(continuous ? { usage: usage(done) } : {}),
        });
      const out = [chunk({ role: 'assistant', content: '' }, null, 0)];
      for (let i = 0; i < tokens; i++) {
        out.push(chunk({ content: tokenText(i) }, i === tokens - 1 ? 'length' : null, i + 1));
      }
      return [...out, ...usageAndDone({ ...head, model: MODEL }, tokens)];
    },
  };
}

/** vLLM's completions stream (serving_completion.py). */
const vllmCompletions: Shape = {
  endpoint: 'completions',
  events(tokens) {
    const head = { id: 'cmpl-5b0e7d3a', object: 'text_completion', created: CREATED, model: MODEL };
    const out: string[] = [];
    for (let i = 0; i < tokens; i++) {
      const finish = i === tokens - 1 ? 'length' : null;
      out.push(
        sse({
          ...head,
          choices: [
            {
              index: 0,
              text: tokenText(i),
              logprobs: null,
              finish_reason: finish,
              stop_reason: null,
            },
          ],
        }),
      );
    }
    return [...out, ...usageAndDone(head, tokens)];
  },
};

/** SGLang's chat stream (serving_chat.py): nulls for every unset delta field, `usage: null`. */
const sglangChat: Shape = {
  endpoint: 'chat',
  events(tokens) {
    const head = { id: 'a3f1c0de9b8e4f0f', object: 'chat.completion.chunk', created: CREATED };
    const out: string[] = [];
    for (let i = 0; i < tokens; i++) {
      const finish = i === tokens - 1 ? 'length' : null;
      out.push(
        sse({
          ...head,
          model: MODEL,
          choices: [
            {
              index: 0,
              delta: {
                role: null,
                content: tokenText(i),
                reasoning_content: null,
                tool_calls: null,
              },
              logprobs: null,
              finish_reason: finish,
              matched_stop: null,
            },
          ],
          usage: null,
        }),
      );
    }
    return [...out, ...usageAndDone({ ...head, model: MODEL }, tokens)];
  },
};

/** llama.cpp's server (server-task.cpp to_json_oaicompat_chat_stream): `timings` at the end. */
const llamaCppChat: Shape = {
  endpoint: 'chat',
  events(tokens) {
    const tail = {
      created: CREATED,
      id: 'chatcmpl-Zq1x',
      model: 'gpt-3.5-turbo',
      system_fingerprint: 'b5100-1d3e5f7a',
      object: 'chat.completion.chunk',
    };
    const out: string[] = [];
    for (let i = 0; i < tokens; i++) {
      out.push(
        sse({
          choices: [{ finish_reason: null, index: 0, delta: { content: tokenText(i) } }],
          ...tail,
        }),
      );
    }
    out.push(
      sse({
        choices: [{ finish_reason: 'length', index: 0, delta: {} }],
        ...tail,
        usage: usage(tokens),
        timings: { prompt_n: 128, prompt_ms: 12.5, predicted_n: tokens, predicted_ms: 900.1 },
      }),
    );
    out.push('data: [DONE]\n\n');
    return out;
  },
};

const SHAPES: Record<string, Shape> = {
  'vllm-chat': vllmChat(false),
  'vllm-chat-usage': vllmChat(true),
  'vllm-completions': vllmCompletions,
  'sglang-chat': sglangChat,
  'llamacpp-chat': llamaCppChat,
};

/** The events of one answer in reads of `perRead` events each. */
function reads(events: string[], perRead: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < events.length; i += perRead) out.push(events.slice(i, i + perRead).join(''));
  return out;
}

/** Options and request of every stream decoded. */
function request(shape: Shape): { options: BackendOptions; spec: RequestSpec } {
  return {
    options: {
      endpoint: shape.endpoint,
      model: MODEL,
      temperature: 0,
      ignoreEos: true,
      continuousUsageStats: false,
    },
    spec: { prompt: 'p', requestedInputTokens: 128, requestedOutputTokens: TOKENS },
  };
}

/** Decodes `count` whole streams, as http.ts feeds them; returns the output tokens decoded. */
function decode(shape: Shape, chunks: string[], count: number): number {
  const { options, spec } = request(shape);
  let tokens = 0;
  for (let s = 0; s < count; s++) {
    const decoder = openaiBackend.decoder(0, options, spec);
    let atUs = 1000;
    for (const chunk of chunks) {
      atUs += 10;
      decoder.feed(chunk, atUs);
    }
    decoder.end(atUs);
    const decoded = decoder.finish();
    if (decoder.fault) throw new Error(`${decoder.fault.kind}: ${decoder.fault.message}`);
    tokens += decoded.outputTokens;
  }
  if (tokens !== count * TOKENS) throw new Error(`decoded ${tokens} tokens`);
  return tokens;
}

/** Decodes whole streams for about `seconds` of CPU; returns CPU nanoseconds per event. */
function measure(shape: Shape, chunks: string[], events: number, seconds: number): number {
  let streams = 0;
  // CPU time, not wall time: on a shared machine the process waits for a core now and then.
  const start = process.cpuUsage();
  let ns = 0;
  while (ns < seconds * 1e9) {
    decode(shape, chunks, 50);
    streams += 50;
    const used = process.cpuUsage(start);
    ns = (used.user + used.system) * 1000;
  }
  return ns / (streams * events);
}

const names = values.shape ? [values.shape] : Object.keys(SHAPES);
const shapes = names.map((name) => {
  const shape = SHAPES[name];
  if (!shape) throw new Error(`no shape ${name}: ${Object.keys(SHAPES).join(', ')}`);
  return { name, shape, events: shape.events(TOKENS) };
});
if (values.streams !== undefined) {
  let events = 0;
  for (const { shape, events: all } of shapes) {
    for (const perRead of [1, 8]) {
      decode(shape, reads(all, perRead), Number(values.streams));
      events += Number(values.streams) * all.length;
    }
  }
  console.log(`${events} events decoded`);
} else {
  console.log(`CPU ns per event, ${TOKENS}-token answers, median of ${REPEATS} (range)`);
  console.log(
    `${'stream'.padEnd(18)} ${'1 event/read'.padStart(22)} ${'8 events/read'.padStart(22)}`,
  );
  for (const { name, shape, events } of shapes) {
    const cells: string[] = [];
    for (const perRead of [1, 8]) {
      const chunks = reads(events, perRead);
      measure(shape, chunks, events.length, Math.min(0.3, SECONDS)); // warm-up
      const ns: number[] = [];
      for (let r = 0; r < REPEATS; r++) ns.push(measure(shape, chunks, events.length, SECONDS));
      ns.sort((a, b) => a - b);
      const median = ns[Math.floor(ns.length / 2)];
      const range = `${median.toFixed(0)} (${ns[0].toFixed(0)}-${ns[ns.length - 1].toFixed(0)})`;
      cells.push(range.padStart(22));
    }
    console.log(`${name.padEnd(18)} ${cells.join(' ')}`);
  }
}
