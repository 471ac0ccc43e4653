import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export interface SimulatorProcess {
  url: string;
  /** The child process (to pin it to cores in benchmarks). */
  pid: number;
  /** What the simulator models, in one line. */
  banner: string;
  stop(): Promise<void>;
}

/** Messages the simulator sends its parent: it listens, or it could not start (and why). */
export type SimMessage =
  | { type: 'listening'; url: string; banner: string }
  | { type: 'failed'; message: string };

/**
 * Starts the built-in simulator in a child process on a free loopback port, so that its work
 * never shares the client's event loop or CPU readings. The child ignores Ctrl-C (the parent
 * decides when to stop) and exits when the parent goes away.
 */
export function spawnSimulator(args: string[] = []): Promise<SimulatorProcess> {
  // The simulator's process is the command line's `sim` (a path, not an import: the session
  // never imports the command line).
  const self = fileURLToPath(import.meta.url);
  const main = self.replace(/session[/\\]simulator\.(ts|js)$/, 'cli/main.$1');
  const child = fork(main, ['sim', '--host', '127.0.0.1', '--port', '0', ...args], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    let failure: string | undefined;
    const onExit = (code: number | null) =>
      reject(new Error(failure ?? `the built-in simulator exited before listening (code ${code})`));
    child.once('exit', onExit);
    child.once('error', reject);
    child.on('message', (message: SimMessage) => {
      if (message?.type === 'failed')
        failure = `the built-in simulator cannot start: ${message.message}`;
      if (message?.type !== 'listening') return;
      child.off('exit', onExit);
      resolve({
        url: message.url,
        pid: child.pid as number,
        banner: message.banner,
        stop: () =>
          new Promise<void>((done) => {
            if (child.exitCode !== null) return done();
            child.once('exit', () => done());
            child.kill('SIGTERM');
          }),
      });
    });
  });
}
