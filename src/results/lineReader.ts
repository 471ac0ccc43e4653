/**
 * The lines of a JSON-lines file, plain or gzip-compressed, read as bytes with a bound on one
 * line, and every damage to the file (a line past the bound, a damaged or cut gzip member, bytes
 * between members that are none) told as it is met, never thrown: a reader keeps every complete
 * line before a damage and goes on after it (docs/cli.md, "Damaged records").
 *
 * A gzip file is read member by member (our writer writes one per record or per worker batch):
 * each member is inflated on its own and its checksum checked before its lines are handed on, so
 * a damaged member costs only its own lines, and the reader resumes at the next intact member,
 * found by its header (1f 8b 08, flags and OS plausible) and proved by inflating it and checking
 * its CRC. A member too large to hold (a file compressed whole by `gzip`, or a bomb) is streamed
 * instead, its lines handed on as they come; a line in it past the bound abandons the rest of
 * that member.
 */
import { type FileHandle, open } from 'node:fs/promises';
import * as zlib from 'node:zlib';
import { MAX_REQUEST_EVENTS } from '../record.js';

/**
 * Bytes one record line may take: a record is bounded by the request bounds (docs/metrics.md,
 * "Bounds on one request"): at most MAX_REQUEST_EVENTS events (record.ts), each five columns of at
 * most 48 bytes together (a gap in microseconds, a token count and three character counts of
 * one event's text, with their commas), and 1 MiB for the rest (times, counts, the error
 * message, a server's timing). 2^20 x 48 + 2^20 bytes: 49 MiB. A longer line is no record.
 */
export const MAX_RECORD_LINE_BYTES = MAX_REQUEST_EVENTS * 48 + 2 ** 20;

/** What a damage told through `onDamage` is. */
export type LineDamageKind =
  /** A line longer than the bound: skipped. */
  | 'too_long'
  /** A gzip member that fails (bad data, bad checksum) or bytes that are no member: skipped. */
  | 'gzip_damaged'
  /** The gzip stream ends inside a member (a run killed while writing). */
  | 'gzip_cut';

export interface LineDamage {
  kind: LineDamageKind;
  /** Compressed bytes skipped (gzip kinds). */
  bytes?: number;
  /** Lines that a damaged member held and that were dropped with it (its checksum failed). */
  lines?: number;
  /** The line (1-based, of the decompressed text) at or after which it happened. */
  line: number;
  message: string;
}

/** Yielded in place of a line that was cut by damage (its start was read, its end was not). */
export const CUT_LINE = Symbol('cut line');

/** Bytes read from a plain file at once. */
const READ_BYTES = 1 << 20;
/** Compressed bytes of whole members inflated at once (inflateBatch). */
const BATCH_BYTES = 256 << 10;
/** Bytes held to read a member's header (and most members whole) before inflating it. */
const HEAD_BYTES = 64 << 10;
/** Compressed bytes held to inflate a member at once: a larger member is streamed. */
const WINDOW_BYTES = 4 << 20;
/** Inflated bytes of one member held at once: a member inflating to more is streamed. */
const MEMBER_OUT_BYTES = 16 << 20;
/** Compressed bytes fed at once to a streamed member: at most ~1,032x as many come out. */
const STREAM_FEED_BYTES = 16 << 10;

/**
 * Splits bytes into lines of at most `maxBytes` (a trailing \r dropped). A longer line is
 * dropped as it passes, never held: `tooLong` counts them.
 */
class LineSplitter {
  private parts: Buffer[] = [];
  private held = 0;
  /** Inside a line past the bound: its bytes are dropped until its newline. */
  skipping = false;
  tooLong = 0;
  /** Complete lines handed out, and over-long lines skipped: the line number of the last. */
  lines = 0;

  constructor(
    readonly maxBytes: number,
    private readonly onTooLong: (line: number) => void,
  ) {}

