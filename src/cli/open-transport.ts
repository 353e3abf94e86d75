import { existsSync } from 'node:fs';
import type { Transport } from '../transport/types.js';

/** Thrown for a command-line input that cannot work; the CLI prints it and exits with code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** The environment variable that holds the target of a command given `-` or no target. */
export const TARGET_ENV = 'REDELIVER_URL';

/** The environment variable that holds the key prefix of a `redis://` target; default `redeliver`, the transport's. */
export const REDIS_PREFIX_ENV = 'REDELIVER_REDIS_PREFIX';

/**
 * The target a command works on: `target` itself, or `$REDELIVER_URL` when
 * it is omitted or `-` (a URL in the environment stays out of the process
 * list, where `ps` shows its password to every user of the machine).
 */
export function resolveTarget(target: string | undefined, env: Readonly<Record<string, string | undefined>>): string {
  if (target !== undefined && target !== '-') return target;
  const fromEnv = env[TARGET_ENV];
  if (fromEnv === undefined || fromEnv === '') {
    throw new UsageError(`no target: give the SQLite file an endpoint uses, an amqp:// URL or a redis:// URL, or set ${TARGET_ENV} (and give - or nothing as the target)`);
  }
  return fromEnv;
}

/**
 * Opens the transport a command works on: an `amqp://` or `amqps://` URL is
 * RabbitMQ, a `redis://` or `rediss://` URL is Redis (its keys under the
 * prefix `env.REDELIVER_REDIS_PREFIX`, or the default), anything else a
 * SQLite file, which must exist.
 */
export async function openTransport(target: string, env: Readonly<Record<string, string | undefined>> = process.env): Promise<Transport> {
  if (/^rediss?:\/\//i.test(target)) return openRedis(target, env[REDIS_PREFIX_ENV]);
  if (/^amqps?:\/\//i.test(target)) {
    let module: typeof import('../transports/rabbitmq/index.js');
    try {
      module = await import('../transports/rabbitmq/index.js');
    } catch (error) {
      throw new UsageError(`RabbitMQ needs the amqplib package: npm install amqplib (${(error as Error).message})`);
    }
    return new module.RabbitMqTransport({ url: target, connectionName: 'redeliver-cli' });
  }
  if (!existsSync(target)) throw new UsageError(`no SQLite file at ${target} (give the file an endpoint uses, an amqp:// URL or a redis:// URL)`);
  const { SqliteTransport } = await import('../transports/sqlite/index.js');
  return new SqliteTransport({ path: target });
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
function firstConnection(client: import('ioredis').Redis): Promise<void> {
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
