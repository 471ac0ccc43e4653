import type { MessageScanner } from './decoder.js';
import type { Timeline } from './timeline.js';

/**
 * A field scanner for the common OpenAI streaming chunks (vLLM, SGLang, TGI, llama.cpp): reads
 * a chunk's JSON text in place, without building its objects, and records on the timeline
 * exactly what `JSON.parse` and openai.ts `parseChunk` would. It knows the chunk's shape:
 * top-level fields, `choices` with one choice (its `delta` object with `content`,
 * `reasoning_content`, `reasoning` as strings or null and `tool_calls` null or empty, or its
 * `text`; `finish_reason` a string or null) and `usage` (null, or plain integer or null counts
 * with `completion_tokens_details` null). Every other field must hold a string, number,
 * boolean or null, which it checks as JSON.parse would and skips. Anything else (a nested value
 * it does not know, several choices, a key written twice or with an escape, `error`,
 * `timings`, counts that are not plain integers, JSON.parse's own errors) returns false having
 * changed nothing, and the full path reads the chunk: test/unit/backends/decoder-fast-path.test.ts
 * holds the two to the same result.
 */

const TAB = 9;
const LF = 10;
const CR = 13;
const SPACE = 32;
const QUOTE = 34;
const PLUS = 43;
const COMMA = 44;
const MINUS = 45;
const DOT = 46;
const SLASH = 47;
const ZERO = 48;
const NINE = 57;
const COLON = 58;
const UPPER_E = 69;
const LEFT_BRACKET = 91;
const BACKSLASH = 92;
const RIGHT_BRACKET = 93;
const LOWER_E = 101;
const LEFT_BRACE = 123;
const RIGHT_BRACE = 125;

// Keys met, as bits: one written twice is the full path's to judge.
const CHOICES = 1;
const USAGE = 2;
const DELTA = 4;
const TEXT = 8;
const FINISH = 16;
const CONTENT = 32;
const REASONING_CONTENT = 64;
const REASONING = 128;
const TOOL_CALLS = 256;
const COMPLETION_TOKENS = 512;
const PROMPT_TOKENS = 1024;
const DETAILS = 2048;
// The string fields kept, by slot.
const CONTENT_SLOT = 0;
const REASONING_CONTENT_SLOT = 1;
const REASONING_SLOT = 2;
const FINISH_SLOT = 3;

// The kinds of object `object` reads, for its members.
const TOP = 0;
const CHOICE = 1;
const DELTA_OBJECT = 2;
const USAGE_OBJECT = 3;

/**
 * One scan at a time reads `text[pos, end)`; the state lives in one object reused for every
 * chunk, so an event costs no objects.
 */
export class ChunkScanner {
  text = '';
  /** Where the chunk begins. */
  start = 0;
  pos = 0;
  end = 0;
  chat = false;
  /** The last string read: `text[strStart, strEnd)` between its quotes, its length once decoded. */
  strStart = 0;
  strEnd = 0;
  strChars = 0;
  strEscaped = false;
  /** The last number read, or -1 when it was not a plain integer of at most 15 digits. */
  numValue = -1;
  /** Keys met (bits): one written twice is the full path's to judge. */
  seen = 0;
  /** The strings found, by the bit of their key (CONTENT also stands for a completion's `text`). */
  strings = 0;
  choicesEmpty = false;
  usageObject = false;
  completionTokens = -1;
  promptTokens = -1;
  /** One slot per string field kept: where it is, its decoded length, whether it holds escapes. */
  readonly slotStart = [0, 0, 0, 0];
  readonly slotEnd = [0, 0, 0, 0];
  readonly slotChars = [0, 0, 0, 0];
  readonly slotEscaped = [false, false, false, false];

  /**
   * The values of the chunk scanned whole, in order, a template's holes: where each is (a
   * string's characters without its quotes, a number's text) and what it is (CONTENT_HOLE...).
   * Only `scan` adds to them (never `match`, which reads the template's holes instead), and it
   * empties them first: they hold one chunk's values, however many chunks a stream has.
   */
  readonly holeStart: number[] = [];
  readonly holeEnd: number[] = [];
  readonly holeKind: number[] = [];

