import { createRequire } from 'node:module';
import { escapeHtml, markdownCell } from './format.js';

/**
 * A table written once and rendered to the terminal, Markdown or HTML (CSV: csv.ts): a column's label, alignment and the text
 * of its cell for a row. Numbers are formatted by the column (metrics/format.ts), so every
 * format prints the same digits.
 */
export interface Column<Row> {
  label: string;
  /** Text columns are left-aligned, numbers right-aligned. */
  align: 'left' | 'right';
  value: (row: Row) => string;
}

/** The terminal's borderless table (cli-table3, no row separators, no colours). */
export function terminalTable<Row>(columns: readonly Column<Row>[], rows: readonly Row[]): string {
  // Required at first use (it is CommonJS), so that a run loads it only to print its summary.
  const Table = createRequire(import.meta.url)('cli-table3') as typeof import('cli-table3');
  const table = new Table({
    head: columns.map((c) => c.label),
    colAligns: columns.map((c) => c.align),
    style: { head: [], border: [] },
    chars: { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' },
  });
  for (const row of rows) table.push(columns.map((c) => c.value(row)));
  return table.toString();
}

/** GitHub-flavoured Markdown lines: header, alignment row, one line per row. */
export function markdownTable<Row>(
  columns: readonly Column<Row>[],
  rows: readonly Row[],
): string[] {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [
    line(columns.map((c) => markdownCell(c.label))),
    `|${columns.map((c) => (c.align === 'right' ? '---:' : '---')).join('|')}|`,
    ...rows.map((row) => line(columns.map((c) => markdownCell(c.value(row))))),
  ];
}

/** An HTML table in the report's scrolling box; text columns carry `class="text"`. */
export function htmlTable<Row>(columns: readonly Column<Row>[], rows: readonly Row[]): string {
  return htmlTableOf(
    columns.map((c) => c.label),
    rows.map((row) => columns.map((c) => escapeHtml(c.value(row)))),
    columns.flatMap((c, i) => (c.align === 'left' ? [i] : [])),
  );
}

/** The same box for cells that are HTML already (links, marks): `textColumns` left-aligned. */
export function htmlTableOf(head: string[], rows: string[][], textColumns: number[] = []): string {
  const cls = (i: number) => (textColumns.includes(i) ? ' class="text"' : '');
  const th = head.map((h, i) => `<th${cls(i)}>${escapeHtml(h)}</th>`).join('');
  const body = rows
    .map((r) => `<tr>${r.map((c, i) => `<td${cls(i)}>${c}</td>`).join('')}</tr>`)
    .join('\n');
  return `<div class="scroll"><table><thead><tr>${th}</tr></thead><tbody>${body}</tbody></table></div>`;
}
