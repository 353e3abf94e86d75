import { describe, expect, it } from 'vitest';
import { constant, delaysOf, exponential, fullJitter, nsqRequeue, stopAfterAttempts, stopAfterElapsed } from '../../src/backoff/index.js';
import { discard, retryLater } from '../../src/policy/decision.js';
import { seededRandom } from '../../src/time/random.js';
import { findConflicts, planNotes } from '../../src/planning/conflicts.js';
import { planPolicy } from '../../src/planning/plan.js';

const S = 1_000;
const elapsed = (plan: ReturnType<typeof planPolicy>) => plan.schedule.map((a) => a.elapsedMs.p50);

describe('planPolicy: hand-computed schedules', () => {
  it('NServiceBus defaults: 5 immediate and 3 delayed retries of 10, 20, 30 s make 24 attempts, 60 s to the error queue', () => {
    const plan = planPolicy({}, { draws: 10 });
    expect(plan.attempts).toEqual({ min: 24, max: 24 });
    expect(plan.schedule.map((a) => a.kind)).toEqual([
      'first', ...Array(5).fill('immediate'),
      'delayed', ...Array(5).fill('immediate'),
      'delayed', ...Array(5).fill('immediate'),
      'delayed', ...Array(5).fill('immediate'),
    ]);
    expect(plan.schedule.filter((a) => a.kind === 'delayed').map((a) => a.delayMs.p50)).toEqual([10 * S, 20 * S, 30 * S]);
    expect(elapsed(plan)).toEqual([...Array(6).fill(0), ...Array(6).fill(10 * S), ...Array(6).fill(30 * S), ...Array(6).fill(60 * S)]);
    expect(plan.toErrorQueueMs).toEqual({ p0: 60 * S, p50: 60 * S, p99: 60 * S, p100: 60 * S });
    expect(plan.outcome).toBe('error-queue');
    expect(plan.reason).toBe('retries-exhausted');
    expect(plan.cap.cappedDelays).toBe(0);
  });

  it('handler time adds to every attempt: with 1 s per attempt the 24th starts at 23 s + 60 s', () => {
    const plan = planPolicy({ concurrency: 4 }, { draws: 1, handlerMs: S, queueDepth: 10 });
    expect(plan.schedule[6]!.elapsedMs.p50).toBe(6 * S + 10 * S);
    expect(plan.schedule[23]!.elapsedMs.p50).toBe(23 * S + 60 * S);
    expect(plan.toErrorQueueMs.p100).toBe(24 * S + 60 * S);
    // A round of 6 attempts holds one delivery 6 s; 24 attempts take 24 s of worker time;
    // 10 messages on 4 workers are 3 waves: 18 s for the first round, 72 s for all.
    expect(plan.handler).toEqual({ handlerMs: S, holdPerDeliveryMs: 6 * S, workerTimePerMessageMs: 24 * S, queue: { messages: 10, concurrency: 4, firstRoundMs: 18 * S, allRoundsMs: 72 * S } });
  });

  it("NSQ's requeue preset: 4 requeues of 90, 180, 270, 360 s, 15 min to the error queue", () => {
    const plan = planPolicy({ recoverability: { immediateRetries: 0, delayedRetries: 4, delayedBackoff: nsqRequeue() } }, { draws: 5 });
    expect(plan.attempts.max).toBe(5);
    expect(plan.schedule.map((a) => a.kind)).toEqual(['first', 'delayed', 'delayed', 'delayed', 'delayed']);
    expect(elapsed(plan)).toEqual([0, 90 * S, 270 * S, 540 * S, 900 * S]);
    expect(plan.toErrorQueueMs.p100).toBe(900 * S);
  });

  it('a jittered schedule is the backoff drawn with each seed: one draw gives exactly its delays', () => {
    const backoff = fullJitter(exponential(S, 2));
    const plan = planPolicy({ recoverability: { immediateRetries: 0, delayedRetries: 3, delayedBackoff: backoff } }, { draws: 1, seed: 42 });
    const delays = delaysOf(backoff, 3, seededRandom(42));
    expect(plan.schedule.slice(1).map((a) => a.delayMs.p50)).toEqual(delays);
    expect(plan.toErrorQueueMs.p50).toBe(delays[0]! + delays[1]! + delays[2]!);
  });

  it('over many draws the spread of a full-jitter delay stays within its range and widens the elapsed time', () => {
    const plan = planPolicy({ recoverability: { immediateRetries: 0, delayedRetries: 3, delayedBackoff: fullJitter(exponential(S, 2)) } }, { draws: 2_000 });
    const third = plan.schedule[3]!;
    expect(third.delayMs.p0).toBeGreaterThanOrEqual(0);
    expect(third.delayMs.p100).toBeLessThan(4 * S);
    expect(third.delayMs.p50).toBeGreaterThan(1.6 * S);
    expect(third.delayMs.p50).toBeLessThan(2.4 * S);
    expect(third.elapsedMs.p0).toBeLessThan(third.elapsedMs.p50);
    expect(third.elapsedMs.p50).toBeLessThan(third.elapsedMs.p99);
    expect(third.elapsedMs.p100).toBeLessThan(7 * S);
    expect(planPolicy({ recoverability: { immediateRetries: 0, delayedRetries: 3, delayedBackoff: fullJitter(exponential(S, 2)) } }, { draws: 2_000 })).toEqual(plan);
  });

  it('the 24 h cap: a delay of 64 h is cut to 24 h, and the plan says how long it would have been', () => {
    const plan = planPolicy({ recoverability: { immediateRetries: 0, delayedRetries: 4, delayedBackoff: exponential(3_600_000, 4) } }, { draws: 3 });
    expect(plan.schedule.slice(1).map((a) => a.delayMs.p50)).toEqual([3_600_000, 4 * 3_600_000, 16 * 3_600_000, 24 * 3_600_000]);
    expect(plan.cap).toEqual({ cappedDelays: 3, cappedDraws: 3, uncappedLongestMs: 85 * 3_600_000 });
    expect(plan.toErrorQueueMs.p100).toBe(45 * 3_600_000);
  });

  it('a backoff that stops on elapsed time gives a range of attempts', () => {
    const plan = planPolicy({ recoverability: { immediateRetries: 0, delayedRetries: 20, delayedBackoff: stopAfterElapsed(fullJitter(constant(10 * S)), 30 * S) } }, { draws: 500 });
    expect(plan.attempts.min).toBeLessThan(plan.attempts.max);
    expect(plan.schedule[plan.schedule.length - 1]!.reached).toBeLessThan(500);
    expect(plan.toErrorQueueMs.p100).toBeLessThanOrEqual(30 * S);
  });

  it('runs a custom policy: one that discards, one that never ends', () => {
    const discarding = planPolicy({ recoverability: { immediateRetries: 1, policy: (c, d) => (c.attempts >= 2 ? discard('stale') : d) } }, { draws: 1 });
    expect(discarding).toMatchObject({ outcome: 'discarded', reason: 'stale', attempts: { max: 2 } });
    const endless = planPolicy({ recoverability: { policy: () => retryLater(S) } }, { draws: 2 });
    expect(endless.outcome).toBe('never');
    expect(findConflicts(endless, {}, []).map((c) => c.id)).toEqual(['never-ends']);
  });

  it('a backoff that throws ends in the error queue with the reason backoff, as on an endpoint', () => {
    const plan = planPolicy({ recoverability: { immediateRetries: 0, delayedBackoff: () => { throw new Error('bad'); } } }, { draws: 1 });
    expect(plan).toMatchObject({ outcome: 'error-queue', reason: 'backoff', attempts: { max: 1 } });
  });

  it('refuses options an endpoint would refuse', () => {
    expect(() => planPolicy({ recoverability: { immediateRetries: -1 } })).toThrow(/immediateRetries/);
    expect(() => planPolicy({}, { draws: 0 })).toThrow(/draws/);
    expect(() => planPolicy({}, { handlerMs: -5 })).toThrow(/handlerMs/);
  });
});

