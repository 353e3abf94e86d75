import { hostname } from 'node:os';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { linear } from '../backoff/linear.js';
import type { Backoff } from '../backoff/types.js';
import { jsonCodec, type Codec } from '../codec.js';
import { DEFAULTS } from '../defaults.js';
import type { DeduplicationStore } from '../dedup/types.js';
import { resolveFlowConfig, type FlowConfig } from '../flow/config.js';
import { silentLogger, type Logger } from '../logger.js';
import type { OnExpired } from '../policy/deadline.js';
import { unrecoverableClassifier, type ErrorClass, type UnrecoverablePredicate } from '../policy/classify.js';
import { standardSchema } from '../schema/validate.js';
import { systemClock, type Clock } from '../time/clock.js';
import { systemRandom, type Random } from '../time/random.js';
import type { Transport } from '../transport/types.js';
import type { CustomPolicy, EndpointOptions, Handler, RecoverabilityOptions } from './options.js';
import { duration, fn, nonEmpty, OptionError, queueName, wholeNumber } from '../util/option-checks.js';

/** Recoverability options after validation, with every default filled in. */
export interface RecoverabilityConfig {
  readonly immediateRetries: number;
  readonly delayedRetries: number;
  readonly delayedBackoff: Backoff;
  readonly maxDelayMs: number;
  readonly errorQueue: string;
  readonly isUnrecoverable: UnrecoverablePredicate;
  readonly policy: CustomPolicy | undefined;
  readonly deadlineMs: number | undefined;
  readonly onExpired: OnExpired;
}

/** Endpoint options after validation, with every default filled in. */
export interface EndpointConfig<T> extends RecoverabilityConfig {
  readonly name: string;
  readonly queue: string;
  readonly transport: Transport;
  readonly handler: Handler<T>;
  readonly schema: StandardSchemaV1<unknown, T> | undefined;
  readonly concurrency: number;
  readonly leaseMs: number;
  readonly settlementRetries: number;
  readonly flow: FlowConfig;
  readonly deduplication: DeduplicationStore | undefined;
  readonly codec: Codec<T>;
  readonly clock: Clock;
  readonly random: Random;
  readonly logger: Logger;
  readonly host: string;
  readonly replayOutcomeQueue: string | undefined;
}

/** `concurrency`, which is the endpoint's prefetch, checked against the transport's largest prefetch. */
function withinLimits(transport: Transport, concurrency: number): number {
  const max = transport.limits?.maxPrefetch;
  if (max !== undefined && concurrency > max) {
    throw new OptionError(`concurrency must be at most ${max} on the ${transport.name} transport (the largest prefetch it accepts), got ${concurrency}`);
  }
  return concurrency;
}

/**
 * A delay the endpoint's options fix (`option`, `delayMs`), checked against
 * the longest delay the transport holds: refused when the endpoint is
 * built, not at the first retry that long. Every delay a policy asks for
 * (the delayed backoff's, a `RetryLaterError`'s, a custom policy's, a
 * requeue's) is capped at `recoverability.maxDelayMs`, so that cap is
 * checked; so is the retry budget's `deferMs`, which is not capped.
 */
function delayWithinLimits(transport: Transport, option: string, delayMs: number): number {
  const max = transport.limits?.maxDelayMs;
  if (max !== undefined && delayMs > max) {
    throw new OptionError(`${option} is ${delayMs} ms, but the ${transport.name} transport holds a delay of at most ${max} ms (its limits.maxDelayMs): set ${option} to ${max} or less`);
  }
  return delayMs;
}

/** Flow control whose retry budget defers no longer than the transport holds. */
function flowWithinLimits(transport: Transport, flow: FlowConfig): FlowConfig {
  const deferMs = flow.retryBudget?.deferMs;
  if (deferMs !== undefined) delayWithinLimits(transport, 'flowControl.retryBudget.deferMs', deferMs);
  return flow;
}

