// The floor: the least a Node client can do per token event against bench/fake-server, so that
// bench:peer can show what the machine itself allows (`--clients floor`). It is not a client:
// it knows the fake server's exact framing (one event per write, completions chunks, `[DONE]`),
// parses nothing, keeps no record but one stamp per token event in a preallocated array, and
// reads every socket into one shared buffer (`onread`), as H1Pool does. Whatever stamp error
// and CPU per event it shows, no Node client on that machine does better.
//
//   node floor-client.mjs --url URL --concurrency N --requests N --out DIR
//        [--model M] [--input-tokens N] [--output-tokens N] [--hold-objects N] [--drop-objects N]
//
// --hold-objects and --drop-objects add the garbage a real client makes, in units of one small
// object with a string, an array and a closure (256 bytes of heap): that many held by each
// request until its end (what a client keeps per request in flight, which each young-generation
// collection copies), and that many made and dropped at each read (what parsing leaves). They
// show what a client's garbage alone costs in stamp error on the machine (docs/benchmarks.md).
//
// Writes DIR/floor.json: its wall time, the requests that got no `[DONE]`, and each request's
// stamps (id, sentAtMs, tokenEventsMs); bench:peer works out the rest as for any client.
import { writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    url: { type: 'string' },
    concurrency: { type: 'string' },
    requests: { type: 'string' },
    out: { type: 'string' },
    model: { type: 'string', default: 'fake-model' },
    'input-tokens': { type: 'string', default: '128' },
    'output-tokens': { type: 'string', default: '128' },
    'hold-objects': { type: 'string', default: '0' },
    'drop-objects': { type: 'string', default: '0' },
  },
});
const url = new URL(values.url ?? '');
const concurrency = Number(values.concurrency);
const total = Number(values.requests);
const outputTokens = Number(values['output-tokens']);
const holdObjects = Number(values['hold-objects']);
const dropObjects = Number(values['drop-objects']);
const body = JSON.stringify({
  model: values.model,
  prompt: 'hello '.repeat(Number(values['input-tokens'])).trim(),
  max_tokens: outputTokens,
  stream: true,
  ignore_eos: true,
});
const head = (id) =>
  `POST /v1/completions HTTP/1.1\r\nhost: ${url.host}\r\ncontent-type: application/json\r\n` +
  `x-request-id: ${id}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`;

const slots = outputTokens + 2;
const stamps = new Float64Array(total * slots);
const counts = new Int32Array(total);
const sentAt = new Float64Array(total);
const finished = new Uint8Array(total);
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);
const TEXT = Buffer.from('"text":"');
const DONE = Buffer.from('[DONE]');
let next = 0;
let open = 0;
const startMs = performance.now();

/** `n` small objects (256 bytes of heap each: an object, a string, an array, a closure). */
function garbage(n) {
  const objects = [];
  for (let i = 0; i < n; i++) objects.push({ i, name: `k${i}`, pair: [i, i + 1], get: () => i });
  return objects;
}

/** What each request in flight holds; the last read's objects (stored, so none is optimised away). */
const held = [];
let _lastDropped;

function connection() {
  let id = -1;
  open++;
  const send = () => {
    if (next >= total) {
      socket.end();
      return;
    }
    id = next++;
    sentAt[id] = performance.now();
    if (holdObjects > 0) held[id] = garbage(holdObjects);
    socket.write(head(id) + body);
  };
  const socket = connect({
    port: Number(url.port),
    host: url.hostname,
    noDelay: true,
    onread: {
      buffer: READ_BUFFER,
      callback(bytes, buffer) {
        const atMs = performance.now();
        if (dropObjects > 0) _lastDropped = garbage(dropObjects);
        const view = buffer.subarray(0, bytes);
        for (let i = view.indexOf(TEXT); i !== -1; i = view.indexOf(TEXT, i + 1)) {
          if (counts[id] < slots) stamps[id * slots + counts[id]++] = atMs;
        }
        if (view.includes(DONE)) {
          finished[id] = 1;
          held[id] = undefined;
          send();
        }
        return true;
      },
    },
  });
  socket.on('connect', send);
  socket.on('error', () => {});
  socket.on('close', () => {
    if (--open === 0) done();
  });
}

function done() {
  const wallS = (performance.now() - startMs) / 1000;
  const requests = [];
  let failed = 0;
  for (let id = 0; id < total; id++) {
    const tokenEventsMs = Array.from(stamps.subarray(id * slots, id * slots + counts[id]));
    requests.push({ id, sentAtMs: sentAt[id], tokenEventsMs });
    if (!finished[id]) failed++;
  }
  writeFileSync(join(values.out ?? '.', 'floor.json'), JSON.stringify({ wallS, failed, requests }));
}

for (let c = 0; c < Math.min(concurrency, total); c++) connection();
