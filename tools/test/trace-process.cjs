// Preloaded into every Node process of a profiled test file (NODE_OPTIONS=--require ...): one
// JSON line per process at its exit, with its command line, wall time and CPU, appended to
// $INFERGAUGE_TEST_TRACE. tools/test/profile.ts reads the lines to say where a file's time went.
// CommonJS, plain JavaScript: it runs before tsx is loaded, in processes with or without it.
const { appendFileSync } = require('node:fs');
const { isMainThread } = require('node:worker_threads');

const path = process.env.INFERGAUGE_TEST_TRACE;
if (path && isMainThread) {
  process.on('exit', () => {
    const cpu = process.cpuUsage();
    const line = {
      pid: process.pid,
      ppid: process.ppid,
      argv: process.argv.slice(1),
      wallMs: performance.now(),
      cpuMs: (cpu.user + cpu.system) / 1000,
    };
    try {
      appendFileSync(path, `${JSON.stringify(line)}\n`);
    } catch {
      // the profile reads what it finds; a lost line costs a figure, not the test
    }
  });
}
