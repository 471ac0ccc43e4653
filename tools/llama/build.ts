/**
 * Builds llama.cpp's `llama-server` from the source that ships inside the `node-llama-cpp` npm
 * package (a git bundle), or reuses a cached build. Only the npm registry is reachable, so this
 * is how a real engine gets onto a machine with no GitHub access.
 *
 * The package is fetched with `npm pack` (one tarball, no dependency tree) instead of being a
 * dependency: `npm ci` would otherwise pull its prebuilt CUDA/Vulkan binaries as optional
 * dependencies, and `--omit=optional` would also drop esbuild's binary, which tsx needs.
 */
import { execFile as execFileCb, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createWriteStream, existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readFile, rename, rm } from 'node:fs/promises';
import { availableParallelism, cpus, homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const execFile = promisify(execFileCb);

/** Pinned exactly: newer releases break `npm ci` on this kind of machine. */
export const NODE_LLAMA_CPP = {
  spec: 'node-llama-cpp@3.21.1',
  tarball: 'node-llama-cpp-3.21.1.tgz',
  integrity:
    'sha512-E3N0Ev2Va0wzydvXYFwM9Hvyo07PoWjt8T/9GMc43Cvt8YkV/NU/tYUgEMC1grTPv2o9PRjQi0G3Wb5P/awiMg==',
  /** llama.cpp commit of the bundle inside that release. */
  llamaCppCommit: '80fb11ac73e66d89eae2c6a91d8a77428fa733ed',
} as const;

/** Where builds are cached: `$INFERGAUGE_CACHE`, else `~/.cache/infergauge`. */
export function cacheDir(): string {
  return process.env.INFERGAUGE_CACHE ?? join(homedir(), '.cache', 'infergauge');
}

/**
 * The cached binary's path. Keyed by commit and CPU model: the build uses -march=native, so a
 * cache shared with a different CPU must not be reused.
 */
export function llamaServerPath(): string {
  const cpu = createHash('sha256')
    .update(cpus()[0]?.model ?? 'unknown')
    .digest('hex')
    .slice(0, 8);
  const key = `${NODE_LLAMA_CPP.llamaCppCommit.slice(0, 12)}-${process.arch}-${cpu}`;
  return join(cacheDir(), `llama-server-${key}`, 'llama-server');
}

export interface BuildOptions {
  /** Progress lines (defaults to stderr). */
  log?: (line: string) => void;
  /** Parallel compile jobs (defaults to the available cores). */
  jobs?: number;
}

/** Returns a working llama-server, building it first when the cache has none (~5 min, 2 cores). */
export async function ensureLlamaServer(options: BuildOptions = {}): Promise<string> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const binary = llamaServerPath();
  if (existsSync(binary) && (await works(binary))) return binary;
  const started = Date.now();
  const work = await mkdtemp(join(tmpdir(), 'infergauge-llama-build-'));
  try {
    log(
      `llama-server: not cached; building llama.cpp ${NODE_LLAMA_CPP.llamaCppCommit.slice(0, 7)} from ${NODE_LLAMA_CPP.spec}`,
    );
    await execFile('npm', ['pack', NODE_LLAMA_CPP.spec, '--pack-destination', work, '--silent'], {
      cwd: work,
      maxBuffer: 1 << 20,
    });
    const tarball = join(work, NODE_LLAMA_CPP.tarball);
    const integrity = `sha512-${createHash('sha512')
      .update(await readFile(tarball))
      .digest('base64')}`;
    if (integrity !== NODE_LLAMA_CPP.integrity) {
      throw new Error(`${NODE_LLAMA_CPP.tarball}: integrity ${integrity} is not the pinned one`);
    }
    await execFile('tar', ['-xzf', tarball, '-C', work, 'package/llama/gitRelease.bundle']);
    const source = join(work, 'llama.cpp');
    await execFile('git', [
      'clone',
      '--quiet',
      join(work, 'package/llama/gitRelease.bundle'),
      source,
    ]);
    const { stdout: head } = await execFile('git', ['-C', source, 'rev-parse', 'HEAD']);
    if (head.trim() !== NODE_LLAMA_CPP.llamaCppCommit) {
      throw new Error(`the bundle holds llama.cpp ${head.trim()}, not the pinned commit`);
    }
    const generator = (await has('ninja')) ? 'Ninja' : 'Unix Makefiles';
    const buildDir = join(source, 'build');
    const logPath = join(work, 'build.log');
    log(`llama-server: configuring (cmake, ${generator}); log at ${logPath}`);
    await run(
      'cmake',
      [
        '-S',
        source,
        '-B',
        buildDir,
        '-G',
        generator,
        '-DCMAKE_BUILD_TYPE=Release',
        '-DGGML_NATIVE=ON',
        '-DLLAMA_OPENSSL=OFF',
        // The default downloads a prebuilt web UI, and nothing but the npm registry is reachable.
        '-DLLAMA_BUILD_UI=OFF',
        '-DLLAMA_USE_PREBUILT_UI=OFF',
        '-DLLAMA_BUILD_TESTS=OFF',
        '-DLLAMA_BUILD_EXAMPLES=OFF',
        '-DBUILD_SHARED_LIBS=OFF',
      ],
      logPath,
    );
    const jobs = options.jobs ?? availableParallelism();
    log(`llama-server: compiling with ${jobs} jobs (about 5 minutes on 2 cores)`);
    await run(
      'cmake',
      ['--build', buildDir, '--target', 'llama-server', '-j', String(jobs)],
      logPath,
    );
    // Copy, then rename into place: a concurrent or interrupted build never leaves half a binary.
    const target = llamaServerPath();
    await mkdir(join(target, '..'), { recursive: true });
    const partial = `${target}.partial-${process.pid}`;
    await copyFile(join(buildDir, 'bin', 'llama-server'), partial);
    await rename(partial, target);
    if (!(await works(target))) throw new Error(`${target} was built but does not run`);
    log(
      `llama-server: built in ${((Date.now() - started) / 1000).toFixed(0)} s, cached at ${target}`,
    );
    return target;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

async function works(binary: string): Promise<boolean> {
  try {
    const { stdout, stderr } = await execFile(binary, ['--version'], { timeout: 20_000 });
    return `${stdout}${stderr}`.includes(NODE_LLAMA_CPP.llamaCppCommit.slice(0, 7));
  } catch {
    return false;
  }
}

async function has(command: string): Promise<boolean> {
  try {
    await execFile(command, ['--version']);
    return true;
  } catch {
    return false;
  }
}

/** Runs a build step with its output appended to `logPath`; on failure, the log's tail says why. */
async function run(command: string, args: string[], logPath: string): Promise<void> {
  const out = createWriteStream(logPath, { flags: 'a' });
  await new Promise<void>((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.pipe(out, { end: false });
    child.stderr.pipe(out, { end: false });
    child.on('error', reject);
    child.on('close', async (code) => {
      out.end();
      if (code === 0) return resolve();
      const tail = (await readFile(logPath, 'utf8').catch(() => ''))
        .split('\n')
        .slice(-30)
        .join('\n');
      reject(new Error(`${command} ${args.slice(0, 2).join(' ')} exited ${code}:\n${tail}`));
    });
  });
}
