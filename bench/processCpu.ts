import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const CLOCK_TICKS_PER_S = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }));

/**
 * The fields of /proc/<pid>/stat after the command name (which may hold spaces), so that
 * index 0 is field 3 of proc(5) (state): ppid is [1], utime/stime [11]/[12], the reaped
 * children's cutime/cstime [13]/[14]. Undefined once the process is gone (or without /proc).
 */
export function procStat(pid: number | 'self'): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/**
 * user + system CPU seconds of a live process, all its threads (/proc/<pid>/stat, in clock
 * ticks); undefined once it is gone.
 */
export function processCpuS(pid: number): number | undefined {
  const fields = procStat(pid);
  return fields && (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_S;
}

/** CPU seconds of this process's reaped descendants, and theirs (cutime + cstime). */
export function reapedChildrenCpuS(): number {
  const fields = procStat('self');
  return fields ? (Number(fields[13]) + Number(fields[14])) / CLOCK_TICKS_PER_S : 0;
}
