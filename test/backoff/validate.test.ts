import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import { seededRandom } from '../../src/time/random.js';
import {
  capDelay,
  connectionBackoff,
  constant,
  decorrelatedJitter,
  delaysOf,
  distort,
  exponential,
  fromList,
  linear,
  stopAfterAttempts,
  stopAfterElapsed,
} from '../../src/backoff/index.js';

const ok = constant(1);

/** Not a finite delay: negative (down to -Infinity), NaN or +Infinity. */
const badDelay = fc.oneof(
  fc.double({ max: -Number.MIN_VALUE, noNaN: true }),
  fc.constant(Number.NaN),
  fc.constant(Number.POSITIVE_INFINITY),
);
/** Not a cap: negative or NaN (+Infinity is a valid cap). */
const badMax = fc.oneof(fc.double({ max: -Number.MIN_VALUE, noNaN: true }), fc.constant(Number.NaN));
const badMultiplier = fc.oneof(
  fc.double({ max: 1, maxExcluded: true, noNaN: true }),
  fc.constant(Number.NaN),
  fc.constant(Number.POSITIVE_INFINITY),
);
const outside = (min: number, max: number) =>
  fc.oneof(
    fc.double({ max: min, noNaN: true }).filter((x) => x < min),
    fc.double({ min: max, noNaN: true }).filter((x) => x > max),
    fc.constant(Number.NaN),
  );
const notPositiveWhole = fc.oneof(
  fc.integer({ max: 0 }),
  fc.double({ noNaN: true }).filter((x) => !Number.isInteger(x)),
  fc.constant(Number.NaN),
);

/** Asserts `build` throws a RangeError whose message names `name`. */
function rejects(build: () => unknown, name: string): boolean {
  try {
    build();
  } catch (e) {
    return e instanceof RangeError && e.message.includes(name);
  }
  return false;
}

const cases: [string, fc.Arbitrary<number>, string, (v: number) => unknown][] = [
  ['constant', badDelay, 'delayMs', (v) => constant(v)],
  ['linear', badDelay, 'stepMs', (v) => linear(v)],
  ['linear', badMax, 'maxMs', (v) => linear(1, v)],
  ['exponential', badDelay, 'initialMs', (v) => exponential(v)],
  ['exponential', badMultiplier, 'multiplier', (v) => exponential(1, v)],
  ['exponential', badMax, 'maxMs', (v) => exponential(1, 2, v)],
  ['distort', outside(0, 100), 'factor', (v) => distort(ok, v)],
  ['decorrelatedJitter', badDelay, 'initialMs', (v) => decorrelatedJitter(v, 10)],
  ['decorrelatedJitter', badMax, 'maxMs', (v) => decorrelatedJitter(1, v)],
  ['connectionBackoff', badDelay, 'initialMs', (v) => connectionBackoff({ initialMs: v })],
  ['connectionBackoff', badMultiplier, 'multiplier', (v) => connectionBackoff({ multiplier: v })],
  ['connectionBackoff', outside(0, 1), 'jitter', (v) => connectionBackoff({ jitter: v })],
  ['connectionBackoff', badMax, 'maxMs', (v) => connectionBackoff({ maxMs: v })],
  ['fromList', badDelay, 'delaysMs[1]', (v) => fromList([1, v])],
  ['capDelay', badMax, 'maxMs', (v) => capDelay(ok, v)],
  ['stopAfterAttempts', notPositiveWhole, 'attempts', (v) => stopAfterAttempts(ok, v)],
  ['stopAfterElapsed', badDelay, 'totalMs', (v) => stopAfterElapsed(ok, v)],
  ['delaysOf', fc.oneof(fc.integer({ max: -1 }), fc.constant(1.5), fc.constant(Number.NaN)), 'count', (v) => delaysOf(ok, v, seededRandom(42))],
];

describe('parameter validation', () => {
  for (const [fn, bad, name, build] of cases) {
    it(`${fn} rejects a bad ${name} with a RangeError naming it`, () => {
      fc.assert(fc.property(bad, (v) => rejects(() => build(v), `${fn}: ${name} `)));
    });
  }

  it('accepts Infinity where a parameter is a cap, and nowhere else', () => {
    expect(() => linear(1, Infinity)).not.toThrow();
    expect(() => exponential(1, 2, Infinity)).not.toThrow();
    expect(() => decorrelatedJitter(1, Infinity)).not.toThrow();
    expect(() => connectionBackoff({ maxMs: Infinity })).not.toThrow();
    expect(() => capDelay(ok, Infinity)).not.toThrow();
    expect(() => constant(Infinity)).toThrow(/delayMs/);
    expect(() => stopAfterElapsed(ok, Infinity)).toThrow(/totalMs/);
  });

  it('accepts the edges of every range', () => {
    expect(() => constant(0)).not.toThrow();
    expect(() => exponential(0, 1, 0)).not.toThrow();
    expect(() => distort(ok, 0)).not.toThrow();
    expect(() => distort(ok, 100)).not.toThrow();
    expect(() => connectionBackoff({ jitter: 0 })).not.toThrow();
    expect(() => connectionBackoff({ jitter: 1 })).not.toThrow();
    expect(() => stopAfterAttempts(ok, 1)).not.toThrow();
    expect(() => delaysOf(ok, 0, seededRandom(42))).not.toThrow();
  });

  it('names the parameter and the value in the message', () => {
    expect(() => exponential(1000, 0.5)).toThrow('exponential: multiplier must be a finite number >= 1, got 0.5');
  });
});
