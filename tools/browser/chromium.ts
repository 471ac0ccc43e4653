/**
 * Debian's `chromium` for the browser tests and the README screenshot: found at
 * /usr/bin/chromium, or installed with apt-get (as root, or through sudo without a password).
 * The tests drive it with playwright-core, pinned to the release whose Chromium matches
 * Debian's (see test/helpers/browser.ts).
 *
 *   node --import tsx tools/browser/chromium.ts     # installs it if missing, prints the path
 */
import { execFile, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { traceStep } from '../test/trace.js';

export const CHROMIUM_PATH = '/usr/bin/chromium';

/** apt-get can take a while on a cold cache (the package and its libraries, ~100 MB). */
const APT_TIMEOUT_MS = 10 * 60_000;

let cached: Promise<string | undefined> | undefined;

/**
 * The path of Debian's chromium, installing the package first when it is missing and this
 * process may (root, or passwordless sudo). Undefined when it cannot be had, with the reason
 * written to stderr (and kept in `chromiumUnavailableReason`).
 */
export function ensureChromium(): Promise<string | undefined> {
  cached ??= install();
  return cached;
}

export let chromiumUnavailableReason: string | undefined;

async function install(): Promise<string | undefined> {
  if (existsSync(CHROMIUM_PATH)) return CHROMIUM_PATH;
  const fail = (reason: string) => {
    chromiumUnavailableReason = reason;
    process.stderr.write(`chromium: ${reason}\n`);
    return undefined;
  };
  if (process.platform !== 'linux') {
    return fail(`${CHROMIUM_PATH} is missing and Debian packages need Linux`);
  }
  if (!hasCommand('apt-get')) {
    return fail(`${CHROMIUM_PATH} is missing and apt-get is not available (not Debian?)`);
  }
  const root = typeof process.getuid === 'function' && process.getuid() === 0;
  const sudo = !root && hasCommand('sudo') && (await run('sudo', ['-n', 'true'])).ok;
  if (!root && !sudo) {
    return fail(
      `${CHROMIUM_PATH} is missing, and installing Debian's chromium needs root (or sudo without a password): apt-get install chromium`,
    );
  }
  // Another process installing it at the same time (npm test starts the install before the
  // files, and the browser tests ask too) holds dpkg's lock: wait for it rather than fail.
  const apt = (args: string[]) => {
    const aptArgs = ['-o', `DPkg::Lock::Timeout=${APT_TIMEOUT_MS / 1000}`, ...args];
    return sudo ? run('sudo', ['-n', 'apt-get', ...aptArgs]) : run('apt-get', aptArgs);
  };
  const installArgs = ['install', '-y', '--no-install-recommends', 'chromium'];
  process.stderr.write('chromium: installing the Debian package (apt-get install chromium)\n');
  const started = Date.now();
  let result = await apt(installArgs);
  if (!result.ok) {
    // A fresh container has no package lists: fetch them once and try again.
    const update = await apt(['update']);
    if (!update.ok) return fail(`apt-get update failed: ${lastLine(update.output)}`);
    result = await apt(installArgs);
  }
  traceStep('chromium install', started);
  if (!result.ok) return fail(`apt-get install chromium failed: ${lastLine(result.output)}`);
  if (!existsSync(CHROMIUM_PATH)) {
    return fail(`apt-get installed chromium but ${CHROMIUM_PATH} is not there`);
  }
  return CHROMIUM_PATH;
}

/** The flags the tests and the screenshot script run Chromium with. */
export const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
] as const;

/**
 * Debian's chromium driven by playwright-core (a dev dependency, loaded here only), with
 * CHROMIUM_FLAGS. Undefined, with the reason, when chromium cannot be had.
 */
export async function launchChromium(): Promise<
  { browser: import('playwright-core').Browser } | { browser: undefined; reason: string }
> {
  const executablePath = await ensureChromium();
  if (!executablePath) {
    return { browser: undefined, reason: chromiumUnavailableReason ?? 'chromium is unavailable' };
  }
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({
    executablePath,
    headless: true,
    args: [...CHROMIUM_FLAGS],
  });
  return { browser };
}

/** Runs a command to its end without blocking this process (a build may run beside it). */
function run(command: string, args: string[]): Promise<{ ok: boolean; output: string }> {
  return new Promise((resolve) => {
    execFile(
      command,
      args,
      {
        encoding: 'utf8',
        timeout: APT_TIMEOUT_MS,
        maxBuffer: 64 << 20,
        env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
      },
      (error, stdout, stderr) =>
        resolve({
          ok: !error,
          output: `${stdout ?? ''}${stderr ?? ''}${error ? error.message : ''}`,
        }),
    );
  });
}

function hasCommand(name: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).status === 0;
}

function lastLine(text: string): string {
  const lines = text.trim().split('\n');
  return lines[lines.length - 1] || '(no output)';
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const path = await ensureChromium();
  if (path) process.stdout.write(`${path}\n`);
  else process.exitCode = 1;
}
