import { open, readFile, rename, rm, stat } from 'node:fs/promises';

/**
 * Runs `work` while this process holds the lock file `path`, so that processes which need the
 * same slow thing (a llama-server build: `npm test` starts one early, and each test file that
 * uses the server asks for it too) do it once: a second caller waits until the first is done,
 * then runs its own `work`, which finds the result and returns at once.
 *
 * The file holds the holder's pid; a lock whose holder is gone (killed mid-build) is taken over.
 * Two waiters may both see the same dead holder and both take over; the work then runs twice,
 * which costs time but not correctness (the results are written by rename).
 */
export async function withFileLock<T>(
  path: string,
  work: () => Promise<T>,
  options: { pollMs?: number; onWait?: (holderPid: number) => void } = {},
): Promise<T> {
  let told = false;
  for (;;) {
    const handle = await open(path, 'wx').catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'EEXIST') return undefined;
      throw err;
    });
    if (handle) {
      try {
        await handle.writeFile(String(process.pid));
      } finally {
        await handle.close();
      }
      try {
        return await work();
      } finally {
        await rm(path, { force: true });
      }
    }
    const holder = Number((await readFile(path, 'utf8').catch(() => '')).trim());
    if (!alive(holder) && !(await justCreated(path))) {
      // Set aside rather than delete, so that a lock taken meanwhile by a live process is the
      // only one at `path` for the next open().
      await rename(path, `${path}.stale-${process.pid}`).catch(() => {});
      await rm(`${path}.stale-${process.pid}`, { force: true });
      continue;
    }
    if (!told) options.onWait?.(holder);
    told = true;
    await new Promise((resolve) => setTimeout(resolve, options.pollMs ?? 500));
  }
}

/** Whether a process with this pid runs. */
function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A lock file created in the last seconds may not hold its pid yet: its creator is alive. */
async function justCreated(path: string): Promise<boolean> {
  const created = await stat(path).catch(() => undefined);
  return created !== undefined && Date.now() - created.mtimeMs < 5_000;
}