  scan(chat: boolean, text: string, start: number, end: number, t: Timeline): boolean {
    this.holeStart.length = 0;
    this.holeEnd.length = 0;
    this.holeKind.length = 0;
    this.text = text;
    this.start = start;
    this.pos = start;
    this.end = end;
    this.chat = chat;
    this.seen = 0;
    this.strings = 0;
    this.choicesEmpty = false;
    this.usageObject = false;
    this.completionTokens = -1;
    this.promptTokens = -1;
    this.skipSpace();
    let ok = this.at() === LEFT_BRACE && this.object(TOP);
    if (ok) {
      this.skipSpace();
      ok = this.pos === end;
    }
    if (ok) this.apply(t);
    return ok;
  }

  /** Records what parseChunk would from a chunk the scan read whole. */
  private apply(t: Timeline): void {
    const strings = this.strings;
    if (strings & FINISH) {
      const reason = this.slotText(FINISH_SLOT);
      t.finishReason = reason;
      if (reason !== '') t.markComplete();
    }
    let cumulative: number | undefined;
    if (this.usageObject) {
      const completion = this.completionTokens >= 0 ? this.completionTokens : undefined;
      cumulative = t.setCompletionTotal(completion, 'usage.completion_tokens');
      const prompt = this.promptTokens >= 0 ? this.promptTokens : undefined;
      const input = t.count(prompt, 'usage.prompt_tokens', 'input');
      if (input !== undefined) t.promptTokens = input;
      if (this.choicesEmpty) t.markComplete();
    }
    const contentChars = strings & CONTENT ? this.slotChars[CONTENT_SLOT] : 0;
    if (t.capture && contentChars > 0) t.capture.addContent(this.slotText(CONTENT_SLOT));
    const reasoningChars =
      strings & REASONING_CONTENT
        ? this.slotChars[REASONING_CONTENT_SLOT]
        : strings & REASONING
          ? this.slotChars[REASONING_SLOT]
          : 0;
    t.record(contentChars, reasoningChars, 0, undefined, cumulative);
  }

  /** The decoded text of a string slot. */
  private slotText(slot: number): string {
    return stringText(this.text, this.slotStart[slot], this.slotEnd[slot], this.slotEscaped[slot]);
  }

  private hole(start: number, kind: number): void {
    this.holeStart.push(start);
    this.holeEnd.push(kind === CONTENT_HOLE || kind === STRING_HOLE ? this.strEnd : this.pos);
    this.holeKind.push(kind);
  }

  /**
   * The chunk just scanned as a template, when a chunk that differs from it only in its
   * content and numbers would record nothing else: no finish reason, no reasoning.
   */
  template(): Template | undefined {
    if ((this.strings & ~CONTENT) !== 0) return undefined;
    const { text, holeStart, holeEnd } = this;
    // Flat copies: a slice would keep the whole read it came from alive with the template.
    const segments = [flatCopy(text.slice(this.start, holeStart[0] ?? this.end))];
    for (let h = 0; h < holeStart.length; h++) {
      segments.push(flatCopy(text.slice(holeEnd[h], holeStart[h + 1] ?? this.end)));
    }
    const kinds = [...this.holeKind];
    const template: Template = {
      segments,
      kinds,
      values: kinds.map((kind, h) =>
        kind === STRING_HOLE ? flatCopy(text.slice(holeStart[h], holeEnd[h])) : undefined,
      ),
      runText: [],
      runNext: [],
      usageObject: this.usageObject,
      choicesEmpty: this.choicesEmpty,
    };
    setRuns(template);
    return template;
  }

