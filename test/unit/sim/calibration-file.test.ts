/**
 * calibration.json under hostile input (issue 48): the whole file checked against its schema,
 * values no engine can have refused with the field named, in the file and as flags, and no
 * error that shows the bytes of a file the calibration names.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import fc from 'fast-check';
import {
  type CalibrationFile,
  CalibrationFileError,
  calibrationFromValue,
  readCalibrationFile,
} from '../../../src/sim/calibrationFile.js';
import { ENGINE_LIMITS } from '../../../src/sim/engineLimits.js';
import { engineSettingsFromFlags, resolveEngine } from '../../../src/sim/options.js';
import { parseSimulatorArgs, simulatorOptionProblems } from '../../../src/sim/simulatorOptions.js';
import { L40S_CALIBRATION } from '../../helpers/calibration.js';
import { FUZZ_SEED } from '../../helpers/fuzzProperties.js';

const metrics = { ttftMs: 40, tpotMs: 12, outputTokPerS: 900 };
const fittedValue = (value: number) => ({
  value,
  stdErr: value * 0.02,
  low: value * 0.98,
  high: value * 1.02,
  before: value,
});

/** A file as calibrate writes it (sim/calibrate.ts buildCalibrationFile). */
const VALID: CalibrationFile = {
  ...L40S_CALIBRATION,
  fitted: { mbu: fittedValue(0.7), mfu: fittedValue(0.5), stepOverheadMs: fittedValue(2.5) },
  held: { perSeqOverheadUs: 13, frontendLatencyMs: 20 },
  steps: {
    sources: ['probe'],
    points: [
      { tokens: 16, ms: 4, requests: 3 },
      { tokens: 512, ms: 30, requests: 3 },
    ],
    frontendMs: 1.5,
  },
  points: [
    {
      label: 'c1',
      source: 'runs/c1',
      load: 'concurrency 1',
      requests: 40,
      measured: metrics,
      predicted: metrics,
      error: { ttftMs: 0.01, tpotMs: -0.02, outputTokPerS: 0.01 },
    },
  ],
  medianAbsError: { fit: { ttftMs: 0.01, tpotMs: 0.02, outputTokPerS: 0.01 } },
  simulations: 12,
};

