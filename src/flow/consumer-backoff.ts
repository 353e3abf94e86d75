import type { Backoff } from '../backoff/types.js';
import type { Random } from '../time/random.js';

/**
 * NSQ consumer backoff, as a pure state machine. A failure backs the whole
 * consumer off (no new messages) for `strategy(counter)`; after that one
 * message is tried; a success returns to full speed and each success
 * decrements the counter; a failure before the counter is back at 0 backs
 * off again from where the counter stands. The counter is not incremented
 * once the strategy's value for the next level exceeds the maximum, so a
 * long outage does not take a hundred successes to unwind.
 */
export interface ConsumerBackoffSettings {
  /** Delay for a backoff level (`attempt` is the counter). */
  readonly strategy: Backoff;
  /** The level's delay without jitter, for the "not incremented past the maximum" rule. */
  readonly baseDelay: (counter: number) => number;
  /** The longest backoff. */
  readonly maxMs: number;
  /** `on-success`: full speed after one successful probe (NsqSharp); `at-zero`: back off again after each probe until the counter is 0 (go-nsq). */
  readonly resume: 'on-success' | 'at-zero';
}

export interface ConsumerBackoffState {
  /** The backoff counter (level). */
  readonly counter: number;
}

export const INITIAL_CONSUMER_BACKOFF: ConsumerBackoffState = { counter: 0 };

/** After a failure: the new state and how long to stop taking messages. */
export function backoffOnFailure(
  settings: ConsumerBackoffSettings,
  state: ConsumerBackoffState,
  random: Random,
): { state: ConsumerBackoffState; durationMs: number } {
  const counter = settings.baseDelay(state.counter + 1) <= settings.maxMs ? state.counter + 1 : state.counter;
  return { state: { counter }, durationMs: backoffDuration(settings, counter, random) };
}

/** How long to stop taking messages at backoff level `counter`. */
export function backoffDuration(settings: ConsumerBackoffSettings, counter: number, random: Random): number {
  const raw = settings.strategy({ attempt: Math.max(1, counter), previousDelayMs: undefined, elapsedMs: 0, random }) ?? settings.maxMs;
  return Math.min(Math.max(0, raw), settings.maxMs);
}

/** After a success: the counter goes down by one, never below 0. */
export function backoffOnSuccess(state: ConsumerBackoffState): ConsumerBackoffState {
  return state.counter > 0 ? { counter: state.counter - 1 } : state;
}

/** NSQ ExponentialStrategy: `multiplier × 2^counter` (2 s, 4 s, 8 s ... with the 1 s default). */
export function nsqExponential(multiplierMs: number): (counter: number) => number {
  return (counter) => multiplierMs * 2 ** counter;
}
