import { TextDecoder } from 'node:util';

const BOM = 0xfeff;

/**
 * A response body's bytes as text, piece by piece, as one streaming TextDecoder would give it
 * (invalid bytes become U+FFFD, a BOM at the body's start is dropped). Pieces that end on a
 * character boundary (nearly all: servers write whole events) are decoded at once by Buffer's
 * UTF-8 decoder; TextDecoder's streaming mode, several times dearer per call on Node 20, takes
 * over only while a character is split between pieces.
 */
export class BodyText {
  private decoder: TextDecoder | undefined;
  /** The streaming decoder may hold the start of a character split between pieces. */
  private split = false;
  private atStart = true;

  decode(chunk: Buffer): string {
    return this.decodeRange(chunk, 0, chunk.length);
  }

  /** `decode(buffer.subarray(start, end))`, with no view made where none is needed. */
  decodeRange(buffer: Buffer, start: number, end: number): string {
    let text: string;
    if (!this.split && endsOnBoundary(buffer, start, end))
      text = buffer.toString('utf8', start, end);
    else {
      const chunk = buffer.subarray(start, end);
      // ignoreBOM: only the body's first character may be dropped, and that is done below.
      this.decoder ??= new TextDecoder('utf-8', { ignoreBOM: true });
      text = this.decoder.decode(chunk, { stream: true });
      this.split = !endsOnBoundary(chunk);
    }
    if (this.atStart && text.length > 0) {
      this.atStart = false;
      if (text.charCodeAt(0) === BOM) text = text.slice(1);
    }
    return text;
  }
}

/** Whether `bytes[start, end)` ends with a whole UTF-8 character (or is empty). */
export function endsOnBoundary(bytes: Uint8Array, start = 0, end = bytes.length): boolean {
  const n = end;
  if (n === start || bytes[n - 1] < 0x80) return true;
  // Back over continuation bytes (10xxxxxx) to the character's lead byte.
  let i = n - 1;
  while (i > n - 4 && i > start && (bytes[i] & 0xc0) === 0x80) i--;
  const lead = bytes[i];
  const length = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 0;
  return length === n - i;
}
