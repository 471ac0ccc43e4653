// A user's output that listens for the live snapshots (issue 52): what any live output costs the
// run (every thread keeps and sends its live counts once an output listens), and no more.
// bench:peer --infergauge-args ';--output ./bench/live-listener.mjs' runs with and without it.
let seen = 0;
export default () => ({
  name: 'live-listener',
  snapshot: (e) => {
    seen += e.live.totals.completed >= 0 ? 1 : 0;
  },
  sessionFinished: () => {
    if (seen === 0) process.stderr.write('live-listener: no snapshot\n');
  },
});
