import { readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { z as Zod } from 'zod';
import { GPU_FAMILIES, type GpuSpec, INTERCONNECT_KINDS, type Interconnect } from './hardware.js';

/**
 * `--gpu-spec FILE`: a GPU the presets lack, in YAML or JSON, in the units datasheets use.
 *
 *   name: RTX 6000 Ada
 *   family: ada              # optional: ampere, ada, hopper, blackwell, cdna3; cpu for a host
 *                            # CPU (tools/llama/cpu-spec.ts writes one, memory/cpu.ts)
 *   memoryGiB: 47.99         # or memoryGB (decimal); the device-reported total if known
 *   bandwidthTBps: 0.96
 *   peakTflops: { bf16: 364.2, fp8: 728.5 }   # dense, no sparsity
 *   interconnect: { kind: pcie, busGBps: 20, latencyUs: 1 }
 */

/** The largest spec file read: a hand-written spec is a few hundred bytes. */
const GPU_SPEC_MAX_BYTES = 64 * 1024;

/**
 * YAML and zod are required at first use (both ship CommonJS), so that commands given no
 * --gpu-spec load neither.
 */
const require = createRequire(import.meta.url);

/** The spec file's schema, built at first use. */
function specSchema() {
  const { z } = require('zod') as { z: typeof Zod };
  /**
   * A datasheet figure: a finite number in [min, max]. The bounds are what no device has (each
   * use says why), so that a typo (an exponent, a unit off by 1e6) is named here rather than run
   * as a GPU whose steps take no time or forever.
   */
  const figure = (what: string, min: number, max: number) =>
    z
      .number({ error: `must be a finite number (${what})` })
      .positive({ error: `must be above 0 (${what})` })
      .min(min, { error: `must be at least ${min} (${what})` })
      .max(max, { error: `must be at most ${max} (${what})` });
  // Memory: a quarter GB is below any accelerator's since 2010 (and any model's weights worth
  // serving); 100,000 GB is past the largest host described as a device (a few TB today).
  const memory = (what: string) => figure(what, 0.25, 100_000);
  // Peaks: 1 GFLOP/s is below one CPU core (a one-thread SSE host is ~8); 100 PFLOP/s dense is
  // several times the largest part's fp4 peak (GB300, ~15 PFLOP/s).
  const peak = (what: string) => figure(what, 0.001, 100_000);
  return z
    .object(
      {
        id: z.string().min(1).optional(),
        name: z.string({ error: 'must be text, e.g. "RTX 6000 Ada"' }).min(1),
        family: z
          .enum(GPU_FAMILIES, { error: `must be one of ${GPU_FAMILIES.join(', ')}` })
          .optional(),
        memoryGB: memory('decimal GB, e.g. 48').optional(),
        memoryGiB: memory('GiB as the device reports it, e.g. 44.99').optional(),
        // 0.1 GB/s is below a Raspberry Pi's DRAM; 100 TB/s over ten times the fastest HBM (8 TB/s).
        bandwidthTBps: figure('peak memory bandwidth in TB/s, e.g. 0.96', 0.0001, 100),
        peakTflops: z
          .object(
            {
              bf16: peak('dense bf16 tensor TFLOP/s, e.g. 362'),
              fp8: peak('dense fp8 tensor TFLOP/s').optional(),
              int8: peak('dense int8 tensor TOP/s').optional(),
              fp4: peak('dense fp4 tensor TFLOP/s').optional(),
            },
            { error: 'must be a mapping of dense peaks, e.g. { bf16: 362, fp8: 733 }' },
          )
          .strict(),
        interconnect: z
          .object(
            {
              kind: z.enum(INTERCONNECT_KINDS, {
                error: `must be one of ${INTERCONNECT_KINDS.join(', ')}`,
              }),
              name: z.string().min(1).optional(),
              // 0.1 GB/s is below gigabit Ethernet; 100,000 GB/s past fifty NVLink 5 ports (1.8 TB/s).
              busGBps: figure(
                "NCCL's all-reduce bus bandwidth per GPU in GB/s, e.g. 20",
                0.1,
                100_000,
              ),
              // A ring step is a hop between neighbours: 10 ns is under one NVLink hop (~0.5 us),
              // 100 ms over a round trip across continents.
              latencyUs: figure('latency of one ring step in microseconds, e.g. 1', 0.01, 100_000),
              peerAccess: z.boolean({ error: 'must be true or false' }).optional(),
            },
            { error: 'must be a mapping, e.g. { kind: pcie, busGBps: 20, latencyUs: 1 }' },
          )
          .strict(),
      },
      {
        error:
          'must be a mapping of name, memoryGB or memoryGiB, bandwidthTBps, peakTflops and interconnect',
      },
    )
    .strict()
    .refine((s) => (s.memoryGB === undefined) !== (s.memoryGiB === undefined), {
      error: 'give the memory as one of memoryGB or memoryGiB',
      path: ['memoryGB'],
    });
}
let gpuSpecSchema: ReturnType<typeof specSchema> | undefined;
const schema = () => {
  gpuSpecSchema ??= specSchema();
  return gpuSpecSchema;
};

type GpuSpecFile = Zod.infer<ReturnType<typeof specSchema>>;

/** Reads a GPU described in a YAML or JSON file (`--gpu-spec`); throws naming each bad field. */
export function loadGpuSpec(path: string): GpuSpec {
  let text: string;
  try {
    if (statSync(path).size > GPU_SPEC_MAX_BYTES) {
      throw new Error(`${path}: too large for a GPU spec (at most 64 KiB); is it the right file?`);
    }
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === undefined) throw err;
    throw new Error(
      code === 'ENOENT' ? `${path}: no such file` : `${path}: cannot read it (${code})`,
    );
  }
  // JSON is YAML, so one parser reads both.
  const { parseDocument } = require('yaml') as typeof import('yaml');
  const doc = parseDocument(text);
  if (doc.errors.length > 0) {
    throw new Error(`${path}: not valid YAML or JSON: ${doc.errors[0].message.split('\n')[0]}`);
  }
  return gpuSpecFromValue(doc.toJS(), path);
}

