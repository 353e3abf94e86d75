import { describe, expect, it } from 'vitest';
import { constant } from '../../src/backoff/index.js';
import { resolveRecoverabilityConfig } from '../../src/endpoint/config.js';
import { OptionError } from '../../src/util/option-checks.js';
import { HEADER } from '../../src/headers/names.js';
import { readRetryState, withRetryState } from '../../src/headers/retry-state.js';
import type { FailureContext } from '../../src/policy/context.js';
import { deadLetter, discard, retryLater, retryNow } from '../../src/policy/decision.js';
import {
  expiredDecision,
  expiresAtMs,
  isPastDeadline,
  messageDeadline,
  readDeadlineHeaders,
  withinDeadline,
} from '../../src/policy/deadline.js';
import { recoverabilityPolicy } from '../../src/policy/recoverability-policy.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { seededRandom } from '../../src/time/random.js';

const S = 1_000;
const H = 3_600_000;
const START = Date.UTC(2026, 0, 1);

function failure(clock: FakeClock, deadlineAt: number | undefined, patch: Partial<FailureContext> = {}): FailureContext {
  return {
    error: new Error('boom'),
    messageId: 'm',
    queue: 'q',
    headers: {},
    immediateAttempt: 1,
    delayedAttempt: 0,
    attempts: 1,
    lastDelayMs: undefined,
    delayedElapsedMs: 0,
    history: [],
    deadlineAt,
    failedAt: clock.now(),
    ...patch,
  };
}

