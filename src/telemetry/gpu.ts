import { execFile } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import type { MetricSample } from './prometheus.js';

/** Bytes in one MiB: nvidia-smi and DCGM report framebuffer memory in MiB. */
export const MIB = 1024 * 1024;

/** How the local GPU memory is read: a program and its arguments. */
export interface NvidiaSmiCommand {
  file: string;
  args: string[];
}

/**
 * `nvidia-smi --query-gpu=index,memory.used,memory.total,name --format=csv,noheader,nounits`:
 * the name last, where a comma in it cannot shift the numbers.
 */
export const NVIDIA_SMI: NvidiaSmiCommand = {
  file: 'nvidia-smi',
  args: ['--query-gpu=index,memory.used,memory.total,name', '--format=csv,noheader,nounits'],
};

/** Series names of the nvidia-smi source, one series per GPU (label `gpu`, nvidia-smi's index). */
export const NVIDIA_SMI_USED = 'nvidia_smi:memory_used_bytes';
export const NVIDIA_SMI_TOTAL = 'nvidia_smi:memory_total_bytes';
/** An info series (value 1) per GPU whose `name` label is the GPU's type, as DCGM's `modelName`. */
export const NVIDIA_SMI_INFO = 'nvidia_smi:gpu_info';

const COLUMNS = ['index', 'memory.used', 'memory.total', 'name'] as const;

/**
 * Reads `nvidia-smi --query-gpu=index,memory.used,memory.total[,name]` in any of its CSV forms: with
 * or without the header line (`index, memory.used [MiB], memory.total [MiB]`), with or without
 * units on the values (`71234 MiB`). Columns are taken by name from the header when there is
 * one, else in the order queried. Values are MiB (nvidia-smi has no other unit for memory) and
 * come out as bytes. A value nvidia-smi cannot give (`[N/A]`, as on GPUs that share system
 * memory) is left out; lines starting with `#` are skipped. The name, where queried, comes out
 * as one NVIDIA_SMI_INFO series per GPU (after the memory series), for the manifest's GPU type.
 */
export function parseNvidiaSmiCsv(text: string): MetricSample[] {
  const samples: MetricSample[] = [];
  const names: MetricSample[] = [];
  let order: string[] = [...COLUMNS];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line.length === 0 || line.startsWith('#')) continue;
    const cells = line.split(',').map((c) => c.trim());
    if (!/^\d/.test(cells[0] ?? '')) {
      // The header: `index, memory.used [MiB], memory.total [MiB]`.
      order = cells.map((c) => c.replace(/\s*\[.*\]$/, ''));
      continue;
    }
    const cell = (name: string) => cells[order.indexOf(name)];
    const gpu = cell('index');
    if (gpu === undefined) continue;
    const used = mib(cell('memory.used'));
    const total = mib(cell('memory.total'));
    if (used !== undefined) samples.push({ name: NVIDIA_SMI_USED, labels: { gpu }, value: used });
    if (total !== undefined) {
      samples.push({ name: NVIDIA_SMI_TOTAL, labels: { gpu }, value: total });
    }
    // The name is free text: every cell from its column on, commas and all.
    const at = order.indexOf('name');
    const name = at < 0 ? '' : cells.slice(at).join(', ').trim();
    if (name !== '' && name !== '[N/A]') {
      names.push({ name: NVIDIA_SMI_INFO, labels: { gpu, name }, value: 1 });
    }
  }
  if (samples.length === 0) throw new Error('nvidia-smi reported no GPU memory');
  return [...samples, ...names];
}

function mib(cell: string | undefined): number | undefined {
  if (cell === undefined) return undefined;
  const match = /^(\d+(?:\.\d+)?)(?:\s*MiB)?$/.exec(cell);
  return match ? Number(match[1]) * MIB : undefined;
}

/** Runs nvidia-smi (or the command given) and returns what it printed; fails after `timeoutMs`. */
export function runNvidiaSmi(command: NvidiaSmiCommand = NVIDIA_SMI, timeoutMs = 5_000) {
  return new Promise<string>((resolve, reject) => {
    execFile(command.file, command.args, { timeout: timeoutMs }, (err, stdout, stderr) => {
      if (err) {
        const detail = String(stderr).trim().split('\n')[0];
        reject(new Error(`${command.file}: ${err.message}${detail ? ` (${detail})` : ''}`));
      } else resolve(String(stdout));
    });
  });
}

/** The full path of an executable on PATH, or undefined. */
export function findOnPath(name: string, path = process.env.PATH ?? ''): string | undefined {
  const exts = process.platform === 'win32' ? ['.exe', '.cmd', ''] : [''];
  for (const dir of path.split(delimiter)) {
    if (dir.length === 0) continue;
    for (const ext of exts) {
      const candidate = join(dir, name + ext);
      try {
        accessSync(candidate, constants.X_OK);
        return candidate;
      } catch {
        // not here
      }
    }
  }
  return undefined;
}
