import type { NatsConnection, NodeConnectionOptions } from '@nats-io/transport-node';
import { connectionBackoff } from '../../backoff/connection.js';
import type { Backoff } from '../../backoff/types.js';
import { DEFAULTS } from '../../defaults.js';
import type { Logger } from '../../logger.js';
import { systemClock, MAX_TIMER_MS, type Clock } from '../../time/clock.js';
import { systemRandom, type Random } from '../../time/random.js';
import { leaseOption as sharedLeaseOption, wholeNumberOption } from '../../transport/options.js';
import { JetStreamNames } from './names.js';

/** Options of a {@link JetStreamTransport}; every field is optional. */
export interface JetStreamTransportOptions {
  /** The servers to connect to (`nats://host:port`, or a list for a cluster). Ignored when `connection` is given. Default `'nats://127.0.0.1:4222'`. */
  readonly servers?: string | readonly string[];
  /**
   * A NATS connection the application already has. The transport uses it,
   * never changes its options and never closes it. Default none: the
   * transport opens its own connection to `servers`.
   */
  readonly connection?: NatsConnection;
  /**
   * More options for the transport's own connection (credentials, TLS,
   * `ignoreClusterUpdates`…), passed to `connect` as they are. The transport
   * sets `servers`, `name`, reconnection (from `reconnect`) and
   * `waitOnFirstConnect` itself. Default none.
   */
  readonly connectionOptions?: Omit<NodeConnectionOptions, 'servers' | 'name'>;
  /** The name the transport's own connection gives itself, shown by the server's monitoring (`/connz`). Default `'redeliver'`. */
  readonly connectionName?: string;
  /**
   * The first part of every stream and subject name (`<prefix>_Q_<queue>`,
   * `<prefix>.q.<queue>`): letters, digits and `-`. Endpoints that share
   * queues must share the prefix. Default `'redeliver'`.
   */
  readonly prefix?: string;
  /** How many servers keep a copy of each stream the transport creates (`num_replicas`, 1 to 5; 3 on a cluster). Default 1. */
  readonly replicas?: number;
  /**
   * The most messages a work queue's stream holds (`max_msgs` with discard
   * new): a send to a full queue rejects with a `QueueFullError`, so a
   * `Producer` backs off. Applies to streams the transport creates. Default
   * none: unbounded.
   */
  readonly maxLength?: number;
  /**
   * The most deliveries of one queue unacknowledged at once across every
   * process (the consumer's `max_ack_pending`); each subscription also stays
   * within its own prefetch. Default 1 000.
   */
  readonly maxAckPending?: number;
  /** How long a stream remembers a message id to drop a second send of it (`duplicate_window`). Default 120 000 ms. */
  readonly duplicateWindowMs?: number;
  /**
   * How long a delivery stays leased before the server gives it to another
   * consumer (the consumer's `ack_wait`, set when the transport creates the
   * consumer), unless `consume` is given its own. Default 30 000 ms.
   */
  readonly leaseMs?: number;
  /** The longest a publish or a JetStream API call waits for the server's answer. Default 5 000 ms. */
  readonly apiTimeoutMs?: number;
  /** How long one pull request waits for messages before the server ends it and the consumer sends another. Default 5 000 ms. */
  readonly pullExpiresMs?: number;
  /**
   * How often the server signals that an idle pull request is still alive;
   * two missed signals make the consumer send its pull requests again (a
   * server that restarted or lost its consumer leader forgets them). Default 1 000 ms.
   */
  readonly heartbeatMs?: number;
  /**
   * The wait before each reconnection attempt of the transport's own
   * connection. Default `connectionBackoff()`: 1 s, then × 1.6 with ± 20 %
   * jitter, at most 120 s.
   */
  readonly reconnect?: Backoff;
  /** Source of time for lease checks and delayed retries. Default the system clock. */
  readonly clock?: Clock;
  /** Source of randomness for the reconnect jitter. Default `Math.random`. */
  readonly random?: Random;
  /** A pino-compatible logger for connection events and warnings. Default none: silent. */
  readonly logger?: Logger;
}

/** The defaults of {@link JetStreamTransportOptions}. */
export const JETSTREAM_DEFAULTS = {
  servers: 'nats://127.0.0.1:4222',
  connectionName: 'redeliver',
  prefix: 'redeliver',
  replicas: 1,
  maxAckPending: 1_000,
  duplicateWindowMs: 120_000,
  leaseMs: DEFAULTS.leaseMs,
  apiTimeoutMs: 5_000,
  pullExpiresMs: 5_000,
  heartbeatMs: 1_000,
} as const;