describe('deadline: pure functions', () => {
  it('is past at the deadline itself and after it, never without one', async () => {
    const clock = new FakeClock(START);
    const deadline = START + 10 * S;
    expect(isPastDeadline(deadline, clock.now())).toBe(false);
    await clock.advance(10 * S - 1);
    expect(isPastDeadline(deadline, clock.now())).toBe(false);
    await clock.advance(1);
    expect(isPastDeadline(deadline, clock.now())).toBe(true);
    expect(isPastDeadline(undefined, clock.now())).toBe(false);
  });

  it('turns a retry-now at or past the deadline into the expired decision', async () => {
    const clock = new FakeClock(START);
    const deadline = START + 5 * S;
    expect(withinDeadline(retryNow(), failure(clock, deadline), 24 * H, 'error-queue')).toEqual(retryNow());
    await clock.advance(5 * S);
    expect(withinDeadline(retryNow(), failure(clock, deadline), 24 * H, 'error-queue')).toEqual(deadLetter('expired'));
    expect(withinDeadline(retryNow(), failure(clock, deadline), 24 * H, 'discard')).toEqual(discard('expired'));
  });

  it('turns a retry-later that would land at or past the deadline into the expired decision', () => {
    const clock = new FakeClock(START);
    const deadline = START + 10 * S;
    expect(withinDeadline(retryLater(10 * S - 1), failure(clock, deadline), 24 * H, 'error-queue')).toEqual(retryLater(10 * S - 1));
    expect(withinDeadline(retryLater(10 * S), failure(clock, deadline), 24 * H, 'error-queue')).toEqual(deadLetter('expired'));
    expect(withinDeadline(retryLater(10 * S), failure(clock, undefined), 24 * H, 'error-queue')).toEqual(retryLater(10 * S));
  });

  it("counts the transport's delay precision: a retry that could land at or past the deadline, delay plus precision, expires at once", () => {
    const clock = new FakeClock(START);
    const deadline = START + 10 * S;
    // A broker timer that fires every second may bring a 9 s retry back at 10 s.
    expect(withinDeadline(retryLater(9 * S - 1), failure(clock, deadline), 24 * H, 'error-queue', S)).toEqual(retryLater(9 * S - 1));
    expect(withinDeadline(retryLater(9 * S), failure(clock, deadline), 24 * H, 'error-queue', S)).toEqual(deadLetter('expired'));
    expect(withinDeadline(retryLater(9 * S), failure(clock, deadline), 24 * H, 'error-queue', 0)).toEqual(retryLater(9 * S));
  });

  it("the recoverability policy reads the transport's delay precision at each failure", () => {
    const clock = new FakeClock(START);
    let precisionMs = 0;
    const config = resolveRecoverabilityConfig({ immediateRetries: 0, delayedRetries: 5, delayedBackoff: () => 9 * S });
    const policy = recoverabilityPolicy(config, seededRandom(1), () => precisionMs);
    const f = failure(clock, START + 10 * S, { attempts: 1, delayedAttempt: 0 });
    expect(policy.decide(f).decision).toEqual(retryLater(9 * S));
    precisionMs = S;
    expect(policy.decide(f).decision).toEqual(deadLetter('expired'));
  });

  it('leaves dead-letter and discard decisions as they are, even past the deadline', async () => {
    const clock = new FakeClock(START);
    await clock.advance(H);
    expect(withinDeadline(deadLetter('unrecoverable'), failure(clock, START), 24 * H, 'discard')).toEqual(deadLetter('unrecoverable'));
    expect(withinDeadline(discard('x'), failure(clock, START), 24 * H, 'error-queue')).toEqual(discard('x'));
  });

  it('caps the delay first, then compares it with the deadline', () => {
    const clock = new FakeClock(START);
    // Asked for 48 h, capped at 24 h: lands before a 30 h deadline, after a 20 h one.
    expect(withinDeadline(retryLater(48 * H), failure(clock, START + 30 * H), 24 * H, 'error-queue')).toEqual(retryLater(48 * H));
    expect(withinDeadline(retryLater(48 * H), failure(clock, START + 20 * H), 24 * H, 'error-queue')).toEqual(deadLetter('expired'));
  });

  it("a message's deadline: the fixed one, else the earlier of the sender's and the first attempt plus deadlineMs", () => {
    const first = START;
    expect(messageDeadline({ headers: { expiresAt: undefined, deadlineAt: undefined }, deadlineMs: undefined, firstAttemptAt: first })).toBeUndefined();
    expect(messageDeadline({ headers: { expiresAt: START + 5 * S, deadlineAt: undefined }, deadlineMs: undefined, firstAttemptAt: first })).toBe(START + 5 * S);
    expect(messageDeadline({ headers: { expiresAt: undefined, deadlineAt: undefined }, deadlineMs: 7 * S, firstAttemptAt: first })).toBe(START + 7 * S);
    expect(messageDeadline({ headers: { expiresAt: START + 5 * S, deadlineAt: undefined }, deadlineMs: 7 * S, firstAttemptAt: first })).toBe(START + 5 * S);
    expect(messageDeadline({ headers: { expiresAt: START + 9 * S, deadlineAt: undefined }, deadlineMs: 7 * S, firstAttemptAt: first })).toBe(START + 7 * S);
    // A fixed deadline is kept whatever this endpoint's deadlineMs and however late this delivery.
    expect(messageDeadline({ headers: { expiresAt: undefined, deadlineAt: START + 3 * S }, deadlineMs: 7 * S, firstAttemptAt: START + H })).toBe(START + 3 * S);
    expect(messageDeadline({ headers: { expiresAt: undefined, deadlineAt: START + 3 * S }, deadlineMs: undefined, firstAttemptAt: START + H })).toBe(START + 3 * S);
    expect(messageDeadline({ headers: { expiresAt: START + S, deadlineAt: START + 3 * S }, deadlineMs: undefined, firstAttemptAt: first })).toBe(START + S);
    // Whole milliseconds, rounded down.
    expect(messageDeadline({ headers: { expiresAt: undefined, deadlineAt: undefined }, deadlineMs: 1_000.7, firstAttemptAt: first + 0.5 })).toBe(START + 1_001);
  });

  it('reads the headers, naming the ones that are not a time', () => {
    expect(readDeadlineHeaders({})).toEqual({ expiresAt: undefined, deadlineAt: undefined, malformed: [] });
    expect(readDeadlineHeaders({ [HEADER.expiresAt]: '1767225600000', [HEADER.deadlineAt]: '1767225601000' })).toEqual({
      expiresAt: 1767225600000,
      deadlineAt: 1767225601000,
      malformed: [],
    });
    for (const bad of ['', 'soon', '-1', '1.5', '1e12', ' 1', '99999999999999999', '9000000000000000']) {
      expect(readDeadlineHeaders({ [HEADER.expiresAt]: bad })).toEqual({ expiresAt: undefined, deadlineAt: undefined, malformed: [HEADER.expiresAt] });
    }
  });

  it('accepts a Date or whole epoch milliseconds for expiresAt, and refuses the rest clearly', () => {
    expect(expiresAtMs(new Date(START))).toBe(START);
    expect(expiresAtMs(START)).toBe(START);
    for (const bad of [new Date('nope'), Number.NaN, Infinity, -1, 1.5, '2026-01-01', null]) {
      expect(() => expiresAtMs(bad)).toThrow(/expiresAt must be a valid Date or a whole number of milliseconds/);
    }
    expect(() => expiresAtMs(new Date('nope'))).toThrow(/got an invalid Date/);
  });

  it('the expired decision follows onExpired', () => {
    expect(expiredDecision('error-queue')).toEqual(deadLetter('expired'));
    expect(expiredDecision('discard')).toEqual(discard('expired'));
  });

  it('the fixed deadline travels in the retry state', () => {
    const headers = withRetryState({ app: 'x' }, { attempts: 2, delayedAttempts: 1, lastDelayMs: S, delayedElapsedMs: S, history: [], deadlineAt: START + 9 * S });
    expect(headers[HEADER.deadlineAt]).toBe(String(START + 9 * S));
    expect(readRetryState(headers).deadlineAt).toBe(START + 9 * S);
    expect(readRetryState({ [HEADER.deadlineAt]: 'later' }).deadlineAt).toBeUndefined();
    expect(withRetryState({}, { attempts: 1, delayedAttempts: 0, lastDelayMs: undefined, delayedElapsedMs: 0, history: [] })).not.toHaveProperty(HEADER.deadlineAt);
  });
});

