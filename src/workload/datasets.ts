import { extname } from 'node:path';
import { MAX_TOKEN_COUNT } from '../backends/timeline.js';
import { jsonSyntaxProblem } from '../jsonText.js';
import { readTextFile } from './textFile.js';
import { Problems } from './trace.js';

/**
 * - `sharegpt`: a JSON array of `{id?, conversations: [{from: 'human' | 'gpt' | ..., value}]}`
 *   (ShareGPT_V3_unfiltered_cleaned_split.json and its kin).
 * - `jsonl`: one request a line, `{"prompt": "..."}` or `{"messages": [{"role", "content"}]}`,
 *   with an optional `max_tokens` (or `max_completion_tokens`).
 * - `text`: a plain-text corpus, for prompts sliced to the lengths a plan asks for.
 */
export type DatasetFormat = 'sharegpt' | 'jsonl' | 'text';

export interface ChatMessage {
  role: string;
  content: string;
}

/** One request's content; exactly one of `prompt` and `messages` is set. */
export interface DatasetEntry {
  prompt?: string;
  messages?: ChatMessage[];
  /** The output length the dataset asks for (JSONL `max_tokens`). */
  outputTokens?: number;
  /**
   * The reference answer (ShareGPT: the first model turn after the prompt). Its length in
   * tokens, measured with the run's tokenizer, is the request's output length, as in vLLM.
   */
  outputText?: string;
  /**
   * Every turn of the conversation (ShareGPT read with `allTurns`), for multi-turn sessions:
   * each non-empty human message and the model's answer after it, if one came before the next.
   */
  turns?: DatasetTurn[];
}

/** One turn of a ShareGPT conversation. */
export interface DatasetTurn {
  user: string;
  /** The reference answer (absent when the next message is the user's again, or none came). */
  answer?: string;
}

export interface DatasetOptions {
  /**
   * ShareGPT: keep every turn of each conversation (`turns`), for session workloads; without
   * it only the first human turn and its answer are kept (single-turn workloads).
   */
  allTurns?: boolean;
}

/**
 * A dataset: entries to send (ShareGPT, JSONL), or a text corpus that the prompt synthesiser
 * slices to lengths (`text`: the whole file, BOM removed, otherwise as written).
 */
export type Dataset =
  | {
      format: 'sharegpt' | 'jsonl';
      entries: DatasetEntry[];
      /** ShareGPT conversations without a (non-empty) human turn, left out as vLLM does. */
      skipped: number;
    }
  | { format: 'text'; text: string };

/** Who speaks for the user and for the model in ShareGPT conversations. */
const HUMAN = new Set(['human', 'user']);
const MODEL = new Set(['gpt', 'assistant', 'chatgpt', 'bard', 'bing', 'model']);

/**
 * Reads a dataset; `format` is detected when not given: `.txt`/`.md` are text, `.jsonl`/
 * `.ndjson` JSONL; otherwise the content decides (`[` ShareGPT, `{` JSONL, anything else text).
 * Errors name the file and the line (JSONL, from 1) or the entry (ShareGPT, the array index
 * from 0) and the field at fault, up to 10 in one Error. An empty dataset is an error.
 */
export function readDataset(
  path: string,
  format?: DatasetFormat,
  options: DatasetOptions = {},
): Dataset {
  const text = readTextFile(path, 'dataset');
  return parseDataset(text, format ?? detectDatasetFormat(path, text), path, options);
}

/** The format readDataset assumes for `path` with this content. */
export function detectDatasetFormat(path: string, text: string): DatasetFormat {
  const ext = extname(path).toLowerCase();
  if (ext === '.txt' || ext === '.text' || ext === '.md') return 'text';
  if (ext === '.jsonl' || ext === '.ndjson') return 'jsonl';
  const start = stripBom(text).trimStart()[0];
  if (start === '[') return 'sharegpt';
  if (start === '{') return 'jsonl';
  return 'text';
}

/** readDataset on text already in memory. */
export function parseDataset(
  text: string,
  format: DatasetFormat,
  source = 'dataset',
  options: DatasetOptions = {},
): Dataset {
  const content = stripBom(text);
  if (format === 'text') {
    if (content.trim() === '') throw new Error(`${source}: the text corpus is empty`);
    return { format: 'text', text: content };
  }
  if (format === 'sharegpt') return parseShareGpt(content, source, options.allTurns === true);
  if (format === 'jsonl') return parseJsonlDataset(content, source);
  throw new Error(`${source}: unknown dataset format "${format}" (sharegpt, jsonl or text)`);
}

function parseShareGpt(text: string, source: string, allTurns: boolean): Dataset {
  let root: unknown;
  try {
    root = JSON.parse(text);
  } catch (err) {
    throw new Error(`${source}: ${jsonSyntaxProblem(err, text)}`);
  }
  if (!Array.isArray(root)) {
    throw new Error(`${source}: a ShareGPT dataset is a JSON array of {conversations: [...]}`);
  }
  const problems = new Problems(source, 'entry');
  const entries: DatasetEntry[] = [];
  let skipped = 0;
  for (let index = 0; index < root.length; index++) {
    const turns = shareGptTurns(root[index], index, problems);
    if (!turns) continue;
    const human = turns.findIndex((t) => HUMAN.has(t.from) && t.value.trim() !== '');
    if (human < 0) {
      skipped++;
      continue;
    }
    const entry: DatasetEntry = { prompt: turns[human].value };
    const answer = turns.slice(human + 1).find((t) => MODEL.has(t.from));
    if (answer) entry.outputText = answer.value;
    if (allTurns) entry.turns = conversationTurns(turns.slice(human));
    entries.push(entry);
  }
  problems.throwIfAny();
  if (entries.length === 0) {
    throw new Error(
      `${source}: no entries${skipped > 0 ? ` (${skipped} conversations without a human turn)` : ''}`,
    );
  }
  return { format: 'sharegpt', entries, skipped };
}

