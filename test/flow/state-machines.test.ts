import { describe, expect, it } from 'vitest';
import { resolveFlowConfig } from '../../src/flow/config.js';
import { backoffOnFailure, backoffOnSuccess, INITIAL_CONSUMER_BACKOFF, type ConsumerBackoffState } from '../../src/flow/consumer-backoff.js';
import { INITIAL_RATE_LIMIT, rateLimitOnFailure, rateLimitOnSuccess } from '../../src/flow/rate-limit.js';
import { depositFirstAttempt, fullBudget, refill, trySpend } from '../../src/flow/retry-budget.js';
import { seededRandom } from '../../src/time/random.js';
import { OptionError } from '../../src/util/option-checks.js';

describe('NSQ consumer backoff counter', () => {
  const exponential = resolveFlowConfig({ consumerBackoff: true }).consumerBackoff!;
  const random = seededRandom(1);

  it('backs off multiplier × 2^counter: 2, 4, 8, 16, 32, 64 s, and is not incremented once the next level exceeds 2 min', () => {
    let state: ConsumerBackoffState = INITIAL_CONSUMER_BACKOFF;
    const seen: [number, number][] = [];
    for (let i = 0; i < 9; i++) {
      const next = backoffOnFailure(exponential, state, random);
      state = next.state;
      seen.push([state.counter, next.durationMs]);
    }
    expect(seen).toEqual([
      [1, 2_000], [2, 4_000], [3, 8_000], [4, 16_000], [5, 32_000], [6, 64_000],
      [6, 64_000], [6, 64_000], [6, 64_000],
    ]);
  });

  it('decrements on each success and backs off from the current counter on a failure before 0', () => {
    let state: ConsumerBackoffState = { counter: 4 };
    state = backoffOnSuccess(state);
    state = backoffOnSuccess(state);
    expect(state.counter).toBe(2);
    const next = backoffOnFailure(exponential, state, random);
    expect(next.state.counter).toBe(3);
    expect(next.durationMs).toBe(8_000);
    let s: ConsumerBackoffState = { counter: 1 };
    s = backoffOnSuccess(s);
    s = backoffOnSuccess(s);
    expect(s.counter).toBe(0);
  });

  it('full jitter stays within U(0, exponential) and under the maximum', () => {
    const jitter = resolveFlowConfig({ consumerBackoff: { strategy: 'full-jitter', multiplierMs: 1_000, maxMs: 120_000 } }).consumerBackoff!;
    const r = seededRandom(9);
    let state: ConsumerBackoffState = INITIAL_CONSUMER_BACKOFF;
    for (let i = 0; i < 50; i++) {
      const next = backoffOnFailure(jitter, state, r);
      state = next.state;
      expect(next.durationMs).toBeGreaterThanOrEqual(0);
      expect(next.durationMs).toBeLessThanOrEqual(Math.min(1_000 * 2 ** state.counter, 120_000));
    }
    expect(state.counter).toBe(6);
  });

  it('rejects bad options by name', () => {
    expect(() => resolveFlowConfig({ consumerBackoff: { multiplierMs: -1 } })).toThrow(/consumerBackoff\.multiplierMs/);
    expect(() => resolveFlowConfig({ consumerBackoff: { strategy: 'linear' as never } })).toThrow(OptionError);
    expect(() => resolveFlowConfig({ consumerBackoff: { resume: 'never' as never } })).toThrow(/consumerBackoff\.resume/);
    expect(() => resolveFlowConfig({ rateLimit: { consecutiveFailures: 0 } })).toThrow(/rateLimit\.consecutiveFailures/);
    expect(() => resolveFlowConfig({ retryBudget: { ratio: 2 } })).toThrow(/retryBudget\.ratio/);
  });
});

describe('automatic rate limiting', () => {
  it('starts after N consecutive failures and ends on the first success', () => {
    let state = INITIAL_RATE_LIMIT;
    const started: boolean[] = [];
    for (let i = 0; i < 4; i++) {
      const r = rateLimitOnFailure(3, state);
      state = r.state;
      started.push(r.started);
    }
    expect(started).toEqual([false, false, true, false]);
    expect(state).toEqual({ consecutiveFailures: 4, limited: true });
    const ok = rateLimitOnSuccess(state);
    expect(ok).toEqual({ state: INITIAL_RATE_LIMIT, ended: true });
    expect(rateLimitOnSuccess(ok.state).ended).toBe(false);
  });

  it('a success before the threshold resets the count', () => {
    let state = rateLimitOnFailure(3, INITIAL_RATE_LIMIT).state;
    state = rateLimitOnFailure(3, state).state;
    state = rateLimitOnSuccess(state).state;
    const r = rateLimitOnFailure(3, state);
    expect(r.state.consecutiveFailures).toBe(1);
    expect(r.started).toBe(false);
  });
});

describe('retry budget', () => {
  const settings = { ratio: 0.1, floorPerSecond: 1, capacity: 10 };

  it('allows capacity retries from a full bucket, then none', () => {
    let state = fullBudget(settings, 0);
    let allowed = 0;
    for (let i = 0; i < 15; i++) {
      const r = trySpend(settings, state, 0);
      state = r.state;
      if (r.allowed) allowed++;
    }
    expect(allowed).toBe(10);
  });

  it('refills by ratio per first attempt and by the floor per second, up to capacity', () => {
    let state = { tokens: 0, at: 0 };
    for (let i = 0; i < 20; i++) state = depositFirstAttempt(settings, state, 0);
    expect(state.tokens).toBeCloseTo(2, 10);
    expect(refill(settings, state, 3_000).tokens).toBeCloseTo(5, 10);
    expect(refill(settings, state, 60_000).tokens).toBe(10);
  });

  it('in steady state lets retries be about 10 % of first attempts plus the floor', () => {
    let state = { tokens: 0, at: 0 };
    let retries = 0;
    const firstAttempts = 1_000;
    for (let i = 0; i < firstAttempts; i++) {
      const now = i * 10; // 100 first attempts a second for 10 s
      state = depositFirstAttempt(settings, state, now);
      const r = trySpend(settings, state, now);
      state = r.state;
      if (r.allowed) retries++;
    }
    // 1,000 × 0.1 = 100 from traffic, + 10 s × 1 from the floor.
    expect(retries).toBeGreaterThanOrEqual(105);
    expect(retries).toBeLessThanOrEqual(110);
  });
});
