/** A worker thread of `sizeInParallel`: its share of the candidates, each row posted when done. */
import { parentPort, workerData } from 'node:worker_threads';
import { type SizeOptions, sizeShare } from './size.js';

if (!parentPort) throw new Error('session/sizeWorker.ts runs only as a worker thread');
const port = parentPort;
const { options, indices } = workerData as { options: SizeOptions; indices: number[] };
await sizeShare(options, indices, (m) => port.postMessage(m));
