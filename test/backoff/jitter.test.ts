import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import { seededRandom } from '../../src/time/random.js';
import {
  constant,
  decorrelatedJitter,
  delaysOf,
  distort,
  equalJitter,
  exponential,
  fullJitter,
  linear,
  stopAfterAttempts,
} from '../../src/backoff/index.js';
import type { Backoff, BackoffStep } from '../../src/backoff/index.js';

/** The first `n` values of seededRandom(42), the draws the strategies under test consume. */
const draws = (n: number) => {
  const r = seededRandom(42);
  return Array.from({ length: n }, () => r());
};

/** Any uniform value a Random may return: [0, 1). */
const unit = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true });
const attempt = fc.integer({ min: 1, max: 100_000 });
/**
 * A delay in ms: zero, or from a nanosecond up. Below that, subnormal floats
 * halve with rounding error and no real delay lives there.
 */
const delayMs = (max: number) => fc.oneof(fc.constant(0), fc.double({ min: 1e-6, max, noNaN: true }));
/** An inner strategy with finite delays: a capped exponential. */
const inner = fc
  .record({
    initialMs: delayMs(1e7),
    multiplier: fc.double({ min: 1, max: 10, noNaN: true }),
    maxMs: delayMs(1e9),
  })
  .map(({ initialMs, multiplier, maxMs }) =>
    Object.assign(exponential(initialMs, multiplier, maxMs), {
      toString: () => `exponential(${initialMs}, ${multiplier}, ${maxMs})`,
    }),
  );

const stepOf = (n: number, r: number, previousDelayMs?: number): BackoffStep => ({
  attempt: n,
  previousDelayMs,
  elapsedMs: 0,
  random: () => r,
});
const run = (b: Backoff, step: BackoffStep) => b(step) as number;
/** Slack for float rounding in the multiplicative bounds. */
const slack = (d: number) => d * 1e-12;

describe('fullJitter', () => {
  it('yields U(0, d) from the seeded random', () => {
    const r = draws(5);
    const expected = [1000, 2000, 4000, 8000, 16_000].map((d, i) => r[i]! * d);
    const delays = delaysOf(fullJitter(exponential(1000)), 5, seededRandom(42));
    expect(delays).toEqual(expected);
    expect(delays).toEqual([601.1037519201636, 896.5811179950833, 3409.8631739616394, 5357.872331514955, 2797.0223799347878]);
  });

  it('passes a stop through', () => {
    expect(delaysOf(fullJitter(stopAfterAttempts(constant(10), 2)), 5, seededRandom(42))).toHaveLength(2);
  });

  it('stays within [0, d] for any attempt and any random value', () => {
    fc.assert(
      fc.property(inner, attempt, unit, (b, n, r) => {
        const d = run(b, stepOf(n, r));
        const x = run(fullJitter(b), stepOf(n, r));
        return x >= 0 && x <= d;
      }),
    );
  });
});

describe('equalJitter', () => {
  it('yields d/2 + U(0, d/2) from the seeded random', () => {
    const r = draws(5);
    const expected = [1000, 2000, 4000, 8000, 16_000].map((d, i) => d / 2 + r[i]! * (d / 2));
    const delays = delaysOf(equalJitter(exponential(1000)), 5, seededRandom(42));
    expect(delays).toEqual(expected);
    for (const [i, d] of [1000, 2000, 4000, 8000, 16_000].entries()) {
      expect(delays[i]).toBeGreaterThanOrEqual(d / 2);
      expect(delays[i]).toBeLessThan(d);
    }
  });

  it('passes a stop through', () => {
    expect(delaysOf(equalJitter(stopAfterAttempts(constant(10), 2)), 5, seededRandom(42))).toHaveLength(2);
  });

  it('stays within [d/2, d] for any attempt and any random value', () => {
    fc.assert(
      fc.property(inner, attempt, unit, (b, n, r) => {
        const d = run(b, stepOf(n, r));
        const x = run(equalJitter(b), stepOf(n, r));
        return x >= d / 2 && x <= d;
      }),
    );
  });
});

describe('distort', () => {
  it('multiplies by 0.9 to 1.1 for a factor of 10, as nesbus distortFactor does', () => {
    const r = draws(5);
    const expected = [1000, 2000, 3000, 4000, 5000].map((d, i) => d * (0.9 + r[i]! * ((1 + 0.1) - (1 - 0.1))));
    const delays = delaysOf(distort(linear(1000), 10), 5, seededRandom(42));
    expect(delays).toEqual(expected);
    for (const [i, d] of [1000, 2000, 3000, 4000, 5000].entries()) {
      expect(delays[i]).toBeGreaterThanOrEqual(d * 0.9);
      expect(delays[i]).toBeLessThanOrEqual(d * 1.1);
    }
  });

  it('leaves delays unchanged with a factor of 0', () => {
    expect(delaysOf(distort(linear(1000), 0), 3, seededRandom(42))).toEqual([1000, 2000, 3000]);
  });

  it('passes a stop through', () => {
    expect(delaysOf(distort(stopAfterAttempts(constant(10), 2), 50), 5, seededRandom(42))).toHaveLength(2);
  });

  it('stays within d × [1 - f/100, 1 + f/100] for any attempt, factor and random value', () => {
    fc.assert(
      fc.property(inner, attempt, unit, fc.double({ min: 0, max: 100, noNaN: true }), (b, n, r, f) => {
        const d = run(b, stepOf(n, r));
        const x = run(distort(b, f), stepOf(n, r));
        return x >= d * (1 - f / 100) - slack(d) && x <= d * (1 + f / 100) + slack(d);
      }),
    );
  });
});

describe('decorrelatedJitter', () => {
  it('draws from [initial, 3 × previous], starting from previous = initial', () => {
    const r = draws(8);
    const expected: number[] = [];
    let previous = 1000;
    for (const u of r) {
      previous = Math.min(20_000, 1000 + u * (previous * 3 - 1000));
      expected.push(previous);
    }
    const delays = delaysOf(decorrelatedJitter(1000, 20_000), 8, seededRandom(42));
    expect(delays).toEqual(expected);
    expect(delays[0]).toBe(2202.2075038403273);
    expect(delays[7]).toBe(20_000);
  });

  it('stays within [min(initial, 3 × previous), max(initial, 3 × previous)] and below maxMs for any step', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 1e7, noNaN: true }),
        fc.double({ min: 0, max: 1e9, noNaN: true }),
        fc.option(fc.double({ min: 0, max: 1e9, noNaN: true }), { nil: undefined }),
        attempt,
        unit,
        (initialMs, maxMs, previousDelayMs, n, r) => {
          const x = run(decorrelatedJitter(initialMs, maxMs), stepOf(n, r, previousDelayMs));
          const top = (previousDelayMs ?? initialMs) * 3;
          const low = Math.min(initialMs, top);
          const high = Math.max(initialMs, top);
          return x <= maxMs && x >= Math.min(maxMs, low) && x <= high;
        },
      ),
    );
  });
});
