import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { Logger } from '../../logger.js';
import { isCluster, serverOf, type RedisClient } from './cluster.js';
import type { ResolvedRedisOptions } from './options.js';

/**
 * Opens a client of the transport's own. `blocking` clients carry a
 * consumer's blocking reads, so they get no command timeout (a read may
 * block for the poll interval). Every client retries its connection with
 * the `reconnect` backoff, queues commands while it is down, and sends
 * again on reconnection the commands that had no reply (settlements check
 * their lease, so a repeat changes nothing).
 *
 * On a cluster (a `Cluster` passed in, or a cluster `url`) the client is a
 * cluster client of its own with the same settings on every node
 * connection; it follows `MOVED` and `ASK` redirections and reconnects the
 * whole cluster with the `reconnect` backoff.
 */
export function openClient(options: ResolvedRedisOptions, blocking: boolean): RedisClient {
  const given = options.client;
  let client: RedisClient;
  if (given !== undefined && isCluster(given)) client = given.duplicate([], clusterSettings(options, blocking, given.options.redisOptions));
  else if (given !== undefined) client = given.duplicate(nodeSettings(options, blocking));
  else if (options.cluster !== undefined) {
    const { seeds, username, password, tls } = options.cluster;
    const auth = { ...(username === undefined ? {} : { username }), ...(password === undefined ? {} : { password }), ...(tls ? { tls: {} } : {}) };
    client = new Cluster([...seeds], clusterSettings(options, blocking, auth));
  } else client = new Redis(options.url, nodeSettings(options, blocking));
  watchErrors(client, options.logger, blocking ? 'blocking reads' : 'commands');
  return client;
}

/** The settings of a single server's connection. */
function nodeSettings(options: ResolvedRedisOptions, blocking: boolean): RedisOptions {
  return {
    connectionName: options.connectionName,
    maxRetriesPerRequest: null,
    ...(blocking ? {} : { commandTimeout: options.commandTimeoutMs }),
    retryStrategy: reconnectStrategy(options),
  };
}

/**
 * The settings of a cluster client: `base` (the node settings of the
 * cluster passed in, or the url's credentials) with the transport's name
 * and command timeout on every node connection, and the `reconnect`
 * backoff for the cluster's.
 */
function clusterSettings(options: ResolvedRedisOptions, blocking: boolean, base: ClusterOptions['redisOptions']): ClusterOptions {
  return {
    redisOptions: {
      ...base,
      connectionName: options.connectionName,
      maxRetriesPerRequest: null,
      ...(blocking ? {} : { commandTimeout: options.commandTimeoutMs }),
    },
    clusterRetryStrategy: reconnectStrategy(options),
  };
}

/** The `reconnect` backoff as an ioredis retry strategy: milliseconds to wait, or null to stop. */
function reconnectStrategy(options: ResolvedRedisOptions): (times: number) => number | null {
  let previousDelayMs: number | undefined;
  let elapsedMs = 0;
  return (times: number) => {
    const delay = options.reconnect({ attempt: times, previousDelayMs, elapsedMs, random: options.random });
    if (delay === undefined) return null;
    previousDelayMs = delay;
    elapsedMs += delay;
    return Math.max(0, Math.round(delay));
  };
}

/** An ioredis client without an `error` listener would crash the process: log instead, once per outage. */
function watchErrors(client: RedisClient, logger: Logger | undefined, role: string): void {
  let down = false;
  client.on('error', (error: Error) => {
    if (down) return;
    down = true;
    logger?.warn({ err: error, role }, `redis: connection for ${role} failed (${error.message}); reconnecting`);
  });
  client.on('ready', () => {
    if (!down) return;
    down = false;
    logger?.info({ role }, `redis: connection for ${role} is back`);
  });
}

/** What the server keeps and evicts, as {@link readServerSettings} found it. */
export interface ServerSettings {
  readonly appendonly: string;
  readonly appendfsync: string;
  /** The RDB snapshot schedule; empty when snapshots are off. */
  readonly save: string;
  readonly maxmemoryPolicy: string;
}

/**
 * Reads the persistence and eviction settings of the server that holds
 * `key` (on a cluster, the primary serving its slot); undefined when
 * `CONFIG` is refused (a managed server).
 */
export async function readServerSettings(client: RedisClient, key: string): Promise<ServerSettings | undefined> {
  try {
    const node = await serverOf(client, key);
    const reply = (await node.call('CONFIG', 'GET', '*')) as string[];
    const map = new Map<string, string>();
    for (let i = 0; i + 1 < reply.length; i += 2) map.set(reply[i]!, reply[i + 1]!);
    return {
      appendonly: map.get('appendonly') ?? '',
      appendfsync: map.get('appendfsync') ?? '',
      save: map.get('save') ?? '',
      maxmemoryPolicy: map.get('maxmemory-policy') ?? '',
    };
  } catch {
    return undefined;
  }
}

/** The warnings an operator should read about these settings (see docs/redis.md); empty when all is well. */
export function serverWarnings(settings: ServerSettings): string[] {
  const warnings: string[] = [];
  if (settings.appendonly !== 'yes') {
    warnings.push(
      settings.save === ''
        ? 'the server keeps nothing on disk (appendonly no, no RDB snapshots): a restart of Redis loses every queued message, delayed retry and error-queue entry; set appendonly yes'
        : 'the server keeps only RDB snapshots (appendonly no): a restart of Redis loses every message since the last snapshot; set appendonly yes',
    );
  } else if (settings.appendfsync === 'no') {
    warnings.push('appendfsync no: a crash of the machine can lose the last ~30 s of writes; appendfsync everysec bounds it to 1 s, always to none');
  }
  if (settings.maxmemoryPolicy !== '' && settings.maxmemoryPolicy !== 'noeviction') {
    warnings.push(`maxmemory-policy is ${settings.maxmemoryPolicy}: at maxmemory Redis evicts keys, which deletes whole queues; set maxmemory-policy noeviction`);
  }
  return warnings;
}

/**
 * Waits for `work`, but only while every one of `clients` is connected:
 * resolves once `work` settles, or as soon as one of them is not ready (now
 * or later). A command of a client that cannot reach its server waits in
 * ioredis's queue until the server is back, so pausing or closing waits for
 * it only while it can be answered. A cluster client stays ready while one
 * node is down; its commands for that node's slots are not queued but
 * reject once its redirections and retries (`maxRedirections`) are spent.
 */
export function whileReachable(clients: readonly RedisClient[], work: Promise<unknown>): Promise<void> {
  if (clients.some((client) => client.status !== 'ready')) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const done = () => {
      for (const client of clients) client.off('close', done);
      resolve();
    };
    for (const client of clients) client.on('close', done);
    work.then(done, done);
  });
}