/**
 * Human messages and their answers, from the first human message on: a model message answers
 * the human message before it; a second one in a row, or one after an empty human message, is
 * left out.
 */
function conversationTurns(messages: readonly { from: string; value: string }[]): DatasetTurn[] {
  const turns: DatasetTurn[] = [];
  let open: DatasetTurn | undefined;
  for (const m of messages) {
    if (HUMAN.has(m.from)) {
      open = m.value.trim() !== '' ? { user: m.value } : undefined;
      if (open) turns.push(open);
    } else if (MODEL.has(m.from) && open && open.answer === undefined) {
      open.answer = m.value;
    }
  }
  return turns;
}

/** The turns of ShareGPT entry `index` (`from` lower-cased), or undefined after problems. */
function shareGptTurns(
  item: unknown,
  index: number,
  problems: Problems,
): { from: string; value: string }[] | undefined {
  if (!isObject(item)) {
    problems.add(index, 'expected an object');
    return undefined;
  }
  const conversations = item.conversations;
  if (!Array.isArray(conversations)) {
    problems.add(index, `conversations must be an array, got ${describe(conversations)}`);
    return undefined;
  }
  const turns: { from: string; value: string }[] = [];
  for (let t = 0; t < conversations.length; t++) {
    const turn: unknown = conversations[t];
    const field = `conversations[${t}]`;
    if (!isObject(turn)) problems.add(index, `${field} must be an object`);
    else if (typeof turn.from !== 'string') {
      problems.add(index, `${field}.from must be a string, got ${describe(turn.from)}`);
    } else if (typeof turn.value !== 'string') {
      problems.add(index, `${field}.value must be a string, got ${describe(turn.value)}`);
    } else {
      turns.push({ from: turn.from.toLowerCase(), value: turn.value });
      continue;
    }
    return undefined;
  }
  return turns;
}

function parseJsonlDataset(text: string, source: string): Dataset {
  const problems = new Problems(source, 'line');
  const entries: DatasetEntry[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i].trim();
    if (raw === '') continue;
    const line = i + 1;
    let o: unknown;
    try {
      o = JSON.parse(raw);
    } catch (err) {
      problems.add(line, jsonSyntaxProblem(err, raw));
      continue;
    }
    if (!isObject(o)) {
      problems.add(line, 'expected a JSON object');
      continue;
    }
    const before = problems.count;
    const entry: DatasetEntry = {};
    if ('prompt' in o && 'messages' in o) {
      problems.add(line, 'has both prompt and messages; give one');
    } else if ('prompt' in o) {
      if (typeof o.prompt !== 'string' || o.prompt === '') {
        problems.add(line, `prompt must be a non-empty string, got ${describe(o.prompt)}`);
      } else entry.prompt = o.prompt;
    } else if ('messages' in o) {
      const messages = chatMessages(o.messages, line, problems);
      if (messages) entry.messages = messages;
    } else {
      problems.add(line, 'needs prompt (a string) or messages ([{role, content}])');
    }
    const maxKey = 'max_tokens' in o ? 'max_tokens' : 'max_completion_tokens';
    const max = o[maxKey];
    if (max !== undefined && max !== null) {
      if (
        typeof max !== 'number' ||
        !Number.isSafeInteger(max) ||
        max < 1 ||
        max > MAX_TOKEN_COUNT
      ) {
        problems.add(
          line,
          `${maxKey} must be a whole number from 1 to ${MAX_TOKEN_COUNT}, got ${describe(max)}`,
        );
      } else entry.outputTokens = max;
    }
    if (problems.count === before) entries.push(entry);
  }
  problems.throwIfAny();
  if (entries.length === 0) throw new Error(`${source}: no entries`);
  return { format: 'jsonl', entries, skipped: 0 };
}

function chatMessages(value: unknown, line: number, problems: Problems): ChatMessage[] | undefined {
  if (!Array.isArray(value) || value.length === 0) {
    problems.add(line, `messages must be a non-empty array, got ${describe(value)}`);
    return undefined;
  }
  const messages: ChatMessage[] = [];
  for (let m = 0; m < value.length; m++) {
    const message: unknown = value[m];
    if (!isObject(message) || typeof message.role !== 'string') {
      problems.add(line, `messages[${m}].role must be a string`);
      return undefined;
    }
    if (typeof message.content !== 'string') {
      problems.add(
        line,
        `messages[${m}].content must be a string (multimodal content is not supported), got ${describe(message.content)}`,
      );
      return undefined;
    }
    messages.push({ role: message.role, content: message.content });
  }
  return messages;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function describe(v: unknown): string {
  if (v === undefined) return 'nothing';
  const text = JSON.stringify(v);
  return text.length > 40 ? `${text.slice(0, 40)}...` : text;
}

function stripBom(text: string): string {
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}
