import { resolveFlowConfig } from '../flow/config.js';
import { fullBudget, trySpend } from '../flow/retry-budget.js';
import { DEFAULTS } from '../defaults.js';
import { expectedBrokerDeliveries, expectedDeliveriesWarning, QUORUM_DEFAULT_DELIVERY_LIMIT_4X } from '../transports/rabbitmq/delivery-limit.js';
import { MAX_DELAY_MS as RABBITMQ_MAX_DELAY_MS } from '../transports/rabbitmq/topology.js';
import { MIN_INVISIBLE_MS as ROCKETMQ_MIN_INVISIBLE_MS } from '../transports/rocketmq/options.js';
import { formatDuration } from './duration-text.js';
import type { PolicyPlan } from './plan.js';
import type { PolicyInput } from './policy-module.js';

/** A broker or runtime limit that cuts a policy short or works against it, and what to change. */
export interface Conflict {
  /** A stable name: `never-ends`, `retry-budget`, `lease`, `consumer-timeout`, `delivery-limit`, `delay-levels`, `max-deliver`, `max-reconsume`. */
  readonly id: string;
  /** The transport it concerns, or undefined for the runtime. */
  readonly transport: string | undefined;
  readonly what: string;
  readonly fix: string;
}

/** The broker a policy is checked against, and the settings of it that matter. */
export type PlanTarget =
  | {
      readonly transport: 'rabbitmq';
      /** The work queue's type. Default `classic` (the transport's default). */
      readonly queueType?: 'classic' | 'quorum';
      /** The broker's major version. Default 4. */
      readonly brokerMajor?: number;
      /** The work queue's `x-delivery-limit`. Default: none on classic queues, 20 on quorum queues of RabbitMQ 4 and later. */
      readonly deliveryLimit?: number;
      /** The broker's `consumer_timeout`. Default 30 min (RabbitMQ's default). */
      readonly consumerTimeoutMs?: number;
    }
  | { readonly transport: 'sqlite' | 'redis' }
  | {
      readonly transport: 'jetstream';
      /** The work consumer's `max_deliver`. Default -1 (no limit), as the transport creates it. */
      readonly maxDeliver?: number;
    }
  | {
      readonly transport: 'nsq';
      /** nsqd's `--max-msg-timeout`, the longest lease it gives. Default 15 min (nsqd's default). */
      readonly maxMsgTimeoutMs?: number;
    }
  | {
      readonly transport: 'rocketmq';
      /** The consumer group's `retryMaxTimes`: deliveries after the first before the broker dead-letters a message to `%DLQ%<group>`. Default 16 (the broker's default). */
      readonly maxReconsumeTimes?: number;
    };

/** nsqd's default `--max-msg-timeout`: 15 minutes. */
export const NSQD_MAX_MSG_TIMEOUT_MS = 900_000;
/** nsqd's shortest message timeout: 1 s. */
const NSQD_MIN_MSG_TIMEOUT_MS = 1_000;
/** A RocketMQ consumer group's default `retryMaxTimes`: 16. */
export const ROCKETMQ_MAX_RECONSUME_TIMES = 16;

/** RabbitMQ's default `consumer_timeout`: 30 minutes. */
export const RABBITMQ_CONSUMER_TIMEOUT_MS = 1_800_000;

/** Every transport with its defaults: what `redeliver plan` checks when no transport is named. */
export const ALL_TARGETS: readonly PlanTarget[] = [
  { transport: 'sqlite' },
  { transport: 'redis' },
  { transport: 'rabbitmq' },
  { transport: 'jetstream' },
  { transport: 'nsq' },
  { transport: 'rocketmq' },
];

/**
 * The conflicts between a plan and the runtime (retry budget, a policy that
 * never ends) and between the plan and each target broker. Counts broker
 * deliveries the way the transports do: immediate retries run in the
 * process on one delivery, and each delayed retry is a new copy.
 */
export function findConflicts(plan: PolicyPlan, input: PolicyInput, targets: readonly PlanTarget[] = ALL_TARGETS): Conflict[] {
  const conflicts: Conflict[] = [...runtimeConflicts(plan, input)];
  for (const target of targets) conflicts.push(...targetConflicts(plan, input, target));
  return conflicts;
}

