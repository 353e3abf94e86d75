import { describe, it, expect } from 'vitest';
import { seededRandom } from '../../src/time/random.js';
import type { BackoffStep } from '../../src/backoff/index.js';
import {
  capDelay,
  constant,
  delayedRetries,
  delaysOf,
  exponential,
  fromList,
  linear,
  nsqRequeue,
  stopAfterAttempts,
  stopAfterElapsed,
} from '../../src/backoff/index.js';

const rnd = () => seededRandom(42);

describe('capDelay', () => {
  it('caps every delay', () => {
    expect(delaysOf(capDelay(exponential(1000), 5000), 5, rnd())).toEqual([1000, 2000, 4000, 5000, 5000]);
  });

  it('passes a stop through', () => {
    expect(delaysOf(capDelay(stopAfterAttempts(linear(10), 2), 15), 5, rnd())).toEqual([10, 15]);
  });

  it('accepts Infinity as no cap', () => {
    expect(delaysOf(capDelay(linear(10), Infinity), 3, rnd())).toEqual([10, 20, 30]);
  });
});

describe('stopAfterAttempts', () => {
  it('stops after n retries', () => {
    expect(delaysOf(stopAfterAttempts(constant(5), 3), 10, rnd())).toEqual([5, 5, 5]);
  });

  it('reproduces NSQ defaults: four requeues, then give up (MaxAttempts 5)', () => {
    expect(delaysOf(stopAfterAttempts(nsqRequeue(), 4), 10, rnd())).toEqual([90_000, 180_000, 270_000, 360_000]);
  });

  it('reproduces NServiceBus defaults: three delayed retries', () => {
    expect(delaysOf(stopAfterAttempts(delayedRetries(), 3), 10, rnd())).toEqual([10_000, 20_000, 30_000]);
  });
});

describe('stopAfterElapsed', () => {
  it('stops when the next delay would exceed the budget', () => {
    // 1000 + 2000 + 4000 = 7000; the next, 8000, would bring the total to 15 000.
    expect(delaysOf(stopAfterElapsed(exponential(1000), 10_000), 10, rnd())).toEqual([1000, 2000, 4000]);
  });

  it('allows a total exactly at the budget', () => {
    expect(delaysOf(stopAfterElapsed(constant(500), 1500), 10, rnd())).toEqual([500, 500, 500]);
  });

  it('stops before the first retry when it alone exceeds the budget', () => {
    expect(delaysOf(stopAfterElapsed(constant(500), 499), 10, rnd())).toEqual([]);
  });
});

describe('delaysOf', () => {
  it('feeds each step its attempt, the previous delay, the elapsed total and the random source', () => {
    const random = rnd();
    const steps: BackoffStep[] = [];
    delaysOf((step) => {
      steps.push(step);
      return step.attempt * 10;
    }, 4, random);
    expect(steps).toEqual([
      { attempt: 1, previousDelayMs: undefined, elapsedMs: 0, random },
      { attempt: 2, previousDelayMs: 10, elapsedMs: 10, random },
      { attempt: 3, previousDelayMs: 20, elapsedMs: 30, random },
      { attempt: 4, previousDelayMs: 30, elapsedMs: 60, random },
    ]);
  });

  it('stops at the first undefined and asks no further', () => {
    let calls = 0;
    const delays = delaysOf(({ attempt }) => {
      calls++;
      return attempt < 3 ? 1 : undefined;
    }, 10, rnd());
    expect(delays).toEqual([1, 1]);
    expect(calls).toBe(3);
  });

  it('lists nothing for a count of 0', () => {
    expect(delaysOf(fromList([1]), 0, rnd())).toEqual([]);
  });
});