  /** The complete lines in `chunk`; copies what it keeps of `chunk` for a later line. */
  *push(chunk: Buffer): Generator<string> {
    let start = 0;
    for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
      const line = this.take(chunk, start, nl);
      start = nl + 1;
      if (line !== undefined) yield line;
    }
    if (start < chunk.length) this.hold(chunk, start, chunk.length);
  }

  /** What is left once the input ends: a last line without a newline. */
  end(): string | undefined {
    if (this.skipping) {
      this.skipping = false;
      return undefined;
    }
    if (this.held === 0) return undefined;
    this.lines++;
    return this.drain();
  }

  /**
   * The input breaks (damage): true when a line was begun, which is dropped (its end is
   * elsewhere or gone).
   */
  cut(): boolean {
    // A line past the bound was counted as such already.
    const begun = this.held > 0 && !this.skipping;
    this.parts = [];
    this.held = 0;
    this.skipping = false;
    if (begun) this.lines++;
    return begun;
  }

  private take(chunk: Buffer, start: number, end: number): string | undefined {
    if (this.skipping) {
      this.skipping = false;
      return undefined;
    }
    if (this.held + (end - start) > this.maxBytes) {
      this.tooLongLine();
      return undefined;
    }
    this.lines++;
    if (this.held === 0) {
      return chunk.toString('utf8', start, chunk[end - 1] === 13 && end > start ? end - 1 : end);
    }
    this.parts.push(chunk.subarray(start, end));
    return this.drain();
  }

  private hold(chunk: Buffer, start: number, end: number): void {
    if (this.skipping) return;
    if (this.held + (end - start) > this.maxBytes) {
      this.tooLongLine();
      this.skipping = true;
      return;
    }
    this.parts.push(Buffer.from(chunk.subarray(start, end)));
    this.held += end - start;
  }

  private tooLongLine(): void {
    this.parts = [];
    this.held = 0;
    this.lines++;
    this.tooLong++;
    this.onTooLong(this.lines);
  }

  private drain(): string {
    const whole = Buffer.concat(this.parts);
    this.parts = [];
    this.held = 0;
    const end =
      whole.length > 0 && whole[whole.length - 1] === 13 ? whole.length - 1 : whole.length;
    return whole.toString('utf8', 0, end);
  }
}

/**
 * The lines of `path` (gzip when `gzip`), each a string (empty lines included), or CUT_LINE
 * where damage cut a line begun before it. Damage goes to `onDamage`; errors reading the file
 * are thrown. Memory: one line (at most `maxLineBytes`), a window of the compressed file and
 * one member inflated.
 */
export async function* readLines(
  path: string,
  gzip: boolean,
  onDamage: (damage: LineDamage) => void,
  maxLineBytes = MAX_RECORD_LINE_BYTES,
): AsyncGenerator<string | typeof CUT_LINE> {
  const splitter = new LineSplitter(maxLineBytes, (line) =>
    onDamage({
      kind: 'too_long',
      line,
      message: `line ${line.toLocaleString('en-US')} is longer than ${mib(maxLineBytes)} (no record is): skipped`,
    }),
  );
  const file = await open(path, 'r');
  try {
    const chunks = gzip ? gzipChunks(file, splitter, onDamage) : plainChunks(file);
    for await (const chunk of chunks) {
      if (chunk === CUT) {
        if (splitter.cut()) yield CUT_LINE;
        continue;
      }
      yield* splitter.push(chunk);
    }
    const last = splitter.end();
    if (last !== undefined) yield last;
  } finally {
    await file.close();
  }
}

const mib = (bytes: number) => `${Math.round(bytes / 2 ** 20).toLocaleString('en-US')} MiB`;

/** In the chunk stream: the input broke here (damage). */
const CUT = Symbol('cut');

async function* plainChunks(file: FileHandle): AsyncGenerator<Buffer> {
  for (;;) {
    const buffer = Buffer.allocUnsafe(READ_BYTES);
    const { bytesRead } = await file.read(buffer, 0, READ_BYTES, null);
    if (bytesRead === 0) return;
    yield buffer.subarray(0, bytesRead);
  }
}

/** A part of the file held in memory, refilled on demand. */
class Window {
  start = 0;
  bytes = Buffer.alloc(0);

  constructor(
    private readonly file: FileHandle,
    readonly size: number,
  ) {}

  get end(): number {
    return this.start + this.bytes.length;
  }

  /** Holds [at, at + length) (less at the end of the file), reading when it does not. */
  async hold(at: number, length: number): Promise<void> {
    const want = Math.min(length, this.size - at);
    if (at >= this.start && at + want <= this.end) return;
    const bytes = Buffer.allocUnsafe(Math.max(want, Math.min(WINDOW_BYTES, this.size - at)));
    let read = 0;
    while (read < bytes.length) {
      const { bytesRead } = await this.file.read(bytes, read, bytes.length - read, at + read);
      if (bytesRead === 0) break;
      read += bytesRead;
    }
    this.start = at;
    this.bytes = bytes.subarray(0, read);
  }

  /** The held bytes from `at` on. */
  from(at: number): Buffer {
    return this.bytes.subarray(at - this.start);
  }
}

