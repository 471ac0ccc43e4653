/** The escapers of the report formats: text made safe for HTML, a Markdown cell, a CSV field. */

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

/** RFC 4180 field: quoted when it holds a comma, quote or line break; empty when missing. */
export function csvField(value: unknown): string {
  if (value === undefined || value === null) return '';
  const text =
    typeof value === 'number' ? (Number.isFinite(value) ? String(value) : '') : String(value);
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
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
