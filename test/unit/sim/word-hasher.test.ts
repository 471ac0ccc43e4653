/**
 * Virtual time keys a session's prefix cache by hashing the prompt's texts as it reads them
 * (WordHasher), where the HTTP simulator splits the words first (promptBlockHashes): the two must
 * give the same blocks, or a virtual session would hit the cache where the HTTP one misses.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  CONTENT_ANSWER,
  DEFAULT_ANSWER_OPTIONS,
  DEFAULT_MAX_TOKENS,
  readRequest,
} from '../../../src/sim/answer.js';
import { promptBlockHashes, WordHasher } from '../../../src/sim/physical.js';
import { splitWords, toolsPromptText } from '../../../src/workload/words.js';

test('WordHasher fed text by text gives promptBlockHashes of the split words, and their count', () => {
  const texts = [
    'system  prompt\twith\r\nmixed   whitespace ',
    '',
    '  ',
    'search{"query": "a b"}',
    'é ü 日本 words\nacross lines',
    ...Array.from({ length: 40 }, (_, i) => `w${i} x${i * 7}`),
  ];
  for (const blockSize of [1, 3, 16]) {
    const hasher = new WordHasher(blockSize);
    for (const t of texts) hasher.feed(t);
    const words = texts.flatMap(splitWords);
    assert.equal(hasher.words, words.length);
    assert.deepEqual(hasher.hashes, promptBlockHashes(words, blockSize));
  }
});

test('readRequest: the prompt texts in the template order, the output limit, or the 400 message', () => {
  const tool = { type: 'function', function: { name: 'search', parameters: {} } };
  const body = {
    tools: [tool],
    messages: [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: [{ type: 'text', text: 'find x' }] },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'c', type: 'function', function: { name: 'search', arguments: '{"q": "x"}' } },
        ],
      },
      { role: 'tool', content: 'found x' },
    ],
  };
  const read = readRequest('chat', body, '1', DEFAULT_ANSWER_OPTIONS);
  assert.ok(typeof read !== 'string');
  assert.deepEqual(read.promptTexts, [
    toolsPromptText([tool]),
    'be brief',
    'find x',
    'search{"q": "x"}',
    'found x',
  ]);
  assert.equal(read.maxTokens, DEFAULT_MAX_TOKENS);
  assert.deepEqual(
    readRequest('completions', { prompt: 'a b', max_tokens: 3 }, '1', DEFAULT_ANSWER_OPTIONS),
    { promptTexts: ['a b'], maxTokens: 3, plan: CONTENT_ANSWER },
  );
  assert.match(
    readRequest(
      'chat',
      { messages: [{ role: 'user', content: 3 }] },
      '1',
      DEFAULT_ANSWER_OPTIONS,
    ) as string,
    /must be text/,
  );
  assert.match(
    readRequest(
      'completions',
      { prompt: 'a', max_tokens: -1 },
      '1',
      DEFAULT_ANSWER_OPTIONS,
    ) as string,
    /max_tokens/,
  );
});
