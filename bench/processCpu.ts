import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const CLOCK_TICKS_PER_S = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }));

/**
 * user + system CPU seconds of a live process, all its threads (/proc/<pid>/stat, in clock
 * ticks); undefined once it is gone.
 */
export function processCpuS(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces) start after the last ')': fields 14
    // and 15 of proc(5), utime and stime, counted from field 3 (state).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_S;
  } catch {
    return undefined;
  }
}
