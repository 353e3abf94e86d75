import { hostname } from 'node:os';
import { connectionBackoff } from '../../backoff/connection.js';
import type { Backoff } from '../../backoff/types.js';
import { DEFAULTS } from '../../defaults.js';
import type { Logger } from '../../logger.js';
import { systemClock, MAX_TIMER_MS, type Clock } from '../../time/clock.js';
import { systemRandom, type Random } from '../../time/random.js';
import type { ReplicaWait } from './replicas.js';
import { leaseOption as sharedLeaseOption, wholeNumberOption } from '../../transport/options.js';
import type { RedisClient } from './cluster.js';
import { parseClusterTarget, type ClusterTarget } from './target.js';

/** Options of a {@link RedisTransport}; every field is optional. */
export interface RedisTransportOptions {
  /**
   * The server's URL (`redis://` or `rediss://`), or a Redis Cluster's: its
   * seed nodes separated by commas (`redis://10.0.0.1:7000,10.0.0.2:7000`),
   * or one seed with `?cluster=1` (see ./target.ts). Ignored when `client`
   * is given. Default `'redis://127.0.0.1:6379'`.
   */
  readonly url?: string;
  /**
   * An ioredis client the application already has, of one server (`Redis`)
   * or of a Redis Cluster (`Cluster`). The transport sends its
   * commands on it, never changes its options and never closes it; each
   * consumer gets a `duplicate()` of it for its blocking reads, and the
   * transport one more for its settlements (opened with its first consumer,
   * closed with it). Default none: the transport opens its own clients from
   * `url`.
   */
  readonly client?: RedisClient;
  /**
   * The prefix of every key, and the hash tag they share: `{<prefix>}:…`.
   * Endpoints that share queues must share the prefix. Default `'redeliver'`.
   */
  readonly keyPrefix?: string;
  /** The name the transport's own connections give themselves (`CLIENT SETNAME`), shown by `CLIENT LIST`. Default `'redeliver'`. */
  readonly connectionName?: string;
  /**
   * This process's name in each queue's consumer group. Entries it holds are
   * listed under it in the pending entries list. Default
   * `<hostname>:<pid>:<random>`, new for each transport.
   */
  readonly consumerName?: string;
  /**
   * How long a delivery stays leased before another consumer takes it over
   * (`Delivery.deliveryCount` then goes up), unless `consume` is given its
   * own. Default 30 000 ms.
   */
  readonly leaseMs?: number;
  /**
   * The longest an idle consumer waits before it looks again for delayed
   * retries that another process scheduled sooner than it knew, and for
   * deliveries whose lease ran out. Retries scheduled in this process wake
   * it on time whatever this is. Default 1 000 ms.
   */
  readonly pollIntervalMs?: number;
  /** The most entries one read takes. Default 100. */
  readonly batchSize?: number;
  /**
   * The longest a command (a send, a settlement) waits for its reply, on the
   * transport's own clients; it then rejects and may still be carried out,
   * which a settlement tolerates (it checks its lease) and a send may turn
   * into a duplicate. Default 10 000 ms.
   */
  readonly commandTimeoutMs?: number;
  /**
   * The most messages one queue may hold, ready, being handled and delayed
   * together: a send
   * to a queue that holds this many rejects with a `ThrottledError`, so a
   * `Producer` backs off until consumers catch up instead of filling the
   * server's memory. Retries and dead-letters are never refused. Default
   * none: unbounded.
   */
  readonly maxLength?: number;
  /** The largest body `send` accepts, in bytes; a larger one rejects at once with a `MessageTooLargeError`. Default 16 777 216 (16 MiB). */
  readonly maxMessageBytes?: number;
  /**
   * The wait before each reconnection attempt of the transport's own
   * clients; a backoff returning `undefined` stops reconnecting. Default
   * `connectionBackoff()`: 1 s, then × 1.6 with ± 20 % jitter, at most 120 s.
   */
  readonly reconnect?: Backoff;
  /**
   * Read the server's persistence and eviction settings on the first
   * connection and log a warning when it keeps nothing on disk or may evict
   * keys (see docs/redis.md). Default `true`.
   */
  readonly checkServer?: boolean;
  /**
   * How many replicas must have a write before redeliver confirms it: after
   * each send, delayed send, settlement that writes a copy (retry, dead
   * letter, release) and error-queue send-back, the transport sends
   * `WAIT <waitReplicas> <waitReplicasTimeoutMs>` on the connection that
   * wrote, and resolves only when that many replicas have it; with fewer
   * it rejects with a transient `ReplicasBehindError` (the write stands on
   * the primary: a retry may duplicate it). A failover to a replica that
   * confirmed then loses none of it (see docs/redis.md). `WAIT` counts
   * replicas that received the write, not ones that wrote it to disk. Acks
   * are not waited for: an ack a failover loses delivers its message again.
   * Default 0: confirm once the primary has it.
   */
  readonly waitReplicas?: number;
  /**
   * The longest `waitReplicas` waits for the replicas, per write; less than
   * `commandTimeoutMs`. While it waits, the connection carries nothing else.
   * Default 2 000 ms.
   */
  readonly waitReplicasTimeoutMs?: number;
  /** Source of time for wake-ups, reconnect waits and lease checks. Default the system clock. */
  readonly clock?: Clock;
  /** Source of randomness for the reconnect jitter. Default `Math.random`. */
  readonly random?: Random;
  /** A pino-compatible logger for connection events and warnings. Default none: silent. */
  readonly logger?: Logger;
}

