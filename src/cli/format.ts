export { bodyPreview as previewBody, utf8, type BodyPreview } from '../operations/body-preview.js';
/**
 * Text formatting for the command line. Everything shown comes from message
 * headers and bodies, which are untrusted: before it reaches a terminal,
 * control characters (an escape sequence could rewrite the screen) and
 * bidirectional overrides are shown as visible escapes.
 */

const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
const UNSAFE_OR_NEWLINE = /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

function escapeChar(c: string): string {
  if (c === '\n') return '\\n';
  if (c === '\t') return '\\t';
  if (c === '\r') return '\\r';
  const code = c.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/** `text` safe to print on one line: line breaks, tabs and control characters shown as escapes. */
export function oneLine(text: string): string {
  return text.replace(UNSAFE_OR_NEWLINE, escapeChar);
}

/** `text` safe to print on several lines: line feeds and tabs kept, other control characters shown as escapes. */
export function multiLine(text: string): string {
  return text.replace(/\r\n/g, '\n').replace(UNSAFE, escapeChar);
}

/** Length in code points (close enough to the displayed width for the text we show). */
export function width(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/** `text` cut to at most `max` code points, ending in `…` when cut. */
export function truncate(text: string, max: number): string {
  if (width(text) <= max) return text;
  return [...text].slice(0, Math.max(0, max - 1)).join('') + '…';
}

/** Indents every line of `text` by `by` spaces. */
export function indent(text: string, by = 2): string {
  const pad = ' '.repeat(by);
  return text
    .split('\n')
    .map((line) => (line === '' ? line : pad + line))
    .join('\n');
}

/** A column of a {@link table}. */
export interface Column {
  readonly title: string;
  readonly align?: 'left' | 'right';
  /** Cells longer than this are cut with `…`. Default: no limit. */
  readonly max?: number;
}

/**
 * A plain-text table: a title row, then one row per entry, columns two
 * spaces apart, numbers right-aligned. Cells are made one-line and safe.
 * Returns the lines without trailing newlines.
 */
export function table(columns: readonly Column[], rows: readonly (readonly string[])[]): string[] {
  const cells = rows.map((row) => columns.map((column, i) => truncate(oneLine(row[i] ?? ''), column.max ?? Number.POSITIVE_INFINITY)));
  const widths = columns.map((column, i) => Math.max(width(column.title), ...cells.map((row) => width(row[i] ?? ''))));
  const render = (row: readonly string[]) =>
    row
      .map((cell, i) => {
        const pad = ' '.repeat(Math.max(0, (widths[i] ?? 0) - width(cell)));
        return columns[i]?.align === 'right' ? pad + cell : cell + pad;
      })
      .join('  ')
      .trimEnd();
  return [render(columns.map((c) => c.title)), ...cells.map(render)];
}

/** An ISO 8601 time without milliseconds (`2026-11-22T10:04:12Z`); anything else is shown as it is. */
export function shortTime(iso: string): string {
  if (iso === '') return '-';
  return /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/.test(iso) ? iso.replace(/\.\d+Z$/, 'Z') : oneLine(truncate(iso, 40));
}

/** A message body prepared for display: text when it is UTF-8, hex otherwise. */
/** `1 message`, `3 messages`. */
export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}
