/**
 * Virtual time keys a session's prefix cache by hashing the prompt's texts as it reads them
 * (WordHasher), where the HTTP simulator splits the words first (promptBlockHashes): the two must
 * give the same blocks, or a virtual session would hit the cache where the HTTP one misses.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chatPromptTexts, chatPromptWords } from '../../../src/sim/answer.js';
import { promptBlockHashes, WordHasher } from '../../../src/sim/physical.js';
import { splitWords } from '../../../src/workload/words.js';

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

test('chatPromptTexts are the texts chatPromptWords splits, in the template order', () => {
  const body = {
    tools: [{ type: 'function', function: { name: 'search', parameters: {} } }],
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
  const texts = chatPromptTexts(body);
  assert.ok(Array.isArray(texts));
  assert.deepEqual(texts.flatMap(splitWords), chatPromptWords(body));
  assert.equal(texts[0].startsWith('{"type": "function"'), true);
  assert.match(
    chatPromptTexts({ messages: [{ role: 'user', content: 3 }] }) as string,
    /must be text/,
  );
});