/** The defaults of {@link RedisTransportOptions}. */
export const REDIS_DEFAULTS = {
  url: 'redis://127.0.0.1:6379',
  keyPrefix: 'redeliver',
  connectionName: 'redeliver',
  leaseMs: DEFAULTS.leaseMs,
  pollIntervalMs: 1_000,
  batchSize: 100,
  commandTimeoutMs: 10_000,
  maxMessageBytes: 16_777_216,
  checkServer: true,
  waitReplicas: 0,
  waitReplicasTimeoutMs: 2_000,
} as const;

/** Options with defaults applied and values checked. */
export interface ResolvedRedisOptions {
  readonly url: string;
  /** The cluster `url` names; undefined for one server. */
  readonly cluster: ClusterTarget | undefined;
  readonly client: RedisClient | undefined;
  readonly keyPrefix: string;
  readonly connectionName: string;
  readonly consumerName: string;
  readonly leaseMs: number;
  readonly pollIntervalMs: number;
  readonly batchSize: number;
  readonly commandTimeoutMs: number;
  readonly maxLength: number | undefined;
  readonly maxMessageBytes: number;
  readonly reconnect: Backoff;
  readonly checkServer: boolean;
  readonly waitReplicas: ReplicaWait;
  readonly clock: Clock;
  readonly random: Random;
  readonly logger: Logger | undefined;
}

/** Applies the defaults and checks every value, throwing a RangeError or TypeError naming the option. */
export function resolveRedisOptions(options: RedisTransportOptions = {}): ResolvedRedisOptions {
  const random = options.random ?? systemRandom;
  const url = options.url ?? REDIS_DEFAULTS.url;
  if (options.client === undefined && !/^rediss?:\/\//i.test(url)) throw new RangeError(`RedisTransport: url must start with redis:// or rediss://, got ${JSON.stringify(url)}`);
  const reconnect = options.reconnect ?? connectionBackoff();
  if (typeof reconnect !== 'function') throw new TypeError('RedisTransport: reconnect must be a Backoff function');
  const checkServer = options.checkServer ?? REDIS_DEFAULTS.checkServer;
  if (typeof checkServer !== 'boolean') throw new TypeError('RedisTransport: checkServer must be a boolean');
  const maxLength = options.maxLength;
  if (maxLength !== undefined) wholeNumber('maxLength', maxLength, 1, 2 ** 53 - 1);
  const commandTimeoutMs = wholeNumber('commandTimeoutMs', options.commandTimeoutMs ?? REDIS_DEFAULTS.commandTimeoutMs, 1, MAX_TIMER_MS);
  const waitReplicas = wholeNumber('waitReplicas', options.waitReplicas ?? REDIS_DEFAULTS.waitReplicas, 0, 1_000);
  const waitTimeoutMs = wholeNumber('waitReplicasTimeoutMs', options.waitReplicasTimeoutMs ?? REDIS_DEFAULTS.waitReplicasTimeoutMs, 1, MAX_TIMER_MS);
  if (waitReplicas > 0 && waitTimeoutMs >= commandTimeoutMs) {
    throw new RangeError(`RedisTransport: waitReplicasTimeoutMs (${waitTimeoutMs}) must be less than commandTimeoutMs (${commandTimeoutMs}), or the command times out before WAIT answers`);
  }
  const cluster = options.client === undefined ? parseClusterTarget(url) : undefined;
  return {
    url,
    cluster,
    client: options.client,
    keyPrefix: options.keyPrefix ?? REDIS_DEFAULTS.keyPrefix,
    connectionName: name('connectionName', options.connectionName ?? REDIS_DEFAULTS.connectionName),
    consumerName: name('consumerName', options.consumerName ?? `${hostname()}:${process.pid}:${Math.floor(random() * 2 ** 32).toString(36)}`),
    leaseMs: leaseOption('leaseMs', options.leaseMs, REDIS_DEFAULTS.leaseMs),
    pollIntervalMs: wholeNumber('pollIntervalMs', options.pollIntervalMs ?? REDIS_DEFAULTS.pollIntervalMs, 1, MAX_TIMER_MS),
    batchSize: wholeNumber('batchSize', options.batchSize ?? REDIS_DEFAULTS.batchSize, 1, 10_000),
    commandTimeoutMs,
    maxLength,
    maxMessageBytes: wholeNumber('maxMessageBytes', options.maxMessageBytes ?? REDIS_DEFAULTS.maxMessageBytes, 1, 512 * 1024 * 1024),
    reconnect,
    checkServer,
    waitReplicas: { replicas: waitReplicas, timeoutMs: waitTimeoutMs },
    clock: options.clock ?? systemClock,
    random,
    logger: options.logger,
  };
}

/** A lease in milliseconds: `value`, or `fallback` when undefined. */
export function leaseOption(what: string, value: number | undefined, fallback: number): number {
  return sharedLeaseOption('RedisTransport', what, value, fallback);
}

function wholeNumber(what: string, value: unknown, min: number, max: number): number {
  return wholeNumberOption('RedisTransport', what, value, min, max);
}

function name(what: string, value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || /\s/.test(value)) {
    throw new RangeError(`RedisTransport: ${what} must be a non-empty string without spaces, got ${JSON.stringify(value)}`);
  }
  return value;
}
