import { existsSync } from 'node:fs';
import type { Transport } from '../transport/types.js';

/** Thrown for a command-line input that cannot work; the CLI prints it and exits with code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** The environment variable that holds the target of a command given `-` or no target. */
export const TARGET_ENV = 'REDELIVER_URL';

/**
 * The target a command works on: `target` itself, or `$REDELIVER_URL` when
 * it is omitted or `-` (a URL in the environment stays out of the process
 * list, where `ps` shows its password to every user of the machine).
 */
export function resolveTarget(target: string | undefined, env: Readonly<Record<string, string | undefined>>): string {
  if (target !== undefined && target !== '-') return target;
  const fromEnv = env[TARGET_ENV];
  if (fromEnv === undefined || fromEnv === '') {
    throw new UsageError(`no target: give the SQLite file an endpoint uses or an amqp:// URL, or set ${TARGET_ENV} (and give - or nothing as the target)`);
  }
  return fromEnv;
}

/**
 * Opens the transport a command works on: an `amqp://` or `amqps://` URL is
 * RabbitMQ, anything else a SQLite file, which must exist.
 */
export async function openTransport(target: string): Promise<Transport> {
  if (/^amqps?:\/\//i.test(target)) {
    let module: typeof import('../transports/rabbitmq/index.js');
    try {
      module = await import('../transports/rabbitmq/index.js');
    } catch (error) {
      throw new UsageError(`RabbitMQ needs the amqplib package: npm install amqplib (${(error as Error).message})`);
    }
    return new module.RabbitMqTransport({ url: target, connectionName: 'redeliver-cli' });
  }
  if (!existsSync(target)) throw new UsageError(`no SQLite file at ${target} (give the file an endpoint uses, or an amqp:// URL)`);
  const { SqliteTransport } = await import('../transports/sqlite/index.js');
  return new SqliteTransport({ path: target });
}
