import { REQUEST_BOUNDS } from './timeline.js';

/**
 * Receives each event's data, `text[start, end)`. An object, not a function: a decoder is its
 * own sink, where a closure and its context per request were held as long as the request.
 */
export interface SseSink {
  onSseData(text: string, start: number, end: number): void;
}

const LF = 10;
const CR = 13;
const COLON = 58;
const SPACE = 32;
const BOM = 0xfeff;

/**
 * Server-Sent Events framing (WHATWG HTML, "Event stream interpretation") reduced to what an
 * answer needs, each event's data: lines end in LF, CRLF or CR, and may be split across reads;
 * `data` fields (with or without the space after the colon, or with no colon at all) join with
 * LF; a blank line dispatches an event that had at least one `data` field; comments and the
 * `event`, `id` and `retry` fields carry nothing an answer needs and are skipped; a BOM at the
 * stream's start is dropped. An event of one data line reaches the handler as a range of the
 * text read, never copied. A line, or an event's data, longer than `maxEventChars` sets
 * `overflowed` and the framer reads nothing more: a server that never ends a line would
 * otherwise grow the client's memory until the process dies.
 */
export class SseFramer {
  private readonly sink: SseSink;
  private readonly maxEventChars: number;
  /** An event passed `maxEventChars`; nothing more is read. */
  overflowed = false;
  /** Pieces of the line not ended yet (none holds a line end); made when one is left over. */
  private pending: string[] | undefined;
  private pendingChars = 0;
  private atStart = true;
  /** The last read ended in CR: an LF that starts the next one ends no further line. */
  private skipLf = false;
  /** `data` lines of the event so far; their text is `dataText[dataStart, dataEnd)`. */
  private dataLines = 0;
  private dataText = '';
  private dataStart = 0;
  private dataEnd = 0;

  constructor(sink: SseSink, maxEventChars: number = REQUEST_BOUNDS.eventChars) {
    this.sink = sink;
    this.maxEventChars = maxEventChars;
  }

  feed(chunk: string): void {
    let text = chunk;
    if (text.length === 0 || this.overflowed) return;
    if (this.atStart) {
      this.atStart = false;
      if (text.charCodeAt(0) === BOM) text = text.slice(1);
    }
    if (this.skipLf) {
      this.skipLf = false;
      if (text.charCodeAt(0) === LF) text = text.slice(1);
    }
    if (this.pending !== undefined) {
      // Only text with a line end is joined, so a long line in many reads costs its length once.
      this.pending.push(text);
      this.pendingChars += text.length;
      if (text.indexOf('\n') === -1 && text.indexOf('\r') === -1) {
        if (this.pendingChars + this.dataChars() > this.maxEventChars) this.overflow();
        return;
      }
      text = this.pending.join('');
      this.pending = undefined;
      this.pendingChars = 0;
    }
    const rest = text.indexOf('\r') === -1 ? this.lfLines(text) : this.anyLines(text);
    if (rest < text.length && !this.overflowed) {
      this.pending = [rest === 0 ? text : text.slice(rest)];
      this.pendingChars = text.length - rest;
      if (this.pendingChars + this.dataChars() > this.maxEventChars) this.overflow();
    }
  }

  /** Characters of the event's data so far. */
  private dataChars(): number {
    return this.dataLines > 0 ? this.dataEnd - this.dataStart : 0;
  }

  private overflow(): void {
    this.overflowed = true;
    this.pending = undefined;
    this.pendingChars = 0;
    this.dataText = '';
    this.dataLines = 0;
    this.dataStart = this.dataEnd = 0;
  }

  /** The lines of text with no CR in it; returns where the unended rest begins. */
  private lfLines(text: string): number {
    let start = 0;
    for (
      let lf = text.indexOf('\n');
      lf !== -1 && !this.overflowed;
      lf = text.indexOf('\n', start)
    ) {
      this.line(text, start, lf);
      start = lf + 1;
    }
    return start;
  }

  /** The lines of text with any line ends; returns where the unended rest begins. */
  private anyLines(text: string): number {
    let start = 0;
    for (let i = 0; i < text.length && !this.overflowed; i++) {
      const c = text.charCodeAt(i);
      if (c !== LF && c !== CR) continue;
      this.line(text, start, i);
      if (c === CR) {
        if (i + 1 === text.length) this.skipLf = true;
        else if (text.charCodeAt(i + 1) === LF) i++;
      }
      start = i + 1;
    }
    return start;
  }

  private line(text: string, start: number, end: number): void {
    if (start === end) {
      this.dispatch();
      return;
    }
    if (!text.startsWith('data', start)) return;
    const colon = start + 4;
    if (colon === end) this.data(text, end, end);
    else if (text.charCodeAt(colon) === COLON) {
      this.data(text, text.charCodeAt(colon + 1) === SPACE ? colon + 2 : colon + 1, end);
    }
  }

  private data(text: string, start: number, end: number): void {
    if (this.dataLines === 0) {
      this.dataText = text;
      this.dataStart = start;
      this.dataEnd = end;
    } else {
      if (this.dataChars() + end - start >= this.maxEventChars) {
        this.overflow();
        return;
      }
      const joined = `${this.dataText.slice(this.dataStart, this.dataEnd)}\n${text.slice(start, end)}`;
      this.dataText = joined;
      this.dataStart = 0;
      this.dataEnd = joined.length;
    }
    this.dataLines++;
  }

  private dispatch(): void {
    if (this.dataLines === 0) return;
    const { dataText, dataStart, dataEnd } = this;
    this.dataLines = 0;
    this.dataText = '';
    this.sink.onSseData(dataText, dataStart, dataEnd);
  }
}
