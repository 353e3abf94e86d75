/**
 * nesbusRetry reproduces nesbus SbBackoffRetry's schedule: retry n waits
 * delay × factor × n (linear) or (max(factor, 2)^n - 1) × delay / 2
 * (exponential), times a distortion from 1 - d/100 to 1 + d/100, with no
 * immediate retries and retryCount delayed ones.
 */
import { describe, expect, it } from 'vitest';
import { delaysOf } from '../../src/backoff/schedule.js';
import { seededRandom } from '../../src/time/random.js';
import { nesbusRetry } from '../../src/nestjs/nesbus-retry.js';

const undistorted = (options: Parameters<typeof nesbusRetry>[0], count = 20) => {
  const r = nesbusRetry({ ...options, distortFactor: 0 });
  return delaysOf(r.delayedBackoff!, count, seededRandom(1)).slice(0, r.delayedRetries);
};

describe('nesbusRetry', () => {
  it('with nesbus defaults: 10 exponential retries from 0.5 s, no immediate retries', () => {
    const r = nesbusRetry();
    expect(r.immediateRetries).toBe(0);
    expect(r.delayedRetries).toBe(10);
    expect(undistorted({})).toEqual([500, 1_500, 3_500, 7_500, 15_500, 31_500, 63_500, 127_500, 255_500, 511_500]);
  });

  it("the documented example (retryCount 3, factor 1, linear) waits 1, 2 and 3 s", () => {
    expect(undistorted({ retryCount: 3, factor: 1, delayType: 'linear' })).toEqual([1_000, 2_000, 3_000]);
    expect(nesbusRetry({ retryCount: 3, factor: 1, delayType: 'linear' }).delayedRetries).toBe(3);
  });

  it('linear multiplies delay by factor and the retry number', () => {
    expect(undistorted({ retryCount: 4, delay: 250, factor: 3, delayType: 'linear' })).toEqual([750, 1_500, 2_250, 3_000]);
    expect(undistorted({ retryCount: 2, delay: 1_000, factor: 0, delayType: 'linear' })).toEqual([0, 0]);
  });

  it('exponential grows by max(factor, 2)', () => {
    expect(undistorted({ retryCount: 4, delay: 1_000, factor: 3 })).toEqual([1_000, 4_000, 13_000, 40_000]);
    expect(undistorted({ retryCount: 3, delay: 1_000, factor: 1 })).toEqual([500, 1_500, 3_500]);
    expect(undistorted({ retryCount: 3, delay: 0 })).toEqual([0, 0, 0]);
  });

  it('distorts each delay by 0.9 to 1.1 for distortFactor 10, repeatably with a seeded random', () => {
    const r = nesbusRetry({ retryCount: 5, delay: 1_000, factor: 2 });
    const delays = delaysOf(r.delayedBackoff!, 5, seededRandom(42));
    const base = [500, 1_500, 3_500, 7_500, 15_500];
    const random = seededRandom(42);
    base.forEach((b, i) => expect(delays[i]).toBeCloseTo(b * (0.9 + 0.2 * random()), 6));
    expect(delays.map(Math.round)).toEqual([510, 1_484, 3_747, 7_755, 14_492]);
    delays.forEach((d, i) => {
      expect(d).toBeGreaterThanOrEqual(base[i]! * 0.9);
      expect(d).toBeLessThanOrEqual(base[i]! * 1.1);
    });
    const wide = delaysOf(nesbusRetry({ distortFactor: 50 }).delayedBackoff!, 1000, seededRandom(7));
    expect(Math.min(...wide.map((d, i) => d / (((2 ** (i + 1) - 1) * 1_000) / 2)))).toBeGreaterThanOrEqual(0.5);
  });

  it('accepts retryType as another name for delayType', () => {
    expect(undistorted({ retryCount: 2, retryType: 'linear' })).toEqual([2_000, 4_000]);
    expect(undistorted({ retryCount: 2, retryType: 'linear', delayType: 'linear' })).toEqual([2_000, 4_000]);
    expect(() => nesbusRetry({ retryType: 'linear', delayType: 'exponential' })).toThrow(/disagree/);
  });

  it('retryCount 0 means no retries at all', () => {
    expect(nesbusRetry({ retryCount: 0 })).toMatchObject({ immediateRetries: 0, delayedRetries: 0 });
  });

  it('rejects bad settings when built, naming them', () => {
    expect(() => nesbusRetry({ retryCount: 1.5 })).toThrow(/retryCount/);
    expect(() => nesbusRetry({ retryCount: -1 })).toThrow(/retryCount/);
    expect(() => nesbusRetry({ delay: -1 })).toThrow(/delay/);
    expect(() => nesbusRetry({ delay: Number.NaN })).toThrow(/delay/);
    expect(() => nesbusRetry({ factor: -2 })).toThrow(/factor/);
    expect(() => nesbusRetry({ factor: Infinity })).toThrow(/factor/);
    expect(() => nesbusRetry({ distortFactor: 101 })).toThrow(/factor/);
    expect(() => nesbusRetry({ delayType: 'fibonacci' as 'linear' })).toThrow(/delayType/);
  });
});
