import { fork } from 'node:child_process';
import type { SimulatorOptions } from '../sim/simulatorOptions.js';
import { parseSimulatorArgs } from '../sim/simulatorOptions.js';

export interface SimulatorProcess {
  url: string;
  /** The child process (to pin it to cores in benchmarks). */
  pid: number;
  /** What the simulator models, in one line. */
  banner: string;
  /** What the user should know about its options (e.g. a config.json field read approximately). */
  warnings: string[];
  stop(): Promise<void>;
}

/**
 * What parent and child say to each other: the parent sends the options once, the child
 * answers that it listens, or that it could not start (and why).
 */
export type SimMessage =
  | { type: 'start'; options: SimulatorOptions }
  | { type: 'listening'; url: string; banner: string; warnings: string[] }
  | { type: 'failed'; message: string };

/** The child's entry file, next to this one (.ts under tsx, .js when built). */
function childEntry(): URL {
  const ext = import.meta.url.endsWith('.ts') ? 'ts' : 'js';
  return new URL(`./simulatorChild.${ext}`, import.meta.url);
}

/**
 * Starts the built-in simulator in a child process on a free loopback port, so that its work
 * never shares the client's event loop or CPU readings. `options`: SimulatorOptions, or
 * `infergauge sim` flags as words (`['--model', 'llama-3-70b', '--tp', '2']`), read by the same
 * parser as the command's. The child ignores Ctrl-C (the parent decides when to stop) and exits
 * when the parent goes away.
 */
export function spawnSimulator(
  options: readonly string[] | SimulatorOptions = [],
): Promise<SimulatorProcess> {
  let given: SimulatorOptions;
  if (Array.isArray(options)) {
    const parsed = parseSimulatorArgs(options as readonly string[]);
    if (parsed.problems.length > 0) {
      return Promise.reject(
        new Error(
          `the built-in simulator cannot start: invalid options\n  - ${parsed.problems.join('\n  - ')}`,
        ),
      );
    }
    given = parsed.options;
  } else given = options as SimulatorOptions;
  const child = fork(childEntry(), [], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    // Structured clone: specs keep what JSON would lose (undefined, Infinity).
    serialization: 'advanced',
  });
  return new Promise((resolve, reject) => {
    let failure: string | undefined;
    const onExit = (code: number | null) =>
      reject(new Error(failure ?? `the built-in simulator exited before listening (code ${code})`));
    child.once('exit', onExit);
    child.once('error', reject);
    child.on('message', (message: SimMessage) => {
      if (message?.type === 'failed') {
        failure = `the built-in simulator cannot start: ${message.message}`;
        child.disconnect();
      }
      if (message?.type !== 'listening') return;
      child.off('exit', onExit);
      resolve({
        url: message.url,
        pid: child.pid as number,
        banner: message.banner,
        warnings: message.warnings,
        stop: () =>
          new Promise<void>((done) => {
            if (child.exitCode !== null || child.signalCode !== null) return done();
            child.once('exit', () => done());
            child.kill('SIGTERM');
          }),
      });
    });
    child.send({
      type: 'start',
      options: { ...given, host: '127.0.0.1', port: 0 },
    } satisfies SimMessage);
  });
}
