import { resolveRecoverabilityConfig, type RecoverabilityConfig } from '../endpoint/config.js';
import { OptionError } from '../util/option-checks.js';
import type { FailureContext } from '../policy/context.js';
import { recoverabilityPolicy } from '../policy/recoverability-policy.js';
import { seededRandom } from '../time/random.js';
import type { PolicyInput } from './policy-module.js';

/** Percentiles of a figure over the seeded draws. */
export interface Spread {
  readonly p0: number;
  readonly p50: number;
  readonly p99: number;
  readonly p100: number;
}

/** One handler attempt of the plan. */
export interface PlannedAttempt {
  /** 1 for the first attempt. */
  readonly attempt: number;
  /** `first`, an `immediate` retry in the same round, or the first attempt of a `delayed` retry. */
  readonly kind: 'first' | 'immediate' | 'delayed';
  /** 0 for the first round, then 1 for the first delayed retry, and so on. */
  readonly round: number;
  /** How many of the draws reached this attempt (fewer than all when a backoff stops on elapsed time). */
  readonly reached: number;
  /** The wait before this attempt (0 for immediate retries). */
  readonly delayMs: Spread;
  /** Time from the start of the first attempt to the start of this one. */
  readonly elapsedMs: Spread;
}

/** What becomes of a message every attempt of which fails. */
export type PlanOutcome = 'error-queue' | 'discarded' | 'never';

/** A policy's schedule when every attempt fails, over many seeded draws. */
export interface PolicyPlan {
  readonly draws: number;
  readonly seed: number;
  /** Handler attempts in all: the fewest and the most over the draws. */
  readonly attempts: { readonly min: number; readonly max: number };
  readonly immediateRetries: number;
  readonly delayedRetries: number;
  readonly maxDelayMs: number;
  /** The policy's deadline, from the start of the first attempt, when it has one. */
  readonly deadlineMs: number | undefined;
  readonly schedule: readonly PlannedAttempt[];
  readonly outcome: PlanOutcome;
  /** The error-queue reason of the last decision, such as `retries-exhausted`. */
  readonly reason: string | undefined;
  /** From the start of the first attempt until the message is moved to the error queue (or discarded). */
  readonly toErrorQueueMs: Spread;
  /** The effect of the delay cap (`maxDelayMs`, 24 h by default). */
  readonly cap: {
    /** Delays the backoff asked for above the cap, over all draws. */
    readonly cappedDelays: number;
    /** Draws in which at least one delay was cut. */
    readonly cappedDraws: number;
    /** The longest time to the error queue the backoff's own delays would give, without the cap. */
    readonly uncappedLongestMs: number;
  };
  /** Set when a handler time was given. */
  readonly handler: HandlerLoad | undefined;
}

/** What handler time does with the plan. */
export interface HandlerLoad {
  readonly handlerMs: number;
  /** The longest a single delivery is held: the most attempts of one round, back to back. */
  readonly holdPerDeliveryMs: number;
  /** Worker time one failing message takes over all its attempts. */
  readonly workerTimePerMessageMs: number;
  /** Set when a queue depth was given: `messages` failing messages on `concurrency` workers. */
  readonly queue: { readonly messages: number; readonly concurrency: number; readonly firstRoundMs: number; readonly allRoundsMs: number } | undefined;
}

/** Options of {@link planPolicy}. */
export interface PlanOptions {
  /** Seeded draws of the schedule (jitter makes it a distribution). Default 1 000. */
  readonly draws?: number;
  /** Seed of the first draw; draw `i` uses `seed + i`. Default 1. */
  readonly seed?: number;
  /** How long one handler attempt takes, in milliseconds. Default 0: attempts take no time. */
  readonly handlerMs?: number;
  /** Failing messages in the queue, for the worst-case figure. Default none. */
  readonly queueDepth?: number;
}

