/**
 * The prompt salt (issue 47): no two runs, and no two points of a session, send the same
 * words unless the workload asks for sharing, and (seed, salt) repeats a run's prompts exactly.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { RequestSpec } from '../../../src/backends/types.js';
import { PlanError, parseRunPlan } from '../../../src/plan/runPlan.js';
import { randomPromptSalt } from '../../../src/session/target.js';
import { streamSeed } from '../../../src/workload/distributions.js';
import { pointPromptSalt, promptStreamSeed } from '../../../src/workload/promptSalt.js';
import { createPromptFactory } from '../../../src/workload/prompts.js';
import { findScenario, type Scenario } from '../../../src/workload/scenarios.js';
import { createSyntheticWorkload } from '../../../src/workload/synthetic.js';
import { createTokenizer } from '../../../src/workload/tokenizer.js';
import { loadWorkload } from '../../../src/workload/workload.js';

const words = await createTokenizer('words');
const factory = (seed: number, salt: number, sharedPrefixTokens?: number) =>
  createPromptFactory(words, {
    seed: promptStreamSeed(seed, salt),
    ...(sharedPrefixTokens ? { sharedPrefixTokens } : {}),
  });
/** Words two texts share at their start. */
const sharedWords = (a: string, b: string) => {
  const x = a.split(' ');
  const y = b.split(' ');
  let n = 0;
  while (n < x.length && n < y.length && x[n] === y[n]) n++;
  return n;
};

describe('prompt salt', () => {
  test('the same seed with two salts: no request shares its first words with the other run', async () => {
    const a = await factory(42, 1);
    const b = await factory(42, 2);
    let longest = 0;
    for (let id = 0; id < 500; id++)
      longest = Math.max(longest, sharedWords(a.make(id, 64), b.make(id, 64)));
    // Random words from some 150 share 4 leading words with chance ~1e-9 a pair.
    assert.ok(longest < 4, `a request shared ${longest} leading words across salts`);
  });

  test('(seed, salt) repeats every prompt exactly; salt 0 is the unsalted stream of older runs', async () => {
    const a = await factory(7, 1234);
    const again = await factory(7, 1234);
    for (const id of [0, 1, 99, 4096]) assert.equal(again.make(id, 48), a.make(id, 48));
    const unsalted = await createPromptFactory(words, { seed: streamSeed(7, 'prompts') });
    const zero = await factory(7, 0);
    assert.equal(zero.make(3, 32), unsalted.make(3, 32));
    assert.equal(promptStreamSeed(7, 0, 'probe-prompts'), streamSeed(7, 'probe-prompts'));
  });

  test("a point's shorter prompt is not the start of another point's longer one", async () => {
    // The llama-server case: a 200-token prompt of request 0 was the first 200 words of
    // the 384-token prompt sent before it. Points of a session now differ by their salt.
    const run = randomPromptSalt();
    const first = await factory(42, pointPromptSalt(run, 0));
    const second = await factory(42, pointPromptSalt(run, 1));
    assert.equal(pointPromptSalt(run, 0), run, 'a run (one point) keeps the salt it records');
    const salts = new Set(Array.from({ length: 64 }, (_, i) => pointPromptSalt(run, i)));
    assert.equal(salts.size, 64, 'every point its own salt');
    for (let id = 0; id < 50; id++) {
      assert.ok(sharedWords(first.make(id, 384), second.make(id, 200)) < 4, `request ${id}`);
    }
    // Within one point, two lengths of two requests never share a stream.
    assert.ok(sharedWords(first.make(0, 384), first.make(1, 200)) < 4);
  });

  test('a shared prefix stays shared within a run and differs across runs', async () => {
    const a = await factory(42, 11, 32);
    const b = await factory(42, 12, 32);
    const prefixOf = (text: string) => text.split(' ').slice(0, 32).join(' ');
    assert.equal(prefixOf(a.make(0, 40)), prefixOf(a.make(1, 90)));
    assert.ok(sharedWords(a.make(0, 40), b.make(0, 40)) < 4);
  });

  test("synthetic requests (capacity's batches): salted once per workload, salt 0 as before", () => {
    const prompt = (salt: number | undefined, id: number) =>
      (
        createSyntheticWorkload({
          inputTokens: 40,
          outputTokens: 1,
          seed: 5,
          ...(salt === undefined ? {} : { promptSalt: salt }),
        })(id) as RequestSpec
      ).prompt;
    assert.equal(prompt(0, 2), prompt(undefined, 2));
    assert.equal(prompt(9, 2), prompt(9, 2));
    assert.ok(sharedWords(prompt(9, 2), prompt(10, 2)) < 4);
  });

  test("sessions: the system prompt is shared by a run's sessions, not across runs", async () => {
    const base = findScenario('multi-turn') as Scenario;
    const scenario: Scenario = {
      ...base,
      session: { ...(base.session as NonNullable<Scenario['session']>), systemPromptTokens: 24 },
    };
    const firstRequest = async (salt: number, session: number) => {
      const built = await loadWorkload({
        scenario,
        tokenizer: 'words',
        tokenizerOptions: { builtInSimulator: true },
        seed: 3,
        promptSalt: salt,
        promptOverheadTokens: 0,
      });
      assert.ok('nextSession' in built);
      const step = built.nextSession(session).next(undefined);
      const messages = step?.requests[0].messages ?? [];
      return { system: messages[0]?.content ?? '', user: messages.at(-1)?.content ?? '' };
    };
    const [a0, a1, b0] = await Promise.all([
      firstRequest(1, 0),
      firstRequest(1, 1),
      firstRequest(2, 0),
    ]);
    assert.equal(a0.system.split(' ').length, 24);
    assert.equal(a0.system, a1.system, 'one system prompt for the sessions of a run');
    assert.notEqual(a0.user, a1.user);
    assert.ok(sharedWords(a0.system, b0.system) < 4, 'another run, another system prompt');
  });

  test('a text corpus is sliced at another place under another salt', async () => {
    const text = Array.from({ length: 5000 }, (_, i) => `w${i}`).join(' ');
    const slice = async (salt: number) => {
      const built = await loadWorkload({
        scenario: {
          name: 'corpus',
          input: { kind: 'fixed', value: 20 },
          output: { kind: 'fixed', value: 4 },
        },
        tokenizer: 'words',
        tokenizerOptions: { builtInSimulator: true },
        seed: 3,
        promptSalt: salt,
        promptOverheadTokens: 0,
        dataset: { format: 'text', text },
      });
      assert.ok('nextRequest' in built);
      return built.nextRequest(0).prompt;
    };
    assert.equal(await slice(5), await slice(5));
    assert.notEqual(await slice(5), await slice(6));
  });

  test('--prompt-salt: a whole number from 0 to 2^32 - 1, absent until the run draws one', () => {
    assert.equal(parseRunPlan({ promptSalt: '123' }).promptSalt, 123);
    assert.equal(parseRunPlan({}).promptSalt, undefined);
    for (const bad of ['-1', '1.5', '4294967296', 'x']) {
      assert.throws(
        () => parseRunPlan({ promptSalt: bad }),
        (err) => err instanceof PlanError && /--prompt-salt/.test(err.message),
        bad,
      );
    }
    const drawn = new Set(Array.from({ length: 32 }, randomPromptSalt));
    assert.ok(drawn.size > 30 && !drawn.has(0));
  });
});