function runtimeConflicts(plan: PolicyPlan, input: PolicyInput): Conflict[] {
  const out: Conflict[] = [];
  if (plan.outcome === 'never') {
    out.push({
      id: 'never-ends',
      transport: undefined,
      what: `a message that always fails never reaches the error queue: the policy was still retrying after ${plan.attempts.max.toLocaleString('en-US')} attempts`,
      fix: 'bound the retries: a finite delayedRetries, or stopAfterAttempts / stopAfterElapsed around the backoff, or a custom policy that ends in deadLetter()',
    });
  }
  const budget = resolveFlowConfig(input.flowControl).retryBudget;
  if (budget && plan.attempts.max > 1) {
    if (budget.ratio === 0 && budget.floorPerSecond === 0) {
      out.push({
        id: 'retry-budget',
        transport: undefined,
        what: `the retry budget has ratio 0 and floorPerSecond 0: once its ${budget.capacity} saved tokens are spent no retry is ever admitted again, and every later failure is deferred instead of retried`,
        fix: 'give the budget a ratio above 0 (default 0.1) or a floorPerSecond above 0 (default 1)',
      });
    } else if (plan.immediateRetries > 0) {
      const admitted = admittedInARow(budget, plan.immediateRetries, plan.handler?.handlerMs ?? 0);
      if (admitted < plan.immediateRetries) {
        out.push({
          id: 'retry-budget',
          transport: undefined,
          what:
            `the retry budget (capacity ${budget.capacity}, ${budget.floorPerSecond}/s) admits only ${admitted} of the ${plan.immediateRetries} immediate retries of a round even on an idle endpoint: ` +
            'the rest of every round is deferred through the broker instead of retried at once',
          fix: `raise flowControl.retryBudget.capacity to at least ${plan.immediateRetries}, or lower recoverability.immediateRetries to ${admitted}`,
        });
      }
    }
  }
  return out;
}

/** Immediate retries a full budget admits back to back for one failing message, each attempt taking `handlerMs`. */
function admittedInARow(settings: { ratio: number; floorPerSecond: number; capacity: number }, wanted: number, handlerMs: number): number {
  let state = fullBudget(settings, 0);
  let now = handlerMs;
  for (let i = 0; i < wanted; i++) {
    const spent = trySpend(settings, state, now);
    if (!spent.allowed) return i;
    state = spent.state;
    now += handlerMs;
  }
  return wanted;
}

function targetConflicts(plan: PolicyPlan, input: PolicyInput, target: PlanTarget): Conflict[] {
  switch (target.transport) {
    case 'rabbitmq':
      return rabbitMqConflicts(plan, target);
    case 'jetstream':
      return [...leaseConflicts(plan, input, 'jetstream', "the consumer's ack_wait (the transport's leaseMs)"), ...maxDeliverConflicts(plan, input, target.maxDeliver)];
    case 'nsq':
      return nsqConflicts(plan, input, target.maxMsgTimeoutMs ?? NSQD_MAX_MSG_TIMEOUT_MS);
    case 'rocketmq':
      return rocketMqConflicts(plan, input, target.maxReconsumeTimes ?? ROCKETMQ_MAX_RECONSUME_TIMES);
    default:
      return leaseConflicts(plan, input, target.transport, 'the lease');
  }
}

/** The lease `transport` really holds a delivery for: the policy's `leaseMs` (default 30 s), clamped to what the broker gives. */
function effectiveLeaseMs(input: PolicyInput, min: number, max: number): number {
  return Math.min(max, Math.max(min, input.leaseMs ?? DEFAULTS.leaseMs));
}

/** nsqd gives message timeouts from 1 s to its `--max-msg-timeout`; the transport asks for the nearest one to its lease. */
function nsqConflicts(plan: PolicyPlan, input: PolicyInput, maxMsgTimeoutMs: number): Conflict[] {
  const leaseMs = effectiveLeaseMs(input, NSQD_MIN_MSG_TIMEOUT_MS, maxMsgTimeoutMs);
  const capped = leaseMs < (input.leaseMs ?? DEFAULTS.leaseMs);
  const hold = plan.handler?.holdPerDeliveryMs ?? 0;
  return capped
    ? leaseConflicts(plan, input, 'nsq', "nsqd's message timeout (the transport's leaseMs, cut to nsqd's --max-msg-timeout)", leaseMs, `nsqd's --max-msg-timeout raised to at least ${formatDuration(Math.ceil(hold * 1.5))} with it, `)
    : leaseConflicts(plan, input, 'nsq', "nsqd's message timeout (the transport's leaseMs)", leaseMs);
}