  /**
   * Reads a chunk that is the template's text with other values in its holes (a valid JSON
   * string, a valid JSON number): it parses to the template's fields with those values.
   */
  match(template: Template, text: string, start: number, end: number, t: Timeline): boolean {
    const { segments, kinds, runText, runNext } = template;
    this.text = text;
    this.end = end;
    this.strings = 0;
    this.completionTokens = -1;
    this.promptTokens = -1;
    this.pos = start;
    let ok = true;
    // Segment `s` (or its run), then hole `h`: `s` itself, or the one after the run.
    for (let s = 0, h = 0; ok; s = h + 1) {
      h = s;
      if (textAt(text, this.pos, runText[s])) {
        this.pos += runText[s].length;
        h = runNext[s];
      } else {
        ok = runText[s] !== segments[s] && textAt(text, this.pos, segments[s]);
        this.pos += segments[s].length;
      }
      if (!ok || h >= kinds.length) break;
      const kind = kinds[h];
      if (kind === CONTENT_HOLE || kind === STRING_HOLE) {
        const close = this.stringBody(text, this.pos, end);
        ok = close >= 0;
        const value = template.values[h];
        if (ok && value !== undefined && !sameText(text, this.pos, close, value)) {
          // A value that varies (a stream's id): no longer part of a run, where it would fail.
          template.values[h] = undefined;
          setRuns(template);
        }
        if (kind === CONTENT_HOLE) {
          this.slotStart[CONTENT_SLOT] = this.pos;
          this.slotEnd[CONTENT_SLOT] = close;
          this.slotChars[CONTENT_SLOT] = this.strChars;
          this.slotEscaped[CONTENT_SLOT] = this.strEscaped;
          this.strings = CONTENT;
        }
        this.pos = close;
      } else {
        ok = isNumberStart(this.at()) && this.number();
        if (kind === COMPLETION_HOLE) this.completionTokens = this.numValue;
        if (kind === PROMPT_HOLE) this.promptTokens = this.numValue;
        // A count that is not a plain integer is the full path's to judge.
        if (kind !== NUMBER_HOLE && this.numValue < 0) ok = false;
      }
    }
    ok &&= this.pos === end;
    if (ok) {
      this.usageObject = template.usageObject;
      this.choicesEmpty = template.choicesEmpty;
      this.apply(t);
    }
    this.text = '';
    return ok;
  }

  /** Marks a key met; false when it was met before. */
  private first(bit: number): boolean {
    if (this.seen & bit) return false;
    this.seen |= bit;
    return true;
  }

  /** Reads `{...}` from its brace; each member's value goes to the reader of `kind`. */
  private object(kind: number): boolean {
    this.pos++;
    this.skipSpace();
    if (this.at() === RIGHT_BRACE) {
      this.pos++;
      return true;
    }
    for (;;) {
      if (!this.string() || this.strEscaped) return false;
      this.skipSpace();
      if (this.at() !== COLON) return false;
      this.pos++;
      this.skipSpace();
      const ok =
        kind === TOP
          ? this.topMember()
          : kind === CHOICE
            ? this.choiceMember()
            : kind === DELTA_OBJECT
              ? this.deltaMember()
              : this.usageMember();
      if (!ok) return false;
      this.skipSpace();
      const c = this.at();
      this.pos++;
      if (c === RIGHT_BRACE) return true;
      if (c !== COMMA) return false;
      this.skipSpace();
    }
  }

  private topMember(): boolean {
    if (this.isKey('choices')) return this.first(CHOICES) && this.choices();
    if (this.isKey('usage')) return this.first(USAGE) && this.usage();
    if (this.isKey('error') || this.isKey('timings')) return false;
    return this.primitive();
  }

  private choices(): boolean {
    if (this.at() !== LEFT_BRACKET) return false;
    this.pos++;
    this.skipSpace();
    if (this.at() === RIGHT_BRACKET) {
      this.pos++;
      this.choicesEmpty = true;
      return true;
    }
    if (this.at() !== LEFT_BRACE || !this.object(CHOICE)) return false;
    this.skipSpace();
    if (this.at() !== RIGHT_BRACKET) return false;
    this.pos++;
    return true;
  }

  private choiceMember(): boolean {
    if (this.chat && this.isKey('delta')) {
      return this.first(DELTA) && this.at() === LEFT_BRACE && this.object(DELTA_OBJECT);
    }
    if (!this.chat && this.isKey('text')) {
      return this.first(TEXT) && this.stringOrNull(CONTENT_SLOT, CONTENT);
    }
    if (this.isKey('finish_reason')) {
      return this.first(FINISH) && this.stringOrNull(FINISH_SLOT, FINISH);
    }
    return this.primitive();
  }

