import { describe, it, expect } from 'vitest';
import { seededRandom } from '../../src/time/random.js';
import {
  constant,
  delayedRetries,
  delaysOf,
  exponential,
  fromList,
  linear,
  nsqRequeue,
} from '../../src/backoff/index.js';

const rnd = () => seededRandom(42);

describe('constant', () => {
  it('returns the same delay for every attempt', () => {
    expect(delaysOf(constant(250), 5, rnd())).toEqual([250, 250, 250, 250, 250]);
  });

  it('allows a zero delay', () => {
    expect(delaysOf(constant(0), 3, rnd())).toEqual([0, 0, 0]);
  });
});

describe('linear', () => {
  it('grows by one step per attempt', () => {
    expect(delaysOf(linear(100), 5, rnd())).toEqual([100, 200, 300, 400, 500]);
  });

  it('caps at maxMs', () => {
    expect(delaysOf(linear(100, 250), 5, rnd())).toEqual([100, 200, 250, 250, 250]);
  });
});

describe('nsqRequeue', () => {
  it('requeues after 90 s, 180 s, 270 s, 360 s, ... capped at 900 s', () => {
    expect(delaysOf(nsqRequeue(), 12, rnd())).toEqual([
      90_000, 180_000, 270_000, 360_000, 450_000, 540_000, 630_000, 720_000, 810_000, 900_000, 900_000, 900_000,
    ]);
  });
});

describe('delayedRetries', () => {
  it('waits 10 s, 20 s, 30 s like NServiceBus', () => {
    expect(delaysOf(delayedRetries(), 3, rnd())).toEqual([10_000, 20_000, 30_000]);
  });
});

describe('exponential', () => {
  it('doubles by default', () => {
    expect(delaysOf(exponential(1000), 6, rnd())).toEqual([1000, 2000, 4000, 8000, 16_000, 32_000]);
  });

  it('uses the multiplier and caps at maxMs', () => {
    expect(delaysOf(exponential(100, 3, 5000), 6, rnd())).toEqual([100, 300, 900, 2700, 5000, 5000]);
  });

  it('stays flat with a multiplier of 1', () => {
    expect(delaysOf(exponential(700, 1), 4, rnd())).toEqual([700, 700, 700, 700]);
  });

  it('stays at zero from a zero start, even where the growth overflows', () => {
    const b = exponential(0);
    expect(b({ attempt: 5000, previousDelayMs: 0, elapsedMs: 0, random: rnd() })).toBe(0);
  });

  it('reaches the cap rather than Infinity or NaN for huge attempts', () => {
    const b = exponential(1000, 2, 60_000);
    expect(b({ attempt: 5000, previousDelayMs: 60_000, elapsedMs: 0, random: rnd() })).toBe(60_000);
  });
});

describe('fromList', () => {
  it('gives attempt n the n-th delay and repeats the last', () => {
    expect(delaysOf(fromList([1000, 5000, 30_000]), 6, rnd())).toEqual([1000, 5000, 30_000, 30_000, 30_000, 30_000]);
  });

  it('repeats a single delay forever', () => {
    expect(delaysOf(fromList([42]), 4, rnd())).toEqual([42, 42, 42, 42]);
  });

  it('copies the list', () => {
    const list = [1, 2];
    const b = fromList(list);
    list[0] = 99;
    expect(delaysOf(b, 3, rnd())).toEqual([1, 2, 2]);
  });

  it('rejects an empty list', () => {
    expect(() => fromList([])).toThrow(RangeError);
    expect(() => fromList([])).toThrow(/delaysMs/);
  });
});