describe('findConflicts', () => {
  it('finds none for the defaults on every transport', () => {
    expect(findConflicts(planPolicy({}, { draws: 1 }), {})).toEqual([]);
  });

  it('a handler round longer than the lease is a conflict on the leasing transports', () => {
    const input = {};
    const plan = planPolicy(input, { draws: 1, handlerMs: 10 * S });
    const found = findConflicts(plan, input).map((c) => `${c.transport} ${c.id}`);
    expect(found).toEqual(['sqlite lease', 'redis lease', 'jetstream lease', 'nsq lease', 'rocketmq lease', 'rocketmq max-reconsume']);
    expect(findConflicts(plan, { leaseMs: 90 * S })).toEqual([]);
  });

  it("NSQ: a lease above nsqd's --max-msg-timeout is cut to it, and the fix says to raise it", () => {
    const plan = planPolicy({}, { draws: 1, handlerMs: 10 * S });
    expect(findConflicts(plan, { leaseMs: 90 * S }, [{ transport: 'nsq' }])).toEqual([]);
    const cut = findConflicts(plan, { leaseMs: 90 * S }, [{ transport: 'nsq', maxMsgTimeoutMs: 45 * S }]);
    expect(cut.map((c) => c.id)).toEqual(['lease']);
    expect(cut[0]!.what).toContain('cut to nsqd\'s --max-msg-timeout) of 45 s');
    expect(cut[0]!.fix).toContain("nsqd's --max-msg-timeout raised to at least 1 min 30 s");
    // nsqd gives at least 1 s.
    const quick = planPolicy({ recoverability: { immediateRetries: 0 } }, { draws: 1, handlerMs: 900 });
    expect(findConflicts(quick, { leaseMs: 500 }, [{ transport: 'nsq' }])).toEqual([]);
  });

  it('RocketMQ: the invisible duration is 10 s at the least; a round past it ends in %DLQ% after retryMaxTimes + 1 deliveries', () => {
    const plan = planPolicy({ recoverability: { immediateRetries: 0 } }, { draws: 1, handlerMs: 8 * S });
    expect(findConflicts(plan, { leaseMs: 5 * S }, [{ transport: 'rocketmq' }])).toEqual([]);
    expect(findConflicts(plan, { leaseMs: 5 * S }, [{ transport: 'sqlite' }]).map((c) => c.id)).toEqual(['lease']);
    const slow = planPolicy({}, { draws: 1, handlerMs: 10 * S });
    const both = findConflicts(slow, {}, [{ transport: 'rocketmq', maxReconsumeTimes: 3 }]);
    expect(both.map((c) => c.id)).toEqual(['lease', 'max-reconsume']);
    expect(both[1]!.what).toContain('after 4 deliveries the broker moves it to %DLQ%<group>');
  });

  it('RabbitMQ 4 quorum queues: a round past consumer_timeout burns the default delivery limit of 20', () => {
    const input = { recoverability: { delayedRetries: 8, delayedBackoff: fullJitter(exponential(S, 2, 300 * S)) } };
    const plan = planPolicy(input, { draws: 50, handlerMs: 6 * 60 * S });
    const conflicts = findConflicts(plan, input, [{ transport: 'rabbitmq', queueType: 'quorum' }]);
    expect(conflicts.map((c) => c.id)).toEqual(['consumer-timeout', 'delivery-limit']);
    expect(conflicts[0]!.what).toContain('36 min, longer than consumer_timeout 30 min');
    expect(conflicts[0]!.fix).toContain('at most 3');
    expect(conflicts[1]!.what).toContain('default delivery limit of 20');
    expect(conflicts[1]!.what).toContain('after 21 deliveries');
    // The same policy with a short handler: 54 attempts, 9 copies, one delivery each, no conflict.
    const quick = planPolicy(input, { draws: 50, handlerMs: 100 });
    expect(findConflicts(quick, input, [{ transport: 'rabbitmq', queueType: 'quorum' }])).toEqual([]);
    expect(planNotes(quick, [{ transport: 'rabbitmq', queueType: 'quorum' }])[0]).toContain('54 attempts are 9 copies');
    // RabbitMQ 3 gives quorum queues no limit: the timeout alone, and the round starts over forever.
    const v3 = findConflicts(plan, input, [{ transport: 'rabbitmq', queueType: 'quorum', brokerMajor: 3 }]);
    expect(v3.map((c) => c.id)).toEqual(['consumer-timeout']);
    expect(v3[0]!.what).toContain('forever');
  });

  it('a delivery limit of 0 leaves no spare delivery; a delay past the 28 levels is refused', () => {
    const input = { recoverability: { immediateRetries: 0, delayedRetries: 1, delayedBackoff: constant(100 * 3_600_000), maxDelayMs: 2 ** 31 - 1 } };
    const plan = planPolicy(input, { draws: 1 });
    const conflicts = findConflicts(plan, input, [{ transport: 'rabbitmq', queueType: 'quorum', deliveryLimit: 0 }]);
    expect(conflicts.map((c) => c.id)).toEqual(['delivery-limit', 'delay-levels']);
    expect(conflicts[1]!.what).toContain('4 d 4 h');
  });

  it('JetStream max_deliver set on the consumer', () => {
    const plan = planPolicy({}, { draws: 1 });
    expect(findConflicts(plan, {}, [{ transport: 'jetstream', maxDeliver: 1 }]).map((c) => c.id)).toEqual(['max-deliver']);
    expect(findConflicts(plan, {}, [{ transport: 'jetstream', maxDeliver: 5 }])).toEqual([]);
    const slow = planPolicy({}, { draws: 1, handlerMs: 10 * S });
    const both = findConflicts(slow, {}, [{ transport: 'jetstream', maxDeliver: 5 }]);
    expect(both.map((c) => c.id)).toEqual(['lease', 'max-deliver']);
    expect(both[1]!.what).toContain('stays in the stream');
  });

  it('a retry budget that cannot admit a round of immediate retries, or any retry once spent', () => {
    const small = { flowControl: { retryBudget: { capacity: 3 } } };
    const conflict = findConflicts(planPolicy(small, { draws: 1 }), small, []);
    expect(conflict.map((c) => c.id)).toEqual(['retry-budget']);
    expect(conflict[0]!.what).toContain('admits only 3 of the 5 immediate retries');
    const refilled = { flowControl: { retryBudget: { capacity: 3, floorPerSecond: 1 } } };
    expect(findConflicts(planPolicy(refilled, { draws: 1, handlerMs: 2 * S }), refilled, [])).toEqual([]);
    const dry = { flowControl: { retryBudget: { ratio: 0, floorPerSecond: 0 } } };
    expect(findConflicts(planPolicy(dry, { draws: 1 }), dry, [])[0]!.what).toContain('no retry is ever admitted again');
    const enough = { flowControl: { retryBudget: true } };
    expect(findConflicts(planPolicy(enough, { draws: 1 }), enough, [])).toEqual([]);
  });

  it('stopAfterAttempts bounds a policy that would otherwise never end', () => {
    const input = { recoverability: { immediateRetries: 0, delayedRetries: 1_000_000, delayedBackoff: stopAfterAttempts(constant(S), 3) } };
    expect(planPolicy(input, { draws: 1 }).attempts.max).toBe(4);
  });
});

