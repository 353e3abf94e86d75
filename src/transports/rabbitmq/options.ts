import { connectionBackoff } from '../../backoff/connection.js';
import type { Backoff } from '../../backoff/types.js';
import type { Logger } from '../../logger.js';
import type { ConsumeOptions } from '../../transport/types.js';
import { systemClock, type Clock } from '../../time/clock.js';
import { systemRandom, type Random } from '../../time/random.js';
import type { DelayLevelType, QueueType } from './topology.js';

/** Options of a {@link RabbitMqTransport}; every field is optional. */
export interface RabbitMqTransportOptions {
  /** The broker's AMQP URL. Default `'amqp://guest:guest@127.0.0.1:5672'`. */
  readonly url?: string;
  /** Source of time for confirm timeouts, due times and reconnect waits. Default the system clock. */
  readonly clock?: Clock;
  /** Source of randomness for the reconnect jitter. Default `Math.random`. */
  readonly random?: Random;
  /**
   * The longest a publish (send, retry copy, error-queue copy) waits for the
   * broker's confirm, counting any wait for a reconnection or for a
   * `connection.blocked` to lift. On timeout the call rejects with a
   * `ConfirmTimeoutError` (or, when it was held at the blocked gate and never
   * written, a `PublishBlockedError`) and the original delivery stays
   * unsettled. Keep it below a `Producer`'s `minAttemptTimeoutMs` (20 s) so
   * the transport, which knows whether the publish was written, answers
   * first. Default 10 000 ms.
   */
  readonly confirmTimeoutMs?: number;
  /**
   * The type of the work and error queues this transport declares:
   * `'classic'` or `'quorum'` (`x-queue-type: quorum`, which also makes
   * `Delivery.deliveryCount` the broker's own count). Every endpoint sharing
   * a queue must use the same type. The delay levels have their own option,
   * `delayLevels`. Default `'classic'`.
   */
  readonly queueType?: QueueType;
  /**
   * The kind of delay levels that hold delayed retries. `'quorum'`: quorum
   * queues `<prefix>.delay-quorum.NN` whose hops from level to level (and
   * back to the work queue) are dead-lettered at least once, so a broker
   * crash loses no waiting retry, and a copy returning to a full bounded
   * work queue waits for room instead of being dropped. `'classic'`: the
   * classic queues `<prefix>.delay.NN`, dead-lettered at most once, cheaper
   * on a single node but a crash can lose retries in transit. Endpoints may
   * mix them: each level set returns copies to the same work queues. See
   * docs/rabbitmq.md, "Delayed retries". Default `'quorum'`.
   */
  readonly delayLevels?: DelayLevelType;
  /**
   * For quorum queues: the `x-delivery-limit` declared on work queues. The
   * broker drops (or dead-letters) a message returned more than this many
   * times; see `deliveryLimitWarning`. Never declared on error queues, which
   * every browse counts a delivery against: those get no limit (`-1` on
   * RabbitMQ 4 and later, whose default for quorum queues is 20). Ignored for
   * classic queues. Default none: no limit is declared (RabbitMQ 4 then
   * applies its default of 20).
   */
  readonly deliveryLimit?: number;
  /**
   * The wait before each reconnection attempt after the connection or a
   * channel drops; a backoff returning `undefined` gives up, and the
   * transport then fails every operation. Default
   * `connectionBackoff()`: 1 s, then × 1.6 per attempt with ± 20 % jitter,
   * the base capped at 120 s.
   */
  readonly reconnect?: Backoff;
  /** A pino-compatible logger for connection events and warnings. Default none: silent. */
  readonly logger?: Logger;
  /**
   * Prefix of the shared delay topology: exchanges and queues
   * `<prefix>.delay-quorum.00` to `.27` (or `<prefix>.delay.00` to `.27` with
   * classic `delayLevels`) and their deliver exchange. Endpoints that share
   * work queues must share the prefix. Default `'redeliver'`.
   */
  readonly topologyPrefix?: string;
  /** The connection name shown by the management UI and `rabbitmqctl list_connections`. Default `'redeliver'`. */
  readonly connectionName?: string;
  /**
   * Bounds the work queues this transport declares (the queues it sends to
   * and consumes from, not error queues nor the delay levels) with
   * `x-max-length: maxLength` and `x-overflow: reject-publish`. When a queue
   * holds this many ready messages (deliveries being handled do not count),
   * the broker refuses further publishes with a nack and `send` rejects with
   * a `PublishNackedError`, a `ThrottledError`: a `Producer` backs off until
   * consumers catch up, instead of the queue growing without bound.
   *
   * A delayed retry returning from quorum delay levels to a full queue waits
   * in its level until the broker retries the hop (every 180 s by default)
   * and finds room; from classic levels it is dropped. Every endpoint declaring the queue must use the same value; a queue that
   * exists without it is used as it is (a warning is logged). Default none:
   * unbounded.
   */
  readonly maxLength?: number;
  /**
   * Whether the transport declares the work and error queues it uses. With
   * `false` it declares none: each queue must exist already (it is checked
   * once per connection, passively) and `send` or `consume` on a missing one
   * rejects with a `QueueNotFoundError`, which a `Producer` does not retry.
   * The delay levels are still declared and the queues still bound to the
   * deliver exchange, which delayed retries need. Default `true`.
   */
  readonly declareQueues?: boolean;
  /**
   * The largest body `send` accepts, in bytes; a larger one rejects at once
   * with a `MessageTooLargeError` (never retried) instead of reaching the
   * broker, which would close the publishing channel and fail every other
   * publish in flight on it. Set it to the broker's `max_message_size`:
   * at most 536 870 912 (512 MiB, the most a broker can be set to).
   * Default 16 777 216 (16 MiB, RabbitMQ 4's default `max_message_size`).
   */
  readonly maxMessageBytes?: number;
  /**
   * Fault injection for tests of the failure windows; not for production.
   * @internal
   */
  readonly faults?: RabbitMqFaults;
}

