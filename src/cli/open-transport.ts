import { existsSync } from 'node:fs';
import type { Transport } from '../transport/types.js';

/** Thrown for a command-line input that cannot work; the CLI prints it and exits with code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
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