const dir = mkdtempSync(join(tmpdir(), 'ig-calibration-file-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let written = 0;
const fileOf = (value: unknown): string => {
  const path = join(dir, `c${written++}.json`);
  writeFileSync(path, typeof value === 'string' ? value : JSON.stringify(value));
  return path;
};

/** `VALID` with the value at `path` set (or deleted when `value` is undefined). */
function withField(path: string[], value: unknown): unknown {
  const copy = structuredClone(VALID) as unknown as Record<string, unknown>;
  let at = copy;
  for (const key of path.slice(0, -1)) at = at[key] as Record<string, unknown>;
  const last = path[path.length - 1];
  if (value === undefined) delete at[last];
  else at[last] = value;
  return copy;
}

const refusal = (value: unknown): CalibrationFileError => {
  try {
    calibrationFromValue(value, 'cal.json');
  } catch (err) {
    assert.ok(err instanceof CalibrationFileError, `not a CalibrationFileError: ${String(err)}`);
    return err;
  }
  assert.fail('accepted');
};

describe('calibration file: the schema', () => {
  test("size --verify's history is optional, and an entry this version cannot read is kept", () => {
    const history = [
      { at: '2026-12-06T00:00:00.000Z', inside: true, dir: 'sizing/verify' },
      { future: 1 },
    ];
    const file = readCalibrationFile(fileOf(withField(['verifications'], history)));
    assert.deepEqual(file.verifications, history);
    assert.equal(readCalibrationFile(fileOf(VALID)).verifications, undefined);
    assert.match(refusal(withField(['verifications'], 'none')).message, /verifications/);
  });

  test('a file as calibrate writes it loads', () => {
    assert.deepEqual(readCalibrationFile(fileOf(VALID)), VALID);
    const r = resolveEngine({ calibration: fileOf(VALID) });
    assert.deepEqual(r.problems, []);
    assert.equal(r.engine?.efficiency?.stepOverheadS, 2.5e-3);
  });

  test('a missing engine.args, fitted: null and wrong types name the field, exit-2 style', () => {
    const cases: [unknown, RegExp][] = [
      [withField(['engine', 'args'], undefined), /cal\.json: engine\.args: is missing/],
      [withField(['fitted'], null), /cal\.json: fitted: /],
      [withField(['engine'], 'vllm'), /cal\.json: engine: /],
      [withField(['engine', 'tp'], 0), /cal\.json: engine\.tp: /],
      [withField(['held', 'mbu'], '0.5'), /cal\.json: held\.mbu: must be a number/],
      [withField(['fitted', 'mbu', 'value'], undefined), /fitted\.mbu\.value: is missing/],
      [withField(['held', 'constructor'], 1), /cal\.json: held: has a field that is not/],
      [withField(['steps', 'points'], [{ tokens: 1, ms: 1, requests: 1 }]), /steps\.points: /],
      [withField(['points'], [null]), /cal\.json: points\.0: /],
      [null, /cal\.json: is not a calibration file/],
      [[1, 2], /cal\.json: is not a calibration file/],
    ];
    for (const [value, message] of cases) assert.match(refusal(value).message, message);
    const r = resolveEngine({ calibration: fileOf(withField(['engine', 'args'], undefined)) });
    assert.equal(r.engine, undefined);
    assert.match(r.problems.join('\n'), /--calibration: .*engine\.args: is missing/);
  });

  test('values no engine can have are refused, naming the field and its range', () => {
    const cases: [string[], unknown, RegExp][] = [
      [
        ['fitted', 'stepOverheadMs', 'value'],
        1e308,
        /fitted\.stepOverheadMs\.value: must be at most 10000/,
      ],
      [['held', 'perSeqOverheadUs'], -1, /held\.perSeqOverheadUs: must be at least 0/],
      [['fitted', 'mbu', 'value'], 1.5, /fitted\.mbu\.value: must be at most 1/],
      [['fitted', 'mfu', 'value'], 0, /fitted\.mfu\.value: must be at least 0\.01/],
      [['steps', 'frontendMs'], 1e9, /steps\.frontendMs: must be at most/],
      [['steps', 'points', '1', 'ms'], 0, /steps\.points\.1\.ms: must be above 0/],
    ];
    for (const [path, value, message] of cases) {
      assert.match(refusal(withField(path, value)).message, message);
    }
  });

  test('a folder, a device or a missing file is refused by name, never read for ever', () => {
    for (const [path, why] of [
      [dir, /not a regular file/],
      ['/dev/zero', /not a regular file/],
      [join(dir, 'none.json'), /no such file/],
    ] as const) {
      assert.throws(
        () => readCalibrationFile(path),
        (err: Error) => {
          assert.ok(err instanceof CalibrationFileError);
          assert.match(err.message, why);
          return err.message.startsWith(path);
        },
      );
    }
  });

  test('never shows the file: a JSON error names the line, not the bytes', () => {
    const path = fileOf('{"format": "infergauge-calibration",\n  SECRET-TOKEN-1234 }');
    assert.throws(
      () => readCalibrationFile(path),
      (err: Error) =>
        err instanceof CalibrationFileError &&
        !err.message.includes('SECRET') &&
        err.message.includes(path),
    );
  });
});

describe('calibration file: what it names', () => {
  test('a --model it names is read as config.json without printing a byte of it', () => {
    const secret = join(dir, 'shadow');
    writeFileSync(secret, 'root:$6$SECRETHASH:19000:0:99999:7:::\n');
    const quoted = join(dir, 'quoted.json');
    writeFileSync(quoted, JSON.stringify('root:$6$SECRETHASH:19000'));
    const hidden = join(dir, 'hidden.json');
    writeFileSync(hidden, JSON.stringify({ num_hidden_layers: 'SECRET password here' }));
    for (const model of [secret, quoted, hidden]) {
      const file = withField(['engine', 'args'], ['--model', model, '--gpu', 'l40s']);
      const r = resolveEngine({ calibration: fileOf(file) });
      const text = r.problems.join('\n');
      assert.equal(r.engine, undefined);
      assert.ok(text.includes(model), text);
      assert.match(text, /--model \(named by .*'s engine\.args\)/);
      assert.doesNotMatch(text, /SECRET|root:/);
    }
  });
});

describe('engine limits: flags and options', () => {
  test('the flags refuse a step overhead of 1e308, naming the flag and its range', () => {
    const { problems } = engineSettingsFromFlags({ stepOverheadMs: '1e308' });
    assert.match(
      problems.join('\n'),
      /--step-overhead-ms must be between 0 and 10000 \(got 1e308\)/,
    );
    for (const [key, flag] of [
      ['perSeqOverheadUs', '--per-seq-overhead-us'],
      ['frontendLatencyMs', '--frontend-latency-ms'],
      ['frontendChatCpuMs', '--frontend-chat-cpu-ms'],
      ['mfuHalfTokens', '--mfu-half-tokens'],
      ['nonKvOverheadGb', '--non-kv-overhead-gb'],
    ] as const) {
      const over = String(ENGINE_LIMITS[key].max * 10);
      assert.match(engineSettingsFromFlags({ [key]: over }).problems.join('\n'), new RegExp(flag));
      assert.deepEqual(
        engineSettingsFromFlags({ [key]: String(ENGINE_LIMITS[key].max) }).problems,
        [],
      );
    }
  });

  test("a program's options are held to the same limits (startSimulator's path)", () => {
    const r = resolveEngine({ stepOverheadMs: 1e308 });
    assert.equal(r.engine, undefined);
    assert.match(r.problems.join('\n'), /--step-overhead-ms/);
    assert.match(
      parseSimulatorArgs(['--step-overhead-ms', '1e308']).problems.join('\n'),
      /--step-overhead-ms/,
    );
    // The scripted engine's timing and the answer knobs too, by flag and by option.
    const scripted = parseSimulatorArgs(['--engine', 'scripted', '--itl-ms', '1e308']);
    assert.match(scripted.problems.join('\n'), /--itl-ms/);
    assert.match(
      simulatorOptionProblems({ engine: 'scripted', timing: { ttftBaseMs: 1e308 } }).join('\n'),
      /--ttft-base-ms/,
    );
    assert.deepEqual(simulatorOptionProblems({ answers: { parallelToolCalls: 4 } }), []);
  });
});

describe('calibration file: fuzzed', () => {
  const paths: string[][] = [];
  const walk = (v: unknown, at: string[]) => {
    paths.push(at);
    if (typeof v === 'object' && v !== null) {
      for (const [k, child] of Object.entries(v)) walk(child, [...at, k]);
    }
  };
  walk(VALID, []);
  const fieldPaths = paths.filter((p) => p.length > 0);
  const hostile = fc.oneof(
    fc.jsonValue(),
    fc.constantFrom(null, 0, -1, 1e308, -1e308, 5e-324, '', 'NaN', [], {}),
  );

  /** Loads or is refused naming a field; what loads applies to an engine without a throw. */
  const holds = (value: unknown): boolean => {
    let file: CalibrationFile | undefined;
    try {
      file = calibrationFromValue(value, 'cal.json');
    } catch (err) {
      if (!(err instanceof CalibrationFileError)) throw err;
      assert.match(err.message, /^cal\.json: /);
      return true;
    }
    const r = resolveEngine({ calibration: fileOf(file), gpu: 'l40s' });
    for (const v of Object.values(r.engine?.efficiency ?? {})) assert.ok(Number.isFinite(v));
    return true;
  };

  test('any mutation of a valid file loads or is refused by field, never a TypeError', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom(...fieldPaths), fc.option(hostile, { nil: undefined })), {
          minLength: 1,
          maxLength: 4,
        }),
        (mutations) => {
          let value: unknown = structuredClone(VALID);
          for (const [path, v] of mutations) {
            const copy = value as Record<string, unknown>;
            let at: unknown = copy;
            for (const key of path.slice(0, -1)) {
              at =
                typeof at === 'object' && at !== null
                  ? (at as Record<string, unknown>)[key]
                  : undefined;
            }
            if (typeof at !== 'object' || at === null) continue;
            const last = path[path.length - 1];
            if (v === undefined) delete (at as Record<string, unknown>)[last];
            else (at as Record<string, unknown>)[last] = v;
            value = copy;
          }
          return holds(value);
        },
      ),
      { seed: FUZZ_SEED, numRuns: 300 },
    );
  });

  test('any JSON value, and any text as a file, loads or is refused by name', () => {
    fc.assert(fc.property(fc.jsonValue(), holds), { seed: FUZZ_SEED, numRuns: 200 });
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (text) => {
        try {
          readCalibrationFile(fileOf(text));
        } catch (err) {
          assert.ok(err instanceof CalibrationFileError, String(err));
        }
        return true;
      }),
      { seed: FUZZ_SEED, numRuns: 100 },
    );
  });
});
