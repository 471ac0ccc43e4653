import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { openaiChunkScanner, sharedChunkScanner } from '../../../src/backends/openaiScan.js';
import { Timeline } from '../../../src/backends/timeline.js';

/** The holes the shared scanner keeps between chunks (its three lists). */
const holes = () => {
  const { holeStart, holeEnd, holeKind } = sharedChunkScanner;
  assert.equal(holeEnd.length, holeStart.length);
  assert.equal(holeKind.length, holeStart.length);
  return holeStart.length;
};

/**
 * Feeds `events` chunks of one stream, chunk `i` from `chunk(i)`, counting those read by the
 * template (`match`) rather than scanned whole.
 */
function feed(chat: boolean, events: number, chunk: (i: number) => string) {
  const scan = openaiChunkScanner(chat);
  const { match } = sharedChunkScanner;
  let matched = 0;
  sharedChunkScanner.match = function (...args) {
    const ok = match.apply(this, args);
    if (ok) matched++;
    return ok;
  };
  const held: number[] = [];
  try {
    let t = new Timeline(0);
    for (let i = 0; i < events; i++) {
      // A fresh timeline now and then: its own events are not what this test measures.
      if (i % 50_000 === 0) t = new Timeline(0);
      const text = chunk(i);
      assert.equal(scan(text, 0, text.length, t), true, text);
      if (i === 0 || i === events - 1) held.push(holes());
    }
  } finally {
    Reflect.deleteProperty(sharedChunkScanner, 'match');
  }
  return { matched, held };
}

describe('OpenAI field scanner: what it keeps between chunks (issue 27 case 9)', () => {
  it('keeps one chunk of number positions however many chunks match its template', () => {
    // Per-event usage (continuous_usage_stats) and a `created` that moves: seven numbers a chunk.
    const events = 200_000;
    const { matched, held } = feed(
      true,
      events,
      (i) =>
        `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":${1_733_100_000 + (i >> 4)},"model":"m","choices":[{"index":0,"delta":{"content":" t${i % 7}"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":12,"total_tokens":${12 + i},"completion_tokens":${i}}}`,
    );
    // Every chunk after the first read by the template: the path that kept a position per number.
    assert.equal(matched, events - 1);
    // id, object, created, model, index, content, prompt_tokens, total_tokens,
    // completion_tokens: the first chunk's.
    assert.deepEqual(held, [9, 9]);
  });

  it("reads every stream's chunks by one template, whatever their id (issue 29)", () => {
    // 256 streams taking turns, as a run's reads do: a template per stream held one in flight.
    const streams = 256;
    const { matched } = feed(
      true,
      streams * 8,
      (i) =>
        `{"id":"chatcmpl-${i % streams}","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" t"},"logprobs":null,"finish_reason":null}]}`,
    );
    assert.equal(matched, streams * 8 - 1);
  });

  it('keeps them bounded for completions with usage-only chunks too', () => {
    const events = 20_000;
    const { matched, held } = feed(false, events, (i) =>
      i % 2 === 0
        ? `{"id":"cmpl-1","created":${i},"choices":[{"index":0,"text":"x${i}","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":{"prompt_tokens":5,"completion_tokens":${i}}}`
        : `{"id":"cmpl-1","created":${i},"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":${i},"total_tokens":${i + 5}}}`,
    );
    // The two shapes take turns: each is read by its own template, the last two being kept.
    assert.equal(matched, events - 2);
    assert.ok(held.every((n) => n <= 6));
    const same = feed(false, events, (i) => `{"choices":[],"usage":{"completion_tokens":${i}}}`);
    assert.equal(same.matched, events - 1);
    assert.deepEqual(same.held, [1, 1]);
  });
});

describe('OpenAI field scanner: the work of a read (issue 27)', () => {
  it('costs linear time on a read of many chunks that do not match the template', () => {
    // A reasoning model's stream: its first chunk becomes the template; its reasoning chunks do
    // not match it (nor become one), and each match failed by searching on through the read.
    const role =
      '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}';
    const reasoning = (i: number) =>
      `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":" r${i}"},"logprobs":null,"finish_reason":null}]}`;
    /** Milliseconds to scan a stream of `chunks` such chunks, in one read or one read each. */
    const stream = (chunks: number, oneRead: boolean) => {
      const reads: { text: string; start: number; end: number }[] = [];
      let read = '';
      for (let i = 0; i < chunks; i++) {
        const start = (oneRead ? read.length : 0) + 'data: '.length;
        const text = `data: ${reasoning(i)}\n\n`;
        read = oneRead ? read + text : text;
        reads.push({ text: read, start, end: start + reasoning(i).length });
      }
      if (oneRead) for (const r of reads) r.text = read;
      const scan = openaiChunkScanner(true);
      const t = new Timeline(0);
      assert.equal(scan(role, 0, role.length, t), true);
      const started = performance.now();
      for (const { text, start, end } of reads) assert.equal(scan(text, start, end, t), true);
      const ms = performance.now() - started;
      assert.equal(t.eventCount, chunks + 1);
      return ms;
    };
    // Compiled first; then the best of three, each way, against the machine's noise.
    stream(2000, true);
    stream(2000, false);
    const best = (oneRead: boolean) => Math.min(...[0, 1, 2].map(() => stream(8000, oneRead)));
    const [apart, together] = [best(false), best(true)];
    // About the same (20 ms); searching on through the rest of the read for each chunk made
    // the read of 8,000 chunks take 30 times as long as the chunks one read each.
    assert.ok(
      together < 4 * apart + 20,
      `${Math.round(together)} ms in one read, ${Math.round(apart)} ms one read each`,
    );
  });
});