  private deltaMember(): boolean {
    if (this.isKey('content'))
      return this.first(CONTENT) && this.stringOrNull(CONTENT_SLOT, CONTENT);
    if (this.isKey('reasoning_content')) {
      return (
        this.first(REASONING_CONTENT) &&
        this.stringOrNull(REASONING_CONTENT_SLOT, REASONING_CONTENT)
      );
    }
    if (this.isKey('reasoning')) {
      return this.first(REASONING) && this.stringOrNull(REASONING_SLOT, REASONING);
    }
    if (this.isKey('tool_calls')) {
      return this.first(TOOL_CALLS) && (this.literal('null') || this.emptyArray());
    }
    return this.primitive();
  }

  private usage(): boolean {
    if (this.literal('null')) return true;
    if (this.at() !== LEFT_BRACE) return false;
    this.usageObject = true;
    return this.object(USAGE_OBJECT);
  }

  private usageMember(): boolean {
    if (this.isKey('completion_tokens')) {
      if (!this.first(COMPLETION_TOKENS) || !this.countOrNull(COMPLETION_HOLE)) return false;
      if (this.numValue >= 0) this.completionTokens = this.numValue;
      return true;
    }
    if (this.isKey('prompt_tokens')) {
      if (!this.first(PROMPT_TOKENS) || !this.countOrNull(PROMPT_HOLE)) return false;
      if (this.numValue >= 0) this.promptTokens = this.numValue;
      return true;
    }
    if (this.isKey('completion_tokens_details')) return this.first(DETAILS) && this.literal('null');
    return this.primitive();
  }

  /** A string kept in `slot` (its key's bit set in `strings`), or null (no string: ignored). */
  private stringOrNull(slot: number, bit: number): boolean {
    if (this.literal('null')) return true;
    if (!this.string()) return false;
    this.slotStart[slot] = this.strStart;
    this.slotEnd[slot] = this.strEnd;
    this.slotChars[slot] = this.strChars;
    this.slotEscaped[slot] = this.strEscaped;
    this.strings |= bit;
    if (bit === CONTENT) this.hole(this.strStart, CONTENT_HOLE);
    return true;
  }

  /** A plain integer count (`numValue`, its hole of `kind`), or null (`numValue` -1). */
  private countOrNull(kind: number): boolean {
    this.numValue = -1;
    if (this.literal('null')) return true;
    const start = this.pos;
    if (!isNumberStart(this.at()) || !this.number() || this.numValue < 0) return false;
    this.hole(start, kind);
    return true;
  }

  private emptyArray(): boolean {
    if (this.at() !== LEFT_BRACKET) return false;
    this.pos++;
    this.skipSpace();
    if (this.at() !== RIGHT_BRACKET) return false;
    this.pos++;
    return true;
  }

  /** Skips a string, number, true, false or null; false for anything else. */
  private primitive(): boolean {
    const c = this.at();
    if (c === QUOTE) {
      if (!this.string()) return false;
      this.hole(this.strStart, STRING_HOLE);
      return true;
    }
    if (c === MINUS || isDigit(c)) {
      const start = this.pos;
      if (!this.number()) return false;
      this.hole(start, NUMBER_HOLE);
      return true;
    }
    return this.literal('null') || this.literal('true') || this.literal('false');
  }

  /** The last string read is the key `name`. */
  private isKey(name: string): boolean {
    return this.strEnd - this.strStart === name.length && this.text.startsWith(name, this.strStart);
  }

  private literal(word: string): boolean {
    if (this.end - this.pos < word.length || !this.text.startsWith(word, this.pos)) return false;
    this.pos += word.length;
    return true;
  }

  /** Reads a string from its quote as JSON.parse accepts it (escapes, no control characters). */
  private string(): boolean {
    if (this.at() !== QUOTE) return false;
    const close = this.stringBody(this.text, this.pos + 1, this.end);
    if (close < 0) return false;
    this.strStart = this.pos + 1;
    this.strEnd = close;
    this.pos = close + 1;
    return true;
  }

