import { readFile } from 'node:fs/promises';
import type { MetricSample } from './prometheus.js';

/** Series of the process source: resident set now, and its high-water mark since the start. */
export const PROCESS_RSS = 'process:rss_bytes';
export const PROCESS_PEAK_RSS = 'process:peak_rss_bytes';

/**
 * Reads a Linux `/proc/<pid>/status`: `VmRSS` (resident set size now) and `VmHWM` (its peak
 * since the process started), both in kB (1024 bytes), as bytes. Throws when neither line is
 * there (a kernel thread or a zombie has none).
 */
export function parseProcStatus(text: string): MetricSample[] {
  const samples: MetricSample[] = [];
  for (const line of text.split('\n')) {
    const match = /^(VmRSS|VmHWM):\s+(\d+)\s*kB/.exec(line);
    if (!match) continue;
    samples.push({
      name: match[1] === 'VmRSS' ? PROCESS_RSS : PROCESS_PEAK_RSS,
      labels: {},
      value: Number(match[2]) * 1024,
    });
  }
  if (samples.length === 0) throw new Error('no VmRSS or VmHWM line (a zombie or kernel thread?)');
  return samples;
}

/** The text of `/proc/<pid>/status`; a process that is gone is a clear error. */
export async function readProcStatus(pid: number, procRoot = '/proc'): Promise<string> {
  try {
    return await readFile(`${procRoot}/${pid}/status`, 'utf8');
  } catch (err) {
    if ((err as { code?: string }).code === 'ENOENT') {
      throw new Error(`process ${pid} is not running (no ${procRoot}/${pid}/status)`);
    }
    throw err;
  }
}