/**
 * Points where a test can stop the transport to widen a failure window.
 * @internal
 */
export interface RabbitMqFaults {
  /** Awaited after a retry or error-queue copy is confirmed and before the original is acked. */
  readonly afterCopyConfirmed?: (info: { id: string; queue: string; kind: 'retry' | 'deadLetter' }) => Promise<void> | void;
}

/** Options of {@link RabbitMqTransport.consume}: the transport contract's, and more. */
export interface RabbitMqConsumeOptions extends ConsumeOptions {
  /**
   * The broker deliveries one copy of a message may need before it is
   * settled (see `expectedBrokerDeliveries`). When set, the transport
   * compares it with the queue's `x-delivery-limit` at start-up and logs a
   * warning (and emits `warning`) if the broker could drop messages first.
   * Default none: no check.
   */
  readonly expectedDeliveries?: number;
}

/** Options with defaults applied and values checked. */
export interface ResolvedOptions {
  readonly url: string;
  readonly clock: Clock;
  readonly random: Random;
  readonly confirmTimeoutMs: number;
  readonly queueType: QueueType;
  readonly delayLevels: DelayLevelType;
  readonly deliveryLimit: number | undefined;
  readonly reconnect: Backoff;
  readonly logger: Logger | undefined;
  readonly topologyPrefix: string;
  readonly connectionName: string;
  readonly maxLength: number | undefined;
  readonly declareQueues: boolean;
  readonly maxMessageBytes: number;
  readonly faults: RabbitMqFaults;
}

/** The largest prefetch AMQP 0-9-1 can carry (`basic.qos` prefetch-count is 16 bits). */
export const MAX_PREFETCH = 65_535;

/** The largest `max_message_size` a RabbitMQ broker can be configured with: 512 MiB. */
export const MAX_MESSAGE_BYTES = 536_870_912;

