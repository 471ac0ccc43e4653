/**
 * A one-file CommonJS bundle (echarts' minified build) loaded with a V8 code cache, which Node 20
 * has no switch for (`module.enableCompileCache` came in Node 22). Compiling echarts' 0.7 MB
 * took about 60 ms of CPU at the end of every run that writes report.html (issue 51, --cpu-prof);
 * from the cache, with the functions the report used already compiled, a one-request run took
 * 0.06 s less CPU in all.
 *
 * The cache is a file per bundle and V8 (version, flags, CPU) in infergauge's cache folder
 * (`$INFERGAUGE_CACHE/code-cache`, else `~/.cache/infergauge/code-cache`), written after the
 * bundle was used (`save`) when there was none or V8 refused it. V8
 * runs what the cache holds, so only a file that this user owns and that no one else may write,
 * in a folder likewise, is read. `INFERGAUGE_CODE_CACHE=off` reads and writes none. Whatever
 * goes wrong with the cache (a full disk, a read-only home) only costs the compile.
 */
import { createHash } from 'node:crypto';
import {
  chmodSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  type Stats,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { cachedDataVersionTag } from 'node:v8';
import { Script } from 'node:vm';

export interface CachedBundle {
  /** The bundle's `module.exports`. */
  exports: unknown;
  /** Whether V8 compiled it from the cache. */
  fromCache: boolean;
  /** Writes the cache when it was not used, once: call it after the bundle has done its work. */
  save(): void;
}

/**
 * `code-cache` in infergauge's cache folder (`$INFERGAUGE_CACHE`, else `~/.cache/infergauge`, as
 * tools/llama keeps its builds); undefined when turned off.
 */
export function defaultCodeCacheDir(env = process.env): string | undefined {
  if (env.INFERGAUGE_CODE_CACHE === 'off') return undefined;
  return join(env.INFERGAUGE_CACHE || join(homedir(), '.cache', 'infergauge'), 'code-cache');
}

/** Owned by this user and writable by no one else (where there are users: not on Windows). */
function private_(s: Stats): boolean {
  const uid = process.getuid?.();
  return uid === undefined || (s.uid === uid && (s.mode & 0o022) === 0);
}

/**
 * Loads the CommonJS file `path` as `require` would (its own `require`, `module`, `exports`),
 * compiled from the code cache in `cacheDir` when there is a usable one.
 */
export function requireCached(path: string, cacheDir = defaultCodeCacheDir()): CachedBundle {
  const source = readFileSync(path, 'utf8');
  const key = createHash('sha1')
    // V8 refuses a cache made under another V8, other flags (sql.js's --liftoff-only) or CPU.
    .update(`${process.version} ${process.arch} ${cachedDataVersionTag()}\n`)
    .update(source)
    .digest('hex')
    .slice(0, 16);
  const file = cacheDir && join(cacheDir, `${basename(path)}-${key}.v8`);
  let cached: Buffer | undefined;
  if (file) {
    try {
      if (private_(statSync(cacheDir)) && private_(statSync(file))) cached = readFileSync(file);
    } catch {
      // No cache yet (or not readable): compiled from the source, and saved after.
    }
  }
  const script = new Script(
    `(function (exports, require, module, __filename, __dirname) {${source}\n})`,
    { filename: path, ...(cached ? { cachedData: cached } : {}) },
  );
  const fromCache = cached !== undefined && script.cachedDataRejected !== true;
  const module = { exports: {} as unknown };
  const wrapper = script.runInThisContext() as (...args: unknown[]) => void;
  wrapper.call(module.exports, module.exports, createRequire(path), module, path, dirname(path));
  let saved = fromCache;
  return {
    exports: module.exports,
    fromCache,
    save() {
      if (saved || !file || !cacheDir) return;
      saved = true;
      try {
        mkdirSync(cacheDir, { recursive: true, mode: 0o700 });
        if (!private_(statSync(cacheDir))) return;
        // Whole or not at all: another process may read it while this one writes.
        const tmp = `${file}.${process.pid}.tmp`;
        try {
          writeFileSync(tmp, script.createCachedData(), { mode: 0o600 });
          chmodSync(tmp, 0o600);
          renameSync(tmp, file);
        } catch (error) {
          rmSync(tmp, { force: true });
          throw error;
        }
        // The caches of other builds, Node versions or flags are never read again.
        const prefix = `${basename(path)}-`;
        for (const name of readdirSync(cacheDir)) {
          if (name.startsWith(prefix) && name.endsWith('.v8') && join(cacheDir, name) !== file) {
            rmSync(join(cacheDir, name), { force: true });
          }
        }
      } catch {
        // A cache that cannot be written costs the next run the compile, nothing else.
      }
    },
  };
}
