/**
 * The escapers of the report formats (text made safe for HTML, a Markdown cell, a CSV field),
 * and metric names and units as the catalogue gives them.
 */
import { type LatencyKey, METRICS, type MetricUnit } from '../metrics/catalog.js';

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** HTML-escapes text for element content and quoted attribute values. */
export function escapeHtml(value: unknown): string {
  return String(value ?? '').replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

/** Markdown text for a table cell: pipes and line breaks would break the table. */
export function markdownCell(text: string): string {
  return text
    .replace(/\|/g, '\\|')
    .replace(/[\r\n]+/g, ' ')
    .replace(/</g, '&lt;');
}

/**
 * RFC 4180 field: quoted when it holds a comma, quote or line break; empty when missing. Numbers
 * are ours and print as they are (a negative number stays a number). Every string may come from
 * outside (a server's finish reason or error, a run's name), so one that a spreadsheet would read
 * as a formula (starting with `=`, `+`, `-`, `@`, tab or CR) gets a leading `'` and is quoted,
 * as OWASP advises for CSV injection.
 */
export function csvField(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'number') return Number.isFinite(value) ? String(value) : '';
  const text = String(value);
  if (/^[=+\-@\t\r]/.test(text)) return `"'${text.replace(/"/g, '""')}"`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/**
 * What a terminal acts on: CSI sequences (ESC [ or 0x9b up to the final byte), OSC/DCS/PM/APC/SOS
 * strings up to BEL or ST, any other ESC sequence, and every lone C0/C1 control but tab and LF.
 */
const TERMINAL_CONTROLS =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
  /(?:\u001b\[|\u009b)[\u0020-\u003f]*[\u0040-\u007e]?|(?:\u001b[\]PX^_]|[\u0090\u0098\u009d-\u009f])[^\u0007\u001b\u009c]*(?:\u0007|\u001b\\|\u009c)?|\u001b[\u0020-\u002f]*[\u0030-\u007e]?|[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/**
 * Server text made safe to print on a terminal: escape sequences and control characters (CR
 * included) are removed, so a model id or an error message cannot retitle the window, clear the
 * screen, overwrite a line or hide text. Tab and line feed stay: they move the cursor on, nothing more.
 */
export function terminalSafe(text: unknown): string {
  return String(text ?? '').replace(TERMINAL_CONTROLS, '');
}

/** Markdown-safe text: no raw HTML, no table breaks, no emphasis from a run's label. */
export function escapeMarkdown(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/[\\`*_[\]|#~!]/g, (ch) => `\\${ch}`)
    .replace(/[\r\n]+/g, ' ');
}

/**
 * A latency metric as tables print it, from the metric catalogue (metrics/catalog.ts): its
 * label, with `note` in parentheses (`ITL (per token)`), so that renaming a metric there renames
 * it in every output.
 */
export function metricLabel(key: LatencyKey, note?: string): string {
  const metric = METRICS.find((m) => m.kind === 'distribution' && m.latencyKey === key);
  const label = metric?.label ?? key;
  return note ? `${label} (${note})` : label;
}

/** The catalogue's unit of a latency metric (`ms`, `tok/s`). */
export function metricUnit(key: LatencyKey): MetricUnit {
  const metric = METRICS.find((m) => m.kind === 'distribution' && m.latencyKey === key);
  return metric?.unit ?? 'ms';
}

/** Every distribution of the catalogue, in its order: what "every metric" tables list. */
export function catalogDistributions(): {
  key: LatencyKey;
  id: string;
  label: string;
  unit: MetricUnit;
}[] {
  return METRICS.flatMap((m) =>
    m.kind === 'distribution'
      ? [{ key: m.latencyKey, id: m.id, label: m.label, unit: m.unit }]
      : [],
  );
}
