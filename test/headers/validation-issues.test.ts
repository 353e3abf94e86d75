import { describe, expect, it } from 'vitest';
import { HEADER, LIMITS } from '../../src/headers/names.js';
import { validationIssueLines, validationIssuesHeader } from '../../src/headers/validation-issues.js';
import { formatPath, ValidationError, type ValidationIssue } from '../../src/schema/validate.js';

const parse = (json: string) => JSON.parse(json) as { issues: ValidationIssue[]; dropped: number };

describe('the validation-issues header', () => {
  it('keeps every issue when they fit', () => {
    const issues = [{ path: ['a', 0], message: 'bad' }, { path: [], message: 'worse' }];
    expect(parse(validationIssuesHeader(issues))).toEqual({ issues, dropped: 0 });
  });

  it('keeps the first 20 issues and counts the rest', () => {
    const issues = Array.from({ length: 45 }, (_, i) => ({ path: [i], message: `issue ${i}` }));
    const header = parse(validationIssuesHeader(issues));
    expect(header.issues.map((i) => i.path[0])).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(header.dropped).toBe(25);
  });

  it('drops the last issues kept until the value fits 4 KiB of UTF-8', () => {
    const issues = Array.from({ length: 20 }, (_, i) => ({ path: ['field', i], message: '€'.repeat(1_000) }));
    const json = validationIssuesHeader(issues);
    const header = parse(json);
    expect(Buffer.byteLength(json)).toBeLessThanOrEqual(LIMITS.validationIssuesBytes);
    // Each message is cut to 300 characters, 900 bytes: four fit.
    expect(header.issues).toHaveLength(4);
    expect(header.issues[0]!.message).toHaveLength(LIMITS.validationIssueMessageChars);
    expect(header.issues[0]!.message.endsWith('…')).toBe(true);
    expect(header.dropped).toBe(16);
  });

  it('cuts long paths to their outermost 16 segments and long keys to 100 characters', () => {
    const deep = Array.from({ length: 40 }, (_, i) => (i === 0 ? 'k'.repeat(500) : i));
    const [issue] = parse(validationIssuesHeader([{ path: deep, message: 'm' }])).issues;
    expect(issue!.path).toHaveLength(17);
    expect(issue!.path.at(-1)).toBe('…');
    expect(issue!.path[0]).toHaveLength(100);
    expect(issue!.path.slice(1, 16)).toEqual(Array.from({ length: 15 }, (_, i) => i + 1));
  });

  it('an issue too large on its own is counted, not kept', () => {
    const huge = { path: Array.from({ length: 16 }, () => '€'.repeat(100)), message: '€'.repeat(300) };
    expect(parse(validationIssuesHeader([huge]))).toEqual({ issues: [], dropped: 1 });
  });
});

describe('ValidationError', () => {
  it('names each issue by its path and message', () => {
    const error = new ValidationError([{ path: ['lines', 0, 'qty'], message: 'too small' }, { path: [], message: 'not an object' }]);
    expect(error.name).toBe('ValidationError');
    expect(error.message).toBe('the body failed its schema (2 issues): lines[0].qty: too small; (body): not an object');
  });

  it('names the first 10 issues and counts the rest', () => {
    const error = new ValidationError(Array.from({ length: 13 }, (_, i) => ({ path: [`f${i}`], message: 'x' })));
    expect(error.message).toMatch(/\(13 issues\): f0: x; .*; f9: x; and 3 more$/);
    expect(error.issues).toHaveLength(13);
  });

  it('formats paths as a reader of the body writes them', () => {
    expect(formatPath([])).toBe('(body)');
    expect(formatPath(['customer', 'address', 'zip'])).toBe('customer.address.zip');
    expect(formatPath([0, 'sku'])).toBe('[0].sku');
    expect(formatPath(['headers', 'content-type'])).toBe('headers["content-type"]');
  });
});

describe('the validation-issues header read for people', () => {
  const lines = (value: string) => validationIssueLines({ [HEADER.validationIssues]: value });

  it('gives one path: message line per issue, and counts those left out', () => {
    const header = validationIssuesHeader([{ path: ['a', 0, 'b c'], message: 'bad' }, { path: [], message: 'worse' }]);
    expect(lines(header)).toEqual(['a[0]["b c"]: bad', '(body): worse']);
    expect(lines(JSON.stringify({ issues: [{ path: ['x'], message: 'm' }], dropped: 1 }))).toEqual(['x: m', 'and 1 more issue not recorded']);
  });

  it('gives no lines without the header', () => {
    expect(validationIssueLines({ other: 'x' })).toEqual([]);
  });

  it('reads a header that is not its JSON, or holds odd issues, without throwing, each line bounded', () => {
    expect(lines('not json')).toEqual(['(unreadable: not json)']);
    expect(lines('{"issues":3}')).toEqual(['(unreadable: {"issues":3})']);
    expect(lines(JSON.stringify({ issues: [null, { path: [{}], message: 7 }], dropped: -4 }))).toEqual(['(unknown path): (no message)', '(unknown path): (no message)']);
    const long = lines(JSON.stringify({ issues: [{ path: ['p'.repeat(1_000)], message: 'm'.repeat(5_000) }], dropped: 0 }));
    expect(long[0]!.length).toBeLessThanOrEqual(200 + 2 + LIMITS.validationIssueMessageChars);
    expect(lines(JSON.stringify({ issues: Array.from({ length: 50 }, () => ({ path: [], message: 'm' })), dropped: 0 }))).toHaveLength(LIMITS.validationIssues + 1);
  });
});