/** Options with defaults applied and values checked. */
export interface ResolvedJetStreamOptions {
  readonly servers: string[];
  readonly connection: NatsConnection | undefined;
  readonly connectionOptions: Omit<NodeConnectionOptions, 'servers' | 'name'>;
  readonly connectionName: string;
  readonly names: JetStreamNames;
  readonly replicas: number;
  readonly maxLength: number | undefined;
  readonly maxAckPending: number;
  readonly duplicateWindowMs: number;
  readonly leaseMs: number;
  readonly apiTimeoutMs: number;
  readonly pullExpiresMs: number;
  readonly heartbeatMs: number;
  readonly reconnect: Backoff;
  readonly clock: Clock;
  readonly random: Random;
  readonly logger: Logger | undefined;
}

/** Applies the defaults and checks every value, throwing a RangeError or TypeError naming the option. */
export function resolveJetStreamOptions(options: JetStreamTransportOptions = {}): ResolvedJetStreamOptions {
  const servers = typeof options.servers === 'string' ? [options.servers] : [...(options.servers ?? [JETSTREAM_DEFAULTS.servers])];
  if (options.connection === undefined && (servers.length === 0 || servers.some((s) => typeof s !== 'string' || s.length === 0))) {
    throw new RangeError(`JetStreamTransport: servers must be a non-empty string or list of strings, got ${JSON.stringify(options.servers)}`);
  }
  const reconnect = options.reconnect ?? connectionBackoff();
  if (typeof reconnect !== 'function') throw new TypeError('JetStreamTransport: reconnect must be a Backoff function');
  const connectionName = options.connectionName ?? JETSTREAM_DEFAULTS.connectionName;
  if (typeof connectionName !== 'string' || connectionName.length === 0) throw new RangeError('JetStreamTransport: connectionName must be a non-empty string');
  const heartbeatMs = wholeNumber('heartbeatMs', options.heartbeatMs ?? JETSTREAM_DEFAULTS.heartbeatMs, 100, 60_000);
  const pullExpiresMs = wholeNumber('pullExpiresMs', options.pullExpiresMs ?? JETSTREAM_DEFAULTS.pullExpiresMs, 1_000, 300_000);
  if (heartbeatMs * 2 >= pullExpiresMs) throw new RangeError(`JetStreamTransport: heartbeatMs (${heartbeatMs}) must be less than half of pullExpiresMs (${pullExpiresMs})`);
  return {
    servers,
    connection: options.connection,
    connectionOptions: options.connectionOptions ?? {},
    connectionName,
    names: new JetStreamNames(options.prefix ?? JETSTREAM_DEFAULTS.prefix),
    replicas: wholeNumber('replicas', options.replicas ?? JETSTREAM_DEFAULTS.replicas, 1, 5),
    maxLength: options.maxLength === undefined ? undefined : wholeNumber('maxLength', options.maxLength, 1, 2 ** 53 - 1),
    maxAckPending: wholeNumber('maxAckPending', options.maxAckPending ?? JETSTREAM_DEFAULTS.maxAckPending, 1, 1_000_000),
    duplicateWindowMs: wholeNumber('duplicateWindowMs', options.duplicateWindowMs ?? JETSTREAM_DEFAULTS.duplicateWindowMs, 100, 7 * 24 * 3_600_000),
    leaseMs: leaseOption('leaseMs', options.leaseMs, JETSTREAM_DEFAULTS.leaseMs),
    apiTimeoutMs: wholeNumber('apiTimeoutMs', options.apiTimeoutMs ?? JETSTREAM_DEFAULTS.apiTimeoutMs, 1, MAX_TIMER_MS),
    pullExpiresMs,
    heartbeatMs,
    reconnect,
    clock: options.clock ?? systemClock,
    random: options.random ?? systemRandom,
    logger: options.logger,
  };
}

/** A lease in milliseconds: `value`, or `fallback` when undefined. The server counts `ack_wait` from 1 ms. */
export function leaseOption(what: string, value: number | undefined, fallback: number): number {
  return sharedLeaseOption('JetStreamTransport', what, value, fallback);
}

function wholeNumber(what: string, value: unknown, min: number, max: number): number {
  return wholeNumberOption('JetStreamTransport', what, value, min, max);
}
