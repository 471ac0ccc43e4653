/**
 * Every lookup by a name a user (or a file, or a server) gives finds own entries only: a GPU, a
 * statistic, an output, a dtype, a plan field, a price called `constructor`, `__proto__`,
 * `toString` or `hasOwnProperty` is "no such X", never Object.prototype's function priced,
 * run or called (a `--gpu-spec` with id `constructor` was priced $NaN and put on the front).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { parseThreshold } from '../../../src/analysis/thresholds.js';
import { parseWeightFormat } from '../../../src/memory/dtype.js';
import { findGpuPreset } from '../../../src/memory/hardware.js';
import { modelSpecFromHfConfig } from '../../../src/memory/hfConfig.js';
import { parseSlo } from '../../../src/metrics/slo.js';
import { SummaryBuilder } from '../../../src/metrics/summary.js';
import { severityOf } from '../../../src/metrics/warnings.js';
import { parseRunPlan } from '../../../src/plan/runPlan.js';
import { size } from '../../../src/session/size.js';
import { priceOf, pricesFromValue } from '../../../src/session/sizePrices.js';
import { loadOutputs } from '../../../src/session/userOutputs.js';
import { resolveEngine } from '../../../src/sim/options.js';
import { simulatorOptionProblems } from '../../../src/sim/simulatorOptions.js';
import { sessionRecord } from '../../helpers/sessionRecords.js';

const NAMES = ['constructor', '__proto__', 'toString', 'hasOwnProperty'];

/** `{ [name]: value }` with `name` an own key, `__proto__` included (as JSON.parse and YAML make it). */
const own = (name: string, value: unknown): Record<string, unknown> =>
  JSON.parse(JSON.stringify({ x: value }).replace('"x"', JSON.stringify(name)));

/** The message of what `f` throws (or rejects with); fails where it returns. */
async function thrown(f: () => unknown): Promise<Error> {
  try {
    await f();
  } catch (err) {
    return err as Error;
  }
  assert.fail('expected an error');
}

const LLAMA_CONFIG = {
  model_type: 'llama',
  hidden_size: 4096,
  num_hidden_layers: 32,
  num_attention_heads: 32,
  num_key_value_heads: 8,
  intermediate_size: 14336,
  vocab_size: 128256,
  max_position_embeddings: 8192,
};