/** The defaults of {@link RabbitMqTransportOptions}. */
export const RABBITMQ_DEFAULTS = {
  url: 'amqp://guest:guest@127.0.0.1:5672',
  confirmTimeoutMs: 10_000,
  queueType: 'classic',
  delayLevels: 'quorum',
  topologyPrefix: 'redeliver',
  connectionName: 'redeliver',
  declareQueues: true,
  maxMessageBytes: 16_777_216,
} as const;

/** Applies the defaults and checks every value, throwing a RangeError or TypeError naming the option. */
export function resolveOptions(options: RabbitMqTransportOptions = {}): ResolvedOptions {
  const confirmTimeoutMs = options.confirmTimeoutMs ?? RABBITMQ_DEFAULTS.confirmTimeoutMs;
  if (!Number.isFinite(confirmTimeoutMs) || confirmTimeoutMs <= 0 || confirmTimeoutMs > 2 ** 31 - 1) {
    throw new RangeError(`RabbitMqTransport: confirmTimeoutMs must be a finite number of milliseconds above 0, got ${confirmTimeoutMs}`);
  }
  const queueType = options.queueType ?? RABBITMQ_DEFAULTS.queueType;
  if (queueType !== 'classic' && queueType !== 'quorum') {
    throw new RangeError(`RabbitMqTransport: queueType must be 'classic' or 'quorum', got ${String(queueType)}`);
  }
  const delayLevels = options.delayLevels ?? RABBITMQ_DEFAULTS.delayLevels;
  if (delayLevels !== 'quorum' && delayLevels !== 'classic') {
    throw new RangeError(`RabbitMqTransport: delayLevels must be 'quorum' or 'classic', got ${String(delayLevels)}`);
  }
  const deliveryLimit = options.deliveryLimit;
  if (deliveryLimit !== undefined && !(Number.isInteger(deliveryLimit) && deliveryLimit >= 0)) {
    throw new RangeError(`RabbitMqTransport: deliveryLimit must be a whole number >= 0, got ${deliveryLimit}`);
  }
  const topologyPrefix = options.topologyPrefix ?? RABBITMQ_DEFAULTS.topologyPrefix;
  if (typeof topologyPrefix !== 'string' || topologyPrefix.length === 0 || Buffer.byteLength(topologyPrefix) > 200) {
    throw new RangeError('RabbitMqTransport: topologyPrefix must be a non-empty string of at most 200 bytes');
  }
  const maxLength = options.maxLength;
  if (maxLength !== undefined && !(Number.isInteger(maxLength) && maxLength >= 1 && maxLength <= 2 ** 31 - 1)) {
    throw new RangeError(`RabbitMqTransport: maxLength must be a whole number from 1 to 2^31-1, got ${maxLength}`);
  }
  const declareQueues = options.declareQueues ?? RABBITMQ_DEFAULTS.declareQueues;
  if (typeof declareQueues !== 'boolean') throw new TypeError('RabbitMqTransport: declareQueues must be a boolean');
  const maxMessageBytes = options.maxMessageBytes ?? RABBITMQ_DEFAULTS.maxMessageBytes;
  if (!(Number.isInteger(maxMessageBytes) && maxMessageBytes >= 1 && maxMessageBytes <= MAX_MESSAGE_BYTES)) {
    throw new RangeError(`RabbitMqTransport: maxMessageBytes must be a whole number from 1 to ${MAX_MESSAGE_BYTES}, got ${maxMessageBytes}`);
  }
  const reconnect = options.reconnect ?? connectionBackoff();
  if (typeof reconnect !== 'function') throw new TypeError('RabbitMqTransport: reconnect must be a Backoff function');
  return {
    url: options.url ?? RABBITMQ_DEFAULTS.url,
    clock: options.clock ?? systemClock,
    random: options.random ?? systemRandom,
    confirmTimeoutMs,
    queueType,
    delayLevels,
    deliveryLimit: queueType === 'quorum' ? deliveryLimit : undefined,
    reconnect,
    logger: options.logger,
    topologyPrefix,
    connectionName: options.connectionName ?? RABBITMQ_DEFAULTS.connectionName,
    maxLength,
    declareQueues,
    maxMessageBytes,
    faults: options.faults ?? {},
  };
}
