import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { RequestRecord } from '../../src/record.js';
import { type SimulatorProcess, spawnSimulator } from '../../src/session/simulator.js';
import type { TruthRecord } from '../../src/sim/server.js';
import { runAlone } from '../helpers/alone.js';
import { runAgainst } from '../helpers/run.js';
import { fetchTruth, resetTruth, startSim } from '../helpers/sim.js';

// The client's first token and first tool call are told apart by a few milliseconds of the
// simulator's pacing, which a busy machine merges into one read: npm test runs this file alone.
await runAlone(import.meta.url);

/**
 * Issue 16 part 5: the simulator answers session, agent and reasoning requests in vLLM's wire
 * shapes (tool calls, reasoning deltas), accepts every message shape a session sends, and its
 * prefix cache keeps a conversation's turns (prompt and generated answer) so turn k+1 hits
 * them. The truth says what each event carried and what the cache held.
 */

const MODEL = 'sim-llama-3-8b';
const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'search',
      description: 'Search the web for a query and return the top results',
      parameters: { type: 'object', properties: { query: { type: 'string' } } },
    },
  },
  {
    type: 'function',
    function: {
      name: 'fetch_page',
      description: 'Fetch one page',
      parameters: { type: 'object', properties: { url: { type: 'string' } } },
    },
  },
];

interface Chunk {
  choices: { delta: Record<string, unknown>; finish_reason: string | null }[];
  usage?: {
    prompt_tokens: number;
    completion_tokens: number;
    completion_tokens_details?: { reasoning_tokens: number };
  };
}

interface ToolDelta {
  index: number;
  id?: string;
  type?: string;
  function: { name?: string; arguments?: string };
}

/** Sends one chat request and returns its parsed stream events (or its JSON body). */
async function chat(url: string, body: Record<string, unknown>, id: string): Promise<Chunk[]> {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-request-id': id },
    body: JSON.stringify({
      model: MODEL,
      stream: true,
      stream_options: { include_usage: true },
      ...body,
    }),
  });
  const text = await response.text();
  assert.equal(response.status, 200, text);
  const events = text.split('\n\n').filter((e) => e.startsWith('data: '));
  assert.equal(events.at(-1), 'data: [DONE]');
  return events.slice(0, -1).map((e) => JSON.parse(e.slice(6)) as Chunk);
}

/** The streamed answer put back together: reasoning, content, and whole calls by index. */
function assemble(chunks: Chunk[]) {
  let reasoning = '';
  let content = '';
  const calls: { id: string; type: string; name: string; arguments: string }[] = [];
  let finish: string | null = null;
  for (const chunk of chunks) {
    for (const choice of chunk.choices) {
      const d = choice.delta;
      if (typeof d.reasoning === 'string') {
        assert.equal(d.reasoning_content, d.reasoning, 'the deprecated copy rides along');
        reasoning += d.reasoning;
      }
      if (typeof d.content === 'string') content += d.content;
      for (const call of (d.tool_calls ?? []) as ToolDelta[]) {
        if (call.id !== undefined) {
          assert.equal(call.index, calls.length, 'calls open in index order');
          assert.equal(call.type, 'function');
          assert.equal(typeof call.function.name, 'string');
          calls.push({
            id: call.id,
            type: 'function',
            name: call.function.name ?? '',
            arguments: '',
          });
        } else assert.equal(call.function.name, undefined, 'only the first delta names it');
        calls[call.index].arguments += call.function.arguments ?? '';
      }
      finish = choice.finish_reason ?? finish;
    }
  }
  return { reasoning, content, calls, finish, usage: chunks.at(-1)?.usage };
}

async function truthOf(url: string, id: string): Promise<TruthRecord> {
  const found = (await fetchTruth(url)).find((t) => t.requestId === id);
  assert.ok(found, `truth for ${id}`);
  return found;
}

const words = (n: number, tag: string) =>
  Array.from({ length: n }, (_, i) => `${tag}${i}`).join(' ');