/** Node.js 20.15 and later; older ones skip the checksum (the inflater's errors remain). */
const crc32 = (zlib as { crc32?: (data: Buffer, value?: number) => number }).crc32;

/** Length of a plausible gzip member header at the start of `b`; 0: none; -1: cut short. */
function headerLength(b: Buffer): number {
  if (b.length < 10) return b.length === 0 || isPrefixOfMagic(b) ? -1 : 0;
  const flags = b[3];
  // Deflate only, no reserved flag, and an OS byte gzip writes (0-13, 255 unknown).
  if (b[0] !== 0x1f || b[1] !== 0x8b || b[2] !== 8 || flags & 0xe0) return 0;
  if (b[9] > 13 && b[9] !== 255) return 0;
  let at = 10;
  if (flags & 4) {
    if (b.length < at + 2) return -1;
    at += 2 + b.readUInt16LE(at);
  }
  for (const flag of [8, 16]) {
    if (!(flags & flag)) continue;
    const zero = b.indexOf(0, at);
    if (zero === -1) return -1;
    at = zero + 1;
  }
  if (flags & 2) at += 2;
  return at <= b.length ? at : -1;
}

const isPrefixOfMagic = (b: Buffer) =>
  b[0] === 0x1f && (b.length < 2 || b[1] === 0x8b) && (b.length < 3 || b[2] === 8);

const MAGIC = Buffer.from([0x1f, 0x8b, 0x08]);

type Inflated =
  /** Whole and checked: `out` and the bytes it took, trailer included. */
  | { ok: true; out: Buffer; taken: number }
  /** Not inflated: the member is damaged (`out`: what came before the damage, kept). */
  | { ok: false; out: Buffer; lines?: number; reason: string }
  /** Too large to hold: stream it. */
  | { ok: 'stream' };

/**
 * Inflates the member whose deflate data starts at `body` of `win`, held whole. `prefix`: on
 * damage, find what inflates before it (only what is kept needs it: not a candidate header
 * inside a damaged stretch).
 */
function inflateHeld(win: Window, body: number, prefix: boolean): Inflated | 'more' {
  const input = win.from(body);
  let result: { buffer: Buffer; engine: zlib.InflateRaw };
  try {
    result = zlib.inflateRawSync(input, {
      info: true,
      maxOutputLength: MEMBER_OUT_BYTES,
    }) as unknown as { buffer: Buffer; engine: zlib.InflateRaw };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ERR_BUFFER_TOO_LARGE') return { ok: 'stream' };
    const atEof = win.end >= win.size;
    if (code === 'Z_BUF_ERROR' && !atEof) return 'more';
    // Cut short (the end of the file) or damaged: keep what inflates before the damage.
    return {
      ok: false,
      out: prefix ? inflatedPrefix(input) : Buffer.alloc(0),
      reason:
        code === 'Z_BUF_ERROR'
          ? `${CUT_REASON}: ${(err as Error).message}`
          : (err as Error).message,
    };
  }
  const out = result.buffer;
  const trailer = body + result.engine.bytesWritten;
  if (trailer + 8 > win.end) {
    if (win.end < win.size) return 'more';
    return { ok: false, out, reason: `${CUT_REASON}: its checksum is cut off` };
  }
  const t = win.from(trailer);
  if ((crc32 && crc32(out) !== t.readUInt32LE(0)) || out.length % 2 ** 32 !== t.readUInt32LE(4)) {
    return { ok: false, out: Buffer.alloc(0), lines: countLines(out), reason: 'bad checksum' };
  }
  return { ok: true, out, taken: trailer + 8 - body };
}

/** What inflates of `input` before it breaks: the longest prefix that inflates. */
function inflatedPrefix(input: Buffer): Buffer {
  const inflate = (n: number) => {
    try {
      return zlib.inflateRawSync(input.subarray(0, n), {
        finishFlush: zlib.constants.Z_SYNC_FLUSH,
        maxOutputLength: MEMBER_OUT_BYTES,
      });
    } catch {
      return undefined;
    }
  };
  let lo = 0;
  let hi = input.length;
  let best = Buffer.alloc(0);
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    const out = inflate(mid);
    if (out) {
      best = out;
      lo = mid;
    } else hi = mid - 1;
  }
  return best;
}

const countLines = (b: Buffer) => {
  let n = 0;
  for (let at = b.indexOf(10); at !== -1; at = b.indexOf(10, at + 1)) n++;
  return n;
};

