/**
 * BodyText gives exactly what one streaming TextDecoder gives for the whole body, however the
 * body is cut into pieces: whole characters, characters split across pieces, invalid bytes,
 * and a BOM at the start (dropped) or later (kept).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { BodyText } from '../../../src/loadgen/bodyText.js';

/** Bytes that favour UTF-8's edge cases: ASCII, lead and continuation bytes, a BOM, emoji. */
const piece = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 8 }).map((s) => [...Buffer.from(s)]),
  fc.array(fc.integer({ min: 0x80, max: 0xff }), { maxLength: 4 }),
  fc.constant([0xef, 0xbb, 0xbf]),
  fc.constant([...Buffer.from('data: {"text":"é😀"}\n\n')]),
);

function reference(body: Buffer): string {
  return new TextDecoder('utf-8').decode(body);
}

describe('BodyText', () => {
  test('equals one TextDecoder over the whole body, however it is cut', () => {
    fc.assert(
      fc.property(
        fc.array(piece, { maxLength: 12 }),
        fc.array(fc.nat(), { maxLength: 6 }),
        (parts, cuts) => {
          const body = Buffer.from(parts.flat());
          const points = [...new Set(cuts.map((c) => c % (body.length + 1)))].sort((a, b) => a - b);
          const text = new BodyText();
          let out = '';
          let from = 0;
          for (const at of [...points, body.length]) {
            out += text.decode(body.subarray(from, at));
            from = at;
          }
          // The streaming decoder's end: a character still split is one U+FFFD.
          assert.equal(out + (endsCut(body) ? '\ufffd' : ''), reference(body));
        },
      ),
      { numRuns: 3000 },
    );
  });
});

/** Whether the body ends inside a character (what the last decode left pending). */
function endsCut(body: Buffer): boolean {
  const whole = new TextDecoder('utf-8').decode(body);
  const streamed = new TextDecoder('utf-8').decode(body, { stream: true });
  return whole !== streamed;
}