describe('tool calls and reasoning in vLLM wire shapes', () => {
  let sim: SimulatorProcess;
  before(async () => {
    sim = await startSim({
      engine: 'scripted',
      'ttft-base-ms': 5,
      'itl-ms': 3,
      'parallel-tool-calls': 3,
    });
  });
  after(() => sim.stop());

  test('a single call: named first delta, argument pieces that make valid JSON, usage exact', async () => {
    const chunks = await chat(
      sim.url,
      {
        messages: [{ role: 'user', content: 'find the weather in Paris' }],
        tools: TOOLS,
        tool_choice: 'required',
        parallel_tool_calls: false,
        max_tokens: 7,
        ignore_eos: true,
      },
      'single',
    );
    const answer = assemble(chunks);
    assert.equal(answer.content, '', 'only the role event carries content (empty)');
    assert.equal(answer.calls.length, 1);
    assert.equal(answer.calls[0].name, 'search');
    const args = JSON.parse(answer.calls[0].arguments) as { query: string };
    assert.equal(args.query.split(' ').length, 6, 'one word per token after the opening');
    assert.equal(answer.finish, 'tool_calls');
    assert.equal(answer.usage?.completion_tokens, 7);
    assert.equal(answer.usage?.completion_tokens_details, undefined, 'no reasoning asked');
    const truth = await truthOf(sim.url, 'single');
    assert.equal(truth.toolCalls, 1);
    assert.equal(truth.toolCallTokens, 7);
    assert.equal(truth.reasoningTokens, 0);
    assert.deepEqual(
      truth.events.map((e) => [e.kind, e.tokens]),
      Array.from({ length: 7 }, () => ['toolCall', 1]),
    );

    // A named tool_choice calls that tool and finishes with 'stop', as vLLM does.
    const named = assemble(
      await chat(
        sim.url,
        {
          messages: [{ role: 'user', content: 'open it' }],
          tools: TOOLS,
          tool_choice: { type: 'function', function: { name: 'fetch_page' } },
          max_tokens: 1,
        },
        'named',
      ),
    );
    assert.deepEqual(
      named.calls.map((c) => [c.name, c.arguments]),
      [['fetch_page', '{}']],
    );
    assert.equal(named.finish, 'stop');
  });

  test('parallel calls: their own indices and ids, the tokens split evenly, each JSON whole', async () => {
    const answer = assemble(
      await chat(
        sim.url,
        {
          messages: [{ role: 'user', content: 'research three things' }],
          tools: TOOLS,
          tool_choice: 'auto',
          max_tokens: 8,
        },
        'parallel',
      ),
    );
    assert.deepEqual(
      answer.calls.map((c) => c.name),
      ['search', 'fetch_page', 'search'],
    );
    assert.equal(new Set(answer.calls.map((c) => c.id)).size, 3);
    // 8 tokens over 3 calls: 3, 3, 2 (an opening piece, then one word each).
    assert.deepEqual(
      answer.calls.map(
        (c) => (JSON.parse(c.arguments) as { query: string }).query.split(' ').length,
      ),
      [2, 2, 1],
    );
    assert.equal(answer.finish, 'tool_calls');
    const truth = await truthOf(sim.url, 'parallel');
    assert.equal(truth.toolCalls, 3);
    assert.equal(truth.toolCallTokens, 8);

    // tool_choice 'none' and no tools: plain content.
    const none = assemble(
      await chat(
        sim.url,
        {
          messages: [{ role: 'user', content: 'hi' }],
          tools: TOOLS,
          tool_choice: 'none',
          max_tokens: 4,
        },
        'none',
      ),
    );
    assert.equal(none.calls.length, 0);
    assert.equal(none.content.trim().split(' ').length, 4);
    assert.equal(none.finish, 'length');
  });

  test('reasoning first, then a tool call; the split is in usage, the truth and the JSON body', async () => {
    const body = {
      messages: [{ role: 'user', content: 'think, then search' }],
      tools: TOOLS,
      tool_choice: 'required',
      parallel_tool_calls: false,
      chat_template_kwargs: { enable_thinking: true },
      max_tokens: 10,
    };
    const chunks = await chat(sim.url, body, 'think');
    const answer = assemble(chunks);
    assert.equal(
      answer.reasoning.trim().split(' ').length,
      5,
      'half the tokens (the default share)',
    );
    assert.equal(answer.usage?.completion_tokens_details?.reasoning_tokens, 5);
    assert.equal(answer.calls.length, 1);
    assert.equal(
      (JSON.parse(answer.calls[0].arguments) as { query: string }).query.split(' ').length,
      4,
    );
    // Reasoning streams before the first tool-call delta.
    const kinds = chunks.flatMap((c) =>
      c.choices.flatMap((ch) => (ch.delta.reasoning ? ['r'] : ch.delta.tool_calls ? ['t'] : [])),
    );
    assert.equal(kinds.join(''), 'rrrrrttttt');
    const truth = await truthOf(sim.url, 'think');
    assert.equal(truth.reasoningTokens, 5);
    assert.equal(truth.toolCallTokens, 5);
    assert.deepEqual(
      truth.events.map((e) => e.kind),
      [...Array(5).fill('reasoning'), ...Array(5).fill('toolCall')],
    );

    // The same answer as one JSON body: message.reasoning (and reasoning_content), tool_calls.
    const response = await fetch(`${sim.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, ...body }),
    });
    const whole = (await response.json()) as {
      choices: { message: Record<string, unknown>; finish_reason: string }[];
      usage: Chunk['usage'];
    };
    const message = whole.choices[0].message;
    assert.equal(message.reasoning, answer.reasoning);
    assert.equal(message.reasoning_content, answer.reasoning);
    assert.equal(message.content, '', "vLLM's content for a required call");
    const calls = message.tool_calls as { function: { name: string; arguments: string } }[];
    assert.deepEqual(
      calls.map((c) => [c.function.name, c.function.arguments]),
      answer.calls.map((c) => [c.name, c.arguments]),
    );
    assert.equal(whole.choices[0].finish_reason, 'tool_calls');
    assert.equal(whole.usage?.completion_tokens_details?.reasoning_tokens, 5);

    // enable_thinking false: no reasoning, even from a simulator that always reasons.
    const always = await startSim({ engine: 'scripted', reasoning: 'always', 'ttft-base-ms': 1 });
    try {
      const on = assemble(
        await chat(always.url, { messages: [{ role: 'user', content: 'q' }], max_tokens: 4 }, 'a'),
      );
      assert.equal(on.reasoning.trim().split(' ').length, 2);
      const off = assemble(
        await chat(
          always.url,
          {
            messages: [{ role: 'user', content: 'q' }],
            chat_template_kwargs: { enable_thinking: false },
            max_tokens: 4,
          },
          'b',
        ),
      );
      assert.equal(off.reasoning, '');
      assert.equal(off.usage?.completion_tokens_details, undefined);
    } finally {
      await always.stop();
    }
  });

  test('an agent turn: null content with tool_calls and a tool message are accepted and counted', async () => {
    const first = [
      { role: 'system', content: words(30, 's') },
      { role: 'user', content: 'look it up' },
    ];
    const turn1 = assemble(
      await chat(
        sim.url,
        {
          messages: first,
          tools: TOOLS,
          tool_choice: 'auto',
          parallel_tool_calls: false,
          max_tokens: 6,
        },
        'agent-1',
      ),
    );
    const call = turn1.calls[0];
    const result = words(12, 'r');
    const history = [
      ...first,
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          {
            id: call.id,
            type: 'function',
            function: { name: call.name, arguments: call.arguments },
          },
        ],
      },
      { role: 'tool', tool_call_id: call.id, content: result },
      { role: 'user', content: 'and now?' },
    ];
    const turn2 = assemble(
      await chat(
        sim.url,
        { messages: history, tools: TOOLS, tool_choice: 'none', max_tokens: 3 },
        'agent-2',
      ),
    );
    // The tool schema and history are prompt words: turn 2 = turn 1 + the call exactly as many
    // tokens as it streamed + the tool result + the new user message.
    assert.equal(turn2.usage?.prompt_tokens, (turn1.usage?.prompt_tokens as number) + 6 + 12 + 2);
    const bare = assemble(
      await chat(sim.url, { messages: first, tool_choice: 'none', max_tokens: 1 }, 'agent-bare'),
    );
    assert.ok(
      (turn1.usage?.prompt_tokens as number) > (bare.usage?.prompt_tokens as number) + 20,
      'the tool schemas are rendered into the prompt',
    );
  });

  test('the client records TTFT, ITL and ttftc of a reasoning + tool-call stream against the truth', async () => {
    await resetTruth(sim.url);
    const { records, summary } = await runAgainst(sim.url, {
      target: {
        endpoint: 'chat',
        extraBody: {
          tools: TOOLS,
          tool_choice: 'required',
          parallel_tool_calls: true,
          chat_template_kwargs: { enable_thinking: true },
        },
      },
      requests: 3,
      outputTokens: 12,
    });
    const truth = new Map((await fetchTruth(sim.url)).map((t) => [t.requestId, t]));
    for (const r of records as RequestRecord[]) {
      const t = truth.get(String(r.id)) as TruthRecord;
      assert.equal(r.error, undefined, r.error?.message);
      assert.equal(r.outputTokens, t.outputTokens);
      assert.equal(r.reasoningTokens, t.reasoningTokens);
      assert.equal(r.reasoningTokensSource, 'server');
      assert.equal(r.finishReason, 'tool_calls');
      // One event per token: the client saw every event the truth sent, no more.
      assert.equal(r.events.tokens.filter((k) => k > 0).length, t.events.length);
      // The client's span holds the server's: its TTFT and ttftc are never below the truth's.
      const serverTtft = t.events[0].at - t.arrivedAt;
      const firstCall = t.events.find((e) => e.kind === 'toolCall') as { at: number };
      assert.equal(r.firstReasoningAt, r.firstTokenAt);
      assert.ok((r.firstTokenAt as number) - r.sentAt >= serverTtft - 0.01);
      assert.ok((r.firstToolCallAt as number) - r.sentAt >= firstCall.at - t.arrivedAt - 0.01);
      assert.ok((r.firstToolCallAt as number) > (r.firstTokenAt as number));
      // 3 calls over the 6 non-reasoning tokens.
      assert.equal(t.toolCalls, 3);
    }
    assert.equal(summary.latency.itlMs.count, 3 * 11, 'outputTokens - 1 gaps per request');
    assert.equal(summary.latency.ttftcMs.count, 3);
  });
});

/** `vllm:<name>` from the simulator's Prometheus text. */
async function counter(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`vllm:${name}{`) || l.startsWith(`vllm:${name} `));
  assert.ok(line, `vllm:${name} in /metrics`);
  return Number(line.split(' ').at(-1));
}

/**
 * A 3-turn conversation whose history holds each answer verbatim. With prefix caching, turn k+1
 * hits every full block of turn k's prompt and generated answer (vLLM V1 caches output blocks).
 */
async function conversation(sim: SimulatorProcess, tag: string) {
  const blockSize = 16;
  const messages: Record<string, unknown>[] = [{ role: 'system', content: words(2000, 's') }];
  const turns: { truth: TruthRecord; answerTokens: number }[] = [];
  for (let turn = 1; turn <= 3; turn++) {
    messages.push({ role: 'user', content: words(37, `u${turn}-`) });
    const id = `${tag}-${turn}`;
    const answer = assemble(await chat(sim.url, { messages, max_tokens: 29 }, id));
    messages.push({ role: 'assistant', content: answer.content });
    turns.push({ truth: await truthOf(sim.url, id), answerTokens: 29 });
  }
  return { turns, blockSize };
}

describe('prefix cache across a session', () => {
  test('turn k+1 hits turn k prompt and answer blocks; /metrics and the truth agree; none when off', async () => {
    const on = await spawnSimulator(['--enable-prefix-caching']);
    const off = await spawnSimulator(['--no-enable-prefix-caching']);
    try {
      const cached = await conversation(on, 'on');
      const plain = await conversation(off, 'off');
      const hits = cached.turns.map((t) => t.truth.cachedPromptTokens as number);
      assert.equal(hits[0], 0, 'a cold cache');
      for (let k = 1; k < 3; k++) {
        const before = cached.turns[k - 1].truth;
        // Every full block of turn k's tokens whose KV was computed (all but the last sampled).
        const expected =
          Math.floor((before.inputTokens + before.outputTokens - 1) / cached.blockSize) *
          cached.blockSize;
        assert.equal(hits[k], expected, `turn ${k + 1} hit`);
        assert.ok(hits[k] > before.inputTokens, 'the hit reaches into the generated answer');
      }
      assert.ok(hits[2] > hits[1], 'the hit grows with the turn');
      assert.equal(
        await counter(on.url, 'prefix_cache_hits_total'),
        hits.reduce((a, b) => a + b, 0),
      );
      assert.equal(
        await counter(on.url, 'prefix_cache_queries_total'),
        cached.turns.reduce((a, t) => a + t.truth.inputTokens, 0),
      );
      assert.deepEqual(
        plain.turns.map((t) => t.truth.cachedPromptTokens),
        [0, 0, 0],
      );
      assert.equal(await counter(off.url, 'prefix_cache_hits_total'), 0);
      // TTFT on the server: turns 2 and 3 prefill only their new tokens with the cache on.
      const ttft = (t: TruthRecord) => t.events[0].at - t.arrivedAt;
      for (let k = 1; k < 3; k++) {
        assert.ok(
          ttft(cached.turns[k].truth) < ttft(plain.turns[k].truth),
          `turn ${k + 1}: ${ttft(cached.turns[k].truth)} ms cached vs ${ttft(plain.turns[k].truth)} ms`,
        );
        assert.ok(ttft(cached.turns[k].truth) < ttft(cached.turns[0].truth));
      }
    } finally {
      await on.stop();
      await off.stop();
    }
  });
});
