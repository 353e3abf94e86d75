import type { StandardSchemaV1 } from '@standard-schema/spec';
import { OptionError } from '../util/option-checks.js';
import { truncate } from '../headers/retry-state.js';

/** One reason a body failed its schema. */
export interface ValidationIssue {
  /** Where in the body, outermost key first; empty for the body itself. */
  readonly path: readonly (string | number)[];
  readonly message: string;
}

/** Issues named in a {@link ValidationError}'s message; the rest are counted. */
const ISSUES_IN_MESSAGE = 10;

/**
 * A body that its schema refused. `issues` lists every issue the schema
 * reported; the message names the first few, each as its path and message.
 */
export class ValidationError extends Error {
  override readonly name = 'ValidationError';

  constructor(
    readonly issues: readonly ValidationIssue[],
    options?: { cause?: unknown },
  ) {
    const shown = issues.slice(0, ISSUES_IN_MESSAGE).map(describeIssue);
    const more = issues.length - shown.length;
    super(`the body failed its schema (${issues.length} issue${issues.length === 1 ? '' : 's'}): ${shown.join('; ')}${more > 0 ? `; and ${more} more` : ''}`, options);
  }
}

/** What a schema made of a value: its output, or why it refused it. */
export type Checked<T> = { readonly value: T; readonly issues?: undefined } | { readonly issues: readonly ValidationIssue[] };

/** Checks that `schema` is a Standard Schema, naming the option at fault. */
export function standardSchema<S>(name: string, schema: S): S {
  const props = typeof schema === 'object' || typeof schema === 'function' ? (schema as { '~standard'?: { validate?: unknown } } | null)?.['~standard'] : undefined;
  if (typeof props !== 'object' || props === null || typeof props.validate !== 'function') {
    throw new OptionError(`${name} must be a Standard Schema (such as a zod, valibot or arktype schema): an object whose '~standard' property has a validate function`);
  }
  return schema;
}

/**
 * Runs `schema` on `value`: the verdict at once when the validator answers
 * at once, a promise of it when it answers with one. A validator that
 * throws, rejects or answers something that is not a Standard Schema result
 * throws (or rejects) with that error.
 */
export function check<T>(schema: StandardSchemaV1<unknown, T>, value: unknown): Checked<T> | Promise<Checked<T>> {
  const result = schema['~standard'].validate(value);
  return isPromise(result) ? Promise.resolve(result).then(verdict) : verdict(result);
}

/** The verdict of a Standard Schema result: its output, or its issues made plain. */
function verdict<T>(result: StandardSchemaV1.Result<T>): Checked<T> {
  if (typeof result !== 'object' || result === null) throw new TypeError(`the schema's validate returned ${String(result)}, not a Standard Schema result`);
  if (!result.issues) return { value: (result as StandardSchemaV1.SuccessResult<T>).value };
  if (!Array.isArray(result.issues)) throw new TypeError("the schema's validate returned issues that are not an array");
  return { issues: result.issues.map(plainIssue) };
}

function plainIssue(issue: StandardSchemaV1.Issue): ValidationIssue {
  const path = Array.isArray(issue?.path) ? issue.path.map(pathKey) : [];
  return { path, message: typeof issue?.message === 'string' ? issue.message : String(issue?.message) };
}

/** A path segment as a string or number: a `{ key }` segment unwrapped, a symbol described. */
function pathKey(segment: PropertyKey | StandardSchemaV1.PathSegment): string | number {
  const key = typeof segment === 'object' && segment !== null ? segment.key : segment;
  if (typeof key === 'number' || typeof key === 'string') return key;
  return String(key);
}

/** `items[0].qty`, as a reader of the body would write it; `(body)` for the body itself. */
export function formatPath(path: readonly (string | number)[]): string {
  if (path.length === 0) return '(body)';
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else if (/^[A-Za-z_$][\w$]*$/.test(key)) out += out === '' ? key : `.${key}`;
    else out += `[${JSON.stringify(key)}]`;
  }
  return out;
}

function describeIssue(issue: ValidationIssue): string {
  return `${truncate(formatPath(issue.path), 200)}: ${truncate(issue.message, 300)}`;
}

function isPromise<T>(value: T | Promise<T>): value is Promise<T> {
  return typeof (value as { then?: unknown } | null)?.then === 'function';
}

/**
 * Runs `schema` on a decoded body: its output, or the error that refuses
 * it: a {@link ValidationError} with the issues, or whatever the validator
 * threw or rejected with.
 */
export async function validateBody<T>(schema: StandardSchemaV1<unknown, T>, body: unknown): Promise<{ readonly value: T } | { readonly error: unknown }> {
  try {
    const checked = await check(schema, body);
    return checked.issues ? { error: new ValidationError(checked.issues) } : { value: checked.value };
  } catch (error) {
    return { error };
  }
}
