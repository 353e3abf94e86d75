import type { ValidationIssue } from '../schema/validate.js';
import { LIMITS } from './names.js';
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
