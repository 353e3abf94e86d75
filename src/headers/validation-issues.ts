import { formatPath, type ValidationIssue } from '../schema/validate.js';
import type { Headers } from '../transport/types.js';
import { HEADER, LIMITS } from './names.js';
import { truncate } from './retry-state.js';

/**
 * The `redeliver-validation-issues` value: the first issues, each cut to
 * its bounds, as many as fit within {@link LIMITS.validationIssues} and
 * {@link LIMITS.validationIssuesBytes}, with the count of those left out.
 */
export function validationIssuesHeader(issues: readonly ValidationIssue[]): string {
  const kept = issues.slice(0, LIMITS.validationIssues).map(boundIssue);
  let json = encode(kept, issues.length);
  while (kept.length > 0 && Buffer.byteLength(json) > LIMITS.validationIssuesBytes) {
    kept.pop();
    json = encode(kept, issues.length);
  }
  return json;
}

function encode(kept: readonly ValidationIssue[], total: number): string {
  return JSON.stringify({ issues: kept, dropped: total - kept.length });
}

/** An issue within its bounds: the outermost path segments, ending in `…` when some were cut, and a cut message. */
function boundIssue(issue: ValidationIssue): ValidationIssue {
  const max = LIMITS.validationIssuePathSegments;
  const segments = issue.path.slice(0, max).map((key) => (typeof key === 'string' ? truncate(key, 100) : key));
  return {
    path: issue.path.length > max ? [...segments, '…'] : segments,
    message: truncate(issue.message, LIMITS.validationIssueMessageChars),
  };
}

/**
 * The `redeliver-validation-issues` header read for people: one line per
 * issue, `path: message` (the path as `formatPath` writes it, `(body)` for
 * the body itself), then a line counting the issues left out, if any. No
 * lines without the header. Headers are untrusted: a value that is not the
 * header's JSON reads as one line naming it unreadable with the start of
 * the raw value, and every line is cut to its bounds.
 */
export function validationIssueLines(headers: Readonly<Headers>): string[] {
  if (!Object.prototype.hasOwnProperty.call(headers, HEADER.validationIssues)) return [];
  const raw = String(headers[HEADER.validationIssues]);
  const parsed = parseIssues(raw);
  if (parsed === undefined) return [`(unreadable: ${truncate(raw, LIMITS.validationIssueMessageChars)})`];
  const lines = parsed.issues.slice(0, LIMITS.validationIssues).map((issue) => {
    const path = Array.isArray(issue?.path) && issue.path.every(isPathKey) ? formatPath(issue.path) : '(unknown path)';
    const message = typeof issue?.message === 'string' ? issue.message : '(no message)';
    return `${truncate(path, 200)}: ${truncate(message, LIMITS.validationIssueMessageChars)}`;
  });
  const left = parsed.dropped + Math.max(0, parsed.issues.length - LIMITS.validationIssues);
  return left > 0 ? [...lines, `and ${left} more issue${left === 1 ? '' : 's'} not recorded`] : lines;
}

/** The header's JSON, or undefined when it is not `{ issues: [...], dropped: n }`. */
function parseIssues(raw: string): { issues: { path?: unknown; message?: unknown }[]; dropped: number } | undefined {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return undefined;
  }
  const { issues, dropped } = (value ?? {}) as { issues?: unknown; dropped?: unknown };
  if (!Array.isArray(issues)) return undefined;
  return { issues, dropped: Number.isSafeInteger(dropped) && (dropped as number) > 0 ? (dropped as number) : 0 };
}

function isPathKey(key: unknown): key is string | number {
  return typeof key === 'string' || typeof key === 'number';
}