/**
 * A RocketMQ lease is the invisible duration, 10 s at the least. A copy
 * whose lease keeps running out is delivered again each time, and after the
 * group's `retryMaxTimes` the broker moves it to `%DLQ%<group>` itself.
 */
function rocketMqConflicts(plan: PolicyPlan, input: PolicyInput, maxReconsumeTimes: number): Conflict[] {
  const leaseMs = effectiveLeaseMs(input, ROCKETMQ_MIN_INVISIBLE_MS, Number.POSITIVE_INFINITY);
  const lease = leaseConflicts(plan, input, 'rocketmq', "the invisible duration (the transport's leaseMs, 10 s at the least)", leaseMs);
  if (lease.length === 0) return [];
  return [
    ...lease,
    {
      id: 'max-reconsume',
      transport: 'rocketmq',
      what: `every round outlasts the invisible duration, so each copy is delivered again and again; after ${maxReconsumeTimes + 1} deliveries the broker moves it to %DLQ%<group> itself, without its delayed retries and without the failure story of the error queue`,
      fix: "fix the lease conflict above; the group's retryMaxTimes is then ample (redeliver needs one delivery per copy)",
    },
  ];
}

function leaseConflicts(plan: PolicyPlan, input: PolicyInput, transport: string, lease: string, leaseMs = input.leaseMs ?? DEFAULTS.leaseMs, brokerFix = ''): Conflict[] {
  const hold = plan.handler?.holdPerDeliveryMs ?? 0;
  if (hold < leaseMs) return [];
  return [
    {
      id: 'lease',
      transport,
      what:
        `a round of ${roundText(plan)} holds a delivery for ${formatDuration(hold)}, longer than ${lease} of ${formatDuration(leaseMs)}: ` +
        'the message is given to another consumer while the first is still retrying it, and both handle it',
      fix: `a lease of at least ${formatDuration(Math.ceil(hold * 1.5))}, ${brokerFix}or context.extendLease() in a long handler, or fewer immediate retries`,
    },
  ];
}

function maxDeliverConflicts(plan: PolicyPlan, input: PolicyInput, maxDeliver: number | undefined): Conflict[] {
  if (maxDeliver === undefined || maxDeliver < 0) return [];
  const hold = plan.handler?.holdPerDeliveryMs ?? 0;
  const leaseMs = input.leaseMs ?? DEFAULTS.leaseMs;
  const needed = expectedBrokerDeliveries({ immediateRetries: plan.immediateRetries, delayedRetries: plan.delayedRetries });
  if (hold > 0 && hold >= leaseMs) {
    return [
      {
        id: 'max-deliver',
        transport: 'jetstream',
        what: `every round outlasts ack_wait, so each copy is delivered again and again; after max_deliver ${maxDeliver} deliveries JetStream stops delivering it and it stays in the stream, unhandled, never reaching the error queue`,
        fix: 'remove max_deliver (-1, as the transport creates its consumers) and fix the lease conflict above',
      },
    ];
  }
  if (maxDeliver > needed) return [];
  return [
    {
      id: 'max-deliver',
      transport: 'jetstream',
      what: `max_deliver ${maxDeliver} leaves no spare delivery for a copy that needs ${needed}: one lost connection or restart while it is in flight and JetStream stops delivering it, so it never reaches the error queue`,
      fix: 'use max_deliver -1 (as the transport creates its consumers), or at least a few more than the copy needs',
    },
  ];
}

