import { describe, expect, it } from 'vitest';
import { capDelay, delaysOf, exponential, fullJitter, linear, stopAfterAttempts, decorrelatedJitter, fromList, distort, nsqRequeue } from '../../src/backoff/index.js';
import { seededRandom } from '../../src/time/random.js';
import { BackoffExpressionError, parseBackoffExpression } from '../../src/planning/backoff-expression.js';
import { formatDuration, parseDuration } from '../../src/planning/duration-text.js';

/** The same delays from the expression and from the constructors, on the same seed. */
function same(expression: string, built: ReturnType<typeof linear>, count = 12): void {
  expect(delaysOf(parseBackoffExpression(expression), count, seededRandom(7))).toEqual(delaysOf(built, count, seededRandom(7)));
}

describe('parseBackoffExpression', () => {
  it('builds the same strategies as the constructors', () => {
    same('linear(10s)', linear(10_000));
    same('exponential(1000,2,60000)|fullJitter', fullJitter(exponential(1000, 2, 60_000)));
    same('exponential(1s, 1.5) | cap(20s) | stopAfterAttempts(4)', stopAfterAttempts(capDelay(exponential(1000, 1.5), 20_000), 4));
    same('decorrelatedJitter(100ms,1m)', decorrelatedJitter(100, 60_000));
    same('list(1s,5s,30s)', fromList([1000, 5000, 30_000]));
    same('nsqRequeue|distort(10)', distort(nsqRequeue(), 10));
    expect(delaysOf(parseBackoffExpression('nsqRequeue|stopAfterAttempts(4)'), 10, seededRandom(1))).toEqual([90_000, 180_000, 270_000, 360_000]);
  });

  it('names the part at fault', () => {
    expect(() => parseBackoffExpression('fullJitter')).toThrow(/"fullJitter" is not a strategy/);
    expect(() => parseBackoffExpression('linear(1s)|exponential(1s)')).toThrow(/"exponential" is not a wrapper/);
    expect(() => parseBackoffExpression('linear()')).toThrow(/linear takes 1 to 2 arguments, got 0/);
    expect(() => parseBackoffExpression('exponential(1s,fast)')).toThrow(/argument 2 of exponential must be a number/);
    expect(() => parseBackoffExpression('exponential(1s,0.5)')).toThrow(/multiplier/);
    expect(() => parseBackoffExpression('linear(1s)||fullJitter')).toThrow(/empty part/);
    expect(() => parseBackoffExpression('constructor')).toThrow(BackoffExpressionError);
    expect(() => parseBackoffExpression('linear(1s')).toThrow(/cannot read/);
  });
});

describe('durations', () => {
  it('reads milliseconds and units', () => {
    expect([parseDuration('1500'), parseDuration('250ms'), parseDuration('1.5s'), parseDuration('2m'), parseDuration('24h'), parseDuration('1d')]).toEqual([1500, 250, 1500, 120_000, 86_400_000, 86_400_000]);
    expect([parseDuration('-1s'), parseDuration('1 sec'), parseDuration(''), parseDuration('1e3')]).toEqual([undefined, undefined, undefined, undefined]);
  });

  it('writes them readably', () => {
    expect([formatDuration(850), formatDuration(12_500), formatDuration(96_000), formatDuration(120_000), formatDuration(86_400_000), formatDuration(26 * 3_600_000 + 300_000), formatDuration(2.5 * 86_400_000)]).toEqual([
      '850 ms',
      '12.5 s',
      '1 min 36 s',
      '2 min',
      '24 h',
      '26 h 5 min',
      '2 d 12 h',
    ]);
    expect(formatDuration(3_599_999)).toBe('60 min');
  });
});
