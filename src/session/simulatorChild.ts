/**
 * The simulator's own process, started by spawnSimulator (`infergauge run` without --url): it
 * reads SimulatorOptions from its parent's first message, serves them in this process, and
 * says where it listens (or why it cannot). The parent owns Ctrl-C and this process's lifetime:
 * SIGTERM ends it, and so does the parent going away.
 */
import { type RunningSimulator, startSimulator } from '../sim/simulator.js';
import type { SimMessage } from './simulator.js';

let sim: RunningSimulator | undefined;
let ending = false;

/**
 * Closes the server and the channel to the parent, so that nothing keeps this process alive
 * and it exits by itself (its exit handlers run); killed if something still does after 2 s.
 */
function end(): void {
  if (ending) return;
  ending = true;
  void (sim?.stop() ?? Promise.resolve()).finally(() => {
    if (process.connected) process.disconnect();
    setTimeout(() => process.kill(process.pid, 'SIGKILL'), 2000).unref();
  });
}

process.on('SIGINT', () => {});
process.on('SIGTERM', end);
process.once('disconnect', end);
process.once('message', (message: SimMessage) => {
  if (message?.type !== 'start') return;
  startSimulator(message.options).then(
    (started) => {
      sim = started;
      if (ending) {
        void started.stop();
        return;
      }
      process.send?.({
        type: 'listening',
        url: started.url,
        banner: started.banner,
        warnings: started.warnings,
      } satisfies SimMessage);
    },
    // The parent disconnects once it has read why, which ends this process.
    (err: Error) => process.send?.({ type: 'failed', message: err.message } satisfies SimMessage),
  );
});
