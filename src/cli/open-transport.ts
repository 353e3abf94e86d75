import { existsSync } from 'node:fs';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Transport } from '../transport/types.js';
import { parseNsqTarget } from './nsq-target.js';

/** Thrown for a command-line input that cannot work; the CLI prints it and exits with code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** The environment variable that holds the target of a command given `-` or no target. */
export const TARGET_ENV = 'REDELIVER_URL';

/** The environment variable that holds the key prefix of a `redis://` target; default `redeliver`, the transport's. */
export const REDIS_PREFIX_ENV = 'REDELIVER_REDIS_PREFIX';

/** The environment variable that holds the stream prefix of a `nats://` target; default `redeliver`, the transport's. */
export const NATS_PREFIX_ENV = 'REDELIVER_NATS_PREFIX';

/** The environment variable that holds the `topologyPrefix` of an `amqp://` target (CLI `--topology-prefix`); default `redeliver`, the transport's. */
export const RABBITMQ_PREFIX_ENV = 'REDELIVER_RABBITMQ_PREFIX';

/** The environment variable that holds the name server (`host:port`) of a `rocketmq://` target (CLI `--name-server`); default the target's host on 9876. */
export const ROCKETMQ_NAME_SERVER_ENV = 'REDELIVER_ROCKETMQ_NAME_SERVER';

/** The environment variable that holds the consumer group of a `rocketmq://` target (CLI `--consumer-group`); default `redeliver`, the transport's. */
export const ROCKETMQ_GROUP_ENV = 'REDELIVER_ROCKETMQ_GROUP';

/** The name server's port when a `rocketmq://` target names none. */
export const ROCKETMQ_NAME_SERVER_PORT = 9876;

/** How long connecting to a `nats://` target may take before the command gives up, ms. */
export const NATS_CONNECT_TIMEOUT_MS = 5_000;

/** What the commands take as a target, for messages that list them. */
const TARGETS = 'the SQLite file an endpoint uses, an amqp:// URL, a redis:// URL (a Redis Cluster: redis://host:port,host:port or redis://host:port?cluster=1), a nats:// URL, an nsq:// target or a rocketmq:// proxy address';

/**
 * The target a command works on: `target` itself, or `$REDELIVER_URL` when
 * it is omitted or `-` (a URL in the environment stays out of the process
 * list, where `ps` shows its password to every user of the machine).
 */
export function resolveTarget(target: string | undefined, env: Readonly<Record<string, string | undefined>>): string {
  if (target !== undefined && target !== '-') return target;
  const fromEnv = env[TARGET_ENV];
  if (fromEnv === undefined || fromEnv === '') {
    throw new UsageError(`no target: give ${TARGETS}, or set ${TARGET_ENV} (and give - or nothing as the target)`);
  }
  return fromEnv;
}

/**
 * Opens the transport a command works on: an `amqp://` or `amqps://` URL is
 * RabbitMQ (its topology, and the marks that tell error queues, under the
 * prefix `env.REDELIVER_RABBITMQ_PREFIX`, or the default), a `redis://` or `rediss://` URL is Redis (its keys under the
 * prefix `env.REDELIVER_REDIS_PREFIX`, or the default; several seed nodes
 * separated by commas, or one with `?cluster=1`, are a Redis Cluster), a `nats://` URL is
 * NATS JetStream (its streams under the prefix `env.REDELIVER_NATS_PREFIX`,
 * or the default), an `nsq://` target is NSQ (see `parseNsqTarget`),
 * `rocketmq://host:port` is Apache RocketMQ through the
 * gRPC proxy at host:port (its name server `env.REDELIVER_ROCKETMQ_NAME_SERVER`,
 * or the proxy's host on 9876; its consumer group
 * `env.REDELIVER_ROCKETMQ_GROUP`, or the default), anything else a SQLite
 * file, which must exist.
 */
