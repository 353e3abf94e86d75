import { connectionBackoff } from '../../backoff/connection.js';
import type { Backoff } from '../../backoff/types.js';
import { DEFAULTS } from '../../defaults.js';
import type { Logger } from '../../logger.js';
import { systemClock, type Clock } from '../../time/clock.js';
import { systemRandom, type Random } from '../../time/random.js';
import { leaseOption as sharedLeaseOption, wholeNumberOption } from '../../transport/options.js';

/** Options of a {@link RocketMqTransport}; every field is optional. */
export interface RocketMqTransportOptions {
  /** The gRPC proxy endpoint(s), `host:port` (several separated by `;`). Default `'127.0.0.1:8081'`. */
  readonly endpoints?: string;
  /** The name server (`host:port`) the transport asks to create and check topics. Default `'127.0.0.1:9876'`. */
  readonly nameServer?: string;
  /** The consumer group every consumer of a queue joins. Default `'redeliver'`. */
  readonly consumerGroup?: string;
  /** The cluster whose brokers the transport creates topics on. Default `'DefaultCluster'`. */
  readonly cluster?: string;
  /**
   * Queues (`readQueueNums`/`writeQueueNums`) of each topic the transport
   * creates on each broker. Consumers share a queue (they pop from it), so
   * one keeps messages in the order they were stored, and more spread the
   * broker's load at the cost of that order. Default 1.
   */
  readonly queuesPerTopic?: number;
  /**
   * How long a delivery stays invisible to other consumers (the invisible
   * duration of each receive), unless `consume` is given its own. The proxy
   * refuses less than 10 000 ms: a shorter lease is raised to it. Default 30 000 ms.
   */
  readonly leaseMs?: number;
  /** How long one receive waits on the proxy for messages (its long polling). The proxy refuses less than 5 000 ms. Default 5 000 ms. */
  readonly pollWaitMs?: number;
  /**
   * The furthest ahead one timed message is held: the proxy refuses a
   * delivery time further off than its `maxDelayTimeMills` (24 h by
   * default), so a longer delay goes in hops of at most this much, each
   * sent on by the consumer that receives it early, without running the
   * handler or counting a delivery. Set it to the proxy's value when that
   * was changed. Default 86 400 000 ms (24 h); from 1 000 ms.
   */
  readonly maxTimedDelayMs?: number;
  /** The longest a send, an ack or an admin request waits for its answer. Default 5 000 ms. */
  readonly requestTimeoutMs?: number;
  /** Told to the proxy as the client's name, in its client list. Default `'redeliver'`. */
  readonly connectionName?: string;
  /**
   * The wait between failed receives of a consumer (the first receive after
   * start is one the proxy may refuse). Default `connectionBackoff()`: 1 s,
   * then × 1.6 with ± 20 % jitter, at most 120 s.
   */
  readonly connectionBackoff?: Backoff;
  /** Source of time for leases and delayed retries. Default the system clock. */
  readonly clock?: Clock;
  /** Source of randomness for the backoff jitter. Default `Math.random`. */
  readonly random?: Random;
  /** A pino-compatible logger for consumer failures and warnings. Default none: silent. */
  readonly logger?: Logger;
}

/** The defaults of {@link RocketMqTransportOptions}. */
export const ROCKETMQ_DEFAULTS = {
  endpoints: '127.0.0.1:8081',
  nameServer: '127.0.0.1:9876',
  consumerGroup: 'redeliver',
  cluster: 'DefaultCluster',
  queuesPerTopic: 1,
  leaseMs: DEFAULTS.leaseMs,
  pollWaitMs: 5_000,
  maxTimedDelayMs: 24 * 3_600_000,
  requestTimeoutMs: 5_000,
  connectionName: 'redeliver',
} as const;

/** The proxy's shortest invisible duration: a lease is never shorter. */
export const MIN_INVISIBLE_MS = 10_000;

/** Options with defaults applied and values checked. */
export interface ResolvedRocketMqOptions {
  readonly endpoints: string;
  readonly nameServer: string;
  readonly consumerGroup: string;
  readonly cluster: string;
  readonly queuesPerTopic: number;
  readonly leaseMs: number;
  readonly pollWaitMs: number;
  readonly maxTimedDelayMs: number;
  readonly requestTimeoutMs: number;
  readonly connectionName: string;
  readonly connectionBackoff: Backoff;
  readonly clock: Clock;
  readonly random: Random;
  readonly logger: Logger | undefined;
}

/** Applies the defaults and checks every value, throwing a RangeError or TypeError naming the option. */
export function resolveRocketMqOptions(options: RocketMqTransportOptions = {}): ResolvedRocketMqOptions {
  const backoff = options.connectionBackoff ?? connectionBackoff();
  if (typeof backoff !== 'function') throw new TypeError('RocketMqTransport: connectionBackoff must be a Backoff function');
  return {
    endpoints: text('endpoints', options.endpoints ?? ROCKETMQ_DEFAULTS.endpoints),
    nameServer: address('nameServer', options.nameServer ?? ROCKETMQ_DEFAULTS.nameServer),
    consumerGroup: text('consumerGroup', options.consumerGroup ?? ROCKETMQ_DEFAULTS.consumerGroup),
    cluster: text('cluster', options.cluster ?? ROCKETMQ_DEFAULTS.cluster),
    queuesPerTopic: wholeNumberOption('RocketMqTransport', 'queuesPerTopic', options.queuesPerTopic ?? ROCKETMQ_DEFAULTS.queuesPerTopic, 1, 1_024),
    leaseMs: leaseOption('leaseMs', options.leaseMs, ROCKETMQ_DEFAULTS.leaseMs),
    pollWaitMs: wholeNumberOption('RocketMqTransport', 'pollWaitMs', options.pollWaitMs ?? ROCKETMQ_DEFAULTS.pollWaitMs, 5_000, 60_000),
    maxTimedDelayMs: wholeNumberOption('RocketMqTransport', 'maxTimedDelayMs', options.maxTimedDelayMs ?? ROCKETMQ_DEFAULTS.maxTimedDelayMs, 1_000, 2 ** 31 - 1),
    requestTimeoutMs: wholeNumberOption('RocketMqTransport', 'requestTimeoutMs', options.requestTimeoutMs ?? ROCKETMQ_DEFAULTS.requestTimeoutMs, 100, 300_000),
    connectionName: text('connectionName', options.connectionName ?? ROCKETMQ_DEFAULTS.connectionName),
    connectionBackoff: backoff,
    clock: options.clock ?? systemClock,
    random: options.random ?? systemRandom,
    logger: options.logger,
  };
}

/** A lease in milliseconds: `value`, or `fallback` when undefined; never below the proxy's {@link MIN_INVISIBLE_MS}. */
export function leaseOption(what: string, value: number | undefined, fallback: number): number {
  return Math.max(MIN_INVISIBLE_MS, sharedLeaseOption('RocketMqTransport', what, value, fallback));
}

function text(what: string, value: unknown): string {
  if (typeof value !== 'string' || value.length === 0) throw new RangeError(`RocketMqTransport: ${what} must be a non-empty string, got ${String(value)}`);
  return value;
}

function address(what: string, value: unknown): string {
  const s = text(what, value);
  if (!/^[^:]+:\d+$/.test(s)) throw new RangeError(`RocketMqTransport: ${what} must be host:port, got ${s}`);
  return s;
}
