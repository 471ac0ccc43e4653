import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export interface SimulatorProcess {
  url: string;
  stop(): Promise<void>;
}

/** Message the simulator sends its parent once it listens. */
export interface SimListening {
  type: 'listening';
  url: string;
}

/**
 * Starts the built-in simulator in a child process on a free loopback port, so that its work
 * never shares the client's event loop or CPU readings. The child ignores Ctrl-C (the parent
 * decides when to stop) and exits when the parent goes away.
 */
export function spawnSimulator(args: string[] = []): Promise<SimulatorProcess> {
  const self = fileURLToPath(import.meta.url);
  const main = self.replace(/simProcess\.(ts|js)$/, 'main.$1');
  const child = fork(main, ['sim', '--host', '127.0.0.1', '--port', '0', ...args], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) =>
      reject(new Error(`the built-in simulator exited before listening (code ${code})`));
    child.once('exit', onExit);
    child.once('error', reject);
    child.on('message', (message: SimListening) => {
      if (message?.type !== 'listening') return;
      child.off('exit', onExit);
      resolve({
        url: message.url,
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