/**
 * The inflated bytes of a gzip file, member by member, with CUT where damage broke the text;
 * damage goes to `onDamage` (line numbers from `splitter`, which consumes the chunks in step).
 * Consecutive damaged members and bytes that are no member make one damaged stretch, told once
 * when the next intact member (or the end) is reached; after a damaged member the search for
 * the next one starts right after its header, so a member the damage ran into is not lost.
 */
async function* gzipChunks(
  file: FileHandle,
  splitter: LineSplitter,
  onDamage: (damage: LineDamage) => void,
): AsyncGenerator<Buffer | typeof CUT> {
  const { size } = await file.stat();
  const win = new Window(file, size);
  /** The damaged stretch being crossed (no intact member since it began). */
  let stretch: { from: number; reason: string; lines: number; line: number } | undefined;
  /** Opens a damaged stretch at `from` (unless one is open); false when one was open. */
  const open = (from: number, reason: string): boolean => {
    if (stretch) return false;
    stretch = { from, reason, lines: 0, line: splitter.lines + 1 };
    return true;
  };
  const close = (to: number) => {
    if (!stretch) return;
    const { from, reason, lines, line } = stretch;
    stretch = undefined;
    const bytes = to - from;
    const at = `byte ${from.toLocaleString('en-US')}`;
    if (to === size && reason.startsWith(CUT_REASON)) {
      onDamage({
        kind: 'gzip_cut',
        bytes,
        line,
        message: `the gzip stream is cut short in its last member at ${at} (the run was killed while writing?)`,
      });
      return;
    }
    const dropped =
      lines > 0
        ? `, with the ${lines.toLocaleString('en-US')} line(s) of a member that fails its checksum`
        : '';
    onDamage({
      kind: 'gzip_damaged',
      bytes,
      lines,
      line,
      message: `${bytes.toLocaleString('en-US')} damaged bytes of the gzip stream from ${at} (${reason})${dropped}: skipped to the ${to < size ? 'next intact member' : 'end'}`,
    });
  };
  let at = 0;
  /** Members are read one by one up to here (a batch that failed: damage is in it). */
  let oneByOne = 0;
  while (at < size) {
    if (!stretch && at >= oneByOne) {
      const batch = await inflateBatch(win, at);
      if (batch.ok) {
        if (batch.out.length > 0) yield batch.out;
        at += batch.taken;
        continue;
      }
      oneByOne = batch.end;
    }
    await win.hold(at, HEAD_BYTES);
    const head = headerLength(win.from(at));
    if (head <= 0) {
      const cut = head === -1 && win.end >= size;
      if (open(at, cut ? `${CUT_REASON} header` : 'bytes that are no gzip member')) yield CUT;
      at = await nextMagic(win, at + 1);
      continue;
    }
    const body = at + head;
    let inflated = inflateHeld(win, body, !stretch);
    if (inflated === 'more' && win.start < at) {
      await win.hold(at, WINDOW_BYTES);
      inflated = inflateHeld(win, body, !stretch);
    }
    if (inflated === 'more' || inflated.ok === 'stream') {
      // Larger than a window, or than a member held at once: streamed, its lines as they come.
      const streamed = yield* streamMember(file, size, body);
      if (streamed.ok) {
        close(at);
        at = body + streamed.taken;
        continue;
      }
      if (open(at, streamed.reason)) yield CUT;
      at = await nextMagic(win, at + 1);
      continue;
    }
    if (inflated.ok) {
      close(at);
      if (inflated.out.length > 0) yield inflated.out;
      at = body + inflated.taken;
      continue;
    }
    // A damaged or cut member: the whole lines inflated before the damage are kept, unless it
    // is a candidate found inside a damaged stretch (unproven: its bytes may be anything).
    if (!stretch && inflated.out.length > 0) yield inflated.out;
    if (open(at, inflated.reason)) yield CUT;
    if (stretch) stretch.lines += inflated.lines ?? 0;
    at = await nextMagic(win, at + 1);
  }
  close(size);
}

/** The reason of a member that ends with the file before it does. */
const CUT_REASON = 'cut short';

/**
 * The whole members from `at` up to about BATCH_BYTES on, inflated at once (gzip's own
 * multi-member reading, which checks each member's checksum): the batch ends where the last
 * member header in it starts, so it holds whole members only. One call for many members costs
 * far less than one a member (a run with --workers 0 writes one a record). Not ok (and where
 * it would have ended) when anything in it fails, or it would inflate to more than
 * MEMBER_OUT_BYTES: those members are then read one by one.
 */