/** A walk gives up after this many attempts: the policy is taken never to end. */
export const MAX_PLANNED_ATTEMPTS = 100_000;
/** A walk gives up after this much time (ten years): the policy is taken never to end. */
export const MAX_PLANNED_MS = 10 * 365 * 86_400_000;
/** Attempts in all draws together: beyond it fewer draws are made, so a plan of a million retries stays quick. */
const ATTEMPT_BUDGET = 2_000_000;

const PLANNED_FAILURE = Object.freeze(new Error('the handler failed (planned)'));

interface Walk {
  attempts: { kind: PlannedAttempt['kind']; round: number; delayMs: number; startMs: number }[];
  outcome: PlanOutcome;
  reason: string | undefined;
  endMs: number;
  cappedDelays: number;
  uncappedEndMs: number;
}

/**
 * Plans a policy: runs the endpoint's own recoverability policy (default
 * policy, custom policy, backoff and cap) on a message whose every attempt
 * fails, `draws` times with seeded random sources, and reports every
 * attempt with the spread of its delay and of the time since the first
 * attempt, the total attempts, the time to the error queue and the effect
 * of the delay cap. A policy with `deadlineMs` stops where its deadline
 * does (reason `expired`). Throws an `OptionError` for options the endpoint would
 * refuse.
 */
export function planPolicy(input: PolicyInput, options: PlanOptions = {}): PolicyPlan {
  const config = resolveRecoverabilityConfig(input.recoverability);
  const requested = whole('draws', options.draws ?? 1_000, 1);
  const seed = whole('seed', options.seed ?? 1, 0);
  const handlerMs = nonNegative('handlerMs', options.handlerMs ?? 0);
  const first = walk(config, seed, handlerMs);
  const draws = Math.min(requested, Math.max(1, Math.floor(ATTEMPT_BUDGET / first.attempts.length)));
  const walks = [first];
  for (let i = 1; i < draws; i++) walks.push(walk(config, seed + i, handlerMs));

  const longest = Math.max(...walks.map((w) => w.attempts.length));
  const schedule: PlannedAttempt[] = [];
  for (let a = 0; a < longest; a++) {
    const reached = walks.filter((w) => w.attempts.length > a).map((w) => w.attempts[a]!);
    schedule.push({
      attempt: a + 1,
      kind: reached[0]!.kind,
      round: reached[0]!.round,
      reached: reached.length,
      delayMs: spread(reached.map((r) => r.delayMs)),
      elapsedMs: spread(reached.map((r) => r.startMs)),
    });
  }
  const last = walks[0]!;
  const rounds = roundSizes(schedule);
  return {
    draws,
    seed,
    attempts: { min: Math.min(...walks.map((w) => w.attempts.length)), max: longest },
    immediateRetries: config.immediateRetries,
    delayedRetries: config.delayedRetries,
    maxDelayMs: config.maxDelayMs,
    deadlineMs: config.deadlineMs,
    schedule,
    outcome: walks.some((w) => w.outcome === 'never') ? 'never' : last.outcome,
    reason: last.reason,
    toErrorQueueMs: spread(walks.map((w) => w.endMs)),
    cap: {
      cappedDelays: walks.reduce((n, w) => n + w.cappedDelays, 0),
      cappedDraws: walks.filter((w) => w.cappedDelays > 0).length,
      uncappedLongestMs: Math.max(...walks.map((w) => w.uncappedEndMs)),
    },
    handler: options.handlerMs === undefined ? undefined : handlerLoad(handlerMs, Math.max(...rounds), longest, input.concurrency, options.queueDepth),
  };
}

