/**
 * The fake OpenAI server of the side-by-side benchmark (bench/fake-server/): what it sends is what
 * a real client reads, and what it logs of its own sends is what it sent.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { buildFakeServer, startFakeServer } from '../../bench/fake-server/fakeServer.js';
import { runCli, tempDir } from '../helpers/cli.js';

const noCompiler =
  spawnSync('cc', ['--version']).status !== 0 && 'no C compiler (cc) on this machine';

/** One request on its own connection (as vLLM's client sends), the body read whole. */
function postOnce(
  port: number,
  path: string,
  body: object,
): Promise<{ headers: object; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { port, path, method: 'POST', agent: false, headers: { 'content-type': 'application/json' } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => resolve({ headers: res.headers, text }));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

describe('fake OpenAI server (bench:peer)', { skip: noCompiler }, () => {
  const dir = tempDir('fake-server-');
  const binary = noCompiler ? '' : buildFakeServer(dir);
  const start = (
    name: string,
    schedule: { ttftMs: number; itlMs: number; tokensPerEvent: number },
  ) => startFakeServer({ binary, ...schedule, model: 'fake', statsPath: join(dir, `${name}.f64`) });

  test('a real infergauge run of 20 requests: every token counted, on both sides', async () => {
    const server = await start('run', { ttftMs: 0, itlMs: 0, tokensPerEvent: 1 });
    const out = join(dir, 'run');
    const cli = await runCli([
      'run',
      '--url',
      `http://127.0.0.1:${server.port}`,
      '--endpoint',
      'completions',
      '--model',
      'fake',
      '--input-tokens',
      '32',
      '--output-tokens',
      '16',
      '--ignore-eos',
      '--requests',
      '20',
      '--concurrency',
      '4',
      '--out',
      out,
      '--no-server-metrics',
      '--no-html',
      '--json',
    ]);
    const log = await server.stop();
    assert.equal(cli.code, 0, cli.stderr);
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
    assert.equal(summary.requests.completed, 20);
    assert.equal(summary.requests.failed, 0);
    assert.equal(summary.tokens.output, 20 * 16);
    assert.equal(summary.streaming.tokenCountMismatches, 0);
    assert.equal(summary.streaming.tokensPerEvent, 1);
    assert.equal(log.requests, 20);
    assert.equal(log.completeRequests, 20);
    assert.equal(log.events, 20 * 16);
    assert.equal(log.tokens, 20 * 16);
    assert.equal(log.ttftMs.length, 20);
    assert.equal(log.eventGapMs.length, 20 * 15);
  });

  test('a new connection per request, chat shape, tokens grouped per event, the schedule kept', async () => {
    const server = await start('chat', { ttftMs: 30, itlMs: 5, tokensPerEvent: 3 });
    const answers = await Promise.all(
      [7, 3].map((maxTokens) =>
        postOnce(server.port, '/v1/chat/completions', {
          model: 'asked-for',
          messages: [{ role: 'user', content: 'one two three' }],
          max_completion_tokens: maxTokens,
          stream: true,
        }),
      ),
    );
    const log = await server.stop();
    const [seven, three] = answers.map(({ text }) =>
      text
        .split('\n\n')
        .filter((e) => e.startsWith('data: '))
        .map((e) => e.slice(6)),
    );
    assert.equal(answers[0].headers['content-type' as keyof object], 'text/event-stream');
    assert.equal(seven.at(-1), '[DONE]');
    const chunks = seven.slice(0, -1).map((e) => JSON.parse(e));
    assert.deepEqual(
      chunks
        .slice(0, 3)
        .map((c) => [c.model, c.choices[0].delta.content, c.choices[0].finish_reason]),
      [
        ['asked-for', ' tok tok tok', null],
        ['asked-for', ' tok tok tok', null],
        ['asked-for', ' tok', 'length'],
      ],
    );
    assert.deepEqual(chunks[3].choices, []);
    assert.deepEqual(chunks[3].usage, { prompt_tokens: 3, completion_tokens: 7, total_tokens: 10 });
    assert.equal(three.length, 3); // one token event, usage, [DONE]
    assert.equal(log.events, 3 + 1);
    assert.equal(log.completeRequests, 2);
    // Never early against its own schedule: first event at TTFT or later, no negative lag.
    for (const ttft of log.ttftMs) assert.ok(ttft >= 30, `TTFT ${ttft} ms`);
    for (const lag of log.lagMs) assert.ok(lag >= 0, `lag ${lag} ms`);
  });

  test('a client gone mid-stream: the server goes on serving and logs the events it sent', async () => {
    const server = await start('gone', { ttftMs: 0, itlMs: 20, tokensPerEvent: 1 });
    await new Promise<void>((resolve, reject) => {
      const req = request(
        { port: server.port, path: '/v1/completions', method: 'POST', agent: false },
        (res) =>
          res.once('data', () => {
            req.destroy();
            resolve();
          }),
      );
      req.on('error', reject);
      req.end(JSON.stringify({ model: 'fake', prompt: 'x', max_tokens: 100, stream: true }));
    });
    const after = await postOnce(server.port, '/v1/completions', { prompt: 'x', max_tokens: 2 });
    const log = await server.stop();
    assert.match(after.text, /data: \[DONE\]/);
    assert.equal(log.requests, 2);
    assert.equal(log.completeRequests, 1);
    assert.ok(log.events >= 3 && log.events < 100 + 2, `${log.events} events`);
  });
});