async function inflateBatch(
  win: Window,
  at: number,
): Promise<{ ok: true; out: Buffer; taken: number } | { ok: false; end: number }> {
  await win.hold(at, BATCH_BYTES + HEAD_BYTES);
  let end = Math.min(win.end, at + BATCH_BYTES);
  if (end < win.size) {
    // The last member header in the batch (a plausible one: a false one fails the batch).
    let header = win.bytes.lastIndexOf(MAGIC, end - win.start);
    while (header !== -1 && win.start + header > at) {
      if (headerLength(win.from(win.start + header)) > 0) break;
      header = header === 0 ? -1 : win.bytes.lastIndexOf(MAGIC, header - 1);
    }
    if (header === -1 || win.start + header <= at) return { ok: false, end: at + 1 };
    end = win.start + header;
  }
  const input = win.bytes.subarray(at - win.start, end - win.start);
  try {
    const { buffer, engine } = zlib.gunzipSync(input, {
      info: true,
      maxOutputLength: MEMBER_OUT_BYTES,
    }) as unknown as { buffer: Buffer; engine: zlib.Gunzip };
    if (engine.bytesWritten === input.length) return { ok: true, out: buffer, taken: input.length };
  } catch {
    // Damage, a false header, a member past the batch or too large: one by one.
  }
  return { ok: false, end };
}

/** The next offset from `from` where gzip's magic bytes stand (the file's size: none). */
async function nextMagic(win: Window, from: number): Promise<number> {
  for (let at = from; at < win.size; ) {
    // Searched where it is held; read again only past the window (many false headers in a
    // damaged stretch must not each read a window).
    if (at < win.start || at + MAGIC.length > win.end) await win.hold(at, WINDOW_BYTES);
    const found = win.bytes.indexOf(MAGIC, at - win.start);
    if (found !== -1) return win.start + found;
    // The magic may straddle the window's end.
    if (win.end >= win.size) return win.size;
    at = Math.max(at + 1, win.end - 2);
  }
  return win.size;
}

/**
 * Streams the member whose deflate data starts at `body`: its inflated bytes as they come,
 * `STREAM_FEED_BYTES` of input at a time.
 */
async function* streamMember(
  file: FileHandle,
  size: number,
  body: number,
): AsyncGenerator<Buffer, { ok: true; taken: number } | { ok: false; reason: string }> {
  const inflate = zlib.createInflateRaw({ chunkSize: 64 << 10 });
  const out: Buffer[] = [];
  let crc = 0;
  let outBytes = 0;
  inflate.on('data', (b: Buffer) => {
    out.push(b);
    outBytes += b.length;
    if (crc32) crc = crc32(b, crc);
  });
  let failed: Error | undefined;
  inflate.on('error', (err) => {
    failed = err;
  });
  let fed = 0;
  try {
    for (let at = body; at < size && fed === inflate.bytesWritten && !failed; ) {
      const chunk = Buffer.allocUnsafe(Math.min(STREAM_FEED_BYTES, size - at));
      const { bytesRead } = await file.read(chunk, 0, chunk.length, at);
      at += bytesRead;
      fed += bytesRead;
      await new Promise<void>((done) => inflate.write(chunk.subarray(0, bytesRead), () => done()));
      // A line past the bound (a gzip bomb) is dropped by the splitter as it passes, and the
      // member read on: deflate expands at most ~1,032x, so this costs time in proportion to
      // the file, and the complete records after the bomb are kept.
      for (const b of out.splice(0)) yield b;
    }
    if (!failed && fed === inflate.bytesWritten) {
      // The input ended and the member did not.
      await new Promise<void>((done) => inflate.end(() => done()));
      for (const b of out.splice(0)) yield b;
    }
    if (failed) {
      const cut = (failed as NodeJS.ErrnoException).code === 'Z_BUF_ERROR';
      return {
        ok: false,
        reason: cut ? `${CUT_REASON}: ${failed.message}` : failed.message,
      };
    }
    const trailer = body + inflate.bytesWritten;
    const t = Buffer.alloc(8);
    const { bytesRead } = await file.read(t, 0, 8, trailer);
    if (bytesRead < 8) return { ok: false, reason: `${CUT_REASON}: the checksum is missing` };
    if ((crc32 && crc !== t.readUInt32LE(0)) || outBytes % 2 ** 32 !== t.readUInt32LE(4)) {
      return { ok: false, reason: 'bad checksum' };
    }
    return { ok: true, taken: inflate.bytesWritten + 8 };
  } finally {
    inflate.destroy();
  }
}