const CASES: [string, (name: string) => unknown][] = [
  ['a GPU preset', (n) => assert.equal(findGpuPreset(n), undefined)],
  [
    'an engine on a GPU of that name',
    (n) => {
      const r = resolveEngine({ model: 'llama-3-8b', gpu: n });
      assert.equal(r.engine, undefined);
      assert.match(r.problems.join(), /is not a preset/);
    },
  ],
  ['a weight format', (n) => assert.equal(parseWeightFormat(n), undefined)],
  [
    'a --dtype',
    (n) => {
      const r = resolveEngine({ model: 'llama-3-8b', gpu: 'h100', dtype: n });
      assert.match(r.problems.join(), /is not a weight format/);
    },
  ],
  [
    "a threshold's statistic",
    async (n) =>
      assert.match(
        (await thrown(() => parseThreshold(`ttft.${n}<5`))).message,
        /unknown statistic/,
      ),
  ],
  [
    'an SLO metric',
    async (n) =>
      assert.match(
        (await thrown(() => parseSlo(`${n}<5`))).message,
        /unknown SLO metric|cannot read/,
      ),
  ],
  [
    'an --export output',
    async (n) => {
      const err = await thrown(() => loadOutputs([n]));
      assert.equal(err.constructor.name, 'UsageError');
      assert.match(err.message, /no such output/);
    },
  ],
  [
    "a config.json's torch_dtype",
    (n) => {
      const r = modelSpecFromHfConfig({ ...LLAMA_CONFIG, torch_dtype: n }, 'config.json');
      assert.equal(r.weights, undefined);
      assert.match(r.warnings.join(), /torch_dtype .* is not one this reader maps/);
    },
  ],
  [
    "a config.json's model_type",
    (n) => {
      const r = modelSpecFromHfConfig({ ...LLAMA_CONFIG, model_type: n }, 'config.json');
      assert.equal(typeof r.spec.tiedEmbeddings, 'boolean');
    },
  ],
  [
    'a run option (plan, library)',
    async (n) =>
      assert.match(
        (await thrown(() => parseRunPlan({ ...own(n, '5'), url: 'http://127.0.0.1:1' }))).message,
        new RegExp(`${n} is not an option of run`),
      ),
  ],
  [
    'an --api-key-env variable',
    async (n) =>
      assert.match(
        (
          await thrown(() =>
            parseRunPlan({ url: 'http://127.0.0.1:1', apiKeyEnv: n }, { ...process.env }),
          )
        ).message,
        /--api-key-env names .*, which is not set in the environment/,
      ),
  ],
  [
    'a simulator option',
    (n) => assert.match(simulatorOptionProblems(own(n, 5)).join(), /is not a simulator option/),
  ],
  [
    "a records file's outputTokensSource",
    (n) => {
      const builder = new SummaryBuilder({ load: { mode: 'closed', concurrency: 1 } });
      for (let i = 0; i < 2; i++) {
        const r = sessionRecord({
          sessionId: 1,
          index: i,
          turn: i + 1,
          sentAt: i * 1000,
          ttft: 10,
          e2e: 100,
        });
        builder.add({ ...r, outputTokensSource: n as never });
      }
      const sources = builder.build().streaming.outputTokensSource;
      // Counted as its own name (`__proto__` cannot be a plain object's own key: dropped).
      if (n !== '__proto__') assert.equal(sources[n], 2);
      assert.ok(Object.values(sources).every((v) => typeof v === 'number'));
    },
  ],
  ['a saved warning code', (n) => assert.equal(severityOf({ code: n } as never), 'warning')],
  [
    'a price',
    (n) => {
      assert.equal(priceOf({ h100: 2 }, n), undefined);
      assert.equal(priceOf(pricesFromValue(own(n, 3), 'prices.yaml'), n), 3);
    },
  ],
];

describe('names that are Object.prototype keys are no such thing', () => {
  for (const [what, check] of CASES) {
    test(what, async () => {
      for (const name of NAMES) {
        try {
          await check(name);
        } catch (err) {
          throw new Error(`${what} named ${name}: ${(err as Error).message}`);
        }
      }
    });
  }

  test('size: a --gpu-spec with id constructor is unpriced, or priced by its own entry', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ig-own-keys-'));
    after(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'evil.yaml');
    writeFileSync(
      file,
      'id: constructor\nname: Evil\nfamily: hopper\nmemoryGB: 80\nbandwidthTBps: 3.35\npeakTflops: { bf16: 989 }\ninterconnect: { kind: nvlink, busGBps: 400, latencyUs: 0.5 }\n',
    );
    const options = (prices: Record<string, number>) => ({
      model: 'llama-3-8b',
      traffic: { mode: 'rate' as const, rate: 2 },
      scenario: {
        name: 'test',
        input: { kind: 'fixed' as const, value: 128 },
        output: { kind: 'fixed' as const, value: 32 },
      },
      slo: 'ttft.p99<2000',
      space: {
        gpus: [{ gpu: 'h100' }, { gpuSpec: file }],
        tps: [1],
        dtypes: [undefined],
        kvCacheDtypes: [undefined],
        maxNumSeqs: [undefined],
        personalities: ['vllm-v1'],
      },
      prices,
      requests: 40,
    });
    const unpriced = await size(options({ h100: 2 }));
    const evil = unpriced.deployments.find((d) => d.gpu === file);
    assert.equal(evil?.feasible, true);
    assert.equal(evil?.costPerHour, undefined);
    assert.equal(evil?.pareto, false);
    assert.match(unpriced.warnings.join(), /no price for .*evil\.yaml/);
    const priced = await size(
      options({ h100: 2, ...own('constructor', 3) } as Record<string, number>),
    );
    assert.equal(priced.deployments.find((d) => d.gpu === file)?.costPerHour, 3);
  });
});