export async function openTransport(target: string, env: Readonly<Record<string, string | undefined>> = process.env): Promise<Transport> {
  if (/^rediss?:\/\//i.test(target)) return openRedis(target, env[REDIS_PREFIX_ENV]);
  if (/^nats:\/\//i.test(target)) return openJetStream(target, env[NATS_PREFIX_ENV]);
  if (/^nsq:\/\//i.test(target)) return openNsq(target);
  if (/^rocketmq:\/\//i.test(target)) return openRocketMq(target, env);
  if (/^amqps?:\/\//i.test(target)) {
    let module: typeof import('../transports/rabbitmq/index.js');
    try {
      module = await import('../transports/rabbitmq/index.js');
    } catch (error) {
      throw new UsageError(`RabbitMQ needs the amqplib package: npm install amqplib (${(error as Error).message})`);
    }
    const topologyPrefix = env[RABBITMQ_PREFIX_ENV] || undefined;
    try {
      return new module.RabbitMqTransport({ url: target, connectionName: 'redeliver-cli', ...(topologyPrefix === undefined ? {} : { topologyPrefix }) });
    } catch (error) {
      if (error instanceof RangeError) throw new UsageError(`${error.message} (the topology prefix comes from --topology-prefix or ${RABBITMQ_PREFIX_ENV})`);
      throw error;
    }
  }
  if (!existsSync(target)) throw new UsageError(`no SQLite file at ${target} (give ${TARGETS})`);
  const { SqliteTransport } = await import('../transports/sqlite/index.js');
  return new SqliteTransport({ path: target });
}

/**
 * The RocketMQ transport of a `rocketmq://host:port` target: the gRPC proxy
 * at host:port (8081 when the port is left out). It connects on first use;
 * its name server is asked first, so a command fails at once when that
 * cannot be reached.
 */
async function openRocketMq(target: string, env: Readonly<Record<string, string | undefined>>): Promise<Transport> {
  const endpoints = rocketMqEndpoints(target);
  let module: typeof import('../transports/rocketmq/index.js');
  try {
    module = await import('../transports/rocketmq/index.js');
  } catch (error) {
    throw new UsageError(`RocketMQ needs the rocketmq-client-nodejs package: npm install rocketmq-client-nodejs (${(error as Error).message})`);
  }
  const host = endpoints.slice(0, endpoints.lastIndexOf(':'));
  const nameServer = env[ROCKETMQ_NAME_SERVER_ENV] || `${host}:${ROCKETMQ_NAME_SERVER_PORT}`;
  const consumerGroup = env[ROCKETMQ_GROUP_ENV] || undefined;
  let transport: InstanceType<typeof module.RocketMqTransport>;
  try {
    transport = new module.RocketMqTransport({ endpoints, nameServer, connectionName: 'redeliver-cli', ...(consumerGroup === undefined ? {} : { consumerGroup }) });
  } catch (error) {
    if (error instanceof RangeError) throw new UsageError(`${error.message} (the name server comes from --name-server or ${ROCKETMQ_NAME_SERVER_ENV}, the group from --consumer-group or ${ROCKETMQ_GROUP_ENV})`);
    throw error;
  }
  try {
    await transport.admin.masters();
  } catch (error) {
    await transport.close().catch(() => undefined);
    throw new Error(`cannot reach the RocketMQ name server at ${nameServer}: ${(error as Error).message} (set it with --name-server or ${ROCKETMQ_NAME_SERVER_ENV})`);
  }
  return transport;
}

/** The proxy address (`host:port`) of a `rocketmq://` target; a UsageError when it names none. */
export function rocketMqEndpoints(target: string): string {
  let parsed: URL | undefined;
  try {
    parsed = new URL(target);
  } catch {
    parsed = undefined;
  }
  if (parsed === undefined || parsed.hostname === '' || (parsed.pathname !== '' && parsed.pathname !== '/')) {
    throw new UsageError(`${target} is not a RocketMQ proxy address such as rocketmq://127.0.0.1:8081`);
  }
  return `${parsed.hostname}:${parsed.port || '8081'}`;
}

async function openRedis(url: string, keyPrefix: string | undefined): Promise<Transport> {
  let module: typeof import('../transports/redis/index.js');
  try {
    module = await import('../transports/redis/index.js');
  } catch (error) {
    throw new UsageError(`Redis needs the ioredis package: npm install ioredis (${(error as Error).message})`);
  }
  let transport: InstanceType<typeof module.RedisTransport>;
  try {
    transport = new module.RedisTransport({ url, connectionName: 'redeliver-cli', checkServer: false, ...(keyPrefix ? { keyPrefix } : {}) });
  } catch (error) {
    if (error instanceof RangeError) throw new UsageError(`${error.message} (the key prefix comes from ${REDIS_PREFIX_ENV})`);
    throw error;
  }
  try {
    await firstConnection(transport.client);
  } catch (error) {
    await transport.close().catch(() => undefined);
    throw new Error(`cannot reach Redis at ${url}: ${(error as Error).message}`);
  }
  return transport;
}

/**
 * Resolves when `client` is connected, rejects with the first connection
 * error: a command fails at once on a server it cannot reach, rather than
 * waiting for reconnections that a terminal session does not want.
 */
function firstConnection(client: import('ioredis').Redis | import('ioredis').Cluster): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const ready = () => {
      client.off('error', failed);
      resolve();
    };
    const failed = (error: Error) => {
      client.off('ready', ready);
      reject(error);
    };
    client.once('ready', ready);
    client.once('error', failed);
  });
}

async function openNsq(target: string): Promise<Transport> {
  const { nsqd, lookupd, httpAddresses } = parseNsqTarget(target);
  let module: typeof import('../transports/nsq/index.js');
  try {
    module = await import('../transports/nsq/index.js');
  } catch (error) {
    throw new UsageError(`NSQ needs the nsqjs package: npm install nsqjs (${(error as Error).message})`);
  }
  return new module.NsqTransport({ nsqd, lookupd, httpAddresses, connectionName: 'redeliver-cli' });
}

async function openJetStream(url: string, prefix: string | undefined): Promise<Transport> {
  const module = await jetStreamModule('NATS');
  let names: InstanceType<typeof module.JetStreamNames>;
  try {
    names = new module.JetStreamNames(prefix || module.JETSTREAM_DEFAULTS.prefix);
  } catch (error) {
    if (error instanceof RangeError) throw new UsageError(`${error.message} (the prefix comes from ${NATS_PREFIX_ENV})`);
    throw error;
  }
  const connection = await connectNats(url, 'redeliver-cli');
  return closingConnection(new module.JetStreamTransport({ connection, prefix: names.prefix }), connection);
}

/** The JetStream transport's module; a UsageError naming the packages when they are not installed. */
export async function jetStreamModule(what: string): Promise<typeof import('../transports/jetstream/index.js')> {
  try {
    return await import('../transports/jetstream/index.js');
  } catch (error) {
    throw new UsageError(`${what} needs the @nats-io/transport-node and @nats-io/jetstream packages: npm install @nats-io/transport-node @nats-io/jetstream (${(error as Error).message})`);
  }
}

/**
 * Connects to the NATS server at `url` as `name`, and rejects at once when
 * it does not answer: a terminal session does not want to wait for a
 * server. Once connected, the connection reconnects by itself, so a
 * dashboard rides out a server restart. Credentials in the URL
 * (`nats://user:password@host`, or `nats://token@host`) are passed as the
 * server's user and password, or token.
 */
export async function connectNats(url: string, name: string): Promise<NatsConnection> {
  const { connect } = await import('@nats-io/transport-node');
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (parsed === undefined || parsed.host === '') throw new UsageError(`${url} is not a NATS URL such as nats://127.0.0.1:4222`);
  const user = decodeURIComponent(parsed.username);
  const pass = decodeURIComponent(parsed.password);
  const credentials = user === '' ? {} : pass === '' ? { token: user } : { user, pass };
  try {
    return await connect({ servers: `nats://${parsed.host}`, name, timeout: NATS_CONNECT_TIMEOUT_MS, maxReconnectAttempts: -1, ...credentials });
  } catch (error) {
    throw new Error(`cannot reach NATS at ${url}: ${(error as Error).message}`);
  }
}

/**
 * `transport`, whose `close()` also closes `connection`: the connection
 * opened for it here, which a transport given a connection never closes.
 */
export function closingConnection<T extends Transport>(transport: T, connection: NatsConnection): T {
  const close = transport.close.bind(transport);
  return Object.assign(transport, {
    close: async () => {
      try {
        await close();
      } finally {
        await connection.close();
      }
    },
  });
}