/** Validates options, naming the option at fault, and fills in defaults. */
export function resolveEndpointConfig<T>(options: EndpointOptions<T>): EndpointConfig<T> {
  if (typeof options !== 'object' || options === null) throw new OptionError('Endpoint options must be an object');
  const name = nonEmpty('name', options.name);
  const transport = options.transport;
  if (typeof transport !== 'object' || transport === null || typeof transport.consume !== 'function') {
    throw new OptionError('transport must be a Transport (such as SqliteTransport or MemoryTransport)');
  }
  const queue = options.queue === undefined ? name : nonEmpty('queue', options.queue);
  const recoverability = transportErrorQueue(resolveRecoverabilityConfig(options.recoverability), options.recoverability?.errorQueue, transport, queue);
  return {
    name,
    queue,
    transport,
    handler: fn<Handler<T>>('handler', options.handler),
    schema: options.schema === undefined ? undefined : standardSchema('schema', options.schema),
    concurrency: withinLimits(transport, wholeNumber('concurrency', options.concurrency ?? DEFAULTS.concurrency, 1, 100_000)),
    leaseMs: duration('leaseMs', options.leaseMs ?? DEFAULTS.leaseMs, 1),
    settlementRetries: wholeNumber('settlementRetries', options.settlementRetries ?? DEFAULTS.settlementRetries, 0, 1_000),
    ...recoverability,
    maxDelayMs: delayWithinLimits(transport, 'recoverability.maxDelayMs', recoverability.maxDelayMs),
    flow: flowWithinLimits(transport, resolveFlowConfig(options.flowControl)),
    deduplication: options.deduplication,
    codec: (options.codec ?? jsonCodec) as Codec<T>,
    clock: options.clock ?? systemClock,
    random: options.random === undefined ? systemRandom : fn<Random>('random', options.random),
    logger: options.logger ?? silentLogger,
    host: options.host ?? hostname(),
    replayOutcomeQueue: options.replayOutcomeQueue === undefined ? undefined : outcomeQueue(options.replayOutcomeQueue, queue, recoverability.errorQueue),
  };
}

/** The recoverability config with the transport's default error queue for `queue`, when the options name none and the transport has one. */
function transportErrorQueue(config: RecoverabilityConfig, given: unknown, transport: Transport, queue: string): RecoverabilityConfig {
  if (given !== undefined || typeof transport.defaultErrorQueue !== 'function') return config;
  return { ...config, errorQueue: nonEmpty('transport.defaultErrorQueue()', transport.defaultErrorQueue(queue)) };
}

/** Validates the recoverability options, naming the option at fault, and fills in defaults. */
export function resolveRecoverabilityConfig(options: RecoverabilityOptions = {}): RecoverabilityConfig {
  if (typeof options !== 'object' || options === null) throw new OptionError('recoverability must be an object');
  const r = options;
  const unrecoverable = r.unrecoverable ?? [];
  if (!Array.isArray(unrecoverable) || unrecoverable.some((c) => typeof c !== 'function')) {
    throw new OptionError('recoverability.unrecoverable must be an array of error classes');
  }
  return {
    immediateRetries: wholeNumber('recoverability.immediateRetries', r.immediateRetries ?? DEFAULTS.immediateRetries, 0, 1_000),
    delayedRetries: wholeNumber('recoverability.delayedRetries', r.delayedRetries ?? DEFAULTS.delayedRetries, 0, 1_000_000),
    delayedBackoff: r.delayedBackoff === undefined ? linear(DEFAULTS.delayedRetryStepMs) : fn<Backoff>('recoverability.delayedBackoff', r.delayedBackoff),
    maxDelayMs: duration('recoverability.maxDelayMs', r.maxDelayMs ?? DEFAULTS.maxDelayMs),
    errorQueue: r.errorQueue === undefined ? DEFAULTS.errorQueue : nonEmpty('recoverability.errorQueue', r.errorQueue),
    isUnrecoverable: unrecoverableClassifier(
      unrecoverable as readonly ErrorClass[],
      r.isUnrecoverable === undefined ? undefined : fn<UnrecoverablePredicate>('recoverability.isUnrecoverable', r.isUnrecoverable),
    ),
    policy: r.policy === undefined ? undefined : fn<CustomPolicy>('recoverability.policy', r.policy),
    deadlineMs: r.deadlineMs === undefined ? undefined : duration('recoverability.deadlineMs', r.deadlineMs, 1),
    onExpired: onExpired(r.onExpired),
  };
}

function onExpired(value: unknown): OnExpired {
  if (value === undefined) return DEFAULTS.onExpired;
  if (value !== 'error-queue' && value !== 'discard') throw new OptionError(`recoverability.onExpired must be 'error-queue' or 'discard', got ${JSON.stringify(value)}`);
  return value;
}

/** The outcome queue: a queue name other than the endpoint's own queue and its error queue. */
function outcomeQueue(value: unknown, queue: string, errorQueue: string): string {
  const name = queueName('replayOutcomeQueue', value);
  if (name === queue) throw new OptionError(`replayOutcomeQueue must not be the endpoint's own queue '${queue}': the endpoint would consume its own records`);
  if (name === errorQueue) throw new OptionError(`replayOutcomeQueue must not be the error queue '${errorQueue}'`);
  return name;
}
