import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import { seededRandom } from '../../src/time/random.js';
import { connectionBackoff, delaysOf, MIN_CONNECT_TIMEOUT_MS } from '../../src/backoff/index.js';

/** The base delays of the defaults (1 s × 1.6^(n-1), capped at 120 s), retries 1 to 14. */
const BASES = [
  1000, 1600, 2560, 4096, 6553.6, 10_485.76, 16_777.216, 26_843.5456, 42_949.67296, 68_719.476736,
  109_951.1627776, 120_000, 120_000, 120_000,
];

describe('connectionBackoff', () => {
  it('follows the RocketMQ/gRPC algorithm under the seeded random', () => {
    const r = seededRandom(42);
    const expected = BASES.slice(0, 8).map((b, i) => {
      if (i === 0) return 1000;
      return b + (2 * r() - 1) * 0.2 * b;
    });
    const delays = delaysOf(connectionBackoff(), 8, seededRandom(42));
    for (const [i, d] of delays.entries()) expect(d).toBeCloseTo(expected[i]!, 6);
    expect(delays.slice(0, 4)).toEqual([1000, 1664.7064012289047, 2507.049532413483, 4673.479956054689]);
  });

  it('waits exactly the initial backoff before the first retry, without jitter', () => {
    fc.assert(
      fc.property(fc.integer(), (seed) => delaysOf(connectionBackoff(), 1, seededRandom(seed))[0] === 1000),
    );
  });

  it('keeps every later delay within ±20 % of its base, the base capped at 120 s', () => {
    fc.assert(
      fc.property(fc.integer(), (seed) => {
        const delays = delaysOf(connectionBackoff(), BASES.length, seededRandom(seed));
        return delays.every((d, i) => {
          const b = BASES[i]!;
          return d >= b * 0.8 - 1e-6 && d <= b * 1.2 + 1e-6 && d <= 120_000 * 1.2;
        });
      }),
    );
  });

  it('stays within b × [1 - jitter, 1 + jitter] for any options, attempt and random value', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 1e6, noNaN: true }),
        fc.double({ min: 1, max: 5, noNaN: true }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 0, max: 1e9, noNaN: true }),
        fc.integer({ min: 2, max: 100_000 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (initialMs, multiplier, jitter, maxMs, attempt, r) => {
          const x = connectionBackoff({ initialMs, multiplier, jitter, maxMs })({
            attempt,
            previousDelayMs: undefined,
            elapsedMs: 0,
            random: () => r,
          }) as number;
          const b = initialMs === 0 ? 0 : Math.min(initialMs * multiplier ** (attempt - 1), maxMs);
          const slack = b * 1e-12;
          return x >= b * (1 - jitter) - slack && x <= b * (1 + jitter) + slack;
        },
      ),
    );
  });

  it('takes its options one by one', () => {
    const flat = delaysOf(connectionBackoff({ jitter: 0, maxMs: 3000 }), 5, seededRandom(42));
    [1000, 1600, 2560, 3000, 3000].forEach((d, i) => expect(flat[i]).toBeCloseTo(d, 9));
    expect(delaysOf(connectionBackoff({ initialMs: 500, multiplier: 2, jitter: 0 }), 3, seededRandom(42))).toEqual([500, 1000, 2000]);
  });

  it('exports the 20 s minimum connect timeout', () => {
    expect(MIN_CONNECT_TIMEOUT_MS).toBe(20_000);
  });
});