/** One message's attempts, all failing, with one seeded random source. */
function walk(config: RecoverabilityConfig, seed: number, handlerMs: number): Walk {
  let asked: number | undefined;
  const backoff = config.delayedBackoff;
  const spied: RecoverabilityConfig = {
    ...config,
    delayedBackoff: (step) => {
      asked = backoff(step);
      return asked;
    },
  };
  const policy = recoverabilityPolicy(spied, seededRandom(seed));
  const result: Walk = { attempts: [], outcome: 'never', reason: undefined, endMs: 0, cappedDelays: 0, uncappedEndMs: 0 };
  let now = 0;
  let uncappedExtra = 0;
  let round = 0;
  let delayBefore = 0;
  let delayedAttempt = 0;
  let lastDelayMs: number | undefined;
  let delayedElapsedMs = 0;
  for (let immediateAttempt = 1; result.attempts.length < MAX_PLANNED_ATTEMPTS && now <= MAX_PLANNED_MS; immediateAttempt++) {
    const kind = result.attempts.length === 0 ? 'first' : immediateAttempt === 1 ? 'delayed' : 'immediate';
    result.attempts.push({ kind, round, delayMs: delayBefore, startMs: now });
    now += handlerMs;
    const failure: FailureContext = {
      error: PLANNED_FAILURE,
      messageId: 'planned',
      queue: 'planned',
      headers: {},
      immediateAttempt,
      delayedAttempt,
      attempts: result.attempts.length,
      lastDelayMs,
      delayedElapsedMs,
      history: [],
      // Times count from the start of the first attempt, so the deadline is deadlineMs itself.
      deadlineAt: config.deadlineMs,
      failedAt: now,
    };
    asked = undefined;
    const { decision } = policy.decide(failure);
    if (decision.kind === 'retry-now') {
      delayBefore = 0;
      continue;
    }
    if (decision.kind === 'retry-later') {
      const delayMs = Math.min(decision.delayMs, config.maxDelayMs);
      if (asked !== undefined && asked > config.maxDelayMs) {
        result.cappedDelays++;
        uncappedExtra += asked - config.maxDelayMs;
      }
      round++;
      delayedAttempt++;
      lastDelayMs = delayMs;
      delayedElapsedMs += delayMs;
      delayBefore = delayMs;
      now += delayMs;
      immediateAttempt = 0;
      continue;
    }
    result.outcome = decision.kind === 'discard' ? 'discarded' : 'error-queue';
    result.reason = decision.reason;
    break;
  }
  result.endMs = now;
  result.uncappedEndMs = now + uncappedExtra;
  return result;
}

function roundSizes(schedule: readonly PlannedAttempt[]): number[] {
  const sizes: number[] = [];
  for (const a of schedule) sizes[a.round] = (sizes[a.round] ?? 0) + 1;
  return sizes.length === 0 ? [0] : sizes;
}

function handlerLoad(handlerMs: number, roundSize: number, attempts: number, concurrency = 10, queueDepth: number | undefined): HandlerLoad {
  const workers = whole('concurrency', concurrency, 1);
  return {
    handlerMs,
    holdPerDeliveryMs: roundSize * handlerMs,
    workerTimePerMessageMs: attempts * handlerMs,
    queue:
      queueDepth === undefined
        ? undefined
        : {
            messages: whole('queueDepth', queueDepth, 1),
            concurrency: workers,
            // Whole waves of `workers` messages, each wave holding its workers for a full round.
            firstRoundMs: Math.ceil(queueDepth / workers) * roundSize * handlerMs,
            allRoundsMs: Math.ceil(queueDepth / workers) * attempts * handlerMs,
          },
  };
}

/** The 0th, 50th, 99th and 100th percentiles (nearest rank). */
export function spread(values: readonly number[]): Spread {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
  return { p0: sorted[0]!, p50: at(50), p99: at(99), p100: sorted[sorted.length - 1]! };
}

function whole(name: string, value: number, min: number): number {
  if (!Number.isInteger(value) || value < min) throw new OptionError(`${name} must be a whole number >= ${min}, got ${String(value)}`);
  return value;
}

function nonNegative(name: string, value: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) throw new OptionError(`${name} must be a finite number >= 0, got ${String(value)}`);
  return value;
}
