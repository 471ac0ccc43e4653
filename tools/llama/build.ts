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
import { copyFile, mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, cpus, homedir, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { withFileLock } from '../fileLock.js';
import { traceStep } from '../test/trace.js';

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

/** How llama.cpp is configured: what the tests need of the server, and no more. */
const CMAKE_OPTIONS = [
  '-DCMAKE_BUILD_TYPE=Release',
  '-DGGML_NATIVE=ON',
  '-DLLAMA_OPENSSL=OFF',
  // The default downloads a prebuilt web UI, and nothing but the npm registry is reachable.
  '-DLLAMA_BUILD_UI=OFF',
  '-DLLAMA_USE_PREBUILT_UI=OFF',
  '-DLLAMA_BUILD_TESTS=OFF',
  '-DLLAMA_BUILD_EXAMPLES=OFF',
  '-DBUILD_SHARED_LIBS=OFF',
];

/**
 * Build-time settings per target, included after llama.cpp's own CMakeLists (through
 * CMAKE_PROJECT_INCLUDE, run once every target exists). Most of the build's time is the
 * compiler's front end, not its optimiser: 150 model graph files of ~30 lines each spend ~2 s
 * apiece parsing the same headers. Hence:
 * - the per-token compute (ggml and its CPU backend) keeps Release's -O3 and -march=native;
 * - the rest (the llama library's graph building, the server and its JSON, the HTTP library,
 *   the multimodal loader that llama-server links) is built at -O1, which compiles a third
 *   faster and costs the server little per token (its time is in ggml);
 * - the llama library and the multimodal library are unity builds (8 files per compiler run),
 *   but for the files of this commit that define the same static helper as another
 *   (gemma3n/gemma4) or forbid the internal headers of their library (mtmd-helper).
 * If a later llama.cpp commit breaks the unity build, the build says so and runs once more
 * without it.
 */
const TUNE_CMAKE = `if(NOT COMMAND infergauge_tune)
  function(infergauge_tune)
    foreach(target llama llama-common llama-common-base mtmd server-context llama-server-impl llama-server cpp-httplib)
      if(TARGET \${target})
        target_compile_options(\${target} PRIVATE -O1)
      endif()
    endforeach()
    if(NOT INFERGAUGE_NO_UNITY)
      set_target_properties(llama mtmd PROPERTIES UNITY_BUILD ON)
      set_source_files_properties(\${CMAKE_SOURCE_DIR}/src/models/gemma4.cpp
        TARGET_DIRECTORY llama PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
      set_source_files_properties(\${CMAKE_SOURCE_DIR}/tools/mtmd/mtmd-helper.cpp
        \${CMAKE_SOURCE_DIR}/tools/mtmd/mtmd-helper-gen.cpp
        TARGET_DIRECTORY mtmd PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
    endif()
  endfunction()
  cmake_language(DEFER DIRECTORY \${CMAKE_SOURCE_DIR} CALL infergauge_tune)
endif()
`;

/**
 * The cached binary's path. Keyed by commit, recipe (the options above) and CPU model: the
 * build uses -march=native, so a cache shared with a different CPU must not be reused, and a
 * binary built another way is not the one the tests were written against.
 */
export function llamaServerPath(): string {
  const hash = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 8);
  const recipe = hash(JSON.stringify([CMAKE_OPTIONS, TUNE_CMAKE]));
  const cpu = hash(cpus()[0]?.model ?? 'unknown');
  const key = `${NODE_LLAMA_CPP.llamaCppCommit.slice(0, 12)}-${recipe}-${process.arch}-${cpu}`;
  return join(cacheDir(), `llama-server-${key}`, 'llama-server');
}

export interface BuildOptions {
  /** Progress lines (defaults to stderr). */
  log?: (line: string) => void;
  /** Parallel compile jobs (defaults to the available cores). */
  jobs?: number;
}

/**
 * Returns a working llama-server, building it first when the cache has none (about 5 minutes
 * on 2 cores). One build per cache at a time: a process that asks meanwhile (`npm test` starts
 * the build before its files, and each file that uses the server asks too) waits for it and
 * takes its binary.
 */
export async function ensureLlamaServer(options: BuildOptions = {}): Promise<string> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const binary = llamaServerPath();
  if (existsSync(binary) && (await works(binary))) return binary;
  const started = Date.now();
  await mkdir(cacheDir(), { recursive: true });
  return withFileLock(
    `${dirname(binary)}.lock`,
    async () => {
      if (existsSync(binary) && (await works(binary))) {
        traceStep('llama-server build (another process built it)', started);
        return binary;
      }
      await build(binary, log, options.jobs ?? availableParallelism());
      traceStep('llama-server build', started);
      return binary;
    },
    { onWait: (pid) => log(`llama-server: process ${pid} is building it; waiting for that build`) },
  );
}

async function build(target: string, log: (line: string) => void, jobs: number): Promise<void> {
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
    const tune = join(work, 'tune.cmake');
    await writeFile(tune, TUNE_CMAKE);
    const generator = (await has('ninja')) ? 'Ninja' : 'Unix Makefiles';
    const buildDir = join(source, 'build');
    const logPath = join(work, 'build.log');
    // llama.cpp compiles through ccache where it is installed (its GGML_CCACHE); paths relative
    // to the work folder let a later build in another temporary folder hit that cache.
    const env = { ...process.env, CCACHE_BASEDIR: work, CCACHE_NOHASHDIR: 'true' };
    const configure = (extra: string[]) =>
      run(
        'cmake',
        [
          '-S',
          source,
          '-B',
          buildDir,
          '-G',
          generator,
          ...CMAKE_OPTIONS,
          `-DCMAKE_PROJECT_INCLUDE=${tune}`,
          ...extra,
        ],
        logPath,
        env,
      );
    const compile = () =>
      run(
        'cmake',
        ['--build', buildDir, '--target', 'llama-server', '-j', String(jobs)],
        logPath,
        env,
      );
    log(`llama-server: configuring (cmake, ${generator}); log at ${logPath}`);
    await configure([]);
    log(`llama-server: compiling with ${jobs} jobs (about 5 minutes on 2 cores)`);
    try {
      await compile();
    } catch (err) {
      log(
        `llama-server: the build failed (${(err as Error).message.split('\n')[0]}); building again without unity builds, in case a file of this commit cannot share a compiler run (TUNE_CMAKE in tools/llama/build.ts names those it knows)`,
      );
      await configure(['-DINFERGAUGE_NO_UNITY=ON']);
      await compile();
    }
    // Copy, then rename into place: a concurrent or interrupted build never leaves half a binary.
    await mkdir(dirname(target), { recursive: true });
    const partial = `${target}.partial-${process.pid}`;
    await copyFile(join(buildDir, 'bin', 'llama-server'), partial);
    await rename(partial, target);
    if (!(await works(target))) throw new Error(`${target} was built but does not run`);
    log(
      `llama-server: built in ${((Date.now() - started) / 1000).toFixed(0)} s, cached at ${target}`,
    );
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
async function run(
  command: string,
  args: string[],
  logPath: string,
  env: NodeJS.ProcessEnv,
): Promise<void> {
  const out = createWriteStream(logPath, { flags: 'a' });
  await new Promise<void>((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
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