function rabbitMqConflicts(plan: PolicyPlan, target: Extract<PlanTarget, { transport: 'rabbitmq' }>): Conflict[] {
  const out: Conflict[] = [];
  const queueType = target.queueType ?? 'classic';
  const major = target.brokerMajor ?? 4;
  const limit = queueType === 'quorum' ? (target.deliveryLimit ?? (major >= 4 ? QUORUM_DEFAULT_DELIVERY_LIMIT_4X : undefined)) : undefined;
  const timeoutMs = target.consumerTimeoutMs ?? RABBITMQ_CONSUMER_TIMEOUT_MS;
  const hold = plan.handler?.holdPerDeliveryMs ?? 0;
  const timesOut = hold > 0 && hold >= timeoutMs;
  if (timesOut) {
    out.push({
      id: 'consumer-timeout',
      transport: 'rabbitmq',
      what:
        `a round of ${roundText(plan)} holds a delivery for ${formatDuration(hold)}, longer than consumer_timeout ${formatDuration(timeoutMs)}: ` +
        'the broker closes the channel, puts the message back and the round starts over' +
        (limit === undefined ? ', forever: it never reaches its delayed retries or the error queue' : ''),
      fix: `fewer immediate retries (at most ${Math.max(0, attemptsWithin(timeoutMs, plan.handler?.handlerMs ?? 0) - 1)} with this handler time), a shorter handler, or a consumer_timeout above ${formatDuration(Math.ceil(hold * 1.5))}`,
    });
  }
  if (limit !== undefined) {
    const source = target.deliveryLimit === undefined ? `the RabbitMQ ${major} default delivery limit of ${limit} for quorum queues` : `x-delivery-limit ${limit}`;
    if (timesOut) {
      out.push({
        id: 'delivery-limit',
        transport: 'rabbitmq',
        what: `each timed-out round uses up one delivery: with ${source}, the broker drops the message (or dead-letters it to the queue's own dead-letter exchange) after ${limit + 1} deliveries, without its delayed retries and without the failure story of the error queue`,
        fix: 'fix the consumer_timeout conflict above; the delivery limit is then ample (redeliver needs one delivery per copy)',
      });
    } else {
      const needed = expectedBrokerDeliveries({ immediateRetries: plan.immediateRetries, delayedRetries: plan.delayedRetries });
      const warning = expectedDeliveriesWarning({ queue: 'the work queue', expectedDeliveries: needed, deliveryLimit: limit });
      if (warning) out.push({ id: 'delivery-limit', transport: 'rabbitmq', what: warning, fix: `declare the work queue with an x-delivery-limit of at least ${needed + 2}, or none` });
    }
  }
  const longestDelay = Math.max(0, ...plan.schedule.map((a) => a.delayMs.p100));
  if (longestDelay > RABBITMQ_MAX_DELAY_MS) {
    out.push({
      id: 'delay-levels',
      transport: 'rabbitmq',
      what: `a delay of ${formatDuration(longestDelay)} is beyond what the 28 delay levels hold (${formatDuration(RABBITMQ_MAX_DELAY_MS)}): the transport refuses it, and after the endpoint's settlement retries (about 16 s) the message is put back on its queue to fail through the same round again`,
      fix: `cap the delays at ${formatDuration(RABBITMQ_MAX_DELAY_MS)} or less (recoverability.maxDelayMs, 24 h by default)`,
    });
  }
  return out;
}

/** Attempts of `handlerMs` that end strictly within `limitMs`. */
function attemptsWithin(limitMs: number, handlerMs: number): number {
  if (handlerMs <= 0) return Infinity;
  return Math.ceil(limitMs / handlerMs) - 1;
}

function roundText(plan: PolicyPlan): string {
  const attempts = plan.immediateRetries + 1;
  return `${attempts} attempt${attempts === 1 ? '' : 's'} × ${formatDuration(plan.handler?.handlerMs ?? 0)}`;
}

/**
 * Facts worth knowing that are not conflicts: how a quorum queue's delivery
 * limit counts for this policy.
 */
export function planNotes(plan: PolicyPlan, targets: readonly PlanTarget[]): string[] {
  const notes: string[] = [];
  for (const target of targets) {
    if (target.transport !== 'rabbitmq' || target.queueType !== 'quorum') continue;
    const limit = target.deliveryLimit ?? ((target.brokerMajor ?? 4) >= 4 ? QUORUM_DEFAULT_DELIVERY_LIMIT_4X : undefined);
    if (limit === undefined) continue;
    const copies = (plan.schedule[plan.schedule.length - 1]?.round ?? 0) + 1;
    notes.push(
      `rabbitmq: the quorum delivery limit (${limit}) counts broker deliveries, not handler attempts: the ${plan.attempts.max} attempts are ` +
        `${copies} ${copies === 1 ? 'copy' : 'copies'} (the first and one per delayed retry), each delivered once, with the immediate retries run in the process`,
    );
  }
  return notes;
}
