/**
 * This machine's CPU as a `--gpu-spec` file for the llamacpp personality:
 *
 *   node --import tsx tools/llama/cpu-spec.ts --threads 1 [--out cpu.yaml]
 *
 * The clock, core count, instruction set and memory come from /proc/cpuinfo and /proc/meminfo
 * (the clock from cpufreq's highest where, as on Arm, cpuinfo gives none);
 * the memory bandwidth is measured: `threads` workers each copy a 128 MiB buffer into another
 * (Buffer.copy is libc's memmove, the same vector loads and streaming stores as any tuned copy),
 * five times, and the best round's bytes read + written per second is the figure (about 0.3 s).
 * The peaks are nominal (src/memory/cpu.ts says how).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import { type CpuDescription, cpuSpecFile, parseCpuInfo } from '../../src/memory/cpu.js';

const COPY_BYTES = 128 * 2 ** 20;
const ROUNDS = 5;

/**
 * One worker's copy loop, as plain JavaScript (a worker does not inherit tsx's loader): touches
 * both buffers, says ready, then copies once per message and says how long it took.
 */
const COPY_WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const src = Buffer.alloc(workerData.bytes, 1);
const dst = Buffer.alloc(workerData.bytes);
src.copy(dst);
parentPort.on('message', () => { src.copy(dst); parentPort.postMessage('done'); });
parentPort.postMessage('ready');
`;

/**
 * Copy bandwidth with `threads` copies at once, bytes/s: each round starts every worker
 * together and lasts until the slowest ends; the best of ROUNDS rounds.
 */
export async function measureCopyBandwidth(threads: number): Promise<number> {
  const workers = Array.from(
    { length: threads },
    () => new Worker(COPY_WORKER, { eval: true, workerData: { bytes: COPY_BYTES } }),
  );
  try {
    await Promise.all(
      workers.map((w) => new Promise<void>((resolve) => w.once('message', () => resolve()))),
    );
    let best = Number.POSITIVE_INFINITY;
    for (let round = 0; round < ROUNDS; round++) {
      const t0 = performance.now();
      await Promise.all(
        workers.map(
          (w) =>
            new Promise<void>((resolve) => {
              w.once('message', () => resolve());
              w.postMessage(round);
            }),
        ),
      );
      best = Math.min(best, (performance.now() - t0) / 1000);
    }
    return (2 * COPY_BYTES * threads) / best;
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

/** This machine described for `threads` compute threads (llama.cpp's --threads). */
export async function localCpu(threads: number): Promise<CpuDescription> {
  const info = parseCpuInfo(
    readFileSync('/proc/cpuinfo', 'utf8'),
    readFileSync('/proc/meminfo', 'utf8'),
  );
  // Arm kernels list no "cpu MHz": cpufreq's highest clock then (kHz).
  let mhz = info.mhz;
  if (!Number.isFinite(mhz)) {
    try {
      mhz =
        Number(readFileSync('/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq', 'utf8')) /
        1000;
    } catch {
      // neither: refused below
    }
  }
  if (!(mhz > 0)) {
    throw new Error(
      'neither /proc/cpuinfo ("cpu MHz") nor cpufreq gives the clock: describe this CPU by hand (--gpu-spec)',
    );
  }
  return {
    name: info.name,
    threads,
    ghz: mhz / 1000,
    flags: info.flags,
    memoryBytes: info.memoryBytes,
    bandwidthBytesPerS: await measureCopyBandwidth(threads),
  };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1])) {
  const { values } = parseArgs({
    options: { threads: { type: 'string', default: '1' }, out: { type: 'string' } },
  });
  const threads = Number(values.threads);
  if (!(Number.isInteger(threads) && threads >= 1)) throw new Error('--threads must be >= 1');
  const text = cpuSpecFile(await localCpu(threads));
  if (values.out) writeFileSync(values.out, text);
  else process.stdout.write(text);
}
