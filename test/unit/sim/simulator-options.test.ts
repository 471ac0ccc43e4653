/**
 * The simulator's typed options: one reading of `infergauge sim`'s flags into them (words or
 * commander's values alike), and the same engine whether a program, the command line or the
 * child process of `infergauge run` starts it.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { InfergaugeError, UsageError } from '../../../src/errors.js';
import { findGpuPreset } from '../../../src/memory/hardware.js';
import { findModelPreset } from '../../../src/memory/model.js';
import { spawnSimulator } from '../../../src/session/simulator.js';
import {
  engineFlagArgs,
  engineFromFlags,
  engineSettingsFromArgs,
  resolveEngine,
} from '../../../src/sim/options.js';
import { startSimulator } from '../../../src/sim/simulator.js';
import {
  parseSimulatorArgs,
  type SimulatorOptions,
  simulatorOptionsFromFlags,
} from '../../../src/sim/simulatorOptions.js';

describe('reading the flags', () => {
  test('words and commander values read into the same typed options', () => {
    const words = parseSimulatorArgs([
      '--model',
      'llama-3-70b',
      '--gpu',
      'h200',
      '--tp',
      '2',
      '--enable-prefix-caching',
      '--no-chunked-prefill',
      '--time-scale',
      '0.5',
      '--reasoning',
      'always',
      '--answer-seed',
      '7',
      '--itl-ms',
      '5',
      '--port',
      '0',
    ]);
    assert.deepEqual(words.problems, []);
    assert.deepEqual(words.options, {
      model: 'llama-3-70b',
      gpu: 'h200',
      tp: 2,
      enablePrefixCaching: true,
      chunkedPrefill: false,
      timeScale: 0.5,
      answers: { reasoning: 'always', seed: 7 },
      timing: { itlMs: 5 },
      port: 0,
    });
    const commander = simulatorOptionsFromFlags({
      model: 'llama-3-70b',
      gpu: 'h200',
      tp: '2',
      enablePrefixCaching: true,
      chunkedPrefill: false,
      timeScale: 0.5,
      reasoning: 'always',
      answerSeed: 7,
      itlMs: 5,
      port: 0,
    });
    assert.deepEqual(commander, words);
  });

  test('every bad value is a problem naming its flag; unknown flags too', () => {
    const { problems } = parseSimulatorArgs([
      '--tp',
      '0x2',
      '--itl-ms',
      '-1',
      '--engine',
      'gpu',
      '--port',
      '65536',
    ]);
    assert.deepEqual(problems, [
      '--tp must be a whole number (got "0x2")',
      '--port must be a whole number >= 0 and <= 65535 (got 65536)',
      '--engine gpu is not one; choose physical or scripted',
      '--itl-ms must be a number >= 0 and <= 60000 (got -1)',
    ]);
    assert.match(parseSimulatorArgs(['--gpus', 'h100']).problems[0] as string, /--gpus/);
  });

  test('--engine-version: a vLLM or SGLang release, refused elsewhere and when it is no release', () => {
    const ok = engineFromFlags('llama-3-8b', { engineVersion: 'v0.14.1' });
    assert.deepEqual(ok.problems, []);
    assert.equal(ok.engine?.engineVersion, 'v0.14.1');
    assert.deepEqual(engineSettingsFromArgs(engineFlagArgs({ engineVersion: '0.14.1' })), {
      engineVersion: '0.14.1',
    });
    assert.match(
      engineFromFlags('llama-3-8b', { engineVersion: 'latest' }).problems[0] as string,
      /--engine-version latest is not a release; give one as 0.11.0/,
    );
    assert.match(
      engineFromFlags('llama-3-8b', { engineVersion: '2.1.0', enginePersonality: 'tgi' })
        .problems[0] as string,
      /--engine-version is vllm-v1's, vllm-v0's and sglang's setting/,
    );
    // sglang takes one for its scheduler loop (`sglangOverlap`).
    const sglang = engineFromFlags('llama-3-8b', {
      engineVersion: '0.3.0',
      enginePersonality: 'sglang',
    });
    assert.deepEqual(sglang.problems, []);
    assert.equal(sglang.engine?.engineVersion, '0.3.0');
    // vllm-v0 takes one for its validated range.
    const v0 = engineFromFlags('llama-3-8b', {
      engineVersion: '0.6.2',
      enginePersonality: 'vllm-v0',
    });
    assert.deepEqual(v0.problems, []);
    assert.equal(v0.engine?.engineVersion, '0.6.2');
  });

  test('engineFromFlags is the flags read, then resolveEngine of the typed settings', () => {
    const flags = { gpu: 'a100-80', tp: '2', dtype: 'fp8', maxNumSeqs: '128', mbu: '0.7' };
    const fromFlags = engineFromFlags('llama-3-8b', flags);
    const typed = resolveEngine({
      model: 'llama-3-8b',
      gpu: 'a100-80',
      tp: 2,
      dtype: 'fp8',
      maxNumSeqs: 128,
      mbu: 0.7,
    });
    assert.deepEqual(fromFlags.problems, []);
    assert.deepEqual(typed.engine, fromFlags.engine);
    // Specs instead of preset ids: the same engine.
    const specs = resolveEngine({
      model: findModelPreset('llama-3-8b'),
      gpu: findGpuPreset('a100-80'),
      tp: 2,
      dtype: { dtype: 'fp8' },
      maxNumSeqs: 128,
      mbu: 0.7,
    });
    assert.deepEqual(specs.engine, fromFlags.engine);
  });

  test('the prefix cache follows the engine unless a switch says otherwise, and round-trips', () => {
    const cache = (flags: Record<string, unknown>) => {
      const r = engineFromFlags('llama-3-8b', flags);
      assert.deepEqual(r.problems, []);
      return r.engine?.prefixCaching;
    };
    assert.equal(cache({}), undefined, "the personality's default (on for vllm-v1 and sglang)");
    assert.equal(cache({ enablePrefixCaching: false }), false, '--no-enable-prefix-caching');
    assert.equal(cache({ enablePrefixCaching: true, enginePersonality: 'trtllm' }), true);
    assert.equal(cache({ disableRadixCache: true, enginePersonality: 'sglang' }), false);
    assert.match(
      engineFromFlags('llama-3-8b', { disableRadixCache: true }).problems.join(),
      /--disable-radix-cache is sglang's setting/,
    );
    // A manifest records the switch as given and reads it back.
    const args = engineFlagArgs({ enablePrefixCaching: false, chunkedPrefill: false });
    assert.deepEqual(args, ['--no-chunked-prefill', '--no-enable-prefix-caching']);
    assert.deepEqual(engineSettingsFromArgs(args), {
      chunkedPrefill: false,
      enablePrefixCaching: false,
    });
  });
});

describe('starting it', () => {
  test('in this process, from typed options; bad ones throw naming every flag', async () => {
    const sim = await startSimulator({ model: 'llama-3-8b', gpu: 'h100', maxNumSeqs: 8 });
    try {
      assert.match(sim.url, /^http:\/\/127\.0\.0\.1:\d+$/);
      assert.equal(sim.model, 'sim-llama-3-8b');
      assert.match(sim.banner, /Llama-3-8B bf16 on 1x H100/);
      const models = (await (await fetch(`${sim.url}/v1/models`)).json()) as {
        data: { id: string }[];
      };
      assert.equal(models.data[0]?.id, 'sim-llama-3-8b');
    } finally {
      await sim.stop();
    }
    await assert.rejects(startSimulator({ tp: 0, gpu: 'h900', port: 70_000 }), {
      message:
        /invalid options\n {2}- --port must be a whole number >= 0 and <= 65535 \(got 70000\)\n {2}- --tp must be between 1 and inf \(got 0\)\n {2}- --gpu h900 is not a preset/,
    });
  });

  test('what is not options is refused as an InfergaugeError naming the fix, before any socket', async () => {
    const refused = async (options: unknown, problem: RegExp) => {
      await assert.rejects(startSimulator(options as SimulatorOptions), (err: unknown) => {
        assert.ok(err instanceof InfergaugeError, String(err));
        assert.ok(err instanceof UsageError);
        assert.equal(err.code, 'IG_SIM_OPTIONS');
        assert.match(err.problems.join('\n'), problem);
        return true;
      });
    };
    // parseSimulatorArgs' answer whole: its options once went unread and the default model ran.
    await refused(
      parseSimulatorArgs(['--model', 'llama-3-70b']),
      /parseSimulatorArgs' \{ options, problems \}: check problems, then pass its options/,
    );
    await refused(
      { modle: 'llama-3-70b' },
      /"modle" is not a simulator option \(did you mean "model"\?\)/,
    );
    await refused('h100', /must be an object \(SimulatorOptions\), not a string/);
    await refused({ faults: 'bogus=1' }, /--faults: cannot read "bogus=1"/);
    await refused({ tp: 0 }, /--tp must be between 1/);
  });

  test('in a process of its own, from typed options or words', async () => {
    const typed = await spawnSimulator({
      engine: 'scripted',
      servedModelName: 'typed',
      timing: { itlMs: 1 },
    });
    const words = await spawnSimulator(['--model', 'qwen3-8b', '--gpu', 'l40s']);
    try {
      assert.notEqual(typed.pid, process.pid);
      assert.equal(typed.banner, 'scripted timing');
      const models = (await (await fetch(`${typed.url}/v1/models`)).json()) as {
        data: { id: string }[];
      };
      assert.equal(models.data[0]?.id, 'typed');
      assert.match(words.banner, /Qwen3-8B bf16 on 1x L40S/);
    } finally {
      await Promise.all([typed.stop(), words.stop()]);
    }
    await assert.rejects(spawnSimulator(['--tp', '0']), {
      message: /the built-in simulator cannot start: invalid options\n {2}- --tp must be between 1/,
    });
  });
});
