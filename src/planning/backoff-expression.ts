import { capDelay, stopAfterAttempts, stopAfterElapsed } from '../backoff/combinators.js';
import { constant } from '../backoff/constant.js';
import { exponential } from '../backoff/exponential.js';
import { decorrelatedJitter, distort, equalJitter, fullJitter } from '../backoff/jitter.js';
import { delayedRetries, linear, nsqRequeue } from '../backoff/linear.js';
import { fromList } from '../backoff/list.js';
import type { Backoff } from '../backoff/types.js';
import { parseDuration } from './duration-text.js';

/** A backoff expression that cannot be read: the message says where and why. */
export class BackoffExpressionError extends Error {
  override readonly name = 'BackoffExpressionError';
}

type Kind = 'duration' | 'number';
interface Stage {
  /** Argument kinds; `rest` takes any number of the last kind, at least one. */
  readonly args: readonly Kind[];
  readonly required: number;
  readonly rest?: boolean;
  readonly build: (args: number[], inner: Backoff | undefined) => Backoff;
}

const BASES: Record<string, Stage> = {
  constant: { args: ['duration'], required: 1, build: ([d]) => constant(d!) },
  linear: { args: ['duration', 'duration'], required: 1, build: ([step, max]) => linear(step!, max) },
  exponential: { args: ['duration', 'number', 'duration'], required: 1, build: ([initial, multiplier, max]) => exponential(initial!, multiplier, max) },
  decorrelatedJitter: { args: ['duration', 'duration'], required: 2, build: ([initial, max]) => decorrelatedJitter(initial!, max!) },
  nsqRequeue: { args: [], required: 0, build: () => nsqRequeue() },
  delayedRetries: { args: [], required: 0, build: () => delayedRetries() },
  list: { args: ['duration'], required: 1, rest: true, build: (delays) => fromList(delays) },
};

const WRAPPERS: Record<string, Stage> = {
  fullJitter: { args: [], required: 0, build: (_, inner) => fullJitter(inner!) },
  equalJitter: { args: [], required: 0, build: (_, inner) => equalJitter(inner!) },
  distort: { args: ['number'], required: 1, build: ([factor], inner) => distort(inner!, factor!) },
  cap: { args: ['duration'], required: 1, build: ([max], inner) => capDelay(inner!, max!) },
  stopAfterAttempts: { args: ['number'], required: 1, build: ([n], inner) => stopAfterAttempts(inner!, n!) },
  stopAfterElapsed: { args: ['duration'], required: 1, build: ([total], inner) => stopAfterElapsed(inner!, total!) },
};

/** The strategies an expression may start with and the wrappers that may follow, for help texts. */
export const BACKOFF_EXPRESSION_HELP =
  `a strategy, then wrappers separated by '|': ${Object.keys(BASES).join(', ')}; then ${Object.keys(WRAPPERS).join(', ')}. ` +
  `Durations in ms or with a unit (250ms, 10s, 5m, 24h). Example: "exponential(1s,2,60s)|fullJitter"`;

/**
 * Builds a backoff from a written expression with redeliver's own
 * constructors: a strategy, then wrappers applied left to right, separated
 * by `|`. `exponential(1s,2,60s)|fullJitter|stopAfterAttempts(5)` is
 * `stopAfterAttempts(fullJitter(exponential(1000, 2, 60_000)), 5)`.
 * Durations are milliseconds or carry a unit (`ms`, `s`, `m`, `h`, `d`).
 * Throws a {@link BackoffExpressionError} naming the part at fault.
 */
export function parseBackoffExpression(expression: string): Backoff {
  const parts = expression.split('|').map((p) => p.trim());
  if (parts.some((p) => p === '')) throw new BackoffExpressionError(`backoff "${expression}": an empty part between '|'`);
  let backoff: Backoff | undefined;
  parts.forEach((part, index) => {
    const match = /^([A-Za-z]+)\s*(?:\((.*)\))?$/.exec(part);
    if (!match) throw new BackoffExpressionError(`backoff "${expression}": cannot read "${part}" (expected name or name(arguments))`);
    const [, name, argText] = match;
    const table = index === 0 ? BASES : WRAPPERS;
    const stage = Object.hasOwn(table, name!) ? table[name!] : undefined;
    if (!stage) {
      const expected = index === 0 ? `a strategy (${Object.keys(BASES).join(', ')})` : `a wrapper (${Object.keys(WRAPPERS).join(', ')})`;
      throw new BackoffExpressionError(`backoff "${expression}": "${name}" is not ${expected}`);
    }
    const args = readArgs(expression, name!, argText, stage);
    try {
      backoff = stage.build(args, backoff);
    } catch (error) {
      throw new BackoffExpressionError(`backoff "${expression}": ${error instanceof Error ? error.message : String(error)}`);
    }
  });
  return backoff!;
}

function readArgs(expression: string, name: string, text: string | undefined, stage: Stage): number[] {
  const raw = text === undefined || text.trim() === '' ? [] : text.split(',').map((a) => a.trim());
  const most = stage.rest ? Infinity : stage.args.length;
  if (raw.length < stage.required || raw.length > most) {
    const count = stage.rest ? `at least ${stage.required}` : stage.required === stage.args.length ? `${stage.required}` : `${stage.required} to ${stage.args.length}`;
    throw new BackoffExpressionError(`backoff "${expression}": ${name} takes ${count} argument${count === '1' ? '' : 's'}, got ${raw.length}`);
  }
  return raw.map((value, i) => {
    const kind = stage.args[Math.min(i, stage.args.length - 1)]!;
    const parsed = kind === 'duration' ? parseDuration(value) : Number(value);
    if (parsed === undefined || value === '' || !Number.isFinite(parsed)) {
      throw new BackoffExpressionError(`backoff "${expression}": argument ${i + 1} of ${name} must be ${kind === 'duration' ? 'a duration (1500, 1.5s, 2m)' : 'a number'}, got "${value}"`);
    }
    return parsed;
  });
}
