/**
 * What a user says about a run beside its options: tags (`--tag nightly`) that name the series
 * it belongs to, a one-line note, and facts about the server that the tool cannot learn itself
 * (`--server-info tp=4`, `--server-info vllm-flags=--enable-prefix-caching`). They travel in
 * the plan, so every manifest of the run carries them, and `history` and `compare` read them.
 */
import { SECRET_NAME } from '../backends/request.js';
import type { Field } from './fields.js';

/** The most tags one run carries: enough for series, model, hardware and a ticket. */
export const MAX_TAGS = 16;
export const MAX_TAG_CHARS = 64;
export const MAX_NOTE_CHARS = 500;
/** `--server-info` keys a run carries, and the characters of each value. */
export const MAX_SERVER_INFO_KEYS = 32;
export const MAX_SERVER_INFO_VALUE_CHARS = 200;

/** Characters a tag may hold: safe in a file name, a URL query and a shell word alike. */
const TAG = /^[A-Za-z0-9._:/-]+$/;
/** Keys of `--server-info`: an engine flag's name without its dashes, or a fact's name. */
const INFO_KEY = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** Any C0 or C1 control character, DEL included: a note or value is one printable line. */
const CONTROL = /\p{Cc}/u;

const kindOf = (raw: unknown) => (Array.isArray(raw) ? 'a list' : `a ${typeof raw}`);

/** One tag or a list of them (repeatable `--tag`, a plan's `tags:`), each checked, in order. */
export const tagsField: Field<string[]> = (raw) => {
  const list = typeof raw === 'string' ? [raw] : raw;
  if (!Array.isArray(list))
    return { problem: `must be text or a list of text, not ${kindOf(raw)}` };
  const tags: string[] = [];
  for (const tag of list) {
    if (typeof tag !== 'string') return { problem: `must be text, not ${kindOf(tag)}` };
    if (tag.length === 0) return { problem: 'must not be empty' };
    if (tag.length > MAX_TAG_CHARS) {
      return {
        problem: `"${shown(tag)}" is ${tag.length} characters long; a tag holds at most ${MAX_TAG_CHARS}`,
      };
    }
    if (!TAG.test(tag)) {
      return {
        problem: `"${shown(tag)}" may hold only letters, digits and . _ : - /${tag.includes(',') ? '; give each tag its own --tag' : ''}`,
      };
    }
    // The same tag twice names one series once.
    if (!tags.includes(tag)) tags.push(tag);
  }
  if (tags.length > MAX_TAGS) {
    return { problem: `is given ${tags.length} times; a run carries at most ${MAX_TAGS} tags` };
  }
  return { value: tags };
};

/** One printable line of at most MAX_NOTE_CHARS characters. */
export const noteField: Field<string> = (raw) => {
  if (typeof raw !== 'string') return { problem: `must be text, not ${kindOf(raw)}` };
  const note = raw.trim();
  if (note.length === 0) return { problem: 'must not be empty' };
  if (CONTROL.test(note)) {
    return {
      problem: 'must be one line without control characters (a line break, a tab, an escape)',
    };
  }
  if (note.length > MAX_NOTE_CHARS) {
    return {
      problem: `is ${note.length} characters long; a note holds at most ${MAX_NOTE_CHARS} (one line)`,
    };
  }
  return { value: note };
};

/**
 * `KEY=VALUE` facts (repeatable `--server-info`; a plan's `server-info:` as such text, a list of
 * it, or a mapping). A key named like a credential is refused rather than redacted: a results
 * directory is made to be shared, and a secret has no place in it.
 */
export const serverInfoField: Field<Record<string, string>> = (raw) => {
  const list = typeof raw === 'string' ? [raw] : raw;
  if (!Array.isArray(list)) {
    return { problem: `must be KEY=VALUE text or a list of it, not ${kindOf(raw)}` };
  }
  const info: Record<string, string> = {};
  for (const item of list) {
    if (typeof item !== 'string') return { problem: `must be KEY=VALUE text, not ${kindOf(item)}` };
    const eq = item.indexOf('=');
    const key = eq < 0 ? item.trim() : item.slice(0, eq).trim();
    const value = eq < 0 ? '' : item.slice(eq + 1).trim();
    if (eq <= 0 || !INFO_KEY.test(key)) {
      return {
        problem: `"${shown(item)}" must be KEY=VALUE, the key of letters, digits and . _ - (at most 64)`,
      };
    }
    // `tokens` is a count (max-num-batched-tokens), not a token: only it is let through.
    if (SECRET_NAME.test(key.replace(/tokens/gi, ''))) {
      return {
        problem: `${key}: a key named like a credential is refused (results are shared, and secrets stay out of them); name the fact otherwise, or leave it out`,
      };
    }
    if (value.length === 0) return { problem: `${key} has no value: give ${key}=VALUE` };
    if (CONTROL.test(value)) {
      return { problem: `${key}: the value must be one line without control characters` };
    }
    if (value.length > MAX_SERVER_INFO_VALUE_CHARS) {
      return {
        problem: `${key}: the value is ${value.length} characters long; at most ${MAX_SERVER_INFO_VALUE_CHARS}`,
      };
    }
    if (Object.hasOwn(info, key)) return { problem: `${key} is given twice: keep one` };
    info[key] = value;
  }
  if (Object.keys(info).length > MAX_SERVER_INFO_KEYS) {
    return {
      problem: `gives ${Object.keys(info).length} keys; a run carries at most ${MAX_SERVER_INFO_KEYS}`,
    };
  }
  return { value: info };
};

/** Text from the user, cut for a message that quotes it. */
function shown(text: string): string {
  const line = text.replace(/\p{Cc}/gu, ' ');
  return line.length > 40 ? `${line.slice(0, 40)}...` : line;
}