  /**
   * Reads a string's characters from `from` to its closing quote, whose index it returns (-1:
   * none, or not a JSON string); `strChars` and `strEscaped` then describe it.
   */
  stringBody(text: string, from: number, end: number): number {
    let i = from;
    let chars = 0;
    let escaped = false;
    for (;;) {
      if (i >= end) return -1;
      const c = text.charCodeAt(i);
      if (c === QUOTE) break;
      if (c < SPACE) return -1;
      if (c === BACKSLASH) {
        escaped = true;
        const e = i + 1 < end ? text.charCodeAt(i + 1) : -1;
        if (e === 117) {
          // \uXXXX: one UTF-16 unit, whatever it is (a lone surrogate too, as JSON.parse gives it).
          if (i + 6 > end) return -1;
          for (let h = i + 2; h < i + 6; h++) if (!isHex(text.charCodeAt(h))) return -1;
          i += 6;
        } else if (isEscape(e)) i += 2;
        else return -1;
      } else i++;
      chars++;
    }
    this.strChars = chars;
    this.strEscaped = escaped;
    return i;
  }

  /**
   * Reads a number as JSON's grammar has it; `numValue` is its value when a plain integer. (Its
   * hole is the caller's to record: `match` reads numbers too, and must add none.)
   */
  private number(): boolean {
    let plain = true;
    if (this.at() === MINUS) {
      plain = false;
      this.pos++;
    }
    let value = 0;
    let digits = 0;
    if (this.at() === ZERO) {
      this.pos++;
      digits = 1;
    } else if (isDigit(this.at())) {
      for (let c = this.at(); isDigit(c); c = this.at()) {
        value = value * 10 + (c - ZERO);
        digits++;
        this.pos++;
      }
    } else return false;
    if (this.at() === DOT) {
      plain = false;
      this.pos++;
      if (!this.digits()) return false;
    }
    const e = this.at();
    if (e === LOWER_E || e === UPPER_E) {
      plain = false;
      this.pos++;
      const sign = this.at();
      if (sign === PLUS || sign === MINUS) this.pos++;
      if (!this.digits()) return false;
    }
    this.numValue = plain && digits <= 15 ? value : -1;
    return true;
  }

  /** At least one digit, skipped. */
  private digits(): boolean {
    if (!isDigit(this.at())) return false;
    while (isDigit(this.at())) this.pos++;
    return true;
  }

  private skipSpace(): void {
    const text = this.text;
    const end = this.end;
    let i = this.pos;
    while (i < end) {
      const c = text.charCodeAt(i);
      if (c !== SPACE && c !== TAB && c !== LF && c !== CR) break;
      i++;
    }
    this.pos = i;
  }

  /** The character at `pos`, or -1 past the end. */
  private at(): number {
    return this.pos < this.end ? this.text.charCodeAt(this.pos) : -1;
  }
}

const scanner = new ChunkScanner();

/**
 * The one scanner every stream shares, for tests: what it keeps between chunks (its holes) must
 * stay one chunk's worth however long a stream runs.
 */
export const sharedChunkScanner: ChunkScanner = scanner;

/**
 * A scanner of chunks (chat: `choices[0].delta`, else `choices[0].text`). A server writes the
 * chunks of its answers alike but for their values (the text, the stream's id, usage counts, a
 * time), so a chunk scanned whole that carries neither a finish reason nor reasoning becomes a
 * template: a later chunk that is the template's text with a valid JSON string in each string's
 * place and a valid JSON number in each number's place parses to the same fields but those, and
 * is read by comparing the text between them and scanning them alone. Any other chunk is
 * scanned whole (and may become a template). Which template a chunk matches changes nothing it
 * records, so one scanner serves every stream of a run: a stream holds no template of its own
 * for the 1.3 s it lives (issue 29). It keeps the last three made, the one last matched first:
 * an answer's first chunk (vLLM's `role`), its text chunks and its usage-only chunk each have
 * their own, and streams in flight start all the time.
 */
export function openaiChunkScanner(chat: boolean): MessageScanner {
  const templates: Template[] = [];
  return (text, start, end, t) => {
    for (let i = 0; i < templates.length; i++) {
      const template = templates[i];
      if (!scanner.match(template, text, start, end, t)) continue;
      if (i > 0) {
        templates.copyWithin(1, 0, i);
        templates[0] = template;
      }
      return true;
    }
    const ok = scanner.scan(chat, text, start, end, t);
    if (ok) {
      const made = scanner.template();
      if (made) {
        templates.unshift(made);
        if (templates.length > MAX_TEMPLATES) templates.pop();
      }
    }
    scanner.text = '';
    return ok;
  };
}