describe('planPolicy: deadlines', () => {
  it('defaults with deadlineMs 25 s: the second delayed retry (due at 30 s) is never scheduled; 12 attempts, error queue (expired) at 10 s', () => {
    const plan = planPolicy({ recoverability: { deadlineMs: 25 * S } }, { draws: 10 });
    expect(plan.attempts).toEqual({ min: 12, max: 12 });
    expect(plan.schedule.map((a) => a.kind)).toEqual(['first', ...Array(5).fill('immediate'), 'delayed', ...Array(5).fill('immediate')]);
    expect(elapsed(plan)).toEqual([...Array(6).fill(0), ...Array(6).fill(10 * S)]);
    expect(plan.outcome).toBe('error-queue');
    expect(plan.reason).toBe('expired');
    expect(plan.toErrorQueueMs).toEqual({ p0: 10 * S, p50: 10 * S, p99: 10 * S, p100: 10 * S });
    expect(plan.deadlineMs).toBe(25 * S);
  });

  it('handler time counts toward the deadline, and onExpired discard shows as discarded', () => {
    // 1 s per attempt: round 0 fails at 1..6 s, the retry lands at 16 s; round 1's attempts fail at 17, 18, 19, 20, 21 s,
    // and a retry at once after the one that failed at 21 s would start past the 20.5 s deadline.
    const plan = planPolicy({ recoverability: { deadlineMs: 20_500, onExpired: 'discard' } }, { draws: 1, handlerMs: S });
    expect(plan.attempts.max).toBe(11);
    expect(plan.outcome).toBe('discarded');
    expect(plan.reason).toBe('expired');
    expect(plan.toErrorQueueMs.p100).toBe(21 * S);
  });

  it('the delay is capped first, then compared with the deadline', () => {
    const recoverability = { immediateRetries: 0, delayedRetries: 1, delayedBackoff: constant(48 * 3_600 * S) };
    expect(planPolicy({ recoverability: { ...recoverability, deadlineMs: 25 * 3_600 * S } }, { draws: 1 })).toMatchObject({ attempts: { max: 2 }, reason: 'retries-exhausted' });
    expect(planPolicy({ recoverability: { ...recoverability, deadlineMs: 23 * 3_600 * S } }, { draws: 1 })).toMatchObject({ attempts: { max: 1 }, reason: 'expired' });
  });
});
