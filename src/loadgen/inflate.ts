import {
  constants,
  createBrotliDecompress,
  createGunzip,
  createInflate,
  type Gunzip,
} from 'node:zlib';

/** What a `content-encoding` value decodes with; undefined: not encoded. */
export type Encoding = 'gzip' | 'deflate' | 'br';

/**
 * The body's encoding from its `content-encoding` header: undefined when there is none (or
 * `identity`), a string naming it when it is one infergauge cannot decode (several stacked
 * codings, zstd, compress).
 */
export function bodyEncoding(
  header: string | undefined,
): Encoding | { unsupported: string } | undefined {
  const value = header?.trim().toLowerCase();
  if (!value || value === 'identity') return undefined;
  if (value === 'gzip' || value === 'x-gzip') return 'gzip';
  if (value === 'deflate' || value === 'br') return value;
  return { unsupported: value.slice(0, 40) };
}

/**
 * Decodes a compressed body as it arrives (a server or proxy that compresses although the
 * request asked for no encoding). Each decoded piece comes with the arrival time of the
 * compressed chunk it was decoded from, so event timing stays that of the network: zlib
 * decodes on its thread pool, but hands out a chunk's output before it acknowledges the chunk.
 */
export class Inflater {
  private readonly stream: Gunzip;
  /** Arrival times of the chunks written and not yet acknowledged, oldest first. */
  private readonly arrivalsUs: number[] = [];
  private lastUs = 0;

  constructor(
    readonly encoding: Encoding,
    onData: (chunk: Buffer, atUs: number) => void,
    onError: (err: Error) => void,
  ) {
    // Sync flush: every byte written is decoded now, not held for a fuller block.
    const options = { flush: constants.Z_SYNC_FLUSH, finishFlush: constants.Z_SYNC_FLUSH };
    this.stream =
      encoding === 'br'
        ? createBrotliDecompress({
            flush: constants.BROTLI_OPERATION_FLUSH,
            finishFlush: constants.BROTLI_OPERATION_FLUSH,
          })
        : encoding === 'deflate'
          ? createInflate(options)
          : createGunzip(options);
    this.stream.on('data', (out: Buffer) => onData(out, this.arrivalsUs[0] ?? this.lastUs));
    this.stream.on('error', onError);
  }

  write(chunk: Uint8Array, atUs: number): void {
    this.arrivalsUs.push(atUs);
    this.stream.write(chunk, () => {
      this.lastUs = this.arrivalsUs.shift() ?? this.lastUs;
    });
  }

  /** Calls `onEnd` once everything written has been decoded and handed out. */
  end(onEnd: () => void): void {
    this.stream.once('end', onEnd);
    this.stream.end();
  }

  /** Stops decoding (the request is over); nothing more is handed out. */
  destroy(): void {
    this.stream.removeAllListeners('data');
    this.stream.removeAllListeners('end');
    this.stream.on('error', () => {});
    this.stream.destroy();
  }
}