const MAX_TEMPLATES = 3;

/** Sets a template's runs (Template.runText) from its segments and the values that stay alike. */
function setRuns(template: Template): void {
  const { segments, kinds, values } = template;
  template.runText = [];
  template.runNext = [];
  for (let s = 0; s < segments.length; s++) {
    let run = segments[s];
    let h = s;
    for (; h < kinds.length && values[h] !== undefined; h++) run += values[h] + segments[h + 1];
    template.runText.push(h === s ? run : flatCopy(run));
    template.runNext.push(h);
  }
}

/** `text[start, end)` is `value`. */
function sameText(text: string, start: number, end: number, value: string): boolean {
  return end - start === value.length && text.startsWith(value, start);
}

/**
 * A flat copy of a string (a slice keeps the string it was cut from alive), one byte a character
 * where every character fits: a two-byte copy of a one-byte read made every comparison with the
 * read slower (90 ns a chunk).
 */
function flatCopy(text: string): string {
  if (text.length < 13) return text;
  const encoding = WIDE.test(text) ? 'utf16le' : 'latin1';
  return Buffer.from(text, encoding).toString(encoding);
}

/** A character past Latin-1: the copy then needs two bytes a character. */
const WIDE = /[\u0100-\uffff]/;

/** See ChunkScanner.template. */
interface Template {
  /** The text before, between and after the holes. */
  segments: string[];
  kinds: number[];
  /**
   * For a string value the reading skips: the template's own, until a chunk holds another there
   * (a stream's id; an object's type and a model's name stay alike in every chunk of a run).
   */
  values: (string | undefined)[];
  /**
   * Segment `s` with the values after it that stay alike and the segments after them (each
   * begins with the value's closing quote), as one text compared at memory speed: a chunk that
   * holds it there holds those same valid strings. `runNext[s]`: the hole after the run
   * (kinds.length: the end).
   */
  runText: string[];
  runNext: number[];
  usageObject: boolean;
  choicesEmpty: boolean;
}

const CONTENT_HOLE = 0;
const NUMBER_HOLE = 1;
const COMPLETION_HOLE = 2;
const PROMPT_HOLE = 3;
/** A string value the chunk's reading skips (an id, a model's name, a role). */
const STRING_HOLE = 4;

/** The most characters a failed textAt may search through (a few microseconds' work). */
const SEARCH_BOUND = 4096;

/**
 * `text` holds `part` at `at`. indexOf finds it there at once, comparing at memory speed and
 * copying nothing (startsWith goes a character at a time, and a slice to compare costs a string
 * per call); but where `part` is not there, its search runs on through the rest of the read. A
 * read of n chunks that do not match the template (a reasoning model's, against the template of
 * its first chunk) then cost n times its length: 544 µs a chunk in a read of 10,000. So where
 * more than SEARCH_BOUND characters follow (a read of many chunks, from a reader that fell
 * behind), a slice is compared in place instead.
 */
function textAt(text: string, at: number, part: string): boolean {
  return text.length - at <= SEARCH_BOUND
    ? text.indexOf(part, at) === at
    : text.substring(at, at + part.length) === part;
}

function isNumberStart(c: number): boolean {
  return c === MINUS || isDigit(c);
}

/** The text of the JSON string whose characters are `text[start, end)`. */
function stringText(text: string, start: number, end: number, escaped: boolean): string {
  return escaped ? (JSON.parse(text.slice(start - 1, end + 1)) as string) : text.slice(start, end);
}

function isDigit(c: number): boolean {
  return c >= ZERO && c <= NINE;
}

function isHex(c: number): boolean {
  return isDigit(c) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102);
}

/** The characters after a backslash that JSON allows, besides `u`. */
function isEscape(c: number): boolean {
  return (
    c === QUOTE ||
    c === BACKSLASH ||
    c === SLASH ||
    c === 98 || // b
    c === 102 || // f
    c === 110 || // n
    c === 114 || // r
    c === 116 // t
  );
}
