import { userInfo } from 'node:os';
import { InvalidArgumentError, type Command } from 'commander';
import type { Transport } from '../transport/types.js';
import { redactCredentials } from '../util/redact.js';
import { NATS_PREFIX_ENV, openTransport, RABBITMQ_PREFIX_ENV, REDIS_PREFIX_ENV, resolveTarget, ROCKETMQ_GROUP_ENV, ROCKETMQ_NAME_SERVER_ENV, TARGET_ENV } from './open-transport.js';
import { ioOf, type CliIo, type OutputStream } from './program.js';

/** Help text of every `<target>` argument. */
export const TARGET_HELP = `the SQLite file an endpoint uses, an amqp:// URL (topology prefix from --topology-prefix or $${RABBITMQ_PREFIX_ENV}), a redis:// URL (key prefix from $${REDIS_PREFIX_ENV}; a Redis Cluster: redis://host:port,host:port or redis://host:port?cluster=1), a nats:// URL (stream prefix from $${NATS_PREFIX_ENV}), an nsq:// target (nsq://host:4150, with ?http=port for its HTTP API and ?lookupd=host:port) or rocketmq://<proxy host>:<port> (name server from --name-server or $${ROCKETMQ_NAME_SERVER_ENV}, consumer group from --consumer-group or $${ROCKETMQ_GROUP_ENV}); - for $${TARGET_ENV}`;

/** Help text of a `[target]` argument, which may be left out. */
export const OPTIONAL_TARGET_HELP = `${TARGET_HELP} (the default)`;

/**
 * Opens `target` (see {@link resolveTarget}), runs `fn`, and closes the
 * transport whatever happens, so the process can exit. An error from `fn`
 * wins over one from closing.
 */
export async function withTransport<T>(command: Command, target: string | undefined, fn: (transport: Transport, io: CliIo) => Promise<T>): Promise<T> {
  const io = ioOf(command);
  const env = io.env ?? process.env;
  const transport = await (io.openTransport ?? ((t: string) => openTransport(t, env)))(resolveTarget(target, env));
  let result: T;
  try {
    result = await fn(transport, io);
  } catch (error) {
    await transport.close().catch(() => undefined);
    throw error;
  }
  await transport.close();
  return result;
}

/**
 * `target` as a command line shown to the operator may repeat it: `-` when
 * it comes from the environment, else without its password.
 */
export function shownTarget(target: string | undefined): string {
  return target === undefined || target === '-' ? '-' : redactCredentials(target);
}

/**
 * A signal that aborts when the operator interrupts a long operation: the
 * injected one, or SIGINT / SIGTERM for the real process (a second Ctrl-C
 * then stops the process at once). Call `dispose` when the operation ends.
 */
export function interruption(io: CliIo): { signal: AbortSignal; dispose: () => void } {
  if (io.signal) return { signal: io.signal, dispose: () => undefined };
  const controller = new AbortController();
  if (!io.trapSignals) return { signal: controller.signal, dispose: () => undefined };
  const stop = () => controller.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return {
    signal: controller.signal,
    dispose: () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
    },
  };
}

/** Writes `text`, waiting for the stream to drain when it asks to (a large export into a slow pipe). */
export async function write(stream: OutputStream, text: string): Promise<void> {
  if (stream.write(text) === false && stream.once) await new Promise<void>((resolve) => stream.once!('drain', resolve));
}

/** Parses a queue name: not empty, no control characters. */
export function queueName(value: string): string {
  if (value === '' || /[\u0000-\u001f\u007f]/.test(value)) throw new InvalidArgumentError('expected a queue name');
  return value;
}

/** Collects a repeatable option's values. */
export function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/**
 * Who a write from the command line is recorded as: `cli:` and the
 * operating-system user running it (not a name given on the command line,
 * which anyone could make up).
 */
export function osActor(): string {
  let name: string;
  try {
    name = userInfo().username;
  } catch {
    name = `uid ${process.getuid?.() ?? 'unknown'}`;
  }
  return `cli:${name}`;
}
