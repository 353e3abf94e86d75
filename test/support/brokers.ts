/**
 * Broker availability for tests that need a real broker. On a laptop without
 * the broker those tests are skipped with a loud warning; under CI=true a
 * missing broker fails the run instead of silently skipping.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import amqp from 'amqplib';
import { parseConnections } from './rabbit-node.js';

/** The RabbitMQ URL the tests use: `RABBITMQ_URL`, or the local default. */
export const RABBITMQ_URL = process.env['RABBITMQ_URL'] ?? 'amqp://guest:guest@127.0.0.1:5672';

let rabbit: Promise<boolean> | undefined;

/** Whether RabbitMQ answers at {@link RABBITMQ_URL} (checked once per test file). */
export function rabbitAvailable(): Promise<boolean> {
  rabbit ??= amqp
    .connect(RABBITMQ_URL, { timeout: 2_000 })
    .then(async (connection) => {
      await connection.close();
      return true;
    })
    .catch(() => false);
  return rabbit;
}

/**
 * The skip reason for a RabbitMQ suite: undefined when the broker is up.
 * Throws under CI=true when it is not, and warns loudly otherwise.
 */
export async function rabbitSkipReason(): Promise<string | undefined> {
  if (await rabbitAvailable()) return undefined;
  const reason = `RabbitMQ is not reachable at ${RABBITMQ_URL.replace(/\/\/[^@]*@/, '//')}`;
  if (process.env['CI'] === 'true') throw new Error(`${reason}, and CI=true: broker tests must run in CI`);
  console.warn(`\n!!! SKIPPING RabbitMQ tests: ${reason}. Start RabbitMQ or set RABBITMQ_URL to run them. !!!\n`);
  return reason;
}

/** Runs the broker's own `rabbitmqctl`, for faults no client can cause; resolves its output. */
export async function rabbitmqctl(...args: string[]): Promise<string> {
  const { stdout } = await promisify(execFile)('rabbitmqctl', args, { timeout: 30_000 });
  return stdout;
}

/** The broker's pids of the shared broker's connections whose client-provided name is `connectionName`. */
export async function connectionPidsNamed(connectionName: string): Promise<string[]> {
  const rows = parseConnections(await rabbitmqctl('list_connections', 'pid', 'client_properties', '-q', '--no-table-headers'));
  return rows.filter((row) => row.name === connectionName).map((row) => row.pid);
}

/** Closes the shared broker's connections with these pids (from {@link connectionPidsNamed}); resolves how many. */
export async function closeConnections(pids: readonly string[], reason = 'test: connection cut'): Promise<number> {
  for (const pid of pids) await rabbitmqctl('close_connection', pid, reason);
  return pids.length;
}

/**
 * Closes the shared broker's connections whose client-provided name is
 * `connectionName`, and only those: other clients of the broker are left
 * alone. Resolves how many were closed.
 */
export async function closeConnectionsNamed(connectionName: string, reason = 'test: connection cut'): Promise<number> {
  return closeConnections(await connectionPidsNamed(connectionName), reason);
}

/** Deletes the test's own queues on the shared broker, each on a fresh channel (a missing queue closes its channel). */
export async function deleteQueues(queues: Iterable<string>): Promise<void> {
  const connection = await amqp.connect(RABBITMQ_URL);
  try {
    for (const q of queues) {
      const ch = await connection.createChannel();
      ch.on('error', () => undefined);
      await ch.deleteQueue(q).catch(() => undefined);
      await ch.close().catch(() => undefined);
    }
  } finally {
    await connection.close();
  }
}

/** The Redis URL the tests use: `REDIS_URL`, or the local default. */
export const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';

let redis: Promise<boolean> | undefined;

/** Whether Redis answers PING at {@link REDIS_URL} (checked once per test file). */
export function redisAvailable(): Promise<boolean> {
  redis ??= redisAnswers(REDIS_URL);
  return redis;
}

/** Whether a Redis server answers PING at `url`, asked once on a connection that does not retry. */
export async function redisAnswers(url: string): Promise<boolean> {
  const { Redis } = await import('ioredis');
  const client = new Redis(url, { lazyConnect: true, connectTimeout: 2_000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

/**
 * The skip reason for a Redis suite: undefined when the server is up.
 * Throws under CI=true when it is not, and warns loudly otherwise.
 */
export async function redisSkipReason(): Promise<string | undefined> {
  if (await redisAvailable()) return undefined;
  const reason = `Redis is not reachable at ${REDIS_URL.replace(/\/\/[^@]*@/, '//')}`;
  if (process.env['CI'] === 'true') throw new Error(`${reason}, and CI=true: broker tests must run in CI`);
  console.warn(`\n!!! SKIPPING Redis tests: ${reason}. Start Redis or set REDIS_URL to run them. !!!\n`);
  return reason;
}

/** The NATS URL the tests use: `NATS_URL`, or the local default (a server with JetStream). */
export const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';

let nats: Promise<boolean> | undefined;

/** Whether a NATS server with JetStream answers at {@link NATS_URL} (checked once per test file). */
export function natsAvailable(): Promise<boolean> {
  nats ??= natsAnswers(NATS_URL);
  return nats;
}

/** Whether a NATS server with JetStream enabled answers at `url`, asked once on a connection that does not reconnect. */
export async function natsAnswers(url: string): Promise<boolean> {
  const { connect } = await import('@nats-io/transport-node');
  const { jetstreamManager } = await import('@nats-io/jetstream');
  try {
    const nc = await connect({ servers: url, timeout: 2_000, reconnect: false, name: 'redeliver-test-probe' });
    try {
      await (await jetstreamManager(nc, { timeout: 2_000 })).getAccountInfo();
      return true;
    } finally {
      await nc.close();
    }
  } catch {
    return false;
  }
}

/**
 * The skip reason for a NATS JetStream suite: undefined when the server is
 * up. Throws under CI=true when it is not, and warns loudly otherwise.
 */
export async function natsSkipReason(): Promise<string | undefined> {
  if (await natsAvailable()) return undefined;
  const reason = `NATS with JetStream is not reachable at ${NATS_URL.replace(/\/\/[^@]*@/, '//')}`;
  if (process.env['CI'] === 'true') throw new Error(`${reason}, and CI=true: broker tests must run in CI`);
  console.warn(`\n!!! SKIPPING NATS JetStream tests: ${reason}. Start nats-server -js or set NATS_URL to run them. !!!\n`);
  return reason;
}