describe('deadline: options', () => {
  it('deadlineMs must be a positive duration; onExpired one of its two values', () => {
    expect(resolveRecoverabilityConfig({}).deadlineMs).toBeUndefined();
    expect(resolveRecoverabilityConfig({}).onExpired).toBe('error-queue');
    expect(resolveRecoverabilityConfig({ deadlineMs: 25 * S, onExpired: 'discard' })).toMatchObject({ deadlineMs: 25 * S, onExpired: 'discard' });
    for (const bad of [0, -1, Number.NaN, Infinity, 2 ** 31, '10s']) {
      expect(() => resolveRecoverabilityConfig({ deadlineMs: bad as number })).toThrow(OptionError);
      expect(() => resolveRecoverabilityConfig({ deadlineMs: bad as number })).toThrow(/recoverability\.deadlineMs/);
    }
    expect(() => resolveRecoverabilityConfig({ onExpired: 'drop' as never })).toThrow(/recoverability\.onExpired must be 'error-queue' or 'discard'/);
  });
});

describe('deadline: the recoverability policy', () => {
  const policyOf = (options: Parameters<typeof resolveRecoverabilityConfig>[0]) => recoverabilityPolicy(resolveRecoverabilityConfig(options), seededRandom(1));

  it("holds the default policy's retries to the deadline", async () => {
    const clock = new FakeClock(START);
    const policy = policyOf({ immediateRetries: 1, delayedRetries: 3, delayedBackoff: constant(4 * S) });
    const deadline = START + 6 * S;
    expect(policy.decide(failure(clock, deadline)).decision).toEqual(retryNow());
    expect(policy.decide(failure(clock, deadline, { immediateAttempt: 2, attempts: 2 })).decision).toEqual(retryLater(4 * S));
    await clock.advance(4 * S);
    // The next delayed retry would land at 8 s, past the 6 s deadline.
    expect(policy.decide(failure(clock, deadline, { immediateAttempt: 2, attempts: 4, delayedAttempt: 1 })).decision).toEqual(deadLetter('expired'));
  });

  it("holds the custom policy's decisions too, and shows it the expired default", () => {
    const clock = new FakeClock(START);
    const seen: string[] = [];
    const policy = policyOf({
      immediateRetries: 0,
      onExpired: 'discard',
      policy: (_ctx, defaultDecision) => {
        seen.push(defaultDecision.kind);
        return retryLater(H);
      },
    });
    expect(policy.decide(failure(clock, START + 5 * S)).decision).toEqual(discard('expired'));
    expect(seen).toEqual(['discard']);
    expect(policy.decide(failure(clock, START + 2 * H)).decision).toEqual(retryLater(H));
  });

  it("keeps a custom policy's own dead-letter reasons and its faults", () => {
    const clock = new FakeClock(START);
    const throwing = policyOf({
      policy: () => {
        throw new Error('bad policy');
      },
    });
    expect(throwing.decide(failure(clock, START)).decision).toEqual(deadLetter('policy'));
    const custom = policyOf({ policy: () => deadLetter('mine') });
    expect(custom.decide(failure(clock, START)).decision).toEqual(deadLetter('mine'));
  });
});