/** Validates a parsed spec (pure: tests call it with objects) and converts it to a GpuSpec. */
export function gpuSpecFromValue(value: unknown, path: string): GpuSpec {
  const parsed = schema().safeParse(value, { reportInput: true });
  if (!parsed.success) {
    const problems = parsed.error.issues.flatMap((issue) => {
      const field = issue.path.join('.');
      if (issue.code === 'unrecognized_keys') {
        return issue.keys.map((k) => {
          const near = knownFields(field).find((f) => f.toLowerCase() === k.toLowerCase());
          return `unknown field "${field ? `${field}.${k}` : k}"${near ? ` (did you mean "${near}"?)` : ''}`;
        });
      }
      if (issue.code === 'invalid_type' && issue.input === undefined) {
        return [`${field}: missing`];
      }
      return [`${field || '(top level)'}: ${issue.message}`];
    });
    throw new Error(`${path}: ${problems.join('; ')}`);
  }
  return toGpuSpec(parsed.data, path);
}

/** The fields a spec may have at one level (for a typo's suggestion). */
function knownFields(level: string): string[] {
  const shape = schema().shape;
  if (level === 'peakTflops' || level === 'interconnect') return Object.keys(shape[level].shape);
  return Object.keys(shape);
}

function toGpuSpec(s: GpuSpecFile, path: string): GpuSpec {
  const memoryBytes =
    s.memoryGiB !== undefined ? s.memoryGiB * 1024 ** 3 : (s.memoryGB as number) * 1e9;
  const T = 1e12;
  const peakFlops: GpuSpec['peakFlops'] = { bf16: s.peakTflops.bf16 * T };
  for (const format of ['fp8', 'int8', 'fp4'] as const) {
    const tflops = s.peakTflops[format];
    if (tflops !== undefined) peakFlops[format] = tflops * T;
  }
  const link = s.interconnect;
  const interconnect: Interconnect = {
    kind: link.kind,
    name: link.name ?? `${link.kind} (${link.busGBps} GB/s bus)`,
    busBytesPerS: link.busGBps * 1e9,
    latencyS: link.latencyUs * 1e-6,
    ...(link.peerAccess !== undefined ? { peerAccess: link.peerAccess } : {}),
  };
  return {
    id: s.id ?? path,
    name: s.name,
    ...(s.family ? { family: s.family } : {}),
    memoryGB: Math.round(memoryBytes / 1e9),
    memoryBytes: Math.round(memoryBytes),
    bandwidthBytesPerS: s.bandwidthTBps * T,
    peakFlops,
    interconnect,
  };
}
